/* A released page is restored BEFORE it is formatted.  With every restore
 * failing, the pages tried and parked in the reuse-failed pool must not have
 * been written: they stay non-resident.  restore_before_format=false is the
 * seed's defect: format writes into the still-released range first (verify
 * poisons every formatted page), so each failed page becomes resident. */
#include "check.h"

static uint64_t scenario(const char *order, hl_stats *out) {
  hl_heap *h = HEAP("verify=true", order, "warm_pages=0", "release_per_sweep=1048576");
  hl_ref r;
  OK(h, hl_fill(h, 16u << 20, 256, 0, &r));
  OK(h, hl_ref_release(h, r));
  OK(h, hl_collect(h, 2, -1));
  OK(h, hl_inject(h, HL_SITE_restore, HL_FAULT_always, 0, 5 /* EIO */));
  hl_stats s0 = stats_of(h);
  OK(h, hl_fill(h, 1u << 20, 256, 0, &r));
  *out = stats_of(h);
  out->fresh_pages -= s0.fresh_pages;
  uint64_t res = resident_of(h);
  hl_heap_free(h);
  return res;
}

int main(void) {
  hl_stats good, bad;
  uint64_t res_good = scenario("restore_before_format=true", &good);
  uint64_t res_bad = scenario("restore_before_format=false", &bad);
  printf("restore first: %" PRIu64 " fresh, %" PRIu64 " failed, %.2f MiB resident; "
         "format first: %" PRIu64 " fresh, %" PRIu64 " failed, %.2f MiB resident\n",
         good.fresh_pages, good.restore_failed_pages, res_good / MiB, bad.fresh_pages,
         bad.restore_failed_pages, res_bad / MiB);
  CHECK(good.restore_failed_pages > 0 && bad.restore_failed_pages > 0, "restores did not fail");
  CHECK(res_good <= (good.fresh_pages + 1) * 65536,
        "restore-first: %.2f MiB resident for %" PRIu64 " fresh pages", res_good / MiB,
        good.fresh_pages);
  CHECK(res_bad >= (bad.fresh_pages + bad.restore_failed_pages) * 65536,
        "format-first did not write the failed pages (%.2f MiB)", res_bad / MiB);
  return 0;
}
