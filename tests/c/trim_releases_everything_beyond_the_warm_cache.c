/* hl_trim releases every free page beyond the warm cache; a cycle's trim
 * keeps its bound of release_per_sweep pages.
 *
 * Why: hl_trim (Heap.trim, Lua's h:trim, the preload's malloc_trim) says
 * "release beyond the warm cache", but it was one trim pass: at most
 * release_per_sweep pages (1024: 4 MiB at page_size=4k).  After a 1 GiB
 * drop at 4 KiB pages, a major collection and a trim left 1.19 GB resident,
 * and an idle program kept it for ever (the scale hunt, session 28).  Now
 * the explicit trim runs passes of release_per_sweep pages, the heap lock
 * dropped between them, until only the warm cache is left.
 *
 * A heap of 4 KiB pages, release_per_sweep=256, warm_pages=64 (the demand
 * window off: warm_demand_trims=0) fills FILL bytes and drops them.  The
 * major collection's own trim releases at most 256 pages; one hl_trim then
 * leaves exactly the warm cache free and resident, in at least excess/256
 * passes (the stat trims counts passes); a second hl_trim has nothing to
 * do.  Checked: before the fix this test failed -- the trim released 256
 * pages and left 22,271 beyond the warm cache. */
#include "check.h"

enum { FILL = 64 << 20, PAGE = 4096, PER = 256, WARM = 64 };

int main(void) {
  hl_heap *h = HEAP("page_size=4096", "release_per_sweep=256", "warm_pages=64",
                    "warm_demand_trims=0", "gc_trigger_bytes=1073741824");
  hl_ref r;
  OK(h, hl_fill(h, FILL, 64, 0, &r));
  OK(h, hl_ref_release(h, r));
  hl_stats a = stats_of(h);
  OK(h, hl_collect(h, 1, 1));
  hl_stats b = stats_of(h);
  printf("the cycle: %" PRIu64 " pages released, %" PRIu64 " free after\n",
         b.released_pages - a.released_pages, b.free_pool_pages);
  CHECK(b.released_pages - a.released_pages <= PER,
        "a cycle's trim released %" PRIu64 " pages, release_per_sweep %d",
        b.released_pages - a.released_pages, PER);
  uint64_t excess = b.free_pool_pages - WARM;
  CHECK(b.free_pool_pages > WARM + 4 * PER, "only %" PRIu64 " pages free after the drop of %d MiB",
        b.free_pool_pages, FILL >> 20);
  OK(h, hl_trim(h));
  hl_stats c = stats_of(h);
  printf("hl_trim: %" PRIu64 " pages released in %" PRIu64 " passes, %" PRIu64
         " free after (warm_pages %d)\n",
         c.released_pages - b.released_pages, c.trims - b.trims, c.free_pool_pages, WARM);
  CHECK(c.free_pool_pages == WARM,
        "hl_trim left %" PRIu64 " pages free, %" PRIu64 " beyond the warm cache of %d",
        c.free_pool_pages, c.free_pool_pages - WARM, WARM);
  CHECK(c.released_pages - b.released_pages == excess, "hl_trim released %" PRIu64
        " pages of the %" PRIu64 " beyond the warm cache", c.released_pages - b.released_pages,
        excess);
  CHECK(c.trims - b.trims >= excess / PER, "%" PRIu64 " pages in %" PRIu64
        " passes: more than release_per_sweep (%d) a pass", excess, c.trims - b.trims, PER);
  OK(h, hl_trim(h));
  hl_stats d = stats_of(h);
  CHECK(d.released_pages == c.released_pages && d.free_pool_pages == WARM,
        "a second hl_trim released %" PRIu64 " pages", d.released_pages - c.released_pages);
  OK(h, hl_heap_check(h));
  hl_heap_free(h);
  return 0;
}
