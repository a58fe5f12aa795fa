/* A cycle event's reason says what asked for the cycle (heaplab.h: 1 the
 * small trigger, 2 the large one, 3 pacing near heap_limit_bytes, ...), with
 * the background collector as with the sync one.  The collector thread ran
 * every cycle it was asked for with reason 1: a storm of large objects
 * reported {2: 99} with the sync collector and {1: 133} with the background
 * one (the background-collector hunt, session 30, F4). */
#include <time.h>

#include "check.h"

/* the cycles asked for have run: the stats' cycle count holds still */
static void settle(hl_heap *h) {
  uint64_t last = UINT64_MAX;
  for (int i = 0; i < 200; i++) {
    uint64_t c = stats_of(h).cycles;
    if (c == last) return;
    last = c;
    nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
  }
}

static void storm(const char *collector, const char *what, uint64_t size, int n, int keep,
                  const char *opt1, const char *opt2, uint64_t counts[8]) {
  hl_heap *h = HEAP(collector, "min_cycle_interval_ms=0", opt1, opt2);
  hl_ref ring[16] = {0};
  for (int i = 0; i < n; i++) {
    if (ring[i % keep]) OK(h, hl_ref_release(h, ring[i % keep]));
    OK(h, hl_alloc(h, size, 0, &ring[i % keep]));
    if (i % 32 == 0) cycle_reasons_read(h, counts);
  }
  settle(h);
  cycle_reasons_read(h, counts);
  printf("%s, %s:", collector, what);
  for (int r = 0; r < 8; r++)
    if (counts[r]) printf(" reason %d: %" PRIu64, r, counts[r]);
  printf("\n");
  hl_heap_free(h);
}

int main(void) {
  static const char *collectors[] = {"collector=sync", "collector=background"};
  for (int c = 0; c < 2; c++) {
    const char *coll = collectors[c];
    uint64_t large[8] = {0}, small[8] = {0}, paced[8] = {0};
    /* 100 MiB of 256 KiB objects, 1 MiB live: the large trigger's cycles */
    storm(coll, "large objects", 256u << 10, 400, 4, "large_trigger_bytes=1m", "large_pacing=1",
          large);
    CHECK(large[2] > 0 && large[2] == large[0] + large[1] + large[2] + large[3] + large[4],
          "%s: cycles of a storm of large objects not all of reason 2 (the large trigger): "
          "reason 1: %" PRIu64 ", 2: %" PRIu64, coll, large[1], large[2]);
    /* 200 MiB of 256-byte objects: the small trigger's */
    storm(coll, "small objects", 256, 800000, 4, "large_trigger_bytes=1m", "large_pacing=1",
          small);
    CHECK(small[1] > 0 && small[1] == small[0] + small[1] + small[2] + small[3] + small[4],
          "%s: cycles of a storm of small objects not all of reason 1 (the small trigger): "
          "reason 1: %" PRIu64 ", 2: %" PRIu64, coll, small[1], small[2]);
    /* 1 MiB objects, 14 MiB live under a 16 MiB limit, the large trigger
     * far: the background collector's cycles are pacing's (3) -- or, when an
     * allocation finds the heap at the limit first, memory's (4) */
    storm(coll, "near the limit", 1u << 20, 200, 14, "large_trigger_bytes=1g",
          "heap_limit_bytes=16m", paced);
    if (c == 1)
      CHECK(paced[3] > 0 && paced[1] == 0 && paced[2] == 0,
            "%s: near the limit, reason 1: %" PRIu64 ", 2: %" PRIu64 ", 3: %" PRIu64, coll,
            paced[1], paced[2], paced[3]);
  }
  printf("background_cycles_report_their_reason: ok\n");
  return 0;
}
