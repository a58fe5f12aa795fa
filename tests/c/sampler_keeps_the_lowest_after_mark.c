/* The sampler's "after mark" low is the LOWEST footprint seen since the
 * mark, not a reading at some chosen instant: asynchronous reclamation is
 * asserted on that low (never after a fixed sleep, the seed's way).  Here the
 * footprint drops by 96 MiB after the mark and then climbs back: the low
 * still holds the drop.  The caller's summary takes a sample itself, so the
 * low point is sampled whatever the sampler thread's timing. */
#include "check.h"

int main(void) {
  hl_sampler *s;
  CHECK(hl_sampler_start(&s, 1000, 4096) == HL_OK, "start");
  hl_heap *h = HEAP("warm_pages=0", "warm_demand_trims=0", "release_per_sweep=1048576");
  hl_ref r;
  OK(h, hl_fill(h, 96u << 20, 256, 0, &r));
  CHECK(hl_sampler_mark(s) == HL_OK, "mark");
  OK(h, hl_ref_release(h, r));
  collect_settled(h);
  hl_sampler_summary low, high;
  CHECK(hl_sampler_summary_get(s, &low) == HL_OK, "summary");
  OK(h, hl_fill(h, 96u << 20, 256, 0, &r)); /* back up */
  CHECK(hl_sampler_summary_get(s, &high) == HL_OK, "summary");
  printf("after the mark: low %.1f MiB, high %.1f MiB; at the drop %.1f MiB\n",
         high.min_phys_after_mark / MiB, high.max_phys_after_mark / MiB,
         low.min_phys_after_mark / MiB);
  CHECK(high.max_phys_after_mark >= low.min_phys_after_mark + (80u << 20),
        "the footprint did not drop by 80 MiB and come back (%.1f -> %.1f MiB)",
        low.min_phys_after_mark / MiB, high.max_phys_after_mark / MiB);
  CHECK(high.min_phys_after_mark == low.min_phys_after_mark,
        "the low after the mark moved from %.1f to %.1f MiB when the footprint rose again",
        low.min_phys_after_mark / MiB, high.min_phys_after_mark / MiB);
  CHECK(high.min_phys <= high.min_phys_after_mark, "overall low above the low after the mark");
  hl_heap_free(h);
  hl_sampler_stop(s);
  return 0;
}
