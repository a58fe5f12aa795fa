/*
 * alloc.c -- the allocation sequence of the collected mode: the one slow path
 * every allocating entry takes (hl_alloc, hl_obj_new, hl_obj_new_in, fill and
 * its index, churn).  The inline first try (a slot of the class's allocation
 * word, no cycle due) is hl__obj_alloc_fast in internal.h.
 *
 *   0. limit       with heap_limit_bytes, ENOMEM at once for an object
 *                  larger than the whole limit
 *   1. safepoint   a background collector waiting for the lock goes first
 *   2. pacing      a large allocation waits for the cycle the large path
 *                  asked for (large_pacing, background collector)
 *   3. collect     when a trigger is due (or request it, background); with
 *                  heap_limit_bytes, a major cycle when the live bytes would
 *                  pass the limit, and ENOMEM when they still would
 *   4. take        a slot of the size class, or a large block -- both
 *                  charged (hl__charge) where they are taken; when there is
 *                  none, a major cycle and one more try before ENOMEM
 *   5. initialise  the header and empty slots
 *
 * Steps 1-3 may drop the heap lock or run a cycle: everything the caller
 * needs must be rooted across the call.  The object returned is not: it is
 * the caller's to root before its next allocation.
 */
#include <inttypes.h>
#include <stdio.h>

#include "../internal.h"

int hl__check_alloc_args(hl_heap *h, const char *what, uint64_t size, uint64_t refs) {
  if (h->opt.mode != HL_MODE_COLLECTED)
    return hl__fail(h, HL_EMODE, "%s: objects need a collected heap (this one is manual)", what);
  if (size > HL_MAX_SIZE)
    return hl__fail(h, HL_EINVAL, "%s: size %" PRIu64 " exceeds the maximum of %" PRIu64
                    " bytes", what, size, (uint64_t)HL_MAX_SIZE);
  if (refs > HL_MAX_REFS)
    return hl__fail(h, HL_EINVAL, "%s: refs %" PRIu64 " exceeds the maximum of %" PRIu64
                    " slots", what, refs, (uint64_t)HL_MAX_REFS);
  return HL_OK;
}

/* Step 4 on the small path: a slot of class cls -- when the object has
 * slots, its page flagged PF_REFS and the slot cleared, as the fast path
 * does.  (The trigger's bytes were charged with the slot's run: small.c.) */
static void *take_small(hl_heap *h, uint64_t bytes, uint64_t refs) {
  uint32_t cls = hl__class_of(h, bytes);
  void *obj = hl__small_take(h, cls);
  if (hl_unlikely(!obj)) return NULL;
  if (refs) {
    if (hl_unlikely(!h->aword[cls].refs_max)) hl__aword_refs(h, cls);
    hl__slot_zero(obj, (uint8_t *)obj + h->cls_size[cls], h->cls_size[cls]);
  }
  return obj;
}

/* Run a major cycle for memory (step 4 found none, or the heap is at its
 * limit), unless one is running in this thread (its trim: it will free what
 * there is).  False when none could run. */
static bool collect_for_memory(hl_heap *h) {
  if (h->in_cycle && !hl__may_drop_lock(h)) return false;
  h->tally.memory_cycles++;
  hl__cycle(h, 1, REASON_MEMORY);
  return true;
}

/* heap_limit_bytes: would `bytes` more take the live bytes past it -- those
 * of the allocations in flight (limit_pending) counted as live? */
static bool over_limit(hl_heap *h, uint64_t bytes) {
  uint64_t cap = (uint64_t)h->opt.heap_limit_bytes;
  if (!cap) return false;
  hl__aword_flush(h); /* live bytes without the reserved slots */
  return hl__limit_held(h) + bytes > cap;
}

/* heap_limit_bytes: the bytes of an allocation past the limit test are
 * held (limit_pending) until its block is charged or it fails.  take() may
 * drop the lock -- a large block's mmap or malloc, a small page faulted in
 * or restored -- and every other thread's test passed meanwhile on the same
 * live bytes: 8 threads of 4 MiB objects held 88 MiB under a 64 MiB limit
 * (the background-collector hunt, session 30; tests/c/
 * heap_limit_holds_with_threads.c).  The manual mode's refill holds the
 * blocks it will take the same way (manual.c malloc_small).  alloc_limit
 * follows (the fast path and the small runs leave the room held; 0 on a
 * manual heap whatever is held). */
void hl__limit_hold(hl_heap *h, int64_t bytes) {
  h->limit_pending += (uint64_t)bytes;
  hl__alloc_limit_update(h);
}

int hl__fail_limit_reached(hl_heap *h, const char *what, const char *live_when, uint64_t held) {
  /* (the bytes other threads are allocating, when there are any) */
  char pending[64] = "";
  if (h->limit_pending)
    snprintf(pending, sizeof pending, " and %" PRIu64 " being allocated by other threads",
             h->limit_pending);
  return hl__fail(h, HL_ENOMEM, "%s: heap_limit_bytes %" PRIu64 " reached: %" PRIu64
                  " bytes live%s%s, %" PRIu64 " more asked", what,
                  (uint64_t)h->opt.heap_limit_bytes, hl__live_bytes(h), live_when, pending, held);
}

bool hl__past_whole_limit(hl_heap *h, uint64_t held, const char *what) {
  uint64_t cap = (uint64_t)h->opt.heap_limit_bytes;
  if (!cap || held <= cap) return false;
  hl__fail(h, HL_ENOMEM, "%s: heap_limit_bytes %" PRIu64 " is less than the %" PRIu64
           " bytes asked: %s can make room", what, cap, held,
           h->opt.mode == HL_MODE_MANUAL ? "nothing freed" : "no collection");
  return true;
}

/* Step 4 and 5: a block (the small or the large path), initialised. */
static void *take(hl_heap *h, uint64_t size, uint64_t refs, uint64_t bytes, bool large) {
  void *obj;
  if (!large) {
    obj = take_small(h, bytes, refs);
    if (obj) hl__obj_header(obj, (uint32_t)size, refs); /* (slots cleared) */
    return obj;
  }
  obj = hl__large_alloc(h, bytes, false);
  if (!obj) return NULL;
  hl__alloc_limit_update(h); /* the large trigger may be due now */
  hl__obj_init(obj, HL_SIZE_LARGE, refs);
  return obj;
}

void *hl__obj_alloc(hl_heap *h, uint64_t size, uint64_t refs, unsigned flags, const char *what) {
  HL_ASSERT_LOCKED(h);
  HL_ASSERT(h->opt.mode == HL_MODE_COLLECTED);
  uint64_t bytes = hl__obj_bytes(size, refs);
  bool large = (flags & HL_ALLOC_LARGE) || bytes > h->small_max;
  /* heap_limit_bytes: what the heap will hold, a small object its class's
   * whole slot (the object's own bytes let a 504-byte object in a 512-byte
   * slot take 16 MiB 8 bytes past its limit: the C API hunt, session 26);
   * 0 without a limit.  An object larger than the whole limit fails at
   * once -- no collection can make room for it (five refusals of a 600 MiB
   * object under a 512 MiB limit paid 5 major cycles in sync mode, and 10
   * cycles and 1.5 s of pacing waits in background -- the pacing hunt,
   * session 30) */
  uint64_t held = 0;
  if (hl_unlikely(h->opt.heap_limit_bytes != 0)) {
    held = large ? bytes : h->cls_size[hl__class_of(h, bytes)];
    if (hl__past_whole_limit(h, held, what)) return NULL;
  }
  if (atomic_load_explicit(&h->collector_waiting, memory_order_relaxed)) hl__safepoint(h);
  if (large) hl__pace(h, bytes);
  /* alloc_limit is the small trigger in force, 0 while the large one is due
   * (and below it when heap_limit_bytes is near) */
  if (h->ctr.since_cycle[HL_SMALL] >= h->alloc_limit || (large && h->opt.heap_limit_bytes)) {
    /* the runs' slots not taken yet were charged to the trigger: give them
     * back, so that the trigger reads the bytes really allocated */
    if (h->ctr.since_cycle[HL_SMALL] >= h->alloc_limit) hl__aword_flush(h);
    hl__maybe_collect(h);
    if (h->opt.heap_limit_bytes) {
      if (over_limit(h, held) && collect_for_memory(h) && over_limit(h, held)) {
        hl__fail_limit_reached(h, what, " after a collection", held);
        hl__alloc_limit_update(h);
        return NULL;
      }
      hl__alloc_limit_update(h); /* the headroom left */
    }
  }
  if (held) hl__limit_hold(h, (int64_t)held);
  void *obj = take(h, size, refs, bytes, large);
  /* No memory: a major cycle may free some (a trigger larger than what is
   * left, a failed fill's garbage), then one more try. */
  if (hl_unlikely(!obj) && collect_for_memory(h)) obj = take(h, size, refs, bytes, large);
  if (held) hl__limit_hold(h, -(int64_t)held); /* charged now, or failed */
  if (hl_likely(obj != NULL)) return obj;
  if (large && h->large_set_refused) /* (the block was made, and given back) */
    hl__fail(h, HL_ENOMEM, "%s: no memory to track a large object of %" PRIu64
             " bytes: the heap's set of large blocks could not grow", what, bytes);
  else if (large)
    hl__fail(h, HL_ENOMEM, "%s: the system allocator refused %" PRIu64 " bytes", what, bytes);
  else
    hl__fail_no_page(h, what);
  return NULL;
}
