/* Compaction (compact=sparse) beside tenuring (the default collector's,
 * docs/design.md "Tenuring in the default collector"): the objects of sparse
 * pages move, tenured pages neither give nor take objects, and every
 * reference to a moved object is updated -- those held by tenured objects
 * too, which no full mark traces.
 *
 * Three groups of one size class: D, dense (9 of 10 kept: tenured, with
 * holes); E, half live (a destination, never tenured); S, one kept in ten
 * amid garbage (sparse: it moves), allocated once D is tenured.  The first
 * half of D refers to S (its pages are remembered); the second half refers
 * to nothing untenured, so only the write barrier can tell a full mark about
 * a store into its objects.  After S has moved, a young child is stored into
 * every S object, and full marks that skip the tenured pages run.
 *
 * Fails if an object moved into a hole of a tenured page (it carries no
 * HL_HDR_OLD: a store into it is not remembered, its child is freed while
 * reachable -- the verifier sees it), if a tenured page were evacuated (its
 * page freed while tenured: the heap check), or if the references held by
 * tenured objects were not updated (the verifier's check after compaction). */
#include "check.h"

#define ND 2000
#define NE 1000
#define NS 300

static void *d[ND], *e[NE], *s[NS], *tmp[1];

static uint64_t *id(void *o) { return (uint64_t *)hl_obj_data(o); }

static void *make(hl_heap *h, uint64_t v) {
  void *o = hl_obj_new(h, 16, 3);
  CHECK(o, "alloc: %s", hl_heap_error(h));
  *id(o) = v;
  return o;
}

static void churn(hl_heap *h, int rounds) {
  for (int r = 0; r < rounds; r++)
    for (int k = 0; k < 2000; k++) CHECK(hl_obj_new(h, 200, 0), "churn: %s", hl_heap_error(h));
}

int main(void) {
  /* (no whole mark during the test: tenured pages stay tenured) */
  hl_heap *h = HEAP("compact=sparse", "page_size=4k", "gc_trigger_bytes=64k",
                    "gc_trigger_min_bytes=64k", "tenure_full_marks=1000", "verify=true");
  OK(h, hl_roots_add(h, d, ND, 0));
  OK(h, hl_roots_add(h, e, NE, 0));
  OK(h, hl_roots_add(h, s, NS, 0));
  OK(h, hl_roots_add(h, tmp, 1, 0));
  for (int i = 0; i < ND; i++) d[i] = make(h, i);
  for (int i = 0; i < ND; i += 10) d[i] = NULL; /* holes */
  for (int i = 0; i < NE; i++) e[i] = make(h, 100000 + i);
  for (int i = 0; i < NE; i += 2) e[i] = NULL;
  hl_stats st;
  for (int r = 0; r < 100; r++) {
    churn(h, 1);
    st = stats_of(h);
    if (st.tenured_pages >= 20) break;
  }
  CHECK(st.tenured_pages >= 20, "%" PRIu64 " pages tenured (D takes 24)", st.tenured_pages);

  /* S: sparse pages of the same class */
  for (int i = 0; i < NS; i++) {
    s[i] = make(h, 200000 + i);
    for (int k = 0; k < 9; k++) make(h, 0);
  }
  for (int i = 1; i < ND / 2; i += 10) hl_obj_set(d[i], 0, s[i % NS]);
  uint64_t evac0 = st.evacuated_objects;
  for (int r = 0; r < 100; r++) {
    churn(h, 1);
    st = stats_of(h);
    if (st.evacuated_objects - evac0 >= NS / 2) break;
  }
  CHECK(st.evacuated_objects - evac0 >= NS / 2, "%" PRIu64 " objects moved",
        st.evacuated_objects - evac0);

  /* young children into the moved objects, then full marks past the
   * tenured pages */
  for (int i = 0; i < NS; i++) {
    tmp[0] = make(h, 300000 + i);
    hl_obj_set(s[i], 1, tmp[0]);
  }
  tmp[0] = NULL;
  hl_stats s0 = stats_of(h);
  churn(h, 20);
  st = stats_of(h);
  printf("%" PRIu64 " pages tenured, %" PRIu64 " objects moved, %" PRIu64
         " full marks after the stores, %" PRIu64 " remembered pages traced\n",
         st.tenured_pages, st.evacuated_objects - evac0, st.cycles - s0.cycles,
         st.remembered_pages_scanned - s0.remembered_pages_scanned);
  CHECK(st.cycles - s0.cycles >= 4, "%" PRIu64 " cycles", st.cycles - s0.cycles);
  CHECK(st.whole_marks == s0.whole_marks, "a whole mark ran");
  CHECK(st.tenured_pages >= 20, "%" PRIu64 " pages tenured", st.tenured_pages);
  CHECK(st.verify_failures == 0, "verify failures %" PRIu64 ": %s", st.verify_failures,
        hl_heap_error(h));
  for (int i = 0; i < ND; i++) {
    if (i % 10 == 0) continue;
    CHECK(*id(d[i]) == (uint64_t)i, "d[%d] holds %" PRIu64, i, *id(d[i]));
    if (i < ND / 2 && i % 10 == 1) CHECK(hl_obj_get(d[i], 0) == s[i % NS], "d[%d] -> s", i);
  }
  for (int i = 1; i < NE; i += 2) CHECK(*id(e[i]) == 100000u + i, "e[%d]", i);
  for (int i = 0; i < NS; i++) {
    CHECK(*id(s[i]) == 200000u + i, "s[%d] holds %" PRIu64, i, *id(s[i]));
    void *y = hl_obj_get(s[i], 1);
    CHECK(y && *id(y) == 300000u + i, "s[%d]: its young child was lost", i);
  }
  OK(h, hl_heap_check(h));
  hl_heap_free(h);
  return 0;
}
