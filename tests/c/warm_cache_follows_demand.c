/* warm_demand_trims: while the mutator keeps allocating, a trim keeps as
 * many empty pages as it took in each of the last intervals, so a workload
 * that empties and refills pages every cycle stops releasing and refaulting
 * them; a quiet interval (nothing taken) brings the cache down to
 * warm_pages at the next trim.  warm_demand_trims=0 is the seed's fixed cache. */
#include "check.h"

static hl_stats rounds(const char *demand, uint64_t *resident_quiet) {
  hl_heap *h = HEAP("warm_pages=0", demand);
  for (int i = 0; i < 20; i++) {
    hl_ref r;
    OK(h, hl_fill(h, 8u << 20, 128, 0, &r)); /* ~140 pages a round */
    OK(h, hl_ref_release(h, r));
    OK(h, hl_collect(h, 1, 1));
  }
  hl_stats s = stats_of(h);
  OK(h, hl_collect(h, 1, -1)); /* quiet: nothing taken since the last trim */
  *resident_quiet = resident_of(h);
  check_invariants(h);
  hl_heap_free(h);
  return s;
}

int main(void) {
  uint64_t quiet_on, quiet_off;
  hl_stats on = rounds("warm_demand_trims=2", &quiet_on);
  hl_stats off = rounds("warm_demand_trims=0", &quiet_off);
  printf("20 rounds: demand window released %" PRIu64 " pages (%" PRIu64 " reused warm), "
         "fixed cache released %" PRIu64 " (%" PRIu64 " restored); resident when quiet %.1f / %.1f MiB\n",
         on.released_pages, on.warm_reused_pages, off.released_pages, off.reused_pages,
         quiet_on / MiB, quiet_off / MiB);
  CHECK(off.released_pages >= 19 * 100, "the fixed cache released only %" PRIu64, off.released_pages);
  CHECK(on.released_pages * 10 <= off.released_pages, "demand window released %" PRIu64,
        on.released_pages);
  CHECK(quiet_on == 0 && quiet_off == 0, "quiet heap still resident: %.1f / %.1f MiB",
        quiet_on / MiB, quiet_off / MiB);
  return 0;
}
