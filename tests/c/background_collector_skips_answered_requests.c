/* A request the background collector woke for, answered by a cycle another
 * thread ran while the collector waited for the heap lock, runs no second
 * cycle.  The collector ran one anyway, and its event said reason 1 (the
 * small trigger) though nothing had asked for it: the cycle's requests were
 * cleared by the cycle that answered them (the review of session 30's
 * background-collector fixes; background_cycles_report_their_reason could
 * see reason 1 near the limit now and then).  Here the race is made
 * certain: a thread holds the heap (hl_enter) past the collector's
 * min_cycle_interval_ms, so the collector is at the heap lock, and
 * collects while it holds it. */
#include <time.h>

#include "check.h"

static void sleep_ms(long ms) {
  nanosleep(&(struct timespec){ms / 1000, ms % 1000 * 1000000}, NULL);
}

/* the cycle events read so far: how many, and how many not a caller's */
static void cycles_read(hl_heap *h, uint64_t *all, uint64_t *asked) {
  uint64_t counts[8] = {0};
  cycle_reasons_read(h, counts);
  for (int r = 0; r < 8; r++) {
    *all += counts[r];
    if (r) *asked += counts[r];
  }
}

int main(void) {
  hl_heap *h = HEAP("collector=background", "min_cycle_interval_ms=300",
                    "large_trigger_bytes=1m", "large_pacing=0", "reserve_bytes=256m");
  int reached = 0;
  uint64_t extra = 0;
  for (int attempt = 0; attempt < 6 && reached < 3; attempt++) {
    OK(h, hl_collect(h, 1, -1)); /* a cycle now: the interval starts */
    uint64_t all = 0, asked = 0;
    cycles_read(h, &all, &asked);
    for (int i = 0; i < 3; i++) { /* 3 MiB past the large trigger: a request */
      hl_ref r;
      OK(h, hl_alloc(h, 1u << 20, 0, &r));
      OK(h, hl_ref_release(h, r));
    }
    OK(h, hl_enter(h));
    sleep_ms(300 + 200 + 100 * attempt); /* the interval ends: the collector
                                            goes to the heap lock */
    uint64_t wakeups = stats_of(h).collector_wakeups;
    OK(h, hl_collect(h, 1, -1)); /* answers the request */
    hl_leave(h);
    /* the collector has had the lock once its wake-up is counted; a cycle
     * it ran then is done when this thread has the lock again */
    bool woke = false;
    for (int i = 0; i < 300 && !woke; i++) {
      woke = stats_of(h).collector_wakeups > wakeups;
      if (!woke) sleep_ms(10);
    }
    if (!woke) continue; /* it had not reached the lock: again, longer */
    reached++;
    all = asked = 0;
    cycles_read(h, &all, &asked);
    printf("attempt %d: %" PRIu64 " cycles after the request, %" PRIu64 " not a caller's\n",
           attempt, all, asked);
    extra += asked;
  }
  CHECK(reached > 0, "the collector never reached the heap lock while it was held");
  CHECK(extra == 0,
        "%" PRIu64 " cycles the background collector ran after a caller's cycle had answered "
        "its request (%d times at the heap lock)", extra, reached);
  hl_heap_free(h);
  printf("background_collector_skips_answered_requests: ok (%d times)\n", reached);
  return 0;
}
