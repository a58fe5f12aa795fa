/* The marker and the write barrier map a page offset to a slot index with a
 * multiply by a per-class reciprocal (hl__slot_index), not a divide.  That
 * is exact only because classes are multiples of 16 and offsets stay below
 * 2^20: checked here for every class of the largest configurations and
 * every byte offset of a page. */
#include "check.h"
#include "internal.h"

static void check_heap(const char *page_size, const char *small_max) {
  hl_heap *h = HEAP(page_size, small_max, "reserve_bytes=64m");
  uint64_t checked = 0;
  for (uint32_t c = 0; c < h->nclasses; c++) {
    uint32_t sz = h->cls_size[c];
    CHECK(sz % 16 == 0, "class %u: size %u is not a multiple of 16", c, sz);
    for (uint64_t off = 0; off < h->page_size; off++, checked++)
      if (hl__slot_index(h, off, c) != off / sz)
        CHECK(0, "%s %s: class %u (%u bytes), offset %" PRIu64 ": index %u, not %" PRIu64,
              page_size, small_max, c, sz, off, hl__slot_index(h, off, c), off / sz);
  }
  CHECK(checked >= (uint64_t)h->nclasses * h->page_size, "checked %" PRIu64, checked);
  hl_heap_free(h);
}

int main(void) {
  check_heap("page_size=1m", "small_max=16384"); /* the largest offsets and classes */
  check_heap("page_size=64k", "small_max=512");  /* the defaults */
  check_heap("page_size=4k", "small_max=1024");
  return 0;
}
