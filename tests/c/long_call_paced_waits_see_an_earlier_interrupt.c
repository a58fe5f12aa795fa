/* A long call's paced waits end at an interrupt that came before they began:
 * hl_fill of large objects on a background heap whose collector runs one
 * cycle and then none for 30 s (min_cycle_interval_ms), so that every paced
 * allocation after the first cycle waits its whole pacing_max_wait_ms (1 s)
 * unless an interrupt ends it.  The fill must stop with HL_EINTR within 0.5 s
 * of the interrupt, wherever it lands -- in a wait, or between two.  Before
 * the fix each wait took a fresh interrupt mark and the fill looked for an
 * interrupt only every 4096 objects: the wait the interrupt landed in ended,
 * and every later one ran its whole time (the review of session 30's pacing
 * changes).  (The waits were 2 s, the bound 1 s: 2.6 s a run, paid in the
 * plain, ASan and TSan builds; the fill stops within 0.01 s of the
 * interrupt.) */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static _Atomic double fired_at;
static useconds_t delay_us;

static void *interrupt_later(void *arg) {
  (void)arg;
  usleep(delay_us);
  atomic_store(&fired_at, now_s());
  hl_interrupt();
  return NULL;
}

int main(void) {
  /* the interrupt early (as the fill starts), in the first long wait, and
   * later (in a wait or between two) */
  static const useconds_t delays[] = {20000, 300000, 1300000};
  for (size_t i = 0; i < sizeof delays / sizeof *delays; i++) {
    hl_heap *h = HEAP("collector=background", "min_cycle_interval_ms=30000",
                      "pacing_max_wait_ms=1000", "pacing_give_up_cycles=1000",
                      "large_trigger_bytes=1m", "mark_threads=1");
    delay_us = delays[i];
    atomic_store(&fired_at, 0.0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, interrupt_later, NULL) == 0, "thread");
    hl_ref r = 0;
    double t0 = now_s();
    /* 16 objects of 256 KiB: some 12 paced waits of 1 s each, unless ended */
    int rc = hl_fill(h, 4 << 20, 256 << 10, 0, &r);
    double done = now_s();
    pthread_join(t, NULL);
    double late = done - atomic_load(&fired_at);
    hl_stats s = stats_of(h);
    printf("interrupt at %.3f s: fill %s after %.2f s, %.2f s after the interrupt; %" PRIu64
           " waits, %" PRIu64 " timeouts (%s)\n", delays[i] / 1e6, hl_error_name(rc),
           done - t0, late, s.pacing_waits, s.pacing_timeouts, hl_heap_error(h));
    CHECK(rc == HL_EINTR, "fill: %s (%s)", hl_error_name(rc), hl_heap_error(h));
    CHECK(r == 0, "an interrupted fill made a handle");
    CHECK(late < 0.5, "the fill went on %.2f s after the interrupt", late);
    check_invariants(h);
    hl_heap_free(h);
  }
  puts("ok");
  return 0;
}
