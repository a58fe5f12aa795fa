/* The byte counters are 64-bit all the way: 5 GiB allocated on the large
 * path between two cycles is counted as 5 GiB -- by the counter the large
 * trigger and the quiet test read, and in the stats.  A 32-bit counter (the
 * seed's) wraps at 4 GiB: 5 GiB since the last cycle reads as 1 GiB.  The
 * objects are 4 MiB blocks the heap never writes past their headers, so the
 * 5 GiB are address space, not memory. */
#include "check.h"

#define GiB (1024.0 * MiB)

int main(void) {
  hl_heap *h = HEAP("large_trigger_bytes=8g", "page_release=false");
  const uint64_t block = 4u << 20, n = 1280; /* 5 GiB */
  for (uint64_t i = 0; i < n; i++) {
    hl_ref r;
    OK(h, hl_alloc(h, block, 0, &r));
    OK(h, hl_ref_release(h, r));
  }
  hl_stats s = stats_of(h);
  printf("since the last cycle %.2f GiB, allocated %.2f GiB, live %.2f GiB, %" PRIu64 " cycles\n",
         s.large_bytes_since_cycle / GiB, s.large_allocated_bytes / GiB, s.large_live_bytes / GiB,
         s.cycles);
  CHECK(s.cycles == 0, "%" PRIu64 " cycles below an 8 GiB large trigger", s.cycles);
  CHECK(s.large_bytes_since_cycle >= n * block, "large bytes since the last cycle: %" PRIu64
        ", %" PRIu64 " allocated", s.large_bytes_since_cycle, n * block);
  CHECK(s.large_allocated_bytes >= n * block, "large bytes allocated: %" PRIu64,
        s.large_allocated_bytes);
  CHECK(s.large_live_bytes >= n * block, "large bytes live: %" PRIu64, s.large_live_bytes);

  /* the cycle sees 5 GiB allocated: not quiet, and everything freed */
  OK(h, hl_collect(h, 1, -1));
  s = stats_of(h);
  CHECK(s.major_quiet == 0, "a cycle after 5 GiB of allocation was taken as quiet");
  CHECK(s.large_objects == 0 && s.large_live_bytes == 0, "%" PRIu64 " large objects left",
        s.large_objects);
  hl_heap_free(h);
  return 0;
}
