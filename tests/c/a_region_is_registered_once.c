/* A root region's base names it: hl_roots_remove(heap, base) removes the
 * region at base.  A second hl_roots_add of a base already registered was
 * accepted silently, so two regions had one name -- the remove took one of
 * them, which one depending on the order of earlier removes -- and the
 * other, of another length or kind, stayed a root with nothing to name it
 * but the same base.  Now the second add is refused (HL_EINVAL naming the
 * base), the first region stays as it was and keeps what it points at, and
 * one remove unregisters it.  And a region larger than the heap's
 * reservation is refused before its words are allocated (hl_roots_fit). */
#include "check.h"

int main(void) {
  hl_heap *h = HEAP("verify=1");
  hl_ref target;
  OK(h, hl_alloc(h, 64, 0, &target));
  hl_object_info t;
  OK(h, hl_ref_info(h, target, &t));
  static void *region[4];
  region[1] = (void *)(uintptr_t)t.object;
  OK(h, hl_roots_add(h, region, 4, 0));
  FAILS(h, HL_EINVAL, "already registered", hl_roots_add(h, region, 4, 0));
  FAILS(h, HL_EINVAL, "already registered", hl_roots_add(h, region, 1, 1));
  OK(h, hl_ref_release(h, target)); /* rooted by the region alone */
  OK(h, hl_collect(h, 1, 1));
  hl_stats s = stats_of(h);
  CHECK(s.marked_objects == 1, "the region's object: %" PRIu64 " marked", s.marked_objects);
  OK(h, hl_roots_remove(h, region));
  FAILS(h, HL_EINVAL, "not a registered region", hl_roots_remove(h, region));
  OK(h, hl_collect(h, 1, 1));
  s = stats_of(h);
  CHECK(s.marked_objects == 0, "removed once, the region still roots: %" PRIu64 " marked",
        s.marked_objects);
  /* registered again after the remove: accepted */
  OK(h, hl_roots_add(h, region, 4, 1));
  OK(h, hl_roots_remove(h, region));
  hl_heap_free(h);

  /* A region larger than the heap's reservation is refused, by hl_roots_fit
   * before the caller allocates its words (the bindings: 2^33 words asked
   * calloc for 64 GiB) and by hl_roots_add (h42left, session 42); one of the
   * reservation's size fits (a 1 MiB heap: 131,072 words). */
  hl_heap *small = HEAP("reserve_bytes=1m");
  uint64_t most = stats_of(small).reserved_bytes / sizeof(void *);
  CHECK(most == 131072, "a 1 MiB reservation: %" PRIu64 " words", most);
  OK(small, hl_roots_fit(small, most));
  FAILS(small, HL_EINVAL, "hl_roots_fit: a region of 131073 words is larger than the heap's "
        "reservation (1048576 bytes, reserve_bytes: 131072 words at most)",
        hl_roots_fit(small, most + 1));
  FAILS(small, HL_EINVAL, "a region of 8589934592 words is larger",
        hl_roots_fit(small, (uint64_t)1 << 33));
  /* (refused before the words are read: a base that holds 8 bytes) */
  FAILS(small, HL_EINVAL, "hl_roots_add: a region of 131073 words is larger",
        hl_roots_add(small, region, most + 1, 1));
  void **whole = calloc(most, sizeof(void *));
  CHECK(whole != NULL, "calloc of 1 MiB");
  OK(small, hl_roots_add(small, whole, most, 1));
  OK(small, hl_collect(small, 1, 1));
  OK(small, hl_roots_remove(small, whole));
  free(whole);
  hl_heap_free(small);
  hl_heap *m = HEAP("mode=manual");
  FAILS(m, HL_EMODE, "hl_roots_fit: root regions need a collected heap", hl_roots_fit(m, 4));
  hl_heap_free(m);
  return 0;
}
