/* Huge pages (thp): the kernel backs a 2 MiB chunk whole -- thp=populate
 * faults the chunk in with one call, thp=madvise at its first touch -- so
 * the part of the last chunk that no page was carved from yet is resident
 * too.  hl_resident_bytes must count it: on a680368 it measured only the
 * carved pages and said 1.3 MiB after a 1 MiB fill while AnonHugePages had
 * grown by 2 MiB.
 *
 * The checks that need huge pages run only where thp_enabled says the kernel
 * gives them and AnonHugePages shows the chunk. */
#include "check.h"

#define CHUNK ((uint64_t)2 << 20)

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

int main(void) {
  resident_counts_the_whole_chunk("thp=populate");
  resident_counts_the_whole_chunk("thp=madvise");
  return 0;
}
