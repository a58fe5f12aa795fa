/* Collected mode: every live large object is found again after heavy
 * large-path churn with collections.  The collector follows a slot to a
 * large object only after finding it in the set of live large blocks (an
 * open-addressing set with backward-shift deletion), so an entry that a
 * deletion loses is a live object the next sweep frees.  4,000 kept large
 * objects of assorted sizes, then 200,000 short-lived ones dropped in
 * batches with a collection after each batch: the kept objects' count,
 * checksum and bytes are what they were. */
#include "check.h"

enum { KEPT = 4000, BATCH = 2000, ROUNDS = 100 };

static uint64_t size_of(uint64_t i) { return 600 + (i * 7919) % 15000; } /* > small_max */

int main(void) {
  hl_heap *h = HEAP("page_release=false");
  hl_ref keep;
  OK(h, hl_alloc(h, 0, KEPT, &keep));
  for (uint64_t i = 0; i < KEPT; i++) {
    hl_ref r;
    OK(h, hl_alloc(h, size_of(i), 0, &r));
    unsigned char b[64];
    memset(b, (int)(i * 37 + 1), sizeof b);
    OK(h, hl_ref_write(h, r, 0, b, sizeof b));
    OK(h, hl_ref_write(h, r, size_of(i) - sizeof b, b, sizeof b));
    OK(h, hl_ref_set(h, keep, i, r));
    OK(h, hl_ref_release(h, r));
  }
  OK(h, hl_collect(h, 1, -1));
  hl_stats s0 = stats_of(h);
  uint64_t sum0, n0;
  OK(h, hl_ref_checksum(h, keep, &sum0, &n0));
  CHECK(n0 == KEPT + 1, "%" PRIu64 " objects reachable, expected %d", n0, KEPT + 1);

  for (int round = 0; round < ROUNDS; round++) {
    hl_ref batch;
    OK(h, hl_alloc(h, 0, BATCH, &batch));
    for (uint64_t i = 0; i < BATCH; i++) {
      hl_ref r;
      OK(h, hl_alloc(h, size_of(i + (uint64_t)round * BATCH + 17), 0, &r));
      OK(h, hl_ref_set(h, batch, i, r));
      OK(h, hl_ref_release(h, r));
    }
    OK(h, hl_ref_release(h, batch));
    OK(h, hl_collect(h, 1, -1));
    if (round % 10 == 9) {
      uint64_t sum, n;
      OK(h, hl_ref_checksum(h, keep, &sum, &n));
      CHECK(n == n0 && sum == sum0, "round %d: %" PRIu64 " objects reachable (checksum %016" PRIx64
            "), expected %" PRIu64 " (%016" PRIx64 ")", round, n, sum, n0, sum0);
    }
  }
  hl_stats s1 = stats_of(h);
  printf("%" PRIu64 " cycles, %" PRIu64 " objects freed; %" PRIu64 " large objects, %.1f MiB live\n",
         s1.cycles - s0.cycles, s1.objects_freed - s0.objects_freed, s1.large_objects,
         s1.large_live_bytes / MiB);
  CHECK(s1.large_objects == s0.large_objects, "%" PRIu64 " large objects, expected %" PRIu64,
        s1.large_objects, s0.large_objects);
  CHECK(s1.large_live_bytes == s0.large_live_bytes, "%" PRIu64 " large bytes live, expected %" PRIu64,
        s1.large_live_bytes, s0.large_live_bytes);
  for (uint64_t i = 0; i < KEPT; i += 97) { /* and each one reads back */
    hl_ref r;
    OK(h, hl_ref_get(h, keep, i, &r));
    unsigned char b[64];
    OK(h, hl_ref_read(h, r, size_of(i) - sizeof b, b, sizeof b));
    CHECK(b[0] == (unsigned char)(i * 37 + 1) && b[63] == b[0], "object %" PRIu64 " changed", i);
    OK(h, hl_ref_release(h, r));
  }
  check_invariants(h);
  hl_heap_free(h);
  return 0;
}
