/* A thread that frees a large structure in hash order (a server's FLUSHALL,
 * redis-server in E9) must not keep its pages with the blocks its cache
 * holds.  Before the fix the cache kept up to tcache_blocks (1024) freed
 * blocks per class, each from a different page: 3 classes of 32, 48 and 96
 * bytes freed in random order left ~3,000 pages (190 MiB of 64 KiB pages)
 * pinned by 3,000 blocks; E9 returned 50% instead of 95%.  Now a flush that
 * empties pages lowers the class's cache limit, and the pages come back;
 * a refill restores the limit (allocation speed is unchanged). */
#include <stdint.h>

#include "check.h"

#define PER_CLASS 1000000

int main(void) {
  static const size_t cls[3] = {32, 48, 96};
  hl_heap *h = HEAP("mode=manual", "warm_pages=16");
  size_t n = 3 * PER_CLASS;
  void **b = malloc(n * sizeof *b);
  for (size_t i = 0; i < n; i++) {
    b[i] = hl_malloc(h, cls[i % 3]);
    CHECK(b[i], "malloc: %s", hl_heap_error(h));
    memset(b[i], 1, cls[i % 3]);
  }
  uint64_t full = 0;
  OK(h, hl_resident_bytes(h, &full));
  /* free in a random order: each cached block from another page */
  uint64_t x = 0x9e3779b97f4a7c15ull;
  shuffle(b, n, &x);
  for (size_t i = 0; i < n; i++) hl_free(h, b[i]);
  uint64_t left = 0;
  OK(h, hl_resident_bytes(h, &left));
  /* what may stay: 16 warm pages, the trim threshold (16), one owned page
   * per class and the pages the shrunken caches still hold (at most 16
   * blocks per class): 83 pages, 5.2 MiB; 8 MiB allowed */
  CHECK(left <= 8u << 20, "%.1f MiB of %.1f MiB still resident after every block was freed",
        left / 1048576.0, full / 1048576.0);
  /* allocating again restores the cache: refills take whole half-caches */
  hl_stats st0, st1;
  OK(h, hl_stats_get(h, &st0));
  for (size_t i = 0; i < 200000; i++) b[i] = hl_malloc(h, 32);
  for (size_t i = 0; i < 200000; i++) hl_free(h, b[i]);
  OK(h, hl_stats_get(h, &st1));
  CHECK(st1.tcache_refills - st0.tcache_refills < 1000,
        "%" PRIu64 " refills for 200,000 blocks: the cache limit did not grow back",
        st1.tcache_refills - st0.tcache_refills);
  free(b);
  hl_heap_free(h);
  printf("ok: %.1f MiB resident after the frees (of %.1f MiB)\n", left / 1048576.0,
         full / 1048576.0);
  return 0;
}
