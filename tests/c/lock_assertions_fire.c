/* With -Dasserts=true the internal functions that need the heap lock check
 * that the calling thread holds it (HL_ASSERT_LOCKED).  Proven here by a
 * death test: a child process calls such functions without the lock and
 * must die of SIGABRT with the assertion's message; with the lock (and
 * through hl_enter) the same calls run.  Skipped (exit 77) in a build
 * without assertions, where nothing is checked. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "internal.h"

#ifdef HL_ASSERTS
/* Run f(h) in a child; its wait status. */
static int in_child(void (*f)(hl_heap *), hl_heap *h) {
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0, "fork");
  if (pid == 0) {
    f(h);
    _exit(0);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
  return status;
}

static void cycle_unlocked(hl_heap *h) { hl__cycle(h, -1, REASON_EXPLICIT); }
static void trim_unlocked(hl_heap *h) { hl__trim_now(h); }
static void alloc_unlocked(hl_heap *h) { hl__obj_alloc(h, 16, 0, 0, "alloc"); }
static void cycle_locked(hl_heap *h) {
  bool locked = hl__lock(h);
  hl__cycle(h, -1, REASON_EXPLICIT);
  hl__unlock(h, locked);
}
static void cycle_held(hl_heap *h) {
  hl_enter(h);
  hl__cycle(h, -1, REASON_EXPLICIT);
  CHECK(hl__obj_alloc(h, 16, 0, 0, "alloc"), "alloc with the heap held");
  hl_leave(h);
}
#endif

int main(void) {
#ifndef HL_ASSERTS
  puts("SKIP: built without -Dasserts=true");
  return 77;
#else
  hl_heap *h = HEAP("reserve_bytes=64m");
  void (*unlocked[])(hl_heap *) = {cycle_unlocked, trim_unlocked, alloc_unlocked};
  for (size_t i = 0; i < sizeof unlocked / sizeof unlocked[0]; i++) {
    int st = in_child(unlocked[i], h);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT,
          "call %zu without the lock: expected death by SIGABRT, got status %d", i, st);
  }
  void (*fine[])(hl_heap *) = {cycle_locked, cycle_held};
  for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++) {
    int st = in_child(fine[i], h);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "call %zu with the lock: status %d", i, st);
  }
  hl_heap_free(h);
  return 0;
#endif
}
