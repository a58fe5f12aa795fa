/* When the primary advice is refused the page takes the fallback advice
 * (Linux MADV_FREE: still resident, still charged), is recorded as such and
 * upgraded by a later trim.  upgrade_per_sweep=0 reproduces the seed's
 * "fallback counted as success and never upgraded". */
#include "check.h"

static void scenario(int64_t budget) {
  char opt[64];
  snprintf(opt, sizeof opt, "upgrade_per_sweep=%" PRId64, budget);
  hl_heap *h = HEAP(opt, "warm_pages=0", "release_per_sweep=1048576");
  hl_ref r;
  OK(h, hl_fill(h, 32u << 20, 256, 0, &r));
  OK(h, hl_ref_release(h, r));
  OK(h, hl_inject(h, HL_SITE_release, HL_FAULT_always, 0, 12 /* ENOMEM */));
  OK(h, hl_inject(h, HL_SITE_upgrade, HL_FAULT_always, 0, 12));
  OK(h, hl_collect(h, 2, -1));
  OK(h, hl_inject(h, HL_SITE_upgrade, HL_FAULT_off, 0, 0));
  hl_stats s = stats_of(h);
  hl_footprint fp;
  hl_footprint_get(&fp);
  CHECK(s.fallback_pages == s.total_pages && s.fallback_pool_pages == s.total_pages,
        "fallback %" PRIu64 " of %" PRIu64, s.fallback_pages, s.total_pages);
  CHECK(resident_of(h) >= (32ull << 20), "MADV_FREE pages should stay resident");
  CHECK(fp.lazyfree >= (32ull << 20), "LazyFree is %.1f MiB", fp.lazyfree / MiB);
  OK(h, hl_inject(h, HL_SITE_release, HL_FAULT_off, 0, 0));
  for (int i = 0; i < 4; i++) OK(h, hl_trim(h));
  s = stats_of(h);
  if (budget > 0) {
    CHECK(s.upgraded_pages == s.total_pages && s.fallback_pool_pages == 0,
          "upgraded %" PRIu64 " of %" PRIu64, s.upgraded_pages, s.total_pages);
    CHECK(resident_of(h) == 0, "upgraded pages still resident: %.1f MiB", resident_of(h) / MiB);
  } else {
    CHECK(s.upgraded_pages == 0 && s.fallback_pool_pages == s.total_pages,
          "budget 0 upgraded pages");
    CHECK(resident_of(h) >= (32ull << 20), "never-upgraded pages were dropped");
  }
  check_invariants(h);
  hl_heap_free(h);
}

int main(void) {
  scenario(1024);
  scenario(0);
  return 0;
}
