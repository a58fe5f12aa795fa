/* "Slots start empty" on memory that held objects: an object with slots has
 * its slot cleared when it is taken (hl__slot_zero: the fast path and the
 * allocation sequence; runs are not zeroed ahead), so every allocation path
 * must find its slots zeroed whichever run or page it lands in -- the raw
 * fast paths (hl_obj_new, hl_obj_new_in), the handle API (hl_alloc) and the
 * allocation sequence.  First the pages are filled with objects whose slots
 * and payloads are all non-zero and dropped (page_release off: the bytes
 * stay), then objects of every slot count are allocated over them, with
 * reads (the heap check: flushes in the middle of a run) and cycles in
 * between.  verify: the slots a flush gives back keep their poison. */
#include "check.h"
#include "internal.h"

#define N 6000

static void *shadow[N];

static void dirty(hl_heap *h) {
  /* objects of 1..8 slots (16..80 bytes), every slot pointing at the object
   * itself, every payload byte 0xA5 */
  hl_enter(h);
  for (int i = 0; i < N; i++) {
    uint64_t refs = 1 + (uint64_t)i % 8, size = 8 * ((uint64_t)i % 3);
    shadow[i] = hl_obj_new(h, size, refs);
    CHECK(shadow[i], "dirty %d: %s", i, hl_heap_error(h));
    for (uint64_t s = 0; s < refs; s++) hl_obj_set(shadow[i], s, shadow[i]);
    memset(hl_obj_data(shadow[i]), 0xA5, size);
  }
  hl_leave(h);
  for (int i = 0; i < N; i++) shadow[i] = NULL;
  OK(h, hl_collect(h, 1, 1));
}

static void expect_empty(void *o, const char *how, int i) {
  CHECK(o, "%s %d: NULL", how, i);
  uint64_t refs = hl_obj_refs(o);
  for (uint64_t s = 0; s < refs; s++)
    CHECK(hl_obj_get(o, s) == NULL, "%s %d: slot %" PRIu64 " of %" PRIu64 " holds %p", how, i,
          s, refs, hl_obj_get(o, s));
}

int main(void) {
  hl_heap *h = HEAP("page_size=4k", "page_release=false", "verify=true",
                    "gc_trigger_min_bytes=256k", "gc_trigger_bytes=256k");
  OK(h, hl_roots_add(h, shadow, N, 0));
  for (int round = 0; round < 3; round++) {
    dirty(h);
    hl_stats s0 = stats_of(h);
    hl_enter(h);
    for (int i = 0; i < N; i++) {
      uint64_t refs = 1 + (uint64_t)(i * 7 + round) % 8, size = 8 * ((uint64_t)i % 3);
      switch ((i + round) % 3) {
      case 0:
        shadow[i] = hl_obj_new(h, size, refs);
        expect_empty(shadow[i], "hl_obj_new", i);
        break;
      case 1:
        if (i && shadow[i - 1] && hl_obj_refs(shadow[i - 1])) {
          shadow[i] = hl_obj_new_in(h, shadow[i - 1], 0, size, refs);
          expect_empty(shadow[i], "hl_obj_new_in", i);
          break;
        }
        shadow[i] = hl_obj_new(h, size, refs);
        expect_empty(shadow[i], "hl_obj_new", i);
        break;
      default: {
        /* the handle API, outside hl_enter: the allocation sequence */
        hl_leave(h);
        hl_ref r, t;
        OK(h, hl_alloc(h, size, refs, &r));
        for (uint64_t s = 0; s < refs; s++) {
          OK(h, hl_ref_get(h, r, s, &t));
          CHECK(t == 0, "hl_alloc %d: slot %" PRIu64 " of %" PRIu64 " is not empty", i, s, refs);
        }
        OK(h, hl_ref_release(h, r));
        hl_enter(h);
        shadow[i] = hl_obj_new(h, size, refs);
        expect_empty(shadow[i], "hl_obj_new after hl_alloc", i);
      }
      }
      /* a non-NULL slot in a live object: the next objects land among them */
      if (i % 2 && shadow[i]) hl_obj_set(shadow[i], 0, shadow[i]);
      if (i % 97 == 5) OK(h, hl_heap_check(h)); /* a flush in the middle of a chunk */
    }
    hl_leave(h);
    hl_stats s1 = stats_of(h);
    CHECK(s1.verify_failures == s0.verify_failures, "verify failed: %s", hl_heap_error(h));
    CHECK(s1.cycles > s0.cycles, "round %d ran no cycle among its allocations", round);
    OK(h, hl_heap_check(h));
    for (int i = 0; i < N; i++) shadow[i] = NULL;
  }
  hl_heap_free(h);
  puts("ok");
  return 0;
}
