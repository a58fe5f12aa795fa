/* The quiet test's cutoff is min(trigger in force / 4, quiet_bytes), not a
 * fixed quiet_bytes: with a 4 MiB trigger every small-path cycle has 4 MiB
 * allocated since the last one, far from quiet, although that is below the
 * 6 MiB quiet_bytes.  A fixed cutoff (the seed's) took each of them for a
 * quiet cycle and made it a major sweep over every partial page.  Below the
 * cutoff (1 MiB here) a cycle is still quiet. */
#include "check.h"

int main(void) {
  hl_heap *h = HEAP("gc_trigger_bytes=4m", "gc_trigger_min_bytes=4m", "adaptive_trigger=false",
                    "gc_live_ratio=0", "page_release=false");
  hl_options o;
  OK(h, hl_heap_options(h, &o));
  CHECK(o.quiet_bytes == 6 << 20, "quiet_bytes is %" PRId64 ", the scenario needs 6 MiB",
        o.quiet_bytes);
  hl_stats s0 = stats_of(h);
  /* 64 MiB of small garbage: a cycle every 4 MiB */
  for (int i = 0; i < 16; i++) {
    hl_ref r;
    OK(h, hl_fill(h, 4u << 20, 120, 0, &r));
    OK(h, hl_ref_release(h, r));
  }
  hl_stats s1 = stats_of(h);
  uint64_t cycles = s1.cycles - s0.cycles, quiet = s1.major_quiet - s0.major_quiet;
  printf("%" PRIu64 " cycles at a %.0f MiB trigger, %" PRIu64 " taken as quiet\n", cycles,
         s1.gc_trigger_bytes / MiB, quiet);
  CHECK(s1.gc_trigger_bytes == 4u << 20, "trigger in force %" PRIu64, s1.gc_trigger_bytes);
  CHECK(cycles >= 12, "only %" PRIu64 " cycles", cycles);
  CHECK(quiet == 0, "%" PRIu64 " of %" PRIu64 " cycles with 4 MiB allocated were taken as quiet",
        quiet, cycles);

  /* 512 KiB since the last cycle: below trigger/4, quiet */
  OK(h, hl_collect(h, 1, 0));
  hl_ref r;
  OK(h, hl_fill(h, 512u << 10, 120, 0, &r));
  OK(h, hl_collect(h, 1, -1));
  hl_stats s2 = stats_of(h);
  CHECK(s2.major_quiet == s1.major_quiet + 1, "a cycle after 512 KiB was not quiet");
  hl_heap_free(h);
  return 0;
}
