/* One released page fails restore permanently (a sticky fault).  fifo parks
 * it at the tail of the reuse-failed pool and keeps reusing the other
 * released pages; lifo (the seed's defect) puts it back at the head, retries
 * it on every attempt and starves: every acquisition takes a fresh page. */
#include "check.h"

static hl_stats scenario(const char *order) {
  char opt[64];
  snprintf(opt, sizeof opt, "reuse_failed_order=%s", order);
  hl_heap *h = HEAP(opt, "warm_pages=0", "release_per_sweep=1048576");
  hl_ref r;
  OK(h, hl_fill(h, 16u << 20, 256, 0, &r));
  OK(h, hl_ref_release(h, r));
  OK(h, hl_collect(h, 2, -1));
  hl_stats s0 = stats_of(h);
  CHECK(s0.released_pool_pages == s0.total_pages, "not all released");
  /* page 0 is the head of the released pool (released runs are filed in
   * address order): it fails restore, forever */
  OK(h, hl_inject(h, HL_SITE_restore, HL_FAULT_sticky, 0, 5 /* EIO */));
  OK(h, hl_fill(h, 8u << 20, 256, 0, &r));
  hl_stats s = stats_of(h);
  s.fresh_pages -= s0.fresh_pages;
  s.reused_pages -= s0.reused_pages;
  uint64_t sum, n;
  OK(h, hl_ref_checksum(h, r, &sum, &n));
  CHECK(n > (8u << 20) / 256, "objects lost");
  check_invariants(h);
  hl_heap_free(h);
  return s;
}

int main(void) {
  hl_stats fifo = scenario("fifo");
  hl_stats lifo = scenario("lifo");
  printf("fifo: fresh %" PRIu64 " reused %" PRIu64 " failed %" PRIu64 "; lifo: fresh %" PRIu64
         " reused %" PRIu64 " failed %" PRIu64 "\n",
         fifo.fresh_pages, fifo.reused_pages, fifo.restore_failed_pages, lifo.fresh_pages,
         lifo.reused_pages, lifo.restore_failed_pages);
  CHECK(fifo.fresh_pages == 0, "fifo took %" PRIu64 " fresh pages", fifo.fresh_pages);
  CHECK(fifo.reused_pages >= 128, "fifo reused only %" PRIu64, fifo.reused_pages);
  CHECK(lifo.reused_pages == 0, "lifo reused %" PRIu64 " pages past the bad one", lifo.reused_pages);
  CHECK(lifo.fresh_pages >= 128, "lifo took only %" PRIu64 " fresh pages", lifo.fresh_pages);
  return 0;
}
