/* Huge pages (thp): the kernel backs a 2 MiB chunk whole -- thp=populate
 * faults the chunk in with one call, thp=madvise at its first touch -- so
 * the part of the last chunk that no page was carved from yet is resident
 * too.  hl_resident_bytes must count it: on a680368 it measured only the
 * carved pages and said 1.3 MiB after a 1 MiB fill while AnonHugePages had
 * grown by 2 MiB.
 *
 *
 * And a trim that gives the last chunk's carved pages back must give back
 * its uncarved rest too once the huge page is split: on 6c1b26f "the last,
 * partly carved chunk is never whole" left that rest resident for the
 * heap's life -- 1.5 MiB of every heap whose fill was dropped (40 heaps of
 * 3-6 MiB fills kept 48 MiB more than with thp=never, 19% of what they had
 * grown), invisible to everything but the process's RSS.
 *
 * The checks that need huge pages run only where thp_enabled says the kernel
 * gives them and AnonHugePages shows the chunk. */
#include <errno.h>

#include "check.h"

#define CHUNK ((uint64_t)2 << 20)

/* The process's anonymous memory under AddressSanitizer holds its shadow of
 * the fill (an eighth) and its own allocations: the process-level check of
 * what came back runs without it (resident_bytes, the heap's, runs with). */
#if defined(__SANITIZE_ADDRESS__)
#define PROCESS_FOOTPRINT 0
#else
#define PROCESS_FOOTPRINT 1
#endif

static void resident_counts_the_whole_chunk(const char *thp) {
  hl_footprint f0, f1;
  OK(NULL, hl_footprint_get(&f0));
  hl_heap *h = HEAP(thp, "warm_pages=0", "thp_prefault=0", "verify=1");
  hl_ref r;
  OK(h, hl_fill(h, 1u << 20, 248, 0, &r)); /* 21 pages of 64 KiB: one chunk, in part */
  OK(h, hl_footprint_get(&f1));
  hl_stats s = stats_of(h);
  uint64_t res = resident_of(h);
  double huge = (double)f1.anon_huge - (double)f0.anon_huge;
  printf("%s: %" PRIu64 " pages carved, resident_bytes %.2f MiB, AnonHugePages +%.2f MiB "
         "(thp_enabled %" PRIu64 ")\n", thp, s.total_pages, res / MiB, huge / MiB,
         s.thp_enabled);
  CHECK(s.total_pages * 65536 < CHUNK, "the fill carved %" PRIu64 " pages", s.total_pages);
  if (s.thp_enabled && huge >= (double)CHUNK)
    CHECK(res >= CHUNK, "a huge page backs the chunk, yet resident_bytes says %.2f MiB",
          res / MiB);
  OK(h, hl_ref_release(h, r));
  hl_heap_free(h);
}

/* A fill that ends 0.5 MiB into its third chunk, dropped and trimmed: no
 * page is in use, and what the process had grown comes back. */
static void dropped_fill_gives_the_last_chunk_back(const char *thp) {
  hl_footprint f0, f1, f2;
  OK(NULL, hl_footprint_get(&f0));
  hl_heap *h = HEAP(thp, "warm_pages=0", "warm_demand_trims=0", "thp_prefault=0",
                    "release_per_sweep=1048576", "verify=1");
  hl_ref r;
  OK(h, hl_fill(h, 4u << 20, 248, 0, &r)); /* 72 pages: 2 chunks and 8 pages */
  uint64_t sum0, sum1, objs0, objs1;
  OK(h, hl_ref_checksum(h, r, &sum0, &objs0));
  OK(h, hl_footprint_get(&f1));
  hl_stats a = stats_of(h);
  CHECK(a.total_pages % 32 != 0, "%" PRIu64 " pages: the last chunk is whole", a.total_pages);
  OK(h, hl_collect(h, 1, 1));
  OK(h, hl_ref_checksum(h, r, &sum1, &objs1));
  CHECK(sum0 == sum1 && objs0 == objs1, "the fill changed under a collection");
  OK(h, hl_ref_release(h, r));
  OK(h, hl_collect(h, 2, 1));
  OK(h, hl_heap_check(h));
  OK(h, hl_footprint_get(&f2));
  hl_stats b = stats_of(h);
  uint64_t res = resident_of(h);
  double grew = (double)f1.anonymous - (double)f0.anonymous;
  double kept = (double)f2.anonymous - (double)f0.anonymous;
  printf("%s: %" PRIu64 " of %" PRIu64 " pages released, %" PRIu64 " chunks whole, %" PRIu64
         " split; grew %.2f MiB, %.2f MiB kept, resident_bytes %.2f MiB\n", thp,
         b.released_pages, b.total_pages, b.thp_chunks_released, b.thp_splits, grew / MiB,
         kept / MiB, res / MiB);
  CHECK(b.released_pages == b.total_pages, "%" PRIu64 " of %" PRIu64 " pages released",
        b.released_pages, b.total_pages);
  CHECK(res <= 256u << 10, "resident_bytes %.2f MiB with every page released", res / MiB);
  if (PROCESS_FOOTPRINT && a.thp_enabled &&
      (double)f1.anon_huge - (double)f0.anon_huge >= (double)(2 * CHUNK))
    CHECK(kept <= grew / 8, "grew %.2f MiB, %.2f MiB still there with every page released",
          grew / MiB, kept / MiB);
  hl_heap_free(h);
}

/* The call over the rest refused (fault site release, sticky on the first
 * uncarved page: the pages' own calls do not cover it): a later trim tries
 * again.  On 1cc283c nothing did -- the chunk stayed split with its rest
 * resident for good. */
static void refused_rest_is_retried(void) {
  hl_heap *h = HEAP("thp=populate", "warm_pages=0", "warm_demand_trims=0", "thp_prefault=0",
                    "release_per_sweep=1048576", "syscall_retry_max=0", "verify=1");
  hl_ref r;
  OK(h, hl_fill(h, 4u << 20, 248, 0, &r));
  hl_stats a = stats_of(h);
  CHECK(a.total_pages % 32 != 0, "%" PRIu64 " pages: the last chunk is whole", a.total_pages);
  OK(h, hl_inject(h, HL_SITE_release, HL_FAULT_sticky, (int64_t)a.total_pages, EIO));
  OK(h, hl_ref_release(h, r));
  OK(h, hl_collect(h, 2, 1));
  OK(h, hl_heap_check(h));
  hl_stats b = stats_of(h);
  uint64_t refused = resident_of(h);
  CHECK(b.released_pages == b.total_pages, "%" PRIu64 " of %" PRIu64 " pages released",
        b.released_pages, b.total_pages);
  OK(h, hl_inject(h, HL_SITE_release, HL_FAULT_off, 0, 0));
  OK(h, hl_trim(h));
  uint64_t res = resident_of(h);
  printf("rest refused: resident_bytes %.2f MiB; after the next trim %.2f MiB\n", refused / MiB,
         res / MiB);
  if (b.thp_enabled) CHECK(refused >= 1u << 20, "the refused rest is not resident (%.2f MiB)",
                           refused / MiB);
  CHECK(res <= 256u << 10, "resident_bytes %.2f MiB after a trim with nothing refused",
        res / MiB);
  OK(h, hl_heap_check(h));
  hl_heap_free(h);
}

int main(void) {
  resident_counts_the_whole_chunk("thp=populate");
  resident_counts_the_whole_chunk("thp=madvise");
  dropped_fill_gives_the_last_chunk_back("thp=populate");
  dropped_fill_gives_the_last_chunk_back("thp=madvise");
  refused_rest_is_retried();
  return 0;
}
