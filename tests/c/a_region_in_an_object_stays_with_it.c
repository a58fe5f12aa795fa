/* A root region registered in the heap's own memory -- the payload of a live
 * object -- with compaction on.  The object holding the region was alone on
 * a sparse page, so a full collection evacuated it: the region's words were
 * left in the freed slot (free-slot poison, later another object's payload),
 * and the object the region rooted lost its root and was freed.  Objects
 * that hold a root region's words are now pinned: the host stays, the
 * region keeps what it roots, payloads intact.  Precise and conservative
 * regions, verify on (the invariant check after every cycle). */
#include "check.h"

enum { PER_PAGE = 85 }; /* 48-byte slots (40-byte payloads) on a 4 KiB page */

static void run(int conservative) {
  hl_heap *h = HEAP("verify=1", "page_size=4096", "compact=always");
  hl_ref objs[2 * PER_PAGE];
  for (int i = 0; i < 2 * PER_PAGE; i++) OK(h, hl_alloc(h, 40, 0, &objs[i]));
  /* the host alone on the first page; half of the second page free */
  for (int i = 0; i < 2 * PER_PAGE; i++)
    if (i != 3 && (i < PER_PAGE || i % 2)) OK(h, hl_ref_release(h, objs[i]));
  hl_ref target;
  OK(h, hl_alloc(h, 200, 0, &target));
  uint8_t pat[200];
  memset(pat, 0x77, sizeof pat);
  OK(h, hl_ref_write(h, target, 0, pat, sizeof pat));
  hl_object_info host, t;
  OK(h, hl_ref_info(h, objs[3], &host));
  OK(h, hl_ref_info(h, target, &t));
  void **region = (void **)(uintptr_t)host.address; /* the host's payload: 5 words */
  hl_enter(h);
  memset(region, 0, 40);
  region[2] = (void *)(uintptr_t)(conservative ? t.address + 17 : t.object);
  hl_leave(h);
  OK(h, hl_roots_add(h, region, 5, conservative));
  OK(h, hl_ref_release(h, target)); /* rooted by the region alone */

  for (int c = 0; c < 3; c++) {
    OK(h, hl_collect(h, 1, 1));
    /* garbage of the target's class over the slots a freed one would give */
    for (int i = 0; i < 100; i++) {
      hl_ref g;
      OK(h, hl_alloc(h, 200, 0, &g));
      OK(h, hl_ref_release(h, g));
    }
  }
  hl_stats s = stats_of(h);
  CHECK(s.evacuated_objects > 0, "the scenario compacted nothing");
  OK(h, hl_ref_info(h, objs[3], &host));
  CHECK((void **)(uintptr_t)host.address == region,
        "conservative=%d: the object holding the region moved (%p -> 0x%" PRIx64 ")",
        conservative, (void *)region, host.address);
  hl_enter(h);
  const uint8_t *kept = (const uint8_t *)region[2] - (conservative ? 17 + 8 : 0);
  CHECK(kept == (const uint8_t *)(uintptr_t)t.object && hl_obj_size(kept) == 200,
        "conservative=%d: the region's word holds %p", conservative, region[2]);
  CHECK(memcmp(hl_obj_payload(kept), pat, sizeof pat) == 0,
        "conservative=%d: the object the region roots lost its payload", conservative);
  hl_leave(h);
  check_invariants(h);
  OK(h, hl_roots_remove(h, region));
  hl_heap_free(h);
}

int main(void) {
  run(0);
  run(1);
  return 0;
}
