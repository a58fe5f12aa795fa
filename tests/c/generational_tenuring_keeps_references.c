/* Generational tenuring: a page at least 7/8 live after two full marks in a
 * row is tenured, and later full marks keep its marks without tracing it.
 * Whatever its objects refer to that is not tenured must still be found --
 * references made before the page was tenured (found when it is tenured)
 * and stores into it since (the write barrier) -- or it is freed while
 * reachable.  Here a long-lived tree is tenured while full marks run from
 * the old generation's growth.  The first half of its nodes hold references
 * to objects on sparse pages (never tenured) from the start; the second
 * half's pages refer only to tenured nodes, so nothing but the write barrier
 * can tell a full mark about the young children both halves get, through
 * every store the API has, after the tree is tenured.  Every reference is
 * checked against its payload after each phase, and the verifier
 * (verify=true) checks between mark and sweep of every cycle that no marked
 * object refers to an unmarked one.  Then the tree is dropped: a whole mark
 * (an explicit collection) untenures and frees it.
 *
 * With the argument "default" the same runs on a heap that is not
 * generational: tenuring is the default collector's too (every full mark
 * skips the tenured pages; the barrier is only the remembering of tenured
 * pages -- docs/design.md, "Tenuring"). */
#include <stdbool.h>
#include <string.h>

#include "check.h"

#define DEPTH 11 /* 4095 nodes of 48 bytes: about 48 pages of 4 KiB */
#define NODES ((1u << (DEPTH + 1)) - 1)
#define RING 3000 /* temporaries that outlive a minor cycle, then die */

static void *roots[2 + RING]; /* [0] the tree, [1] scratch, then the ring */
static void *node_at[NODES];  /* by id - 1: refreshed after every phase */

static uint64_t id_of(const void *o) { return *(const uint64_t *)hl_obj_data((void *)o); }

/* Node ids in preorder; slot 2 of the first half's nodes holds a "side"
 * object (id + 1e6) allocated amid garbage of its class, so its page is
 * never dense. */
#define HALF (NODES / 2)
static void *build(hl_heap *h, void *parent, uint64_t slot, int d, uint64_t *next_id) {
  void *n = parent ? hl_obj_new_in(h, parent, slot, 8, 3) : hl_obj_new(h, 8, 3);
  CHECK(n, "alloc: %s", hl_heap_error(h));
  if (!parent) roots[0] = n;
  uint64_t id = ++*next_id;
  *(uint64_t *)hl_obj_data(n) = id;
  node_at[id - 1] = n;
  if (id <= HALF) {
    void *side = hl_obj_new_in(h, n, 2, 40, 1);
    CHECK(side, "alloc side");
    *(uint64_t *)hl_obj_data(side) = id + 1000000;
    for (int k = 0; k < 3; k++) CHECK(hl_obj_new(h, 40, 1), "garbage"); /* sparse side pages */
  }
  if (d > 0) {
    build(h, n, 0, d - 1, next_id);
    build(h, n, 1, d - 1, next_id);
  }
  return n;
}

/* Walk the tree from the root: ids in preorder, every side object and every
 * young child (id + 2e6: slot 0 of the side object in the first half, slot
 * 2 of the node in the second) where expected. */
static uint64_t walk(void *n, int d, uint64_t *next_id, int with_young) {
  uint64_t id = ++*next_id;
  CHECK(id_of(n) == id, "node %" PRIu64 " has id %" PRIu64, id, id_of(n));
  node_at[id - 1] = n;
  void *young;
  if (id <= HALF) {
    void *side = hl_obj_get(n, 2);
    CHECK(side && id_of(side) == id + 1000000, "node %" PRIu64 ": side object lost", id);
    young = hl_obj_get(side, 0);
  } else {
    young = hl_obj_get(n, 2);
  }
  if (with_young && (id % 3 == 0 || (id > HALF && id % 5 == 1))) {
    CHECK(young && id_of(young) == id + 2000000, "node %" PRIu64 ": young child lost", id);
  }
  uint64_t n_nodes = 1;
  if (d > 0) {
    n_nodes += walk(hl_obj_get(n, 0), d - 1, next_id, with_young);
    n_nodes += walk(hl_obj_get(n, 1), d - 1, next_id, with_young);
  }
  return n_nodes;
}

static void check_tree(int with_young, const char *when) {
  uint64_t next_id = 0;
  CHECK(walk(roots[0], DEPTH, &next_id, with_young) == NODES, "%s: tree incomplete", when);
}

/* Allocate `rounds` ring replacements: each temporary lives RING
 * allocations, so many outlive a minor cycle, are promoted and then die --
 * the old generation grows and full marks follow. */
static void churn(hl_heap *h, uint64_t rounds) {
  static uint64_t at;
  for (uint64_t i = 0; i < rounds; i++, at++) {
    void *t = hl_obj_new(h, 32, 1);
    CHECK(t, "churn alloc: %s", hl_heap_error(h));
    roots[2 + at % RING] = t;
  }
}

static bool generational = true;

/* Full marks: the old generation's growth called them (generational), or
 * every cycle this test's allocation called (the default collector). */
static uint64_t full_marks(hl_stats s) { return generational ? s.major_full_mark : s.cycles; }

int main(int argc, char **argv) {
  generational = !(argc > 1 && strcmp(argv[1], "default") == 0);
  hl_heap *h = HEAP(generational ? "generational=true" : "generational=false", "young_bytes=256k",
                    "gc_trigger_min_bytes=64k", "tenure_full_marks=6", "page_size=4k",
                    "verify=true", "page_release=false");
  OK(h, hl_roots_add(h, roots, 2 + RING, 0));
  hl_enter(h);
  uint64_t next_id = 0;
  build(h, NULL, 0, DEPTH, &next_id);
  CHECK(next_id == NODES, "built %" PRIu64, next_id);

  /* tenure: churn until the tree's pages are tenured and full marks keep
   * running past them */
  hl_stats s0 = stats_of(h), s;
  for (int i = 0; i < 400; i++) {
    churn(h, 20000);
    s = stats_of(h);
    if (s.tenured_pages >= 40 && full_marks(s) - full_marks(s0) >= 8) break;
  }
  CHECK(s.tenured_pages >= 40, "tenured pages %" PRIu64 " (the tree takes about 48)",
        s.tenured_pages);
  CHECK(full_marks(s) - full_marks(s0) >= 8, "full marks %" PRIu64,
        full_marks(s) - full_marks(s0));
  CHECK(s.whole_marks - s0.whole_marks >= 1, "whole marks %" PRIu64, s.whole_marks - s0.whole_marks);
  CHECK(s.verify_failures == 0, "verify failures %" PRIu64, s.verify_failures);
  check_tree(0, "tenured");

  /* stores into tenured objects, through hl_obj_new_in and hl_obj_set.
   * First half: every fifth node's side object replaced by a young one,
   * young children hung off every third node's side object.  Second half:
   * young children straight into slot 2 of every third node and of every
   * fifth-plus-one. */
  uint64_t tenured_at_store = stats_of(h).tenured_pages;
  for (uint64_t id = 1; id <= NODES; id++) {
    void *n = node_at[id - 1];
    if (id <= HALF && id % 5 == 0) {
      void *side = hl_obj_new(h, 40, 1);
      CHECK(side, "alloc");
      *(uint64_t *)hl_obj_data(side) = id + 1000000;
      roots[1] = side;
      hl_obj_set(n, 2, side); /* a young object into a tenured one */
    }
    if (id % 3 == 0) {
      void *y = hl_obj_new_in(h, id <= HALF ? hl_obj_get(n, 2) : n, id <= HALF ? 0 : 2, 8, 0);
      CHECK(y, "alloc");
      *(uint64_t *)hl_obj_data(y) = id + 2000000;
    } else if (id > HALF && id % 5 == 1) {
      void *y = hl_obj_new(h, 8, 0);
      CHECK(y, "alloc");
      *(uint64_t *)hl_obj_data(y) = id + 2000000;
      roots[1] = y;
      hl_obj_set(n, 2, y);
    }
    if (id % 7 == 0) churn(h, 300); /* cycles in the middle of the stores */
  }
  roots[1] = NULL;
  s0 = stats_of(h);
  for (int i = 0; i < 400; i++) {
    churn(h, 20000);
    s = stats_of(h);
    if (full_marks(s) - full_marks(s0) >= 4) break;
  }
  CHECK(full_marks(s) - full_marks(s0) >= 4, "full marks after the stores %" PRIu64,
        full_marks(s) - full_marks(s0));
  CHECK(s.remembered_pages_scanned > s0.remembered_pages_scanned,
        "no full mark traced a tenured page (%" PRIu64 " tenured when the stores ran)",
        tenured_at_store);
  CHECK(s.verify_failures == 0, "verify failures %" PRIu64, s.verify_failures);
  check_tree(1, "after stores into tenured objects");
  OK(h, hl_heap_check(h));

  /* drop the tree: an explicit collection is a whole mark */
  roots[0] = NULL;
  for (int i = 0; i < RING; i++) roots[2 + i] = NULL;
  hl_leave(h);
  OK(h, hl_collect(h, 1, 1));
  s = stats_of(h);
  CHECK(s.tenured_pages == 0, "tenured pages %" PRIu64 " after a whole mark", s.tenured_pages);
  CHECK(s.small_live_bytes == 0, "live %" PRIu64 " bytes after the tree was dropped",
        s.small_live_bytes);
  CHECK(s.verify_failures == 0, "verify failures %" PRIu64, s.verify_failures);
  OK(h, hl_heap_check(h));
  hl_heap_free(h);
  return 0;
}
