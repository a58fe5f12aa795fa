/* Manual mode returns memory like the collected heap does: 192 MiB of small
 * blocks freed (in scattered order, sized and unsized) leave at most the
 * warm cache, the trim threshold and one owned page per class resident
 * (mincore), because frees trigger trims; with page_release=false the pages
 * stay.  Allocating the same set again reuses the released pages instead of
 * carving new ones. */
#include <stdint.h>

#include "check.h"

#define TOTAL (192ull << 20)

static void **blocks;
static size_t *sizes;
static size_t nblocks;

static uint64_t fill_all(hl_heap *h) {
  uint64_t bytes = 0, x = 88172645463325252ull;
  nblocks = 0;
  while (bytes < TOTAL) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    size_t size = 16 + (x >> 11) % 497;
    void *b = hl_malloc(h, size);
    CHECK(b, "malloc(%zu) failed after %.1f MiB: %s", size, bytes / MiB, hl_heap_error(h));
    memset(b, (int)(nblocks & 0xff), size);
    blocks[nblocks] = b;
    sizes[nblocks++] = size;
    bytes += size;
  }
  return bytes;
}

static void free_all(hl_heap *h) {
  /* every 7th block first (pages go partial), then the rest */
  for (size_t i = 0; i < nblocks; i += 7) {
    hl_free_sized(h, blocks[i], sizes[i]);
    blocks[i] = NULL;
  }
  for (size_t i = 0; i < nblocks; i++) {
    if (!blocks[i]) continue;
    unsigned char *b = blocks[i];
    CHECK(b[0] == (unsigned char)(i & 0xff) && b[sizes[i] - 1] == (unsigned char)(i & 0xff),
          "block %zu damaged", i);
    if (i & 1) hl_free(h, b);
    else hl_free_sized(h, b, sizes[i]);
  }
  hl_thread_flush(h);
}

int main(void) {
  blocks = malloc(sizeof(void *) * (TOTAL / 16));
  sizes = malloc(sizeof(size_t) * (TOTAL / 16));
  CHECK(blocks && sizes, "test arrays");

  hl_heap *h = HEAP("mode=manual", "page_release=true");
  hl_options o;
  OK(h, hl_heap_options(h, &o));
  fill_all(h);
  uint64_t filled = resident_of(h);
  hl_stats s1 = stats_of(h);
  free_all(h);
  uint64_t after = resident_of(h);
  hl_stats s2 = stats_of(h);
  check_invariants(h);
  /* what may stay: the warm cache, the trim threshold (max(1 MiB's worth of
   * pages, warm/4)) and the owned page of each class */
  uint64_t batch = ((uint64_t)1 << 20) / (uint64_t)o.page_size;
  uint64_t threshold = (uint64_t)o.warm_pages / 4 > batch ? (uint64_t)o.warm_pages / 4 : batch;
  uint64_t allowed = ((uint64_t)o.warm_pages + threshold + 64) * (uint64_t)o.page_size;
  printf("page_release on: %.1f MiB resident after the fill, %.1f MiB after the frees "
         "(allowed %.1f); %" PRIu64 " pages released in %" PRIu64 " trims\n",
         filled / MiB, after / MiB, allowed / MiB, s2.released_pages, s2.trims);
  CHECK(filled >= TOTAL, "the fill left only %.1f MiB resident", filled / MiB);
  CHECK(after <= allowed, "%.1f MiB still resident after freeing everything", after / MiB);
  CHECK(s2.small_live_bytes == 0, "%" PRIu64 " bytes live", s2.small_live_bytes);

  /* the same set again: released pages are restored and reused */
  fill_all(h);
  hl_stats s3 = stats_of(h);
  printf("refill: %" PRIu64 " pages carved first, %" PRIu64 " after; %" PRIu64 " reused\n",
         s1.total_pages, s3.total_pages, s3.reused_pages);
  CHECK(s3.reused_pages >= s2.released_pages * 9 / 10, "only %" PRIu64 " of %" PRIu64
        " released pages reused", s3.reused_pages, s2.released_pages);
  CHECK(s3.total_pages <= s1.total_pages + s1.total_pages / 20,
        "the refill carved %" PRIu64 " pages beyond the first fill's %" PRIu64,
        s3.total_pages - s1.total_pages, s1.total_pages);
  free_all(h);
  check_invariants(h);
  hl_heap_free(h);

  /* control: page_release=false keeps the emptied pages resident */
  h = HEAP("mode=manual", "page_release=false");
  fill_all(h);
  filled = resident_of(h);
  free_all(h);
  after = resident_of(h);
  s2 = stats_of(h);
  printf("page_release off: %.1f MiB resident after the fill, %.1f MiB after the frees\n",
         filled / MiB, after / MiB);
  CHECK(after >= filled * 95 / 100, "page_release=false kept only %.1f of %.1f MiB", after / MiB,
        filled / MiB);
  CHECK(s2.released_pages == 0, "pages released with page_release=false");
  check_invariants(h);
  hl_heap_free(h);
  free(blocks);
  free(sizes);
  return 0;
}
