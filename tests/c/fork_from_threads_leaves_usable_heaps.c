/* fork() while other threads allocate leaves the child usable heaps of both
 * modes, a working background collector and a working sampler.  On a8ce51d
 * only manual heaps were protected: 37 of 40 children of a process whose
 * thread was filling a collected heap hung on its lock.  Each child here
 * allocates, fills, collects, reads its sampler and exits; an alarm fails it
 * if anything hangs.  Runs under ThreadSanitizer too (suite threads), where
 * the race it looks for is in the parent (the fork handlers beside the
 * threads; the child has one thread).  TSan's runtime does not support a
 * child of a threaded parent that starts threads (it dies, or with
 * die_after_fork=0 may deadlock), and GCC 12's does not lock its allocator
 * around fork(): a child's free hung 1 run in 7 (gdb, 2026-12-06:
 * SizeClassAllocator64::ReturnToAllocator's mutex, from hl_heap_free's
 * free of a large block, held at the fork by a mallocer thread).  So under
 * TSan the child starts no thread -- not the collector, not the sampler,
 * not a parallel mark's helpers (mark_threads=1) -- and the threads leave
 * the system allocator alone (no large objects), which the plain build's
 * run covers. */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static hl_heap *sync_heap, *bg_heap, *manual_heap;
static hl_sampler *sampler;
static _Atomic int stop;

#define CHILD_STARTS_THREADS (!UNDER_TSAN)
#define LARGE_TOO (!UNDER_TSAN) /* the large path: the system allocator's blocks */

static void *filler(void *arg) {
  hl_heap *h = arg;
  while (!stop) {
    hl_ref r;
    if (hl_fill(h, 2u << 20, 64, 0, &r) == HL_OK) hl_ref_release(h, r);
    hl_ref l;
    if (LARGE_TOO && hl_alloc(h, 100000, 0, &l) == HL_OK) hl_ref_release(h, l);
  }
  return NULL;
}

static void *mallocer(void *arg) {
  hl_heap *h = arg;
  void *b[256];
  /* 16 to 1801 bytes, past small_max (512) to the large path; 16 to 457
   * under TSan */
  size_t span = LARGE_TOO ? 256 : 64;
  while (!stop) {
    for (size_t i = 0; i < 256; i++) b[i] = hl_malloc(h, 16 + i % span * 7);
    for (int i = 0; i < 256; i++) hl_free(h, b[i]);
  }
  return NULL;
}

/* Where a child is: a child that hangs says so as its alarm ends it (one
 * child in 51 runs of the TSan build hung once, 2026-12-05, with nothing to
 * say where -- TSan's runtime or a lock of the heap's). */
static const char *const steps[] = {"start", "fill", "collect", "background heap",
                                    "collect background", "malloc", "check", "sampler",
                                    "sampler stop", "heap free"};
static volatile sig_atomic_t step;

static void child_hung(int sig) {
  (void)sig;
  char msg[96] = "child hung in: ";
  size_t n = strlen(msg);
  for (const char *p = steps[step]; *p && n < sizeof msg - 2; p++) msg[n++] = *p;
  msg[n++] = '\n';
  ssize_t w = write(2, msg, n);
  (void)w;
  signal(SIGALRM, SIG_DFL);
  raise(SIGALRM); /* (the parent counts it as hung) */
}

static int child(void) {
  signal(SIGALRM, child_hung);
  alarm(10);
  hl_ref r;
  for (int k = 0; k < 3; k++) {
    step = 1;
    if (hl_fill(sync_heap, 1u << 20, 64, 0, &r) || hl_ref_release(sync_heap, r)) return 2;
    step = 2;
    if (hl_collect(sync_heap, 1, -1)) return 3;
    /* the background heap: its collector thread is started again here */
    step = 3;
    for (int i = 0; i < 64 && CHILD_STARTS_THREADS; i++) {
      if (hl_alloc(bg_heap, 64 << 10, 0, &r) || hl_ref_release(bg_heap, r)) return 4;
    }
    step = 4;
    if (CHILD_STARTS_THREADS && hl_collect(bg_heap, 1, -1)) return 5;
    step = 5;
    void *p = hl_malloc(manual_heap, 100);
    if (!p) return 6;
    hl_free(manual_heap, p);
  }
  step = 6;
  if (hl_heap_check(sync_heap) || hl_heap_check(bg_heap) || hl_heap_check(manual_heap)) return 7;
  step = 7;
  hl_sampler_summary s;
  if (CHILD_STARTS_THREADS &&
      (hl_sampler_mark(sampler) || hl_sampler_summary_get(sampler, &s) || !s.samples))
    return 8;
  step = 8;
  hl_sampler_stop(sampler);
  step = 9;
  hl_heap_free(bg_heap); /* joins the child's collector thread */
  return 0;
}

int main(void) {
  SKIP_WHERE_FORK_IS_UNSAFE();
  const char *marks = CHILD_STARTS_THREADS ? "mark_threads=0" : "mark_threads=1";
  sync_heap = HEAP("reserve_bytes=256m", marks);
  bg_heap = HEAP("reserve_bytes=256m", "collector=background", "large_trigger_bytes=1m", marks);
  manual_heap = HEAP("mode=manual", "reserve_bytes=256m");
  CHECK(hl_sampler_open(&sampler, 0.0005, 4096) == HL_OK, "sampler");
  pthread_t t[4];
  CHECK(pthread_create(&t[0], NULL, filler, sync_heap) == 0, "thread");
  CHECK(pthread_create(&t[1], NULL, filler, bg_heap) == 0, "thread");
  CHECK(pthread_create(&t[2], NULL, mallocer, manual_heap) == 0, "thread");
  CHECK(pthread_create(&t[3], NULL, mallocer, manual_heap) == 0, "thread");
  /* 30 forks; under ThreadSanitizer a third (10).  A child there takes
   * 0.02 s at first and 0.2-0.3 s once the parent's heaps have grown to
   * their triggers (~450 pages each, by the tenth fork), competing for the
   * CPU with the parent's four threads and its sampler: 5-40 s for 30 under
   * TSan, by the load.  What TSan checks -- the fork handlers beside those
   * threads, in the parent -- is the same code at each fork, and the defect
   * this was written for hung 37 of 40 children: 10 all but surely see it;
   * the plain build still forks 30 times into the grown heaps. */
  const int forks = TSAN_FEWER(30);
  int hung = 0, failed = 0;
  for (int i = 0; i < forks; i++) {
    usleep(2000);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) child_exit(child());
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM) hung++;
    else if (!WIFEXITED(st) || WEXITSTATUS(st)) {
      failed++;
      fprintf(stderr, "child %d: status %d\n", i, st);
    }
  }
  stop = 1;
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  CHECK(!hung && !failed, "%d of %d children hung, %d failed", hung, forks, failed);
  hl_sampler_stop(sampler);
  hl_heap_free(sync_heap);
  hl_heap_free(bg_heap);
  hl_heap_free(manual_heap);
  printf("ok: %d children of a threaded parent ran\n", forks);
  return 0;
}
