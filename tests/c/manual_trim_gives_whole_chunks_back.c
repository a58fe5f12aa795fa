/* Huge pages (thp) in manual mode: a trim runs from a free once the free
 * pool is manual_trim_threshold pages (16 of 64 KiB) past the warm cache, so
 * it takes about 17 pages -- fewer than the 32 of a 2 MiB chunk.  On bb2b780
 * a chunk whose 32 pages were all free was then never taken whole: the trim
 * released 17 of its pages (a split of its huge page: the RSS drops, the
 * machine gets the memory only at the kernel's deferred split) and the next
 * trim the rest -- every chunk a manual heap gave back was split (12 MiB of
 * blocks freed in order: 4 splits, 3 chunks whole, 10 calls).  A trim now
 * takes a whole chunk even past what it would take (at most
 * release_per_sweep pages): 0 splits, 4 chunks whole, 4 calls.
 *
 * The chunk counters are the heap's and do not depend on the kernel giving
 * huge pages (thp_enabled 0 keeps the same 2 MiB chunks); the process's
 * AnonHugePages is only printed. */
#include "check.h"

#define CHUNK ((uint64_t)2 << 20)
#define BLOCK 240 /* bytes: a size class of its own, 273 blocks a page */

static void **blocks;

static size_t fill(hl_heap *h, uint64_t bytes) {
  size_t n = (size_t)(bytes / BLOCK);
  for (size_t i = 0; i < n; i++) {
    blocks[i] = hl_malloc(h, BLOCK);
    CHECK(blocks[i], "malloc %zu of %zu: %s", i, n, hl_heap_error(h));
    memset(blocks[i], (int)(i & 0xff), BLOCK);
  }
  return n;
}

/* Free in allocation order: whole chunks empty one after another. */
static void free_all(hl_heap *h, size_t n) {
  for (size_t i = 0; i < n; i++) {
    unsigned char *b = blocks[i];
    CHECK(b[0] == (unsigned char)(i & 0xff), "block %zu damaged", i);
    hl_free_sized(h, b, BLOCK);
  }
  hl_thread_flush(h);
}

static void whole_chunks_back(const char *thp, const char *page_size) {
  hl_footprint f0, f1, f2;
  hl_heap *h = HEAP("mode=manual", thp, page_size, "thp_prefault=0", "verify=0");
  hl_stats s0 = stats_of(h);
  OK(NULL, hl_footprint_get(&f0));
  size_t n = fill(h, 12u << 20);
  OK(NULL, hl_footprint_get(&f1));
  free_all(h, n);
  OK(NULL, hl_footprint_get(&f2));
  OK(h, hl_heap_check(h));
  hl_stats s = stats_of(h);
  hl_options o;
  OK(h, hl_heap_options(h, &o));
  uint64_t per = CHUNK / (uint64_t)o.page_size;
  printf("%s %s: %" PRIu64 " pages carved, %" PRIu64 " released in %" PRIu64 " trims, %" PRIu64
         " calls; %" PRIu64 " chunks whole, %" PRIu64 " split; AnonHugePages %.1f -> %.1f -> "
         "%.1f MiB (thp_enabled %" PRIu64 ")\n",
         thp, page_size, s.total_pages, s.released_pages, s.trims, s.release_calls,
         s.thp_chunks_released, s.thp_splits, f0.anon_huge / MiB, f1.anon_huge / MiB,
         f2.anon_huge / MiB, s0.thp_enabled);
  CHECK(s.small_live_bytes == 0, "%" PRIu64 " bytes live", s.small_live_bytes);
  CHECK(s.released_pages >= 2 * per, "%" PRIu64 " pages released", s.released_pages);
  CHECK(s.thp_chunks_released >= 1, "no chunk released whole");
  CHECK(s.thp_splits == 0, "%" PRIu64 " huge pages split for %" PRIu64 " chunks released whole "
        "(%" PRIu64 " pages released): a trim takes part of a free chunk", s.thp_splits,
        s.thp_chunks_released, s.released_pages);
  CHECK(s.released_pages == s.thp_chunks_released * per, "%" PRIu64 " pages released, %" PRIu64
        " chunks whole", s.released_pages, s.thp_chunks_released);
  hl_heap_free(h);
}

/* release_per_sweep stays a bound: below a chunk's pages, a trim takes no
 * chunk whole (it splits one, as before) and releases at most that many. */
static void release_per_sweep_still_bounds_a_trim(void) {
  hl_heap *h = HEAP("mode=manual", "thp=madvise", "thp_prefault=0", "release_per_sweep=8");
  size_t n = fill(h, 8u << 20);
  hl_event ev[4096];
  size_t ne;
  OK(h, hl_events_read(h, ev, 4096, &ne, 1));
  free_all(h, n);
  OK(h, hl_events_read(h, ev, 4096, &ne, 1));
  OK(h, hl_heap_check(h));
  hl_stats s = stats_of(h);
  uint64_t trims = 0;
  for (size_t i = 0; i < ne; i++) {
    if (ev[i].kind != HL_EV_trim) continue;
    trims++;
    CHECK(ev[i].fields[0] <= 8, "a trim released %" PRId64 " pages, release_per_sweep=8",
          ev[i].fields[0]);
  }
  CHECK(trims > 0 && s.released_pages > 0, "%" PRIu64 " trims released %" PRIu64 " pages", trims,
        s.released_pages);
  CHECK(s.thp_splits >= 1, "no split, 8 pages at a time of chunks of 32");
  hl_heap_free(h);
}

int main(void) {
  blocks = malloc(sizeof(void *) * ((12u << 20) / BLOCK + 1));
  CHECK(blocks, "test array");
  whole_chunks_back("thp=madvise", "page_size=64k");
  whole_chunks_back("thp=populate", "page_size=64k");
  whole_chunks_back("thp=madvise", "page_size=16k");
  release_per_sweep_still_bounds_a_trim();
  free(blocks);
  return 0;
}
