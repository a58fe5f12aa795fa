/* Generational mode: a full mark runs once the bytes minor cycles promoted
 * since the last one reach full_growth_ratio percent of what that one found
 * live -- 25 by default (it was 50: binary-trees at depth 20 then held
 * 208 MiB at its peak where 25 holds 159, and traced 11% more;
 * docs/performance.md, fourth round, item 26).  Here a live set of LIVE
 * bytes is marked by an explicit collection; then, round after round, a
 * chunk of objects is kept alive across one minor cycle (promoted) and
 * dropped, so the old generation's garbage grows a chunk at a time.  The
 * first full mark must come once that garbage reaches a quarter of the live
 * set, not half of it; and the option still moves it. */
#include "check.h"

#define OBJ_PAYLOAD 48 /* + an 8-byte header and one slot: 64-byte objects */
#define OBJ_BYTES 64
#define LIVE_OBJECTS 65536                     /* 4 MiB live */
#define LIVE ((uint64_t)LIVE_OBJECTS * OBJ_BYTES)
#define CHUNK_OBJECTS 256                      /* 16 KiB promoted a round */

static void *roots[2]; /* [0] the live list, [1] the chunk of this round */

/* Push a new object onto the list rooted at *head. */
static void push_obj(hl_heap *h, void **head) {
  void *o = hl_obj_new(h, OBJ_PAYLOAD, 1);
  CHECK(o, "alloc: %s", hl_heap_error(h));
  hl_obj_set(o, 0, *head);
  *head = o;
}

/* Bytes promoted (by minor cycles) before the first full mark after an
 * explicit collection of a LIVE-byte live set. */
static uint64_t promoted_before_full(hl_heap *h) {
  roots[0] = roots[1] = NULL;
  OK(h, hl_roots_add(h, roots, 2, 0));
  hl_enter(h);
  for (int i = 0; i < LIVE_OBJECTS; i++) push_obj(h, &roots[0]);
  hl_leave(h);
  OK(h, hl_collect(h, 1, 1)); /* a full mark: the live set is old, LIVE found live */
  hl_stats s0 = stats_of(h);
  for (int round = 0; round < 4096; round++) {
    hl_stats before = stats_of(h);
    hl_enter(h);
    for (int i = 0; i < CHUNK_OBJECTS; i++) push_obj(h, &roots[1]);
    hl_leave(h);
    /* garbage until a cycle has run with the chunk rooted */
    for (;;) {
      hl_enter(h);
      for (int i = 0; i < 64; i++) CHECK(hl_obj_new(h, OBJ_PAYLOAD, 0), "alloc");
      hl_leave(h);
      if (stats_of(h).cycles != before.cycles) break;
    }
    roots[1] = NULL; /* the promoted chunk is old garbage now */
    hl_stats s = stats_of(h);
    if (s.major_full_mark != s0.major_full_mark) {
      /* (this round's cycle was the full mark: what it saw promoted is
       * what the minor cycles before it promoted) */
      uint64_t promoted = s.promoted_bytes - s0.promoted_bytes;
      OK(h, hl_roots_remove(h, roots));
      return promoted;
    }
  }
  CHECK(0, "no full mark after 4096 rounds");
  return 0;
}

int main(void) {
  /* the default full_growth_ratio */
  hl_heap *h = HEAP("generational=true", "young_bytes=64k", "gc_trigger_min_bytes=64k",
                    "mark_threads=1", "verify=true");
  uint64_t p = promoted_before_full(h);
  CHECK(p >= LIVE / 4, "a full mark with %" PRIu64 " bytes promoted, below 25%% of %" PRIu64,
        p, LIVE);
  CHECK(p < LIVE / 4 + LIVE / 16, "no full mark until %" PRIu64 " bytes were promoted: more "
        "than 25%% of the %" PRIu64 " live (the default full_growth_ratio is 25)", p, LIVE);
  CHECK(stats_of(h).verify_failures == 0, "verify: %s", hl_heap_error(h));
  hl_heap_free(h);

  /* the option moves it */
  h = HEAP("generational=true", "young_bytes=64k", "gc_trigger_min_bytes=64k",
           "mark_threads=1", "full_growth_ratio=50");
  p = promoted_before_full(h);
  CHECK(p >= LIVE / 2 && p < LIVE / 2 + LIVE / 16,
        "full_growth_ratio=50: a full mark with %" PRIu64 " bytes promoted (live %" PRIu64 ")",
        p, LIVE);
  hl_heap_free(h);
  return 0;
}
