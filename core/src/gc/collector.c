/*
 * collector.c -- the background collector thread and large-path pacing.
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

/* Lock held (by the caller, through hl__lock).  The reason goes with the
 * request: the collector's cycle reports it (it said 1, small, whatever
 * asked -- 133 of 133 cycles of a storm of large objects, where the sync
 * collector's said 2: the background-collector hunt, session 30). */
void hl__request_cycle(hl_heap *h, int reason) {
  HL_ASSERT_LOCKED(h);
  /* a child of fork() has no collector thread until it asks for a cycle */
  if (!h->collector_running && !h->closing && hl__collector_start(h) != 0) {
    hl__cycle(h, -1, reason); /* no thread: the cycle runs here */
    return;
  }
  atomic_fetch_or(&h->cycle_reasons, 1u << reason);
  if (atomic_load_explicit(&h->cycle_requested, memory_order_relaxed)) return;
  h->tally.cycle_requests++;
  pthread_mutex_lock(&h->req_lock);
  atomic_store(&h->cycle_requested, true);
  pthread_cond_signal(&h->collector_cv);
  pthread_mutex_unlock(&h->req_lock);
}

/* A mutator about to allocate steps aside while the collector is waiting
 * for the heap lock.  Lock held; returns with it held. */
void hl__safepoint(hl_heap *h) {
  HL_ASSERT_LOCKED(h);
  if (!atomic_load_explicit(&h->collector_waiting, memory_order_relaxed)) return;
  if (!hl__may_drop_lock(h)) return;
  uint64_t done = h->cycles_completed;
  while (atomic_load(&h->collector_waiting) || (h->in_cycle && h->cycles_completed == done)) {
    hl__wait_ns(h, &h->cycle_done, 100 * 1000000u); /* re-check; never stuck */
    if (h->closing) break;
  }
}

/* The reason a requested cycle reports: of those its requests gave, the one
 * a sync cycle would (the small trigger before the large one, as
 * hl__maybe_collect), pacing's last (small if none was recorded: a request
 * always records one). */
static int requested_reason(hl_heap *h) {
  unsigned r = atomic_load(&h->cycle_reasons);
  static const int order[] = {REASON_SMALL, REASON_LARGE, REASON_PACING};
  for (size_t i = 0; i < sizeof order / sizeof *order; i++)
    if (r & (1u << order[i])) return order[i];
  return REASON_SMALL;
}

static void *collector_main(void *arg) {
  hl_heap *h = arg;
  pthread_mutex_lock(&h->req_lock);
  for (;;) {
    while (!atomic_load(&h->cycle_requested) && !h->collector_stop)
      prim_cond_wait(&h->collector_cv, &h->req_lock);
    if (h->collector_stop) break;
    /* min_cycle_interval_ms: the seed paced its cycles at 200 ms. */
    uint64_t gap = (uint64_t)h->opt.min_cycle_interval_ms * 1000000u;
    uint64_t now = hl__prim_now_ns();
    uint64_t last = atomic_load(&h->last_cycle_end_ns);
    if (gap && last && now - last < gap) {
      prim_cond_wait_ns(&h->collector_cv, &h->req_lock, gap - (now - last));
      continue;
    }
    pthread_mutex_unlock(&h->req_lock);

    atomic_store(&h->collector_waiting, true);
    hl__lock_raw(h);
    atomic_store(&h->collector_waiting, false);
    h->tally.collector_wakeups++;
    /* a cycle another thread ran while this one waited for the lock (a
     * caller's, one for memory, a holding thread's) answered the request
     * and cleared it: none more (one ran, and said reason 1, though nothing
     * had asked for it -- the review of session 30's fixes;
     * background_collector_skips_answered_requests) */
    if (!h->closing && atomic_load(&h->cycle_requested)) hl__cycle(h, -1, requested_reason(h));
    pthread_cond_broadcast(&h->cycle_done);
    hl__unlock_raw(h);

    pthread_mutex_lock(&h->req_lock);
  }
  pthread_mutex_unlock(&h->req_lock);
  return NULL;
}

int hl__collector_start(hl_heap *h) {
  hl__pin_code();
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
  prim_join(h->collector);
  h->collector_running = false;
}

/* How often a paced wait looks for an interrupt. */
#define PACE_POLL_NS (20 * 1000000u)

/* Before a large allocation of `bytes` (lock held). */
void hl__pace(hl_heap *h, uint64_t bytes) {
  HL_ASSERT_LOCKED(h);
  if (h->opt.collector != HL_COLLECTOR_BACKGROUND) return; /* sync: the cycle runs inline */
  bool over = h->ctr.since_cycle[HL_LARGE] + bytes > (uint64_t)h->opt.large_trigger_bytes;
  uint64_t limit = (uint64_t)h->opt.heap_limit_bytes;
  if (limit) hl__aword_flush(h); /* live bytes without the reserved slots */
  /* (with the bytes other threads' allocations hold in flight, as the limit
   * test counts them: the live bytes alone let an allocation past the limit
   * with them go unpaced -- the review of session 30's pacing changes) */
  bool over_limit = limit && hl__limit_held(h) + bytes > limit;
  if (!over && !over_limit) return;
  /* (the large trigger's, as the sync collector's cycle would be; near the
   * limit alone, pacing's) */
  hl__request_cycle(h, over ? REASON_LARGE : REASON_PACING);
  /* No collector thread: the cycle ran here (a fork child's thread could not
   * be started again), or the heap is closing -- no cycle is coming to wait
   * for.  (A child whose pthread_create failed waited pacing_max_wait_ms at
   * every paced allocation: 64 of 64 KiB took 4 s -- the pacing hunt,
   * session 30.) */
  if (!h->collector_running) return;
  /* large_pacing=0: the seed's legacy path -- the request is only scheduled
   * and the mutator runs on. */
  if (!h->opt.large_pacing) return;
  if (!hl__may_drop_lock(h)) {
    /* this thread holds the heap: nobody else can run the cycle */
    if (!h->in_cycle) hl__cycle(h, -1, REASON_PACING);
    return;
  }
  if (h->pacing_dry_cycles >= (uint32_t)h->opt.pacing_give_up_cycles) {
    h->tally.pacing_gave_up++;
    hl__event(h, HL_EV_pacing_wait, 4, (int64_t)h->ctr.since_cycle[HL_LARGE], (int64_t)0,
              (int64_t)0, (int64_t)1);
    return;
  }
  uint64_t target = h->cycles_completed + (h->in_cycle ? 2 : 1);
  uint64_t t0 = hl__prim_now_ns(), max_ns = (uint64_t)h->opt.pacing_max_wait_ms * 1000000u;
  /* hl_interrupt (Ctrl-C) ends the wait: the allocation goes on unpaced, as
   * after a timeout, and a long call around it stops at its next safe point.
   * The interrupt is async-signal-safe, so it cannot signal cycle_done: the
   * wait looks every PACE_POLL_NS.  (It ignored interrupts: Ctrl-C waited up
   * to pacing_max_wait_ms, 28 s of 30 -- the pacing hunt, session 30.)  In a
   * long call the mark is the call's: an interrupt that came before this wait
   * began, between two of the call's waits, ends it at once.  (A mark taken
   * here missed it, and every later wait ran its whole time -- the review of
   * session 30's pacing changes.) */
  uint64_t mark = hl__call_mark();
  bool timed_out = false;
  /* The binding's hook (hl_heap_set_wait_hook), the lock dropped: the Lua
   * module attaches its SIGINT handler for the wait alone.  (Without it
   * nothing called hl_interrupt during a Lua h:alloc's wait: Ctrl-C waited
   * for the wait's end, 2.5 s of a min_cycle_interval_ms of 4 s.) */
  hl_wait_hook hook = h->wait_hook;
  void *hook_arg = h->wait_hook_arg;
  if (hook) {
    hl__unlock_raw(h);
    hook(h, 1, hook_arg);
    hl__lock_raw(h);
  }
  while (h->cycles_completed < target && !h->closing && !hl__interrupted(mark)) {
    uint64_t spent = hl__prim_now_ns() - t0;
    if (spent >= max_ns) {
      timed_out = true;
      break;
    }
    hl__wait_ns(h, &h->cycle_done, max_ns - spent < PACE_POLL_NS ? max_ns - spent : PACE_POLL_NS);
  }
  uint64_t waited = hl__prim_now_ns() - t0;
  h->tally.pacing_waits++;
  h->tally.pacing_wait_ns += waited;
  if (timed_out) h->tally.pacing_timeouts++;
  hl__event(h, HL_EV_pacing_wait, 4, (int64_t)h->ctr.since_cycle[HL_LARGE], (int64_t)waited,
            (int64_t)timed_out, (int64_t)0);
  if (hook) {
    hl__unlock_raw(h);
    hook(h, 0, hook_arg);
    hl__lock_raw(h);
  }
}
