/* Generational mode, tenuring: a page dense at two full marks in a row is
 * tenured, and its objects stay marked -- dead or alive -- until a whole
 * mark (every tenure_full_marks-th full mark).  A structure that is still
 * being built when those two full marks run is dense at both, and is often
 * garbage soon after it is finished: binary-trees' stretch tree at depth 21
 * (256 MiB) was tenured while it was built and stayed until the 16th full
 * mark after it died; the long-lived tree was built on fresh pages beside
 * it, and the peak was 543.8 MiB against mimalloc's 289.5 (docs/
 * performance.md, item 28).  So a full mark whose live set grew by more than
 * full_growth_ratio percent since the last one tenures nothing: the pages
 * are tenured once the live set has stopped growing.
 *
 * Here a list is built across many full marks and dropped, then a second
 * list half its size is built: its pages must come from the first list's,
 * reclaimed by the next full mark, not from fresh pages.  And a list that
 * stays (the live set stable) is still tenured. */
#include "check.h"

#define OBJ_PAYLOAD 48 /* + an 8-byte header and one slot: 64-byte objects */
#define BIG 65536      /* 4 MiB of objects */

static void *roots[2];

static void push_obj(hl_heap *h, void **head) {
  void *o = hl_obj_new(h, OBJ_PAYLOAD, 1);
  CHECK(o, "alloc: %s", hl_heap_error(h));
  hl_obj_set(o, 0, *head);
  *head = o;
}

static void build(hl_heap *h, void **head, int n) {
  hl_enter(h);
  for (int i = 0; i < n; i++) push_obj(h, head);
  hl_leave(h);
}

int main(void) {
  hl_heap *h = HEAP("generational=true", "young_bytes=64k", "gc_trigger_min_bytes=64k",
                    "mark_threads=1", "page_size=4k", "page_release=false", "verify=true",
                    "tenure_full_marks=64"); /* (no whole mark comes in the test) */
  OK(h, hl_roots_add(h, roots, 2, 0));
  hl_stats s0 = stats_of(h);
  build(h, &roots[0], BIG); /* the "stretch" list: grows across full marks */
  hl_stats s1 = stats_of(h);
  CHECK(s1.major_full_mark - s0.major_full_mark >= 4,
        "only %" PRIu64 " full marks while the list grew", s1.major_full_mark - s0.major_full_mark);
  roots[0] = NULL;
  build(h, &roots[1], BIG / 2); /* the "long-lived" list */
  hl_stats s2 = stats_of(h);
  uint64_t half = (uint64_t)BIG / 2 * 64 / 4096; /* the second list's pages */
  printf("first list: %" PRIu64 " pages carved, %" PRIu64 " full marks, %" PRIu64
         " pages tenured; after the second: %" PRIu64 " carved (+%" PRIu64 ", its objects fill %"
         PRIu64 "), %" PRIu64 " full marks, %" PRIu64 " whole\n",
         s1.total_pages, s1.major_full_mark - s0.major_full_mark, s1.tenured_pages,
         s2.total_pages, s2.total_pages - s1.total_pages, half,
         s2.major_full_mark - s1.major_full_mark, s2.whole_marks - s1.whole_marks);
  CHECK(s2.whole_marks == s1.whole_marks, "a whole mark ran: the test shows nothing then");
  /* (the nursery is 16 pages; before the fix 128 came fresh, the first
   * list's 640 tenured pages kept) */
  CHECK(s2.total_pages - s1.total_pages <= half / 8,
        "the second list took %" PRIu64 " fresh pages of its %" PRIu64 ": the first list's were "
        "tenured while it grew and kept after it died", s2.total_pages - s1.total_pages, half);
  /* the second list stays, and the live set is stable now: tenured */
  OK(h, hl_collect(h, 1, 1)); /* (explicit: a whole mark) */
  hl_stats s3 = stats_of(h);
  uint64_t f3 = s3.major_full_mark;
  for (int round = 0; round < 1 << 16 && stats_of(h).major_full_mark < f3 + 3; round++) {
    build(h, &roots[0], 300); /* promoted and dropped (300: not a divisor of the
                                  nursery's 1,024 objects): full marks, a stable live set */
    roots[0] = NULL;
  }
  hl_stats s4 = stats_of(h);
  printf("then %" PRIu64 " full marks with the second list live: %" PRIu64 " pages tenured\n",
         s4.major_full_mark - f3, s4.tenured_pages);
  CHECK(s4.major_full_mark >= f3 + 3, "no full marks came");
  CHECK(s4.tenured_pages >= half * 3 / 4,
        "%" PRIu64 " pages tenured after full marks with a stable live set (the list fills %"
        PRIu64 ")", s4.tenured_pages, half);
  CHECK(s4.verify_failures == 0, "verify: %s", hl_heap_error(h));
  OK(h, hl_roots_remove(h, roots));
  check_invariants(h);
  hl_heap_free(h);
  return 0;
}
