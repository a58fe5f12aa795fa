/* hl_heap_free from the thread that holds the heap (hl_enter) while the
 * background collector waits for the heap lock.  hl_heap_free stopped the
 * collector (joined its thread) before it let go of this thread's hold, and
 * the collector was blocked on exactly that lock: the join never returned.
 * Found by the core concurrency hunt (twenty-second session).  Now the hold
 * goes first, the collector finishes its cycle or sees the stop, and the
 * heap is freed.
 *
 * The collector is made to wait for the lock without a sleep: a cycle is
 * requested within min_cycle_interval_ms of the last one, so the collector
 * waits out the interval; this thread takes the heap meanwhile and waits
 * until the collector says it is waiting for the lock (collector_waiting).
 * An alarm reports a hang. */
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "internal.h" /* (collector_waiting: the collector blocked on the lock) */

static void on_alarm(int sig) {
  (void)sig;
  static const char m[] =
      "hl_heap_free of a held heap did not return in 20 s: it joins the background collector, "
      "which waits for the lock this thread holds\n";
  ssize_t w = write(2, m, sizeof m - 1);
  (void)w;
  _exit(1);
}

int main(void) {
  hl_heap *h = HEAP("collector=background", "min_cycle_interval_ms=200",
                    "gc_trigger_bytes=1048576", "gc_trigger_min_bytes=1048576",
                    "adaptive_trigger=0", "gc_growth_ratio=0");
  OK(h, hl_collect(h, 1, 1)); /* the last cycle ended now: the interval starts */
  /* 2 MiB of garbage: past the trigger, a request the collector holds until
   * the interval has passed */
  for (int i = 0; i < 8192; i++) {
    hl_ref r;
    OK(h, hl_alloc(h, 256, 0, &r));
    OK(h, hl_ref_release(h, r));
  }
  OK(h, hl_enter(h));
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while (!atomic_load(&h->collector_waiting)) {
    clock_gettime(CLOCK_MONOTONIC, &t);
    CHECK(t.tv_sec - t0.tv_sec < 10, "the background collector never waited for the lock "
          "(cycles completed: %" PRIu64 ")", h->cycles_completed);
    usleep(1000);
  }
  signal(SIGALRM, on_alarm);
  alarm(20);
  hl_heap_free(h);
  alarm(0);
  puts("ok");
  return 0;
}
