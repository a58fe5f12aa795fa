/* Generational mode (sticky mark bits): minor cycles mark only what was
 * allocated since the last cycle, so an old object that is given a young
 * child must be seen by the write barrier, or the child is freed while
 * reachable.  Here old objects get young children through every store the
 * API has (hl_obj_set, hl_obj_new_in, hl_ref_set), hundreds of minor cycles
 * run in between, and every reachable object is checked against a mirror of
 * the graph; the verifier (verify=true) checks, between mark and sweep of
 * every cycle, that no marked object refers to an unmarked one.  Then the
 * other side: young garbage is freed by minor cycles, old garbage by the
 * full marks the old generation's growth calls, and a store that bypasses
 * the barrier is caught by the verifier -- and repaired, nothing freed. */
#include "check.h"

#define OLD 256   /* old objects, each with SLOTS slots; every 16th is large */
#define SLOTS 4
#define STEPS 200000

static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static void *roots[OLD];            /* registered as a root region */
static uint64_t expect[OLD][SLOTS]; /* the id of the child in each slot, 0 = none */

static uint64_t id_of(void *o) { return *(uint64_t *)hl_obj_data(o); }

/* Every slot of every old object holds the child the mirror says, and each
 * child's own child (a grandchild made young with it) is intact. */
static void check_graph(void) {
  for (int i = 0; i < OLD; i++) {
    CHECK(id_of(roots[i]) == (uint64_t)i + 1, "old object %d lost its id", i);
    for (int k = 0; k < SLOTS; k++) {
      void *c = hl_obj_get(roots[i], (uint64_t)k);
      if (!expect[i][k]) {
        CHECK(!c, "old %d slot %d should be empty", i, k);
        continue;
      }
      CHECK(c && id_of(c) == expect[i][k], "old %d slot %d: child %" PRIu64 " lost (found %" PRIu64
            ")", i, k, expect[i][k], c ? id_of(c) : 0);
      void *g = hl_obj_get(c, 0);
      CHECK(g && id_of(g) == expect[i][k] + (1ull << 40), "old %d slot %d: grandchild lost", i, k);
    }
  }
}

/* Old objects get young children and grandchildren through every store
 * the API has, with minor cycles in between; the graph is checked against
 * its mirror as it goes. */
static void run_graph(hl_heap *h) {
  memset(expect, 0, sizeof expect);
  OK(h, hl_roots_add(h, roots, OLD, 0));
  hl_enter(h);
  for (int i = 0; i < OLD; i++) {
    roots[i] = hl_obj_new(h, i % 16 ? 8 : 600, SLOTS); /* every 16th on the large path */
    CHECK(roots[i], "alloc");
    *(uint64_t *)hl_obj_data(roots[i]) = (uint64_t)i + 1;
  }
  hl_leave(h);
  OK(h, hl_collect(h, 1, 1)); /* they are old now */

  uint64_t next_id = 1000;
  for (int step = 0; step < STEPS; step++) {
    int i = (int)(next() % OLD), k = (int)(next() % SLOTS);
    uint64_t id = next_id++;
    int how = (int)(next() % 4);
    hl_enter(h);
    void *c;
    if (how == 0) { /* hl_obj_set: allocate, then store */
      c = hl_obj_new_in(h, roots[i], (uint64_t)k, 8, 1); /* rooted at once ... */
      CHECK(c, "alloc");
      hl_obj_set(roots[i], (uint64_t)k, NULL);             /* ... then unrooted, */
      hl_obj_set(roots[i], (uint64_t)k, c);                /* and stored again */
    } else if (how == 1 || how == 2) { /* hl_obj_new_in straight into the old object */
      c = hl_obj_new_in(h, roots[i], (uint64_t)k, 8, 1);
      CHECK(c, "alloc");
    } else { /* drop the slot */
      hl_obj_set(roots[i], (uint64_t)k, NULL);
      expect[i][k] = 0;
      hl_leave(h);
      continue;
    }
    *(uint64_t *)hl_obj_data(c) = id;
    /* the grandchild: its allocation may run a minor cycle, which makes c
     * old before c's slot is stored to -- the barrier case inside one call */
    void *g = hl_obj_new_in(h, c, 0, 8, 0);
    CHECK(g, "alloc");
    *(uint64_t *)hl_obj_data(g) = id + (1ull << 40);
    expect[i][k] = id;
    /* garbage, so that minor cycles keep coming; its payload overwrites
     * whatever a wrongly freed child left in its slot */
    for (int j = 0; j < 4; j++) {
      void *x = hl_obj_new(h, 40, 1);
      CHECK(x, "alloc");
      memset(hl_obj_data(x), 0xEE, 40);
    }
    hl_leave(h);
    if (step % 20000 == 0) check_graph();
  }
  check_graph();
  hl_stats s = stats_of(h);
  CHECK(s.minor_cycles > 300, "minor cycles %" PRIu64, s.minor_cycles);
  CHECK(s.major_full_mark > 0, "no full mark was called by the old generation's growth");
  CHECK(s.dirty_pages_scanned > 0, "the barrier never dirtied a page");
  CHECK(s.promoted_bytes > 0, "nothing promoted");
  CHECK(s.verify_failures == 0, "verify failed: %s", hl_heap_error(h));
}

int main(void) {
  /* without the verifier: the barrier alone keeps the graph */
  hl_heap *plain = HEAP("generational=true", "young_bytes=64k", "gc_trigger_min_bytes=256k");
  run_graph(plain);
  OK(plain, hl_roots_remove(plain, roots));
  hl_heap_free(plain);
  /* with it: no cycle finds a marked object referring to an unmarked one */
  hl_heap *h = HEAP("generational=true", "young_bytes=64k", "gc_trigger_min_bytes=256k",
                    "verify=true", "warm_demand_trims=0");
  run_graph(h);

  /* hl_ref_set into an old object */
  hl_ref old, young;
  OK(h, hl_alloc(h, 8, 1, &old));
  OK(h, hl_collect(h, 1, 1));
  OK(h, hl_alloc(h, 8, 0, &young));
  OK(h, hl_ref_set(h, old, 0, young));
  OK(h, hl_ref_release(h, young));
  for (int j = 0; j < 20000; j++) { /* minor cycles */
    hl_ref r;
    OK(h, hl_alloc(h, 40, 0, &r));
    OK(h, hl_ref_release(h, r));
  }
  hl_ref got;
  OK(h, hl_ref_get(h, old, 0, &got));
  CHECK(got != 0, "hl_ref_set's young child was lost");
  OK(h, hl_ref_release(h, got));
  OK(h, hl_ref_release(h, old));
  check_invariants(h);

  /* minor cycles free young garbage; old garbage waits for a full mark */
  hl_stats a = stats_of(h);
  hl_enter(h);
  for (int j = 0; j < 100000; j++) CHECK(hl_obj_new(h, 40, 0), "alloc");
  hl_leave(h);
  hl_stats b = stats_of(h);
  CHECK(b.minor_cycles - a.minor_cycles >= 50, "minor cycles %" PRIu64,
        b.minor_cycles - a.minor_cycles);
  CHECK(b.objects_freed - a.objects_freed >= 90000, "minor cycles freed %" PRIu64 " of 100000",
        b.objects_freed - a.objects_freed);

  /* a store that bypasses the barrier: caught between mark and sweep, and
   * the object it hid is traced anyway (nothing is freed) */
  hl_enter(h);
  void *kid = hl_obj_new(h, 8, 0);
  *(uint64_t *)hl_obj_data(kid) = 77;
  ((void **)hl_obj_slots(roots[0]))[0] = kid; /* the defect: no hl_obj_set */
  uint64_t minors = stats_of(h).minor_cycles;
  while (stats_of(h).minor_cycles == minors) CHECK(hl_obj_new(h, 40, 0), "alloc");
  hl_leave(h);
  CHECK(stats_of(h).verify_failures == 1, "verify failures %" PRIu64, stats_of(h).verify_failures);
  CHECK(strstr(hl_heap_error(h), "without the write barrier"), "error: %s", hl_heap_error(h));
  CHECK(hl_obj_get(roots[0], 0) == kid && id_of(kid) == 77, "the hidden object was freed");
  for (int j = 0; j < 50000; j++) { /* later minor cycles are clean: it is marked now */
    hl_enter(h);
    CHECK(hl_obj_new(h, 40, 0), "alloc");
    hl_leave(h);
  }
  CHECK(stats_of(h).verify_failures == 1, "verify failures %" PRIu64, stats_of(h).verify_failures);
  CHECK(id_of(kid) == 77, "the hidden object was freed later");
  hl_heap_free(h);
  return 0;
}
