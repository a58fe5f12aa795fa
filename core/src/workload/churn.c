/*
 * churn.c -- the churn phase (hl_churn): keep a ring of live_bytes of objects
 * of `size` alive while allocating at a rate (bytes/s, 0 = as fast as
 * possible) for a duration.  Each allocation is one mutator call -- lock,
 * allocate through the allocation sequence, store into the ring, unlock -- so
 * a background collector gets in between as it would between a real
 * mutator's calls (experiment E3).
 */
#include <string.h>

#include "../internal.h"

/* Called without the lock (the arguments checked by hl_churn): each
 * allocation is one mutator call that takes it. */
int hl__churn(hl_heap *h, double duration_s, uint64_t size, uint64_t live_bytes, double rate,
              hl_churn_result *out) {
  HL_ASSERT_UNLOCKED(h);
  int rc = HL_OK;
  uint64_t ring_n = live_bytes / size;
  bool large = hl__obj_bytes(size, 0) > h->small_max;

  bool locked = hl__lock(h);
  hl_ref ring_ref = 0;
  void *ring = hl__obj_alloc(h, 0, ring_n, HL_ALLOC_LARGE, "churn");
  if (!ring || (rc = hl__handle_new(h, ring, &ring_ref))) {
    hl__unlock(h, locked);
    return rc ? rc : HL_ENOMEM;
  }
  uint64_t cycles0 = h->cycles_completed, waits0 = h->tally.pacing_waits;
  uint64_t wait_ns0 = h->tally.pacing_wait_ns;
  uint64_t t0 = hl__prim_now_ns(), end = t0 + (uint64_t)(duration_s * 1e9);
  uint64_t i = 0, now = t0;
  hl__unlock(h, locked);

  uint64_t mark = hl__call_mark();
  while (now < end) {
    if (hl__interrupted(mark)) {
      rc = hl__fail(h, HL_EINTR, "churn: interrupted after %llu allocation%s",
                    (unsigned long long)out->allocations, hl__s(out->allocations));
      break;
    }
    if (rate > 0) {
      double allowed = rate * (double)(now - t0) / 1e9;
      if ((double)out->allocated_bytes >= allowed) {
        double ahead_s = ((double)out->allocated_bytes - allowed) / rate;
        int64_t us = (int64_t)(ahead_s * 1e6);
        hl__prim_sleep_us(us < 50 ? 50 : us > 2000 ? 2000 : us);
        now = hl__prim_now_ns();
        continue;
      }
    }
    /* one mutator call: lock, allocate, store, unlock -- so the collector
     * can get in between, as it would between a real mutator's calls */
    locked = hl__lock(h);
    void *obj = hl__obj_alloc(h, size, 0, 0, "churn");
    if (!obj) {
      rc = HL_ENOMEM;
      hl__unlock(h, locked);
      break;
    }
    /* touch it as an app would its buffer: one write per OS page */
    uint8_t *pl = hl__obj_payload(obj);
    for (uint64_t off = 0; off < size; off += 4096) pl[off] = (uint8_t)i;
    pl[size - 1] = (uint8_t)i;
    hl__handle_get(h, ring_ref, &ring); /* (a cycle may have run) */
    hl__store(h, ring, i % ring_n, obj);
    if (h->ctr.live[HL_LARGE] > out->peak_large_live_bytes)
      out->peak_large_live_bytes = h->ctr.live[HL_LARGE];
    hl__unlock(h, locked);
    out->allocated_bytes += size;
    out->allocations++;
    i++;
    if ((i & 15) == 0 || large) now = hl__prim_now_ns();
  }

  locked = hl__lock(h);
  hl__handle_release(h, ring_ref);
  out->cycles = h->cycles_completed - cycles0;
  out->pacing_waits = h->tally.pacing_waits - waits0;
  out->pacing_wait_ns = h->tally.pacing_wait_ns - wait_ns0;
  hl__unlock(h, locked);
  out->elapsed_ns = hl__prim_now_ns() - t0;
  return rc;
}
