/* A root region's base names it: hl_roots_remove(heap, base) removes the
 * region at base.  A second hl_roots_add of a base already registered was
 * accepted silently, so two regions had one name -- the remove took one of
 * them, which one depending on the order of earlier removes -- and the
 * other, of another length or kind, stayed a root with nothing to name it
 * but the same base.  Now the second add is refused (HL_EINVAL naming the
 * base), the first region stays as it was and keeps what it points at, and
 * one remove unregisters it. */
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
  return 0;
}
