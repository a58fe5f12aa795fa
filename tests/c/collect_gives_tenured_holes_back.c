/* A tenured page takes no new objects: tenuring takes it off its class's
 * avail list (gc/mark.c, tenuring).  A whole mark untenures every page --
 * a caller's collection among them, after which no page is to keep a hole
 * it cannot reuse (docs/design.md, "Tenuring in the default collector") --
 * but untenuring left the pages off the avail lists: only a major sweep put
 * them back, so after collect() with the policy's major sweep (Python's
 * collect(), Lua's h:collect()) that chose none, the holes of every page
 * that had been tenured stayed unusable and new objects of their class went
 * to new pages (235 pages of 236 off the lists in the probe; collect(major=
 * True) put them back).
 *
 * Here a dense set with one hole in ten is tenured; after hl_collect(h, 1,
 * -1) that sweeps no partial page, as many objects as there are holes must
 * land in the set's pages. */
#include "check.h"

#define N 10000 /* 48-byte objects: 118 pages of 4 KiB */

static void *roots[N];

int main(void) {
  hl_heap *h = HEAP("page_size=4k", "gc_trigger_bytes=64k", "gc_trigger_min_bytes=64k",
                    "tenure_full_marks=4", "verify=true");
  OK(h, hl_roots_add(h, roots, N, 0));
  for (int i = 0; i < N; i++) {
    roots[i] = hl_obj_new(h, 16, 3);
    CHECK(roots[i], "alloc: %s", hl_heap_error(h));
  }
  /* the set's pages (its last page's free slots past its objects too) */
  uintptr_t lo = (uintptr_t)roots[0], hi = ((uintptr_t)roots[N - 1] + 4096) & ~(uintptr_t)4095;
  for (int i = 0; i < N; i += 10) roots[i] = NULL; /* holes */
  hl_stats s;
  for (int r = 0; r < 200; r++) {
    for (int k = 0; k < 1000; k++) CHECK(hl_obj_new(h, 200, 0), "churn: %s", hl_heap_error(h));
    s = stats_of(h);
    if (s.tenured_pages >= 100) break;
  }
  CHECK(s.tenured_pages >= 100, "%" PRIu64 " pages tenured (the set takes 118)", s.tenured_pages);
  /* the holes are free (a major sweep freed them before the pages were tenured) */
  uint64_t majors = s.major_sweeps;
  for (int k = 0; k < 1000; k++) CHECK(hl_obj_new(h, 200, 0), "churn: %s", hl_heap_error(h));
  OK(h, hl_collect(h, 1, -1));
  s = stats_of(h);
  CHECK(s.tenured_pages == 0, "%" PRIu64 " pages tenured after collect()", s.tenured_pages);
  CHECK(s.major_sweeps == majors, "collect() swept major (the test needs it not to)");

  int in_set = 0;
  for (int i = 0; i < N; i += 10) {
    void *o = hl_obj_new(h, 16, 3);
    CHECK(o, "alloc: %s", hl_heap_error(h));
    roots[i] = o;
    in_set += (uintptr_t)o >= lo && (uintptr_t)o < hi;
  }
  printf("%d of %d new objects in the holes of the untenured pages\n", in_set, N / 10);
  CHECK(in_set == N / 10, "only %d of %d new objects went to the holes", in_set, N / 10);
  s = stats_of(h);
  CHECK(s.verify_failures == 0, "verify failures %" PRIu64, s.verify_failures);
  OK(h, hl_heap_check(h));
  hl_heap_free(h);
  return 0;
}
