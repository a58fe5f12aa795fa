/* A page released with the fallback advice (MADV_FREE: still charged) whose
 * restore then fails is parked in the reuse-failed pool -- and must still be
 * upgraded by later trims, or it stays charged for as long as restores fail.
 * (Found by the manual-mode fault tests.) */
#include "check.h"

int main(void) {
  hl_heap *h = HEAP("warm_pages=0", "release_per_sweep=1048576", "reuse_attempts=4");
  hl_ref r;
  OK(h, hl_fill(h, 16u << 20, 256, 0, &r));
  OK(h, hl_ref_release(h, r));
  /* every page takes the fallback, and no upgrade can happen yet */
  OK(h, hl_inject(h, HL_SITE_release, HL_FAULT_always, 0, 12));
  OK(h, hl_inject(h, HL_SITE_upgrade, HL_FAULT_always, 0, 12));
  OK(h, hl_collect(h, 2, -1));
  hl_stats s = stats_of(h);
  CHECK(s.fallback_pool_pages == s.total_pages, "fallback %" PRIu64 " of %" PRIu64,
        s.fallback_pool_pages, s.total_pages);
  /* every restore fails: acquisitions park fallback pages as reuse-failed */
  OK(h, hl_inject(h, HL_SITE_restore, HL_FAULT_always, 0, 5));
  uint64_t fresh0 = stats_of(h).fresh_pages;
  OK(h, hl_fill(h, 2u << 20, 256, 0, &r));
  s = stats_of(h);
  uint64_t fresh = s.fresh_pages - fresh0;
  CHECK(s.reuse_failed_pool_pages >= 8, "only %" PRIu64 " pages parked", s.reuse_failed_pool_pages);
  CHECK(s.fallback_pool_pages == s.released_pool_pages + s.reuse_failed_pool_pages,
        "parked fallback pages not counted");
  uint64_t parked = s.reuse_failed_pool_pages;
  /* the primary advice works again: the trims upgrade both pools */
  OK(h, hl_inject(h, HL_SITE_release, HL_FAULT_off, 0, 0));
  OK(h, hl_inject(h, HL_SITE_upgrade, HL_FAULT_off, 0, 0));
  OK(h, hl_trim(h));
  s = stats_of(h);
  CHECK(s.fallback_pool_pages == 0, "%" PRIu64 " fallback pages left", s.fallback_pool_pages);
  CHECK(s.reuse_failed_pool_pages == parked, "parked pages moved pools");
  /* what stays resident is the new fill on its fresh pages, not the parked ones */
  CHECK(resident_of(h) <= (fresh + 1) * 65536ull,
        "%.1f MiB resident for %" PRIu64 " fresh pages", resident_of(h) / MiB, fresh);
  check_invariants(h);
  hl_heap_free(h);
  return 0;
}
