/* A marker whose stack fills up after it shared a packet from its bottom
 * compacts -- moves its entries down to the room the share left -- and the
 * mark loses nothing.
 *
 * Why: a parallel mark's share() takes the oldest entries of the marker's
 * stack, stack[bottom, ...), and moves nothing (the scale hunt, session 28:
 * parallel_mark_shares_without_moving_its_stack); a push that finds the end
 * of the stack with room at its bottom compacts (gc/mark.c, compact()).  No
 * test executed compact() (h41cov: three graph shapes, the stack shrunk to
 * 64 and 1024 entries -- the parallel phase always drained before a full
 * stack met a hungry helper).  It needs, in one marker: a share (a helper
 * hungry), then, before the stack empties, one object traced whose slots
 * fill it.  The graph here:
 *   handle -> CHAIN links, each referring to the next -> A
 *   A: ALEAVES leaves, then W (its last slot);  W: WLEAVES leaves;
 *   each leaf refers to a grandchild (8 bytes, no slots).
 * The chain keeps the marking thread busy with one entry on its stack, so
 * the helper runs dry and waits, hungry (a million links, some 10 ms; a
 * third under the sanitizers, which mark as slowly: with 100,000 the first
 * mark, whose helper thread starts then, mostly missed).  A's trace pushes
 * its leaves and then W, on top (small_max=16384: W is a small object of
 * another page, pushed by the last batch); the share after that trace
 * takes 510 of A's leaves from the bottom; W, popped next, pushes WLEAVES
 * more onto a stack shrunk to CAP entries (the heap's internals, as
 * mark_stack_overflow_keeps_every_object does): the push at the end finds
 * 510 free at the bottom and compacts (mark_moved = CAP - 510 = 3202), and
 * the rest of W's leaves fit.  (W under A's last leaves, as a large W is,
 * was no good: a helper on the marking thread's core ran at each share and
 * came back hungry before the next trace, the shares halved the stack down
 * to W and it emptied -- a quarter of the processes never compacted.)
 * Checked: every mark counts exactly the live objects (a leaf lost in the
 * move would leave its grandchild unmarked), verify=true finds no marked
 * object referring to an unmarked one, and a mark compacted -- up to ROUNDS
 * marks until two did: 30 of 30 processes compacted in their first two
 * marks alone, 29 of 30 three at a time on two cores (0.4 s each, ASan
 * 1-2 s).  Checked by hand: with compact()'s memmove or its bottom = 0
 * dropped (mutants compact-moves-nothing, compact-keeps-its-bottom) verify
 * finds a marked object referring to an unmarked one; with compact()
 * returning false at once the marks overflow into the rescan and no mark
 * moves an entry. */
#include "check.h"
#include "internal.h"

/* (a third of the links under the sanitizers, which mark as slowly) */
#define CHAIN ((uint64_t)SAN_FEWER(1000000))
enum { ALEAVES = 2000, WLEAVES = 2000, CAP = 3712, ROUNDS = 24 };

static void *leaf_in(hl_heap *h, void *parent, uint64_t slot) {
  void *leaf = hl_obj_new_in(h, parent, slot, 8, 1);
  CHECK(leaf, "leaf: %s", hl_heap_error(h));
  CHECK(hl_obj_new_in(h, leaf, 0, 8, 0), "grandchild: %s", hl_heap_error(h));
  return leaf;
}

static void *object_of(hl_heap *h, hl_ref r) {
  hl_object_info info;
  OK(h, hl_ref_info(h, r, &info));
  return (void *)(uintptr_t)info.object;
}

int main(void) {
  /* small_max 16 KiB: W is a small object, pushed after A's leaves */
  hl_heap *h = HEAP("mark_threads=2", "generational=false", "verify=true", "small_max=16384",
                    "gc_trigger_bytes=1073741824");
  hl_ref top, chain;
  OK(h, hl_alloc(h, 0, ALEAVES + 1, &top));
  OK(h, hl_alloc(h, 8, 1, &chain));
  hl_enter(h);
  void *a = object_of(h, top);
  for (uint64_t k = 0; k < ALEAVES; k++) leaf_in(h, a, k);
  void *w = hl_obj_new_in(h, a, ALEAVES, 0, WLEAVES);
  CHECK(w, "W: %s", hl_heap_error(h));
  for (uint64_t k = 0; k < WLEAVES; k++) leaf_in(h, w, k);
  void *link = a;
  for (uint64_t i = 0; i < CHAIN; i++) {
    void *n = hl_obj_new(h, 8, 1);
    CHECK(n, "link: %s", hl_heap_error(h));
    hl_obj_set(n, 0, link);
    link = n;
  }
  hl_obj_set(object_of(h, chain), 0, link);
  hl_leave(h);
  OK(h, hl_ref_release(h, top)); /* A: reached through the chain only */
  uint64_t live = 1 + CHAIN + 2 + 2 * ((uint64_t)ALEAVES + WLEAVES);
  uint64_t cap = h->mark_cap;
  CHECK(cap > CAP, "the mark stack has %" PRIu64 " entries", cap);
  h->mark_cap = CAP; /* (the reservation stays; only the part in use shrinks) */
  int compacted = 0, round = 0;
  for (; round < ROUNDS && compacted < 2; round++) {
    uint64_t steals = stats_of(h).mark_steals;
    OK(h, hl_collect(h, 1, 1));
    hl_stats s = stats_of(h);
    uint64_t moved = h->mark_moved;
    printf("mark %d: %" PRIu64 " thread(s), %" PRIu64 " steals, %" PRIu64
           " objects, %" PRIu64 " entries moved within the stacks\n",
           round, s.mark_threads_used, s.mark_steals - steals, s.marked_objects, moved);
    CHECK(s.marked_objects == live, "mark %d counted %" PRIu64 " objects, %" PRIu64 " live (%"
          PRIu64 " entries moved)", round, s.marked_objects, live, moved);
    CHECK(s.verify_failures == 0, "mark %d: %s", round, hl_heap_error(h));
    compacted += moved > 0;
  }
  CHECK(compacted > 0, "no mark of %d compacted its stack: the helper never took a share "
        "before W's trace filled it", round);
  h->mark_cap = cap;
  OK(h, hl_heap_check(h));
  OK(h, hl_ref_release(h, chain));
  hl_heap_free(h);
  printf("%d of %d marks compacted\n", compacted, round);
  return 0;
}
