/*
 * collector.c -- the background collector thread, large-path pacing and the
 * churn phase.
 *
 * The collector thread sleeps on its own request lock, not on the heap lock,
 * so a mutator asking for a cycle never has to wake a thread that then
 * fights it for the heap lock.  Before it takes the heap lock it raises
 * `collector_waiting`; an allocating mutator that sees the flag steps aside
 * until that cycle is done (a safepoint), instead of re-taking the lock in a
 * tight loop and starving the collector.
 *
 * Pacing (seed 000: the legacy path had a trigger but no throttle): when the
 * large-path bytes since the last cycle run past the budget, a paced
 * allocation waits for the cycle it asked for -- at most pacing_max_wait_ms,
 * and not at all after pacing_give_up_cycles cycles in a row that freed
 * nothing on the large path (waiting again would not help).
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "../internal.h"

static void abs_deadline(struct timespec *ts, uint64_t ns_from_now) {
  clock_gettime(CLOCK_REALTIME, ts);
  uint64_t ns = (uint64_t)ts->tv_nsec + ns_from_now;
  ts->tv_sec += (time_t)(ns / 1000000000u);
  ts->tv_nsec = (long)(ns % 1000000000u);
}

/* Lock held (by the caller, through hl__lock). */
void hl__request_cycle(hl_heap *h) {
  if (atomic_load_explicit(&h->cycle_requested, memory_order_relaxed)) return;
  h->st.cycle_requests++;
  pthread_mutex_lock(&h->req_lock);
  atomic_store(&h->cycle_requested, true);
  pthread_cond_signal(&h->collector_cv);
  pthread_mutex_unlock(&h->req_lock);
}

/* A mutator about to allocate steps aside while the collector is waiting
 * for the heap lock.  Lock held; returns with it held. */
void hl__safepoint(hl_heap *h) {
  if (!atomic_load_explicit(&h->collector_waiting, memory_order_relaxed)) return;
  if (!hl__may_drop_lock(h)) return;
  uint64_t done = h->cycles_completed;
  while (atomic_load(&h->collector_waiting) || (h->in_cycle && h->cycles_completed == done)) {
    struct timespec ts;
    abs_deadline(&ts, 100 * 1000000u); /* re-check; never stuck */
    pthread_cond_timedwait(&h->cycle_done, &h->lock, &ts);
    if (h->closing) break;
  }
}

static void *collector_main(void *arg) {
  hl_heap *h = arg;
  pthread_mutex_lock(&h->req_lock);
  for (;;) {
    while (!atomic_load(&h->cycle_requested) && !h->collector_stop)
      pthread_cond_wait(&h->collector_cv, &h->req_lock);
    if (h->collector_stop) break;
    /* min_cycle_interval_ms: the seed paced its cycles at 200 ms. */
    uint64_t gap = (uint64_t)h->opt.min_cycle_interval_ms * 1000000u;
    uint64_t now = prim_now_ns();
    uint64_t last = atomic_load(&h->last_cycle_end_ns);
    if (gap && last && now - last < gap) {
      struct timespec ts;
      abs_deadline(&ts, gap - (now - last));
      pthread_cond_timedwait(&h->collector_cv, &h->req_lock, &ts);
      continue;
    }
    pthread_mutex_unlock(&h->req_lock);

    atomic_store(&h->collector_waiting, true);
    pthread_mutex_lock(&h->lock);
    atomic_store(&h->collector_waiting, false);
    h->st.collector_wakeups++;
    if (!h->closing) hl__cycle(h, -1, REASON_SMALL);
    pthread_cond_broadcast(&h->cycle_done);
    pthread_mutex_unlock(&h->lock);

    pthread_mutex_lock(&h->req_lock);
  }
  pthread_mutex_unlock(&h->req_lock);
  return NULL;
}

int hl__collector_start(hl_heap *h) {
  int e = pthread_create(&h->collector, NULL, collector_main, h);
  if (e == 0) h->collector_running = true;
  return e;
}

void hl__collector_stop(hl_heap *h) {
  if (!h->collector_running) return;
  pthread_mutex_lock(&h->req_lock);
  h->collector_stop = true;
  pthread_cond_signal(&h->collector_cv);
  pthread_mutex_unlock(&h->req_lock);
  pthread_join(h->collector, NULL);
  h->collector_running = false;
}

/* Before a large allocation of `bytes` (lock held). */
void hl__large_paced(hl_heap *h, uint64_t bytes) {
  if (h->opt.collector != HL_COLLECTOR_BACKGROUND) return; /* sync: the cycle runs inline */
  bool over = h->st.large_bytes_since_cycle + bytes > (uint64_t)h->opt.large_trigger_bytes;
  uint64_t limit = (uint64_t)h->opt.heap_limit_bytes;
  if (limit) hl__aword_flush(h); /* live bytes without the reserved slots */
  bool over_limit =
      limit && h->st.small_live_bytes + h->st.large_live_bytes + bytes > limit;
  if (!over && !over_limit) return;
  hl__request_cycle(h);
  /* large_pacing=0: the seed's legacy path -- the request is only scheduled
   * and the mutator runs on. */
  if (!h->opt.large_pacing) return;
  if (!hl__may_drop_lock(h)) {
    /* this thread holds the heap: nobody else can run the cycle */
    if (!h->in_cycle) hl__cycle(h, -1, REASON_PACING);
    return;
  }
  if (h->pacing_dry_cycles >= (uint32_t)h->opt.pacing_give_up_cycles) {
    h->st.pacing_gave_up++;
    hl__event(h, HL_EV_pacing_wait, 4, (int64_t)h->st.large_bytes_since_cycle, (int64_t)0,
              (int64_t)0, (int64_t)1);
    return;
  }
  uint64_t target = h->cycles_completed + (h->in_cycle ? 2 : 1);
  uint64_t t0 = prim_now_ns();
  struct timespec ts;
  abs_deadline(&ts, (uint64_t)h->opt.pacing_max_wait_ms * 1000000u);
  bool timed_out = false;
  while (h->cycles_completed < target && !h->closing) {
    if (pthread_cond_timedwait(&h->cycle_done, &h->lock, &ts) == ETIMEDOUT) {
      timed_out = h->cycles_completed < target;
      break;
    }
  }
  uint64_t waited = prim_now_ns() - t0;
  h->st.pacing_waits++;
  h->st.pacing_wait_ns += waited;
  if (timed_out) h->st.pacing_timeouts++;
  hl__event(h, HL_EV_pacing_wait, 4, (int64_t)h->st.large_bytes_since_cycle, (int64_t)waited,
            (int64_t)timed_out, (int64_t)0);
}

/* ---- churn ---- */

int hl_churn(hl_heap *h, double duration_s, uint64_t size, uint64_t live_bytes, double rate,
             hl_churn_result *out) {
  if (!h) return HL_EINVAL;
  if (!out) return hl__fail(h, HL_EINVAL, "churn: NULL output");
  memset(out, 0, sizeof *out);
  if (!(duration_s > 0 && duration_s <= 3600))
    return hl__fail(h, HL_EINVAL, "churn: duration_s %g out of range (0, 3600]", duration_s);
  if (!(rate >= 0 && rate < 1e15))
    return hl__fail(h, HL_EINVAL, "churn: rate_bytes_per_s %g out of range [0, 1e15)", rate);
  int rc = hl__check_alloc_args(h, size, 0);
  if (rc) return rc;
  if (size == 0) return hl__fail(h, HL_EINVAL, "churn: size must be at least 1 byte");
  if (live_bytes < size)
    return hl__fail(h, HL_EINVAL, "churn: live_bytes %llu is smaller than one object of %llu",
                    (unsigned long long)live_bytes, (unsigned long long)size);
  uint64_t ring_n = live_bytes / size;
  if (ring_n > HL_MAX_REFS)
    return hl__fail(h, HL_EINVAL, "churn: a ring of %llu objects exceeds %llu",
                    (unsigned long long)ring_n, (unsigned long long)HL_MAX_REFS);
  uint64_t bytes = sizeof(hl_objhdr) + size;
  bool large = bytes > h->small_max;

  bool locked = hl__lock(h);
  hl_ref ring_ref = 0;
  void *ring = hl__obj_alloc(h, 0, ring_n, true);
  if (!ring || (rc = hl__handle_new(h, ring, &ring_ref))) {
    hl__unlock(h, locked);
    return rc ? rc : HL_ENOMEM;
  }
  uint64_t cycles0 = h->cycles_completed, waits0 = h->st.pacing_waits;
  uint64_t wait_ns0 = h->st.pacing_wait_ns;
  uint64_t t0 = prim_now_ns(), end = t0 + (uint64_t)(duration_s * 1e9);
  uint64_t i = 0, now = t0;
  hl__unlock(h, locked);

  while (now < end) {
    if (rate > 0) {
      double allowed = rate * (double)(now - t0) / 1e9;
      if ((double)out->allocated_bytes >= allowed) {
        double ahead_s = ((double)out->allocated_bytes - allowed) / rate;
        int64_t us = (int64_t)(ahead_s * 1e6);
        prim_sleep_us(us < 50 ? 50 : us > 2000 ? 2000 : us);
        now = prim_now_ns();
        continue;
      }
    }
    /* one mutator call: lock, allocate, store, unlock -- so the collector
     * can get in between, as it would between a real mutator's calls */
    locked = hl__lock(h);
    hl__safepoint(h);
    if (large) hl__large_paced(h, bytes);
    hl__maybe_collect(h);
    void *obj = hl__obj_alloc(h, size, 0, false);
    if (!obj) {
      rc = HL_ENOMEM;
      hl__unlock(h, locked);
      break;
    }
    /* touch it as an app would its buffer: one write per OS page */
    uint8_t *pl = hl__obj_payload(obj);
    for (uint64_t off = 0; off < size; off += 4096) pl[off] = (uint8_t)i;
    pl[size - 1] = (uint8_t)i;
    ring = h->handles[(uint32_t)(ring_ref & 0xffffffffu) - 1].obj;
    hl__store(h, ring, i % ring_n, obj);
    if (h->st.large_live_bytes > out->peak_large_live_bytes)
      out->peak_large_live_bytes = h->st.large_live_bytes;
    hl__unlock(h, locked);
    out->allocated_bytes += size;
    out->allocations++;
    i++;
    if ((i & 15) == 0 || large) now = prim_now_ns();
  }

  locked = hl__lock(h);
  hl__handle_release(h, ring_ref);
  out->cycles = h->cycles_completed - cycles0;
  out->pacing_waits = h->st.pacing_waits - waits0;
  out->pacing_wait_ns = h->st.pacing_wait_ns - wait_ns0;
  hl__unlock(h, locked);
  out->elapsed_ns = prim_now_ns() - t0;
  return rc;
}
