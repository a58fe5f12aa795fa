/* The default collector tenures (issue 19; docs/design.md, "Tenuring in the
 * default collector"): with no option given, a long-lived structure whose
 * pages stay dense is tenured once the live set has stopped growing, and the
 * cycles the allocation calls after that mark only what is not tenured --
 * while the trigger still counts the tenured bytes, so the heap collects no
 * more often than the seeds' collector (tenure_full_marks=0) does for the
 * same allocation.  Then a caller's collection marks everything and leaves
 * nothing tenured, and once the structure is dropped it frees all of it. */
#include "check.h"

#define DEPTH 15 /* 65,535 nodes of 40 bytes: about 2.6 MiB */

static void *roots[2]; /* [0] the tree, [1] the latest temporary */

static void build(hl_heap *h, void *parent, uint64_t slot, int d) {
  void *n = parent ? hl_obj_new_in(h, parent, slot, 16, 2) : hl_obj_new(h, 16, 2);
  CHECK(n, "alloc: %s", hl_heap_error(h));
  if (!parent) roots[0] = n;
  if (d > 0) {
    build(h, n, 0, d - 1);
    build(h, n, 1, d - 1);
  }
}

typedef struct {
  uint64_t cycles, tenured_pages, whole_marks, last_marked, tree_objects;
} run_result;

/* Build the tree, then allocate 192 MiB of short-lived objects (more than
 * 16 cycles: a whole mark among them). */
static run_result run(const char *tenure) {
  hl_heap *h = HEAP("page_size=16k", "gc_trigger_bytes=1m", "gc_trigger_min_bytes=1m",
                    "verify=true", tenure);
  OK(h, hl_roots_add(h, roots, 2, 0));
  hl_enter(h);
  build(h, NULL, 0, DEPTH);
  hl_stats s0 = stats_of(h);
  for (int i = 0; i < (192 << 20) / 48; i++) {
    roots[1] = hl_obj_new(h, 32, 1);
    CHECK(roots[1], "churn: %s", hl_heap_error(h));
  }
  hl_stats s = stats_of(h);
  run_result r = {s.cycles - s0.cycles, s.tenured_pages, s.whole_marks, s.marked_objects,
                  (1u << (DEPTH + 1)) - 1};
  CHECK(s.verify_failures == 0, "verify failures %" PRIu64, s.verify_failures);
  hl_leave(h);

  /* a caller's collection: a whole mark, nothing tenured after it */
  OK(h, hl_collect(h, 1, 1));
  s = stats_of(h);
  CHECK(s.tenured_pages == 0, "%s: %" PRIu64 " pages tenured after collect()", tenure,
        s.tenured_pages);
  CHECK(s.marked_objects >= r.tree_objects, "%s: collect() marked %" PRIu64 " objects", tenure,
        s.marked_objects);
  roots[0] = roots[1] = NULL;
  OK(h, hl_collect(h, 1, 1));
  s = stats_of(h);
  CHECK(s.small_live_bytes == 0, "%s: %" PRIu64 " bytes live after the tree was dropped", tenure,
        s.small_live_bytes);
  OK(h, hl_heap_check(h));
  hl_heap_free(h);
  return r;
}

int main(void) {
  /* (tenure_full_marks as it comes) */
  run_result d = run("mark_threads=0");
  run_result seeds = run("tenure_full_marks=0");
  printf("default: %" PRIu64 " cycles, %" PRIu64 " whole marks, %" PRIu64
         " pages tenured, the last cycle marked %" PRIu64 " objects; tenure_full_marks=0: %" PRIu64
         " cycles, the last marked %" PRIu64 " (the tree: %" PRIu64 ")\n",
         d.cycles, d.whole_marks, d.tenured_pages, d.last_marked, seeds.cycles, seeds.last_marked,
         d.tree_objects);
  CHECK(d.tenured_pages > 100, "default: %" PRIu64 " pages tenured (the tree takes ~160)",
        d.tenured_pages);
  CHECK(d.whole_marks >= 1, "default: no whole mark in %" PRIu64 " cycles", d.cycles);
  CHECK(d.last_marked * 10 < d.tree_objects,
        "default: the last cycle marked %" PRIu64 " objects of a %" PRIu64 "-node tree",
        d.last_marked, d.tree_objects);
  CHECK(seeds.last_marked >= d.tree_objects, "tenure_full_marks=0: the last cycle marked %" PRIu64,
        seeds.last_marked);
  CHECK(seeds.tenured_pages == 0, "tenure_full_marks=0: %" PRIu64 " pages tenured",
        seeds.tenured_pages);
  /* the trigger counts the tenured bytes: no more cycles than the seeds' */
  CHECK(d.cycles <= seeds.cycles + seeds.cycles / 10 + 1,
        "default: %" PRIu64 " cycles where tenure_full_marks=0 ran %" PRIu64, d.cycles,
        seeds.cycles);
  return 0;
}
