/* A parallel mark shares work at the cost of the packet shared, not of the
 * marker's whole stack.
 *
 * Why: share() handed the oldest entries of a marker's stack to the pool
 * (a packet, at most 510) and memmoved everything above them down.  One
 * object with millions of slots pushes millions of entries at once, and
 * every share then moved them all: a collection of a 2^24-slot object took
 * 15-24 s with two markers against 0.6-0.8 s with one, 88.7% in memmove
 * (the scale hunt, session 28).  Now a marker's entries are
 * stack[bottom, top): a share takes from the bottom and moves nothing; a
 * push at the stack's end with room below compacts (once a stackful).
 *
 * The count, not a time: the heap's mark_moved (internal.h) is the number
 * of entries the last mark moved within its markers' stacks.  A root of
 * SLOTS slots, each referring to an object with one slot that refers to a
 * leaf, is collected with mark_threads=2 until a helper took part and work
 * was shared (mark_steals); the entries moved must be at most the objects
 * marked (the old share moved about SLOTS entries per packet shared:
 * hundreds of millions), and every object was marked exactly once.
 * Checked: with the old share (its memmove counted in mark_moved) this test
 * failed -- 3.0e8-3.4e8 entries moved for 2.1e6 objects. */
#include "check.h"
#include "internal.h"

enum { SLOTS = 1 << 20 };

int main(void) {
  hl_heap *h = HEAP("mark_threads=2", "gc_trigger_bytes=1073741824");
  hl_ref root;
  OK(h, hl_alloc(h, 0, SLOTS, &root));
  hl_object_info ri;
  OK(h, hl_ref_info(h, root, &ri));
  hl_enter(h);
  void *r = (void *)(uintptr_t)ri.object;
  for (uint64_t i = 0; i < SLOTS; i++) {
    void *in = hl_obj_new_in(h, r, i, 8, 1);
    CHECK(in, "inner %" PRIu64 ": %s", i, hl_heap_error(h));
    CHECK(hl_obj_new_in(h, in, 0, 8, 0), "leaf %" PRIu64 ": %s", i, hl_heap_error(h));
  }
  hl_leave(h);
  uint64_t live = 1 + 2 * (uint64_t)SLOTS, shared_marks = 0, moved_max = 0;
  for (int round = 0; round < 8 && shared_marks < 2; round++) {
    uint64_t steals = stats_of(h).mark_steals;
    OK(h, hl_collect(h, 1, 1));
    hl_stats s = stats_of(h);
    uint64_t moved = h->mark_moved;
    printf("mark %d: %" PRIu64 " thread(s), %" PRIu64 " steals, %" PRIu64 " objects, %" PRIu64
           " entries moved within the stacks, %.1f ms\n",
           round, s.mark_threads_used, s.mark_steals - steals, s.marked_objects, moved,
           s.mark_ns / 1e6);
    CHECK(s.marked_objects == live, "the mark counted %" PRIu64 " objects, %" PRIu64 " live",
          s.marked_objects, live);
    if (moved > moved_max) moved_max = moved;
    shared_marks += s.mark_threads_used >= 2 && s.mark_steals > steals;
  }
  CHECK(shared_marks >= 1, "no mark of %" PRIu64 " objects shared work with a helper", live);
  CHECK(moved_max <= live, "a mark moved %" PRIu64 " stack entries for %" PRIu64
        " objects: sharing costs more than the packets it shares", moved_max, live);
  OK(h, hl_heap_check(h));
  OK(h, hl_ref_release(h, root));
  hl_heap_free(h);
  return 0;
}
