/*
 * verify=true finds a write after free when the freed object's page went
 * empty too: such a page went to the free pool unpoisoned and unchecked,
 * and its next format wiped the evidence (./coll1 all of the verify hunt:
 * nothing reported, where ./coll1 partial was).  Now an emptied page is
 * poisoned whole, hl_heap_check and every cycle check the free pool's
 * pages, and a page taken again -- from the free pool, or released and
 * restored (its OS pages read back as zero, or as the old poison after
 * MADV_FREE) -- is checked before it is formatted: counted in
 * verify_failures, the heap's error says where.  Without a write, many
 * rounds of emptying, releasing and reusing report nothing.
 */
#include "check.h"

static void stale_write(const char *warm, int check_first) {
  hl_heap *h = HEAP("verify=true", "reserve_bytes=64m", warm, "warm_demand_trims=0");
  enum { N = 5000 };
  static hl_ref r[N];
  for (int i = 0; i < N; i++) OK(h, hl_alloc(h, 40, 0, &r[i]));
  hl_object_info in;
  OK(h, hl_ref_info(h, r[7], &in));
  for (int i = 0; i < N; i++) OK(h, hl_ref_release(h, r[i]));
  OK(h, hl_collect(h, 2, 1)); /* every page empty: the free pool, or released */
  memset((void *)(uintptr_t)in.address, 'X', 8); /* the defect */
  char want[64];
  snprintf(want, sizeof want, "%p, in the slot at %p", (void *)(uintptr_t)in.address,
           (void *)(uintptr_t)in.object);
  if (check_first) { /* a page of the free pool is checked where it lies */
    FAILS(h, HL_ECHECK, want, hl_heap_check(h));
    FAILS(h, HL_ECHECK, "its last class 48 bytes", hl_collect(h, 1, 1));
    CHECK(stats_of(h).verify_failures == 1, "one failure");
  }
  /* taken again: checked before its format wipes the write */
  uint64_t before = stats_of(h).verify_failures;
  for (int i = 0; i < N; i++) OK(h, hl_alloc(h, 40, 0, &r[i]));
  CHECK(stats_of(h).verify_failures == before + 1, "the reuse found it: %" PRIu64 " -> %" PRIu64,
        before, stats_of(h).verify_failures);
  CHECK(strstr(hl_heap_error(h), want) && strstr(hl_heap_error(h), "taken again"),
        "the heap's error says where: '%s'", hl_heap_error(h));
  OK(h, hl_heap_check(h));
  hl_heap_free(h);
}

int main(void) {
  stale_write("warm_pages=64", 1); /* the page stays in the free pool */
  stale_write("warm_pages=0", 0);  /* released by the cycle's trim; restored on reuse */

  /* no write: nothing reported through emptying, releasing, reusing */
  const char *advice[] = {"release_advice=dontneed", "release_advice=free"};
  for (int a = 0; a < 2; a++) {
    hl_heap *h = HEAP("verify=true", "reserve_bytes=64m", "warm_pages=1", advice[a],
                      "warm_demand_trims=0");
    for (int round = 0; round < 30; round++) {
      hl_ref f;
      OK(h, hl_fill(h, 1u << 20, 40 + (uint64_t)(round % 4) * 24, round % 2, &f));
      OK(h, hl_ref_release(h, f));
      OK(h, hl_collect(h, 1, round % 2));
    }
    check_invariants(h);
    hl_stats s = stats_of(h);
    CHECK(s.verify_failures == 0 && s.released_pages > 0 && s.reused_pages > 0,
          "failures %" PRIu64 " released %" PRIu64 " reused %" PRIu64, s.verify_failures,
          s.released_pages, s.reused_pages);
    hl_heap_free(h);
  }
  puts("ok");
  return 0;
}
