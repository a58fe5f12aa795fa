/* hl_interrupt() (Ctrl-C through hl_interrupt_attach) ends a paced
 * allocation's wait: the allocation goes on unpaced and succeeds, and a long
 * call around it (hl_churn) stops at its next safe point with HL_EINTR.  The
 * collector here runs one cycle and then none for 30 s (min_cycle_interval_ms),
 * so every later paced allocation waits its whole pacing_max_wait_ms (10 s)
 * unless the interrupt ends the wait.  Before the fix the wait ignored
 * interrupts: Ctrl-C came through 28 s of 30 later (the pacing hunt,
 * session 30). */
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *interrupt_later(void *arg) {
  (void)arg;
  usleep(500000);
  hl_interrupt();
  return NULL;
}

static hl_heap *paced_heap(void) {
  return HEAP("collector=background", "min_cycle_interval_ms=30000",
              "pacing_max_wait_ms=10000", "large_trigger_bytes=1m", "mark_threads=1");
}

int main(void) {
  /* a loop of allocations: the one waiting when the interrupt comes returns
   * at once, with its object */
  hl_heap *h = paced_heap();
  pthread_t t;
  CHECK(pthread_create(&t, NULL, interrupt_later, NULL) == 0, "thread");
  double start = now_s(), slowest = 0;
  int n = 0;
  while (now_s() - start < 0.5 + 5.0 && slowest < 0.3) {
    hl_ref r;
    double t0 = now_s();
    OK(h, hl_alloc(h, 256 << 10, 0, &r));
    double dt = now_s() - t0;
    if (dt > slowest) slowest = dt;
    OK(h, hl_ref_release(h, r));
    n++;
  }
  pthread_join(t, NULL);
  double end = now_s() - start;
  hl_stats s = stats_of(h);
  printf("alloc: %d allocations, slowest %.2f s, %.2f s in all; %" PRIu64 " waits, %" PRIu64
         " timeouts\n", n, slowest, end, s.pacing_waits, s.pacing_timeouts);
  CHECK(s.pacing_waits >= 1, "no allocation waited");
  CHECK(end < 2.0, "the paced wait went on %.2f s after the interrupt (0.5 s in)", end - 0.5);
  CHECK(s.pacing_timeouts == 0, "%" PRIu64 " timeouts: an interrupted wait is no timeout",
        s.pacing_timeouts);
  check_invariants(h);
  hl_heap_free(h);

  /* a churn that waits on pacing stops with HL_EINTR */
  h = paced_heap();
  CHECK(pthread_create(&t, NULL, interrupt_later, NULL) == 0, "thread");
  hl_churn_result cr;
  double t0 = now_s();
  int rc = hl_churn(h, 60, 256 << 10, 4 << 20, 0, &cr);
  double dt = now_s() - t0;
  pthread_join(t, NULL);
  printf("churn: %s after %.2f s (%s)\n", hl_error_name(rc), dt, hl_heap_error(h));
  CHECK(rc == HL_EINTR, "churn: %s (%s)", hl_error_name(rc), hl_heap_error(h));
  CHECK(dt < 2.0, "churn stopped %.2f s after it started (interrupted at 0.5 s)", dt);
  check_invariants(h);
  hl_heap_free(h);
  puts("ok");
  return 0;
}
