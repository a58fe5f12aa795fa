/*
 * A thread holds one heap at a time (hl_enter), and a handle names its heap
 * among every live heap -- two defects a fuzzing helper found with small
 * programs against the API.
 *
 * 1. hl_enter(a); hl_enter(b): the held heap is one thread-local, so taking
 *    b forgot a -- a call on a then locked a's mutex again and hung, and
 *    hl_leave(a) after hl_leave(b) never unlocked it (the next call on a
 *    hung).  hl_enter(b) now returns HL_EINVAL with a message and holds
 *    nothing more; both orders of leaving work, and a stays usable.
 * 2. A heap's tag (the top 16 bits of its handles) was its serial number's
 *    low 16 bits: 65,536 heaps later a new heap had a live heap's tag and
 *    took that heap's handles for its own -- reading one gave the new heap's
 *    object, HL_OK.  A tag is now one no live heap has.
 * An alarm turns a hang into a failure.
 */
#include <signal.h>

#include "check.h"

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "a_thread_holds_one_heap_at_a_time: a call hung\n";
  (void)!write(2, msg, sizeof msg - 1);
  _exit(1);
}

static void two_heaps_held(int leave_b_first) {
  hl_heap *a = HEAP("mode=collected"), *b = HEAP("mode=collected");
  hl_ref ra, rb, r;
  OK(a, hl_alloc(a, 16, 1, &ra));
  OK(b, hl_alloc(b, 16, 1, &rb));
  OK(a, hl_enter(a));
  OK(a, hl_enter(a)); /* nests */
  hl_leave(a);
  FAILS(b, HL_EINVAL, "already holds another heap", hl_enter(b));
  /* a is held: calls on it run; b is not: calls on it lock per call */
  OK(a, hl_alloc(a, 16, 0, &r));
  OK(b, hl_alloc(b, 16, 0, &r));
  OK(b, hl_collect(b, 1, 1));
  if (leave_b_first) hl_leave(b); /* (does nothing: b is not held) */
  hl_leave(a);
  if (!leave_b_first) hl_leave(b);
  /* a was let go: another thread could take it now; here, this one */
  OK(a, hl_alloc(a, 16, 0, &r));
  OK(a, hl_collect(a, 1, 1));
  OK(b, hl_enter(b)); /* and b can be held now */
  OK(b, hl_alloc(b, 16, 0, &r));
  hl_leave(b);
  hl_heap_free(b);
  hl_heap_free(a);
}

int main(void) {
  signal(SIGALRM, on_alarm);
  alarm(240);
  two_heaps_held(1);
  two_heaps_held(0);

  /* 65,536 heaps made and freed beside a live one: none takes its handles */
  hl_heap *a = HEAP("mode=collected", "reserve_bytes=1m", "page_size=4096");
  hl_ref ra;
  OK(a, hl_alloc(a, 24, 0, &ra));
  OK(a, hl_ref_write(a, ra, 0, "heap A's", 9));
  hl_options o;
  hl_options_defaults(&o);
  char err[256];
  CHECK(hl_options_set(&o, "reserve_bytes", "1m", err, sizeof err) == HL_OK, "%s", err);
  CHECK(hl_options_set(&o, "page_size", "4096", err, sizeof err) == HL_OK, "%s", err);
  int clashes = 0;
  for (int i = 0; i < 65536 + 16; i++) {
    hl_heap *b = NULL;
    CHECK(hl_heap_new(&o, &b, err, sizeof err) == HL_OK, "heap %d: %s", i, err);
    hl_ref rb;
    OK(b, hl_alloc(b, 24, 0, &rb));
    char buf[9] = {0};
    int rc = hl_ref_read(b, ra, 0, buf, 9);
    if (rc != HL_EFOREIGN) {
      clashes++;
      CHECK(0, "heap %d took heap A's handle 0x%llx as its own (%s; its own first handle 0x%llx)",
            i, (unsigned long long)ra, hl_error_name(rc), (unsigned long long)rb);
    }
    hl_heap_free(b);
  }
  char buf[9] = {0};
  OK(a, hl_ref_read(a, ra, 0, buf, 9));
  CHECK(strcmp(buf, "heap A's") == 0, "heap A's object reads '%s'", buf);
  hl_heap_free(a);
  printf("a_thread_holds_one_heap_at_a_time: a second hl_enter refused, both heaps usable; "
         "65,552 heaps beside a live one, %d took its handle\n", clashes);
  return 0;
}
