/* After fill(192 MiB, 256) is dropped and collected, every page that held
 * those objects is empty and back in the free pool, and the pool accounting
 * adds up (every page in exactly one state). */
#include "check.h"

int main(void) {
  hl_heap *h = HEAP("page_release=false");
  hl_ref r;
  OK(h, hl_fill(h, 192u << 20, 256, 0, &r));
  hl_stats s = stats_of(h);
  CHECK(s.total_pages * 65536ull >= (192ull << 20), "only %" PRIu64 " pages", s.total_pages);
  uint64_t sum, n;
  OK(h, hl_ref_checksum(h, r, &sum, &n));
  CHECK(n >= (192u << 20) / 256, "reachable %" PRIu64, n);
  check_invariants(h);
  OK(h, hl_ref_release(h, r));
  /* The first cycle sweeps what was retired since the last one; pages that
   * were swept while the fill was live sit in the partial pool until a major
   * sweep, which the second (quiet) cycle gets. */
  OK(h, hl_collect(h, 2, -1));
  CHECK(stats_of(h).major_quiet >= 1, "the quiet cycle was not a major sweep");
  s = stats_of(h);
  CHECK(s.free_pool_pages == s.total_pages,
        "free %" PRIu64 " of %" PRIu64 " pages (partial %" PRIu64 ", retired %" PRIu64 ")",
        s.free_pool_pages, s.total_pages, s.partial_pool_pages, s.retired_pool_pages);
  CHECK(s.small_live_bytes == 0, "small live %" PRIu64, s.small_live_bytes);
  CHECK(s.owned_pages + s.retired_pool_pages + s.partial_pool_pages + s.free_pool_pages +
                s.released_pool_pages + s.reuse_failed_pool_pages + s.in_flight_pages ==
            s.total_pages,
        "states do not add up");
  check_invariants(h);
  hl_heap_free(h);
  return 0;
}
