/* On the default options, heavy large-path allocation over partially live
 * pages is not "quiet": the quiet test counts the large path's bytes too
 * (quiet_counts_large=true is the default), so the cycles the large path
 * drives sweep only what retired -- no major sweep is chosen as quiet, and
 * the partial pages are walked only by the 16-cycle backstop.  The seed's
 * defect (the quiet test reading small-path bytes only) made every one of
 * these cycles a quiet major sweep over every partial page.  A cycle with
 * nothing allocated since the last one is still quiet. */
#include "check.h"

int main(void) {
  hl_heap *h = heap_with(NULL); /* the defaults, no environment */

  /* survivors on partially live pages: 48 MiB of 248-byte objects, every
   * other one kept, every page swept once */
  hl_ref survivors;
  OK(h, hl_fill_stride(h, 48u << 20, 248, 0, 2, &survivors));
  OK(h, hl_collect(h, 1, 1));
  hl_stats s0 = stats_of(h);
  CHECK(s0.partial_pool_pages > 300, "only %" PRIu64 " partial pages", s0.partial_pool_pages);
  uint64_t sum0 = 0, n0 = 0;
  OK(h, hl_ref_checksum(h, survivors, &sum0, &n0));

  /* heavy large-path allocation: 640 MiB of 64 KiB objects, each dropped at
   * once; the large trigger (24 MiB) drives the cycles */
  for (int i = 0; i < 10240; i++) {
    hl_ref r;
    OK(h, hl_alloc(h, 64u << 10, 0, &r));
    OK(h, hl_ref_release(h, r));
  }
  hl_stats s1 = stats_of(h);
  uint64_t cycles = s1.cycles - s0.cycles;
  uint64_t majors = s1.major_sweeps - s0.major_sweeps;
  uint64_t quiet = s1.major_quiet - s0.major_quiet;
  printf("large churn: %" PRIu64 " cycles, %" PRIu64 " major sweeps (%" PRIu64 " quiet, %" PRIu64
         " backstop), %" PRIu64 " partial pages swept by them\n",
         cycles, majors, quiet, s1.major_backstop - s0.major_backstop,
         s1.major_swept_pages - s0.major_swept_pages);
  CHECK(cycles >= 20, "the large path drove only %" PRIu64 " cycles", cycles);
  CHECK(quiet == 0, "%" PRIu64 " of %" PRIu64 " large-path cycles were taken as quiet", quiet, cycles);
  CHECK(majors <= cycles / 16 + 1, "%" PRIu64 " major sweeps in %" PRIu64 " cycles", majors, cycles);

  /* the survivors are intact, and a cycle after nothing is quiet */
  uint64_t sum = 0, n = 0;
  OK(h, hl_ref_checksum(h, survivors, &sum, &n));
  CHECK(sum == sum0 && n == n0, "the survivors changed during the churn");
  OK(h, hl_collect(h, 1, 1));
  hl_stats s2 = stats_of(h);
  OK(h, hl_collect(h, 1, -1));
  hl_stats s3 = stats_of(h);
  CHECK(s3.major_quiet == s2.major_quiet + 1, "a cycle after nothing allocated was not quiet");
  check_invariants(h);
  hl_options o; /* (what made it so) */
  OK(h, hl_heap_options(h, &o));
  CHECK(o.quiet_counts_large == 1, "quiet_counts_large defaults to %" PRId64, o.quiet_counts_large);
  hl_heap_free(h);
  return 0;
}
