/* Collected mode: every live large object is found again after heavy
 * large-path churn with collections.  The collector follows a slot to a
 * large object only after finding it in the set of live large blocks (an
 * open-addressing set with backward-shift deletion), so an entry that a
 * deletion loses is a live object the next sweep frees.  4,000 kept large
 * objects of assorted sizes, then 200,000 more through a ring of 2,000
 * slots -- the oldest die first, as in a real churn (and E2/E3's), while
 * younger ones stay -- with a collection every 1,000 allocations: the kept
 * objects' count and checksum are what they were, and every object in the
 * ring reads back what was written into it. */
#include "check.h"

enum { KEPT = 4000, RING = 2000, CHURN = 200000 };

static uint64_t size_of(uint64_t i) { return 600 + (i * 7919) % 15000; } /* > small_max */

/* A large object i with a pattern at both ends, stored in slot of root. */
static void put(hl_heap *h, hl_ref root, uint64_t slot, uint64_t i) {
  hl_ref r;
  OK(h, hl_alloc(h, size_of(i), 0, &r));
  unsigned char b[64];
  memset(b, (int)(i * 37 + 1), sizeof b);
  OK(h, hl_ref_write(h, r, 0, b, sizeof b));
  OK(h, hl_ref_write(h, r, size_of(i) - sizeof b, b, sizeof b));
  OK(h, hl_ref_set(h, root, slot, r));
  OK(h, hl_ref_release(h, r));
}

static void check_reads_back(hl_heap *h, hl_ref root, uint64_t slot, uint64_t i) {
  hl_ref r;
  OK(h, hl_ref_get(h, root, slot, &r));
  CHECK(r != 0, "object %" PRIu64 " is gone from its slot", i);
  hl_object_info info;
  OK(h, hl_ref_info(h, r, &info));
  CHECK(info.size == size_of(i), "object %" PRIu64 ": %" PRIu64 " bytes", i, info.size);
  unsigned char a[64], b[64];
  OK(h, hl_ref_read(h, r, 0, a, sizeof a));
  OK(h, hl_ref_read(h, r, size_of(i) - sizeof b, b, sizeof b));
  for (int k = 0; k < 64; k++)
    CHECK(a[k] == (unsigned char)(i * 37 + 1) && b[k] == a[k], "object %" PRIu64 " changed", i);
  OK(h, hl_ref_release(h, r));
}

int main(void) {
  hl_heap *h = HEAP("page_release=false");
  hl_ref keep, ring;
  OK(h, hl_alloc(h, 0, KEPT, &keep));
  for (uint64_t i = 0; i < KEPT; i++) put(h, keep, i, i);
  OK(h, hl_alloc(h, 0, RING, &ring));
  OK(h, hl_collect(h, 1, -1));
  hl_stats s0 = stats_of(h);
  uint64_t sum0, n0;
  OK(h, hl_ref_checksum(h, keep, &sum0, &n0));
  CHECK(n0 == KEPT + 1, "%" PRIu64 " objects reachable, expected %d", n0, KEPT + 1);

  for (uint64_t i = 0; i < CHURN; i++) {
    put(h, ring, i % RING, KEPT + i); /* drops object i - RING */
    if (i % 1000 == 999) {
      OK(h, hl_collect(h, 1, -1)); /* frees exactly the objects the ring dropped */
      uint64_t live = s0.large_objects + (i + 1 < RING ? i + 1 : RING);
      uint64_t now = stats_of(h).large_objects;
      CHECK(now == live, "after %" PRIu64 ": %" PRIu64 " large objects, expected %" PRIu64
            " (a live one was freed)", i + 1, now, live);
    }
    if (i % 20000 == 19999) {
      uint64_t sum, n;
      OK(h, hl_ref_checksum(h, keep, &sum, &n));
      CHECK(n == n0 && sum == sum0, "after %" PRIu64 ": %" PRIu64 " kept objects reachable "
            "(checksum %016" PRIx64 "), expected %" PRIu64 " (%016" PRIx64 ")", i + 1, n, sum, n0,
            sum0);
      OK(h, hl_ref_checksum(h, ring, &sum, &n));
      CHECK(n == RING + 1, "after %" PRIu64 ": %" PRIu64 " ring objects reachable", i + 1, n);
    }
  }
  OK(h, hl_collect(h, 1, -1));
  hl_stats s1 = stats_of(h);
  printf("%" PRIu64 " cycles, %" PRIu64 " objects freed; %" PRIu64 " large objects, %.1f MiB live\n",
         s1.cycles - s0.cycles, s1.objects_freed - s0.objects_freed, s1.large_objects,
         s1.large_live_bytes / MiB);
  CHECK(s1.large_objects == s0.large_objects + RING, "%" PRIu64 " large objects, expected %" PRIu64,
        s1.large_objects, s0.large_objects + RING);
  for (uint64_t i = 0; i < KEPT; i++) check_reads_back(h, keep, i, i);
  for (uint64_t i = CHURN - RING; i < CHURN; i++) check_reads_back(h, ring, i % RING, KEPT + i);
  check_invariants(h);
  hl_heap_free(h);
  return 0;
}
