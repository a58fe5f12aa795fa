/* A released page's mark and allocation bits go back to the OS with it.
 * They live out of line, in side tables of 512 bytes each per 64 KiB page (1.6%),
 * and are not read again until the page is formatted for reuse, so the OS
 * pages of the table that cover only released pages are released too.
 * Measured directly: mincore over the table's range after 256 MiB of pages
 * were filled, dropped and released.  Without that release the whole 4 MiB
 * of the table stays resident. */
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "internal.h"

int main(void) {
  hl_heap *h = HEAP("warm_pages=0", "warm_demand_trims=0", "release_per_sweep=1048576");
  hl_ref r;
  OK(h, hl_fill(h, 256u << 20, 240, 0, &r));
  OK(h, hl_collect(h, 1, -1));
  uint32_t pages = h->high_water;
  /* (a collected heap interleaves each page's mark and allocation bits:
   * one table, from the first page's marks) */
  CHECK(h->bits_stride == 2 * h->bitmap_words && h->abits == h->bits + h->bitmap_words,
        "a collected heap's bitmaps are not interleaved");
  uintptr_t lo = (uintptr_t)hl__marks(h, 0), hi = (uintptr_t)hl__marks(h, pages);
  uint64_t table = hi - lo;
  uint64_t before = mincore_resident(lo, hi);
  CHECK(before >= table * 9 / 10, "the side table of %u live pages is only %" PRIu64
        " of %" PRIu64 " bytes resident", pages, before, table);

  OK(h, hl_ref_release(h, r));
  collect_settled(h);
  hl_stats s = stats_of(h);
  CHECK(s.released_pages >= pages - 2, "%" PRIu64 " of %u pages released", s.released_pages, pages);
  check_invariants(h);
  uint64_t after = mincore_resident(lo, hi);
  printf("side table of %u pages: %.2f MiB resident while live, %.2f MiB after %" PRIu64
         " pages were released\n", pages, before / MiB, after / MiB, s.released_pages);
  /* what may stay: the OS pages at the ends of a released run, shared with
   * a page still in use (the fill's root and index are large or elsewhere) */
  CHECK(after <= table / 32, "%.2f of %.2f MiB of the released pages' side table still resident",
        after / MiB, table / MiB);

  /* and reused pages get their bits back, zeroed, when formatted */
  OK(h, hl_fill(h, 64u << 20, 240, 0, &r));
  OK(h, hl_collect(h, 1, -1));
  check_invariants(h);
  uint64_t sum, n;
  OK(h, hl_ref_checksum(h, r, &sum, &n));
  CHECK(n > (64u << 20) / 240, "%" PRIu64 " objects reached after reuse", n);
  hl_heap_free(h);
  return 0;
}
