/* A mark whose stack fills up keeps every live object.
 *
 * Every marker's stack is a fixed reservation now -- the marking thread's
 * made with its heap, the helpers' in the mark arena (gc/mark.c) -- so a
 * push onto a full stack is an overflow: the object stays marked but
 * untraced, and the rescan traces every marked object again until nothing
 * new is found.  No mark of a test-sized heap fills 32 M entries, so this
 * test shrinks the marking thread's stack to STACK entries through the
 * heap's internals, and checks, with one marker and with helpers, in the
 * default and the generational collector: the mark counts exactly the live
 * objects, every live object is intact after the garbage's slots have been
 * handed out again (verify=true poisons freed slots, and checks after every
 * cycle that no marked object refers to an unmarked one), for a wide graph
 * (a large root with FAN slots, every 16th object they refer to large) and
 * a chain allocated in the order the rescan reaches last (each link is
 * older than the one that refers to it).
 * Checked by hand: with the rescan disabled (rescan_marked returning at
 * once) this test fails. */
#include "check.h"
#include "internal.h"

enum { FAN = 20000, CHAIN = 3000, STACK = 64 };

typedef struct graph {
  hl_ref fan;   /* large root: FAN slots -> inner (1 slot) -> leaf */
  hl_ref chain; /* the newest link; link i refers to link i-1 */
} graph;

static void set_payload(void *obj, uint64_t i) {
  uint64_t v[2] = {i, ~i};
  memcpy(hl_obj_payload(obj), v, sizeof v);
}
static bool payload_is(const void *obj, uint64_t i) {
  uint64_t v[2];
  memcpy(v, hl_obj_payload(obj), sizeof v);
  return v[0] == i && v[1] == ~i;
}

static void *object_of(hl_heap *h, hl_ref r) {
  hl_object_info info;
  OK(h, hl_ref_info(h, r, &info));
  return (void *)(uintptr_t)info.object;
}

static graph build(hl_heap *h) {
  graph g;
  OK(h, hl_alloc(h, 0, FAN, &g.fan));
  hl_enter(h);
  void *r = object_of(h, g.fan);
  for (uint64_t i = 0; i < FAN; i++) {
    /* every 16th inner object large: marked when the stack is full, only
     * the rescan's walk of the large blocks traces it to its leaf (mutant
     * rescan-skips-large-objects, session 37) */
    void *in = hl_obj_new_in(h, r, i, i % 16 ? 8 : 600, 1);
    CHECK(in, "inner: %s", hl_heap_error(h));
    void *leaf = hl_obj_new_in(h, in, 0, 16, 0);
    CHECK(leaf, "leaf: %s", hl_heap_error(h));
    set_payload(leaf, i);
    CHECK(hl_obj_new(h, 16, 0), "garbage: %s", hl_heap_error(h));
  }
  hl_leave(h);
  /* the chain: each new link refers to the one before (a lower address, so
   * a rescan in address order finds one more link a pass) */
  OK(h, hl_alloc(h, 16, 1, &g.chain));
  hl_enter(h);
  set_payload(object_of(h, g.chain), 0);
  hl_leave(h);
  for (uint64_t i = 1; i < CHAIN; i++) {
    hl_ref next;
    OK(h, hl_alloc(h, 16, 1, &next));
    OK(h, hl_ref_set(h, next, 0, g.chain));
    hl_enter(h);
    set_payload(object_of(h, next), i);
    CHECK(hl_obj_new(h, 16, 1), "garbage: %s", hl_heap_error(h));
    hl_leave(h);
    OK(h, hl_ref_release(h, g.chain));
    g.chain = next;
  }
  return g;
}

/* Live objects whose payload is not what was written (or which are gone). */
static uint64_t damaged(hl_heap *h, const graph *g) {
  uint64_t bad = 0;
  hl_enter(h);
  void *r = object_of(h, g->fan);
  for (uint64_t i = 0; i < FAN; i++) {
    void *in = hl_obj_get(r, i);
    void *leaf = in ? hl_obj_get(in, 0) : NULL;
    bad += !leaf || !payload_is(leaf, i);
  }
  void *link = object_of(h, g->chain);
  for (uint64_t i = CHAIN; i-- > 0; link = link ? hl_obj_get(link, 0) : NULL)
    bad += !link || !payload_is(link, i);
  hl_leave(h);
  return bad;
}

static void run(const char *threads, const char *generational) {
  hl_heap *h = HEAP(threads, generational, "verify=true", "warm_pages=0");
  graph g = build(h);
  uint64_t live = 1 + 2 * (uint64_t)FAN + CHAIN;
  CHECK(h->mark_cap > STACK, "%s %s: the mark stack has %" PRIu64 " entries", threads,
        generational, h->mark_cap);
  uint64_t cap = h->mark_cap;
  h->mark_cap = STACK; /* (the reservation stays; only the part in use shrinks) */
  for (int round = 0; round < 3; round++) {
    /* a full collection, then (generational) a minor one */
    OK(h, hl_collect(h, 1, 1));
    hl_stats s = stats_of(h);
    CHECK(s.marked_objects == live, "%s %s: round %d marked %" PRIu64 " objects, %" PRIu64
          " live", threads, generational, round, s.marked_objects, live);
    CHECK(s.verify_failures == 0, "%s %s: %s", threads, generational, hl_heap_error(h));
    OK(h, hl_collect(h, 1, 0));
    /* hand the garbage's slots out again: a leaf freed by mistake is overwritten */
    hl_enter(h);
    for (uint64_t i = 0; i < FAN + CHAIN; i++) {
      uint64_t *p = hl_obj_payload(hl_obj_new(h, 16, 0));
      p[0] = p[1] = 0x5a5a5a5a5a5a5a5aull;
    }
    hl_leave(h);
    uint64_t bad = damaged(h, &g);
    CHECK(bad == 0, "%s %s: round %d: %" PRIu64 " live objects lost or changed", threads,
          generational, round, bad);
    CHECK(stats_of(h).verify_failures == 0, "%s %s: %s", threads, generational,
          hl_heap_error(h));
  }
  OK(h, hl_heap_check(h));
  hl_stats s = stats_of(h);
  printf("%s %s: a stack of %d entries, %" PRIu64 " objects marked each full mark, "
         "%.1f ms marking in all\n", threads, generational, STACK, s.marked_objects,
         s.mark_ns / 1e6);
  h->mark_cap = cap;
  OK(h, hl_ref_release(h, g.fan));
  OK(h, hl_ref_release(h, g.chain));
  hl_heap_free(h);
}

int main(void) {
  run("mark_threads=1", "generational=false");
  run("mark_threads=2", "generational=false");
  run("mark_threads=1", "generational=true");
  run("mark_threads=2", "generational=true");
  return 0;
}
