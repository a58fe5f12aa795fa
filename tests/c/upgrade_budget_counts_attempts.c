/* Upgrade budget 8, a backlog of 200+ fallback pages: counting ATTEMPTS
 * drains all of them (8 per trim); counting pages SCANNED (the seed's defect)
 * spends every later budget on the window already upgraded and stalls at 8. */
#include "check.h"

static uint64_t scenario(const char *counts, uint64_t *backlog) {
  char opt[64];
  snprintf(opt, sizeof opt, "upgrade_budget_counts=%s", counts);
  hl_heap *h = HEAP(opt, "upgrade_per_sweep=8", "warm_pages=0", "release_per_sweep=1048576");
  hl_ref r;
  OK(h, hl_fill(h, 200u * 65536, 256, 0, &r));
  OK(h, hl_ref_release(h, r));
  /* refuse the primary advice everywhere while the backlog builds */
  OK(h, hl_inject(h, HL_SITE_release, HL_FAULT_always, 0, 12));
  OK(h, hl_inject(h, HL_SITE_upgrade, HL_FAULT_always, 0, 12));
  OK(h, hl_collect(h, 2, -1));
  OK(h, hl_inject(h, HL_SITE_release, HL_FAULT_off, 0, 0));
  OK(h, hl_inject(h, HL_SITE_upgrade, HL_FAULT_off, 0, 0));
  hl_stats s = stats_of(h);
  *backlog = s.fallback_pool_pages;
  CHECK(*backlog >= 200 && s.upgraded_pages == 0, "backlog %" PRIu64, *backlog);
  for (uint64_t i = 0; i < *backlog / 8 + 4; i++) OK(h, hl_trim(h));
  s = stats_of(h);
  check_invariants(h);
  hl_heap_free(h);
  return s.upgraded_pages;
}

int main(void) {
  uint64_t backlog_a, backlog_s;
  uint64_t attempts = scenario("attempts", &backlog_a);
  uint64_t scanned = scenario("scanned", &backlog_s);
  printf("backlog %" PRIu64 ": attempts upgraded %" PRIu64 ", scanned upgraded %" PRIu64 "\n",
         backlog_a, attempts, scanned);
  CHECK(attempts == backlog_a, "attempts drained %" PRIu64 " of %" PRIu64, attempts, backlog_a);
  CHECK(scanned == 8, "scanned upgraded %" PRIu64 " (the seed's defect stalls at 8)", scanned);
  return 0;
}
