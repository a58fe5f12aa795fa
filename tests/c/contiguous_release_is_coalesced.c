/* Releasing N contiguous empty pages issues at most N/8 release calls: one
 * madvise per contiguous run, not one per page. */
#include "check.h"

int main(void) {
  hl_heap *h = HEAP("warm_pages=0", "release_per_sweep=1048576");
  hl_ref r;
  OK(h, hl_fill(h, 64u << 20, 256, 0, &r));
  OK(h, hl_ref_release(h, r));
  OK(h, hl_collect(h, 2, -1));
  hl_stats s = stats_of(h);
  CHECK(s.released_pages == s.total_pages, "released %" PRIu64 " of %" PRIu64, s.released_pages,
        s.total_pages);
  CHECK(s.release_calls * 8 <= s.released_pages, "%" PRIu64 " calls for %" PRIu64 " pages",
        s.release_calls, s.released_pages);
  printf("%" PRIu64 " contiguous pages released in %" PRIu64 " calls\n", s.released_pages,
         s.release_calls);
  hl_heap_free(h);
  return 0;
}
