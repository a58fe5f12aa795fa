/* The heap's reservation is exactly one VMA after 10,000 alloc/collect
 * cycles: no per-page mprotect or flag change ever splits it. */
#include "check.h"

int main(void) {
  hl_heap *h = HEAP("warm_pages=0", "release_per_sweep=64");
  CHECK(vmas_of(h) == 1, "fresh heap: %" PRIu64 " VMAs", vmas_of(h));
  hl_ref keep;
  OK(h, hl_alloc(h, 0, 8, &keep));
  for (int c = 0; c < 10000; c++) {
    hl_ref r;
    /* vary sizes so pages of many classes empty and get released */
    OK(h, hl_fill(h, 64 * 1024 * (1 + c % 4), 64 + (uint64_t)(c % 29) * 16, 0, &r));
    OK(h, hl_ref_set(h, keep, (uint64_t)c % 8, (c % 3) ? r : 0));
    OK(h, hl_ref_release(h, r));
    OK(h, hl_collect(h, 1, -1));
  }
  hl_stats s = stats_of(h);
  CHECK(s.released_pages > 1000, "the test did not release pages (%" PRIu64 ")", s.released_pages);
  CHECK(s.reused_pages > 1000, "the test did not reuse released pages (%" PRIu64 ")", s.reused_pages);
  CHECK(vmas_of(h) == 1, "after 10000 cycles: %" PRIu64 " VMAs", vmas_of(h));
  check_invariants(h);
  hl_heap_free(h);
  return 0;
}
