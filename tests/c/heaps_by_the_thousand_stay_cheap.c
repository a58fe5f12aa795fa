/* A process with thousands of heaps: making one more costs what making the
 * first did, and a store into an old object (hl_obj_set, which names no
 * heap: the barrier looks its heap up) costs what it does beside one heap.
 * Both read every live heap before (the many-heaps hunt of the C API,
 * session 36): hl_heap_new looked for a free handle tag by reading each
 * live heap's -- with 20,000 manual heaps live one more took 0.7 ms, 80% of
 * it there, and 61,311 heaps took 105 s to make -- and the barrier walked
 * every heap's range in the order they were made: 3.0 us a store into an
 * object of a heap made after 10,000 others, 19 ns beside none.  Measured
 * in the thread's CPU time (a neighbour's load does not count), as ratios
 * of the same process's own figures, far from what the walks cost. */
#include "check.h"

enum { HEAPS = 20000, BATCH = 2000, STORES = 200000 };

static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* CPU seconds a store of child into parent, an old object, takes, over STORES stores
 * (the best of three rounds) */
static double store_cost(void *parent, void *child) {
  double best = 1e9;
  for (int round = 0; round < 3; round++) {
    double t0 = cpu_s();
    for (int i = 0; i < STORES; i++) hl_obj_set(parent, 0, (i & 1) ? child : parent);
    double t = (cpu_s() - t0) / STORES;
    if (t < best) best = t;
  }
  return best;
}

/* a generational heap's object, old (marked by a full cycle), and a young
 * one: a store of the young into the old is the barrier's slow path */
static hl_heap *old_and_young(void **parent, void **child) {
  hl_heap *h = HEAP("reserve_bytes=64m", "generational=true", "mark_threads=1");
  static void *root[1];
  OK(h, hl_enter(h));
  root[0] = hl_obj_new(h, 16, 1);
  CHECK(root[0], "hl_obj_new: %s", hl_heap_error(h));
  hl_leave(h);
  OK(h, hl_roots_add(h, root, 1, 0));
  OK(h, hl_collect(h, 1, 1));
  OK(h, hl_enter(h));
  *parent = root[0];
  *child = hl_obj_new(h, 16, 0);
  CHECK(*child, "hl_obj_new: %s", hl_heap_error(h));
  return h; /* held */
}

int main(void) {
  /* the store's cost beside one heap */
  void *parent, *child;
  hl_heap *g = old_and_young(&parent, &child);
  double alone = store_cost(parent, child);
  hl_leave(g);
  hl_heap_free(g);

  /* small manual heaps (two mappings each: 40,000 of vm.max_map_count's
   * 65,530 by default) */
  hl_options o;
  hl_options_defaults(&o);
  o.mode = HL_MODE_MANUAL;
  o.reserve_bytes = 1 << 20;
  o.page_size = 4096;
  o.small_max = 1024;
  o.events_capacity = 16;
  static hl_heap *heaps[HEAPS];
  char err[512];
  double first = 0, last = 0;
  for (int i = 0; i < HEAPS; i++) {
    double t0 = cpu_s();
    int rc = hl_heap_new(&o, &heaps[i], err, sizeof err);
    CHECK(rc == HL_OK, "heap %d: %s", i, err);
    double t = cpu_s() - t0;
    if (i < BATCH) first += t;
    if (i >= HEAPS - BATCH) last += t;
  }
  CHECK(last < 3 * first + 0.05,
        "the last %d of %d heaps took %.3f s of CPU to make, the first %d %.3f s", BATCH, HEAPS,
        last, BATCH, first);

  /* the store's cost beside them, its heap made last */
  g = old_and_young(&parent, &child);
  double many = store_cost(parent, child);
  CHECK(many < 4 * alone + 50e-9,
        "a store into an old object costs %.1f ns beside %d heaps, %.1f ns beside none",
        many * 1e9, HEAPS, alone * 1e9);
  /* each heap still finds its own objects: a block of each, freed */
  hl_leave(g);
  for (int i = 0; i < HEAPS; i += 97) {
    void *p = hl_malloc(heaps[i], 100);
    CHECK(p && hl_usable_size(heaps[i], p) >= 100, "heap %d: %s", i, hl_heap_error(heaps[i]));
    CHECK(hl_usable_size(heaps[(i + 1) % HEAPS], p) == 0, "heap %d's block is another's", i);
    hl_free(heaps[i], p);
  }
  check_invariants(g);
  hl_heap_free(g);
  for (int i = 0; i < HEAPS; i++) hl_heap_free(heaps[i]);
  printf("ok: heaps %.3f s then %.3f s a %d; a store %.1f ns, %.1f ns alone\n", first, last,
         BATCH, many * 1e9, alone * 1e9);
  return 0;
}
