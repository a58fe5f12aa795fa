/*
 * cycle.c -- one collection cycle and the policy around it: when a cycle is
 * due (the small trigger, adaptive, and the large path's own), whether it is
 * minor (generational), whether it sweeps major (quiet, pressure, backstop),
 * the sweep, the compaction after it (gc/evacuate.c), the trigger's
 * adaptation, and the trim at its end (not after a cycle for memory).
 *
 * How the marking is done is gc/mark.c; the pages' sweep is small.c.  The
 * triggers read the private counters (hl_counters), never the stats.
 * Everything here runs under the heap lock; the only parts of a cycle that
 * drop it are at its end: the frees of its dead large blocks and the trim's
 * syscalls (release/release.c).
 */
#include <stdio.h>
#include <stdlib.h>

#include "../internal.h"

typedef struct sweep_tally {
  uint64_t pages, freed_objects, freed_bytes;
  uint64_t stat_before, stat_live; /* bytes before/after, non-spliced pages */
  uint64_t large_freed;
} sweep_tally;

static void sweep_one(hl_heap *h, uint32_t p, sweep_tally *t) {
  hl_page *d = &h->pages[p];
  uint32_t sz = h->cls_size[d->cls];
  uint64_t before = (uint64_t)d->used * sz;
  uint64_t freed = 0;
  uint64_t live = hl__sweep_page(h, p, &freed);
  t->pages++;
  t->freed_objects += freed;
  t->freed_bytes += freed * sz;
  /* Pages spliced in by a major sweep are mostly dead by selection; feeding
   * them to the survival ratio halved the trigger in the seed (5 cycles
   * became 8), so they are left out. */
  if (!(d->flags & PF_SPLICED)) {
    t->stat_before += before;
    t->stat_live += live;
  }
  if (live == 0) {
    hl__page_unformat(h, p);
    hl__page_to_state(h, p, PS_FREE, true);
  } else {
    hl__page_to_state(h, p, PS_PARTIAL, false);
  }
}

/* A survivor keeps its mark until the next full mark clears it (in
 * generational mode it is old until then), as small objects do.  The dead
 * blocks are unlinked and discharged here and returned as a chain: their
 * memory goes back at the cycle's end with the lock dropped (free_dead_large),
 * as the trim's syscalls do -- a munmap each for those of large_map_bytes or
 * more, which held every other thread of the heap while it ran. */
static hl_large *sweep_large(hl_heap *h, sweep_tally *t) {
  hl_large *dead = NULL;
  hl_large *l = h->large_head;
  while (l) {
    hl_large *n = l->next;
    if (!l->mark) {
      t->freed_objects++;
      t->large_freed++;
      hl__large_unlink(h, l); /* (discharges it) */
      l->next = dead;
      dead = l;
    }
    l = n;
  }
  return dead;
}

/* The memory of sweep_large's dead blocks, given back with the lock dropped
 * when this call may drop it (not under hl_enter).  The chain is this
 * cycle's alone (unlinked, out of the set); in_cycle is still set, so a
 * fork() waits for it (registry.c) and the child inherits no chain. */
static void free_dead_large(hl_heap *h, hl_large *dead) {
  /* and the ranges munmap refused before (the map limit, large.c): the
   * first is tried again, the rest when it goes -- one refused call a
   * cycle while the process stays at the limit */
  hl_large *pending = hl__large_pending_take(h);
  if (!dead && !pending) return;
  hl_unmap_tally t = {0};
  bool dropped = hl__drop_lock(h);
  hl__large_retry(pending, false, &t);
  hl__large_release_chain(dead, &t);
  hl__retake_lock(h, dropped);
  hl__large_unmap_done(h, &t);
}

/* gc_growth_ratio: the least the heap may grow by in a cycle, for a live set
 * of `live` bytes (the trigger in force is never below it). */
static uint64_t growth_min(const hl_heap *h, uint64_t live) {
  return h->trigger + live / 100 * (uint64_t)h->opt.gc_growth_ratio;
}

/* The small trigger in force: at most half the reservation, so that a heap
 * whose reservation is smaller than its trigger (a small reserve_bytes, or a
 * reservation halved under ulimit -v) still collects before it runs out. */
static uint64_t trigger_in_force(const hl_heap *h) {
  uint64_t t = h->opt.generational
                   ? h->young
                   : h->trigger + h->last_live_bytes / 100 * (uint64_t)h->opt.gc_live_ratio;
  /* gc_growth_ratio: no more than the heap holds free, unless that is less
   * than the growth it allows (docs/design.md, "The trigger") */
  if (!h->opt.generational && h->opt.gc_growth_ratio > 0 && h->growth_free != UINT64_MAX) {
    uint64_t g = growth_min(h, h->last_live_bytes);
    if (h->growth_free > g) g = h->growth_free;
    if (g < t) t = g;
  }
  uint64_t cap = h->reserved / 2;
  return t < cap ? t : cap;
}

static inline bool small_due(const hl_heap *h);

/* Generational: promoted bytes that call for a full mark. */
static uint64_t full_trigger(const hl_heap *h) {
  uint64_t t = h->last_full_live / 100 * (uint64_t)h->opt.full_growth_ratio;
  uint64_t floor = (uint64_t)h->opt.gc_trigger_min_bytes;
  return t > floor ? t : floor;
}

/* Whether this cycle marks only the young objects (generational mode):
 * not when the caller asked for a collection, under pressure, with
 * major_sweep=always, or once the old generation has grown enough. */
static bool choose_minor(const hl_heap *h, int reason) {
  /* a cycle for memory is a full one: a minor cycle frees only young objects,
   * and the allocation that asked would fail with old garbage left (found by
   * fuzz_heap: 8 of 16 pages came back from a major collection after a
   * fill had been refused) */
  if (!h->opt.generational || reason == REASON_EXPLICIT || reason == REASON_MEMORY ||
      h->pressure)
    return false;
  if (h->opt.major_sweep == HL_MAJOR_ALWAYS) return false;
  return h->promoted_since_full < full_trigger(h);
}

/* Generational: the nursery follows what minor cycles keep -- young_survival_factor
 * times the bytes recent ones marked (each minor cycle's count weighs half),
 * between young_min_bytes and young_bytes.  A program whose young objects
 * die young allocates in a nursery small enough to stay in the cache; one
 * whose structures outlive a small nursery gets a large one before they are
 * promoted in pieces (docs/performance.md, item 29). */
static void adapt_nursery(hl_heap *h, uint64_t kept, uint64_t allocated) {
  uint64_t max = (uint64_t)h->opt.young_bytes, min = (uint64_t)h->opt.young_min_bytes;
  if (min > max) min = max;
  h->young_kept = h->young_kept / 2 + kept / 2;
  uint64_t want = h->young_kept * (uint64_t)h->opt.young_survival_factor;
  want = want < min ? min : want > max ? max : want;
  want = want / h->page_size * h->page_size;
  if (want < min) want = min;
  if (want == h->young) return;
  hl__event(h, HL_EV_nursery_adapted, 3, (int64_t)h->young, (int64_t)want,
            (int64_t)(allocated ? kept * 100 / allocated : 0));
  h->young = want;
}

static void adapt_trigger(hl_heap *h, const sweep_tally *t) {
  if (!h->opt.adaptive_trigger || t->stat_before == 0) return;
  uint64_t pct = t->stat_live * 100 / t->stat_before;
  uint64_t old = h->trigger;
  if (pct >= 50) {
    if (++h->high_survival_streak >= 2) {
      h->high_survival_streak = 0;
      h->trigger = h->trigger * 2;
      if (h->trigger > (uint64_t)h->opt.gc_trigger_max_bytes)
        h->trigger = (uint64_t)h->opt.gc_trigger_max_bytes;
    }
  } else {
    h->high_survival_streak = 0;
    if (pct < 10) {
      h->trigger /= 2;
      if (h->trigger < (uint64_t)h->opt.gc_trigger_min_bytes)
        h->trigger = (uint64_t)h->opt.gc_trigger_min_bytes;
    }
  }
  if (h->trigger != old)
    hl__event(h, HL_EV_trigger_adapted, 3, (int64_t)old, (int64_t)h->trigger, (int64_t)pct);
}

/* Small-path bytes the heap holds free now: the empty slots of its pages in
 * use (after a sweep: what the sweep found dead, on the pages it swept) and
 * its empty resident pages. */
static uint64_t free_small_bytes(const hl_heap *h) {
  uint64_t pages = h->state_count[PS_OWNED] + h->state_count[PS_RETIRED] +
                   h->state_count[PS_PARTIAL] + h->state_count[PS_FREE];
  uint64_t bytes = pages * h->page_size, live = h->ctr.live[HL_SMALL];
  return bytes > live ? bytes - live : 0;
}

/* Which kind of major sweep this cycle gets (MAJOR_NONE for none). */
static int choose_major(hl_heap *h, int major_req, uint64_t *quiet_limit) {
  uint64_t trig = trigger_in_force(h);
  uint64_t limit = trig / 4;
  if ((uint64_t)h->opt.quiet_bytes < limit) limit = (uint64_t)h->opt.quiet_bytes;
  *quiet_limit = limit;
  if (major_req == 1) return MAJOR_FORCED;
  if (major_req == 0) return MAJOR_NONE;
  if (h->opt.major_sweep == HL_MAJOR_ALWAYS) return MAJOR_FORCED;
  if (h->opt.major_sweep == HL_MAJOR_NEVER) return MAJOR_NONE;
  if (h->pressure) return MAJOR_PRESSURE;
  /* A cycle is quiet when little was allocated since the last one -- on both
   * paths.  Counting only small-path bytes (quiet_counts_large=0) is the
   * seed's defect: heavy large churn looks quiet and every cycle splices. */
  uint64_t recent = h->ctr.since_cycle[HL_SMALL];
  if (h->opt.quiet_counts_large) recent += h->ctr.since_cycle[HL_LARGE];
  if (recent < limit) return MAJOR_QUIET;
  if (h->opt.major_backstop_cycles > 0 &&
      h->cycles_since_major + 1 >= (uint64_t)h->opt.major_backstop_cycles)
    return MAJOR_BACKSTOP;
  return MAJOR_NONE;
}

/* One full cycle.  Lock held; returns with it held. */
int hl__cycle(hl_heap *h, int major_req, int reason) {
  HL_ASSERT_LOCKED(h);
#if HL_PRELOAD
  /* libheaplab-malloc.so's heap is always manual and never runs a cycle;
   * without a call here --gc-sections drops the collector's code (mark,
   * sweep, evacuation, tenuring) from the library */
  (void)major_req, (void)reason;
  return hl__fail(h, HL_EMODE, "cycle: a manual heap has no collector");
#endif
  while (h->in_cycle) hl__wait(h, &h->cycle_done);
  h->in_cycle = true;
  uint64_t t0 = hl__prim_now_ns();
  h->tally.cycles++;
  bool small_driven = small_due(h);

  /* The owned pages are swept like retired ones: their new objects may
   * already be dead.  The slots their allocation words reserved and did not
   * hand out go back first. */
  hl__aword_flush(h);
  for (uint32_t c = 0; c < h->nclasses; c++) {
    if (h->owned[c] == HL_NIL) continue;
    hl__page_to_state(h, h->owned[c], PS_RETIRED, false);
    h->owned[c] = HL_NIL;
  }

  uint64_t quiet_limit = 0;
  bool minor = choose_minor(h, reason);
  int major;
  if (minor) {
    major = MAJOR_NONE;
  } else if (h->opt.generational && reason != REASON_EXPLICIT && !h->pressure) {
    /* the old generation grew: its garbage is on partial pages */
    major = MAJOR_FULL_MARK;
  } else {
    major = choose_major(h, major_req, &quiet_limit);
  }
  /* Safe in a minor cycle too: an unmarked object on a partial page is dead
   * (young objects are only on the pages owned since the last cycle). */
  bool sweep_partials = major != MAJOR_NONE || h->opt.sweep == HL_SWEEP_FULL;
  /* gc_growth_ratio: in a cycle the small path's trigger called (not the
   * large path's, nor a caller's), the partial pages are swept after the
   * retired ones if those leave too little free: the heap would grow to
   * hold the garbage the partial pages keep.  Not with major_sweep=never. */
  bool growth_check = !sweep_partials && !h->opt.generational && h->opt.gc_growth_ratio > 0 &&
                      major_req < 0 && h->opt.major_sweep == HL_MAJOR_AUTO && small_driven;
  /* tenuring (both modes; gc/mark.c): a full mark skips the tenured pages,
   * except a whole mark -- every tenure_full_marks-th, a caller's, one for
   * memory, one under pressure -- which untenures them all first */
  bool tenuring = !minor && hl__tenures(h);
  /* a caller's collection, one for memory and one under pressure mark
   * everything (the caller's, and an allocation's, must find all garbage);
   * a heap that is not generational tenures nothing after them either, so
   * that after a caller's collection no page keeps its dead objects or its
   * holes */
  bool precise = reason == REASON_EXPLICIT || reason == REASON_MEMORY || h->pressure;
  if (!minor && (h->opt.generational || tenuring)) {
    if (!tenuring || precise ||
        ++h->full_marks_since_whole >= (uint64_t)h->opt.tenure_full_marks) {
      hl__untenure_all(h);
      h->full_marks_since_whole = 0;
      h->tally.whole_marks++;
    }
  }
  uint64_t tenured_before = h->tenured_bytes; /* full marks do not count them */

  int rc = HL_OK;
  /* verify: every header before the mark reads them -- one an overflow
   * overwrote said 1,094,795,585 slots, and the mark read past its object
   * until it faulted.  The cycle goes on: verify's mark traces such an
   * object as every word of its slot (gc/mark.c, bounded), so nothing it
   * refers to is lost, and the failure is reported. */
  if (h->opt.verify) {
    char msg[256];
    if (hl__check_headers(h, msg, sizeof msg)) rc = hl__verify_failed(h, 0, msg);
  }
  uint64_t tm = hl__prim_now_ns(); /* mark_ns: clearing the marks, then marking */
  if (!minor) hl__marks_clear(h);
  hl__mark(h, minor);
  h->tally.mark_ns += hl__prim_now_ns() - tm;
  if (h->opt.verify) {
    char msg[256];
    if (hl__check_marks_closed(h, msg, sizeof msg)) {
      if (!rc) rc = hl__verify_failed(h, 0, msg);
      /* and nothing is lost: trace from every marked object before sweeping */
      hl__mark_repair(h);
    }
  }
  uint64_t marked_bytes = h->marked_bytes;
  /* the live set a full mark found: what it marked and what it kept tenured */
  uint64_t live_found = minor ? marked_bytes : marked_bytes + tenured_before;

  sweep_tally t = {0};
  /* Partial pages first (taken off their lists before retired pages can
   * join them), then everything retired since the last cycle. */
  uint64_t spliced = 0;
  uint32_t *list = NULL;
  uint64_t k = 0;
  if (sweep_partials || growth_check) {
    uint64_t n = h->state_count[PS_PARTIAL];
    list = n ? hl__sys_malloc(n * sizeof(uint32_t)) : NULL;
    if (list) {
      /* (tenured pages are on partial_full: nothing on them is unmarked) */
      for (uint32_t p = h->partial_full.head; p != HL_NIL; p = h->pages[p].next)
        if (!(h->tenure[p] & TN_TENURED)) list[k++] = p;
      for (uint32_t c = 0; c < h->nclasses; c++)
        for (uint32_t p = h->partial_avail[c].head; p != HL_NIL; p = h->pages[p].next)
          list[k++] = p;
    }
  }
  if (sweep_partials) {
    for (uint64_t i = 0; i < k; i++) {
      if (major != MAJOR_NONE) h->pages[list[i]].flags |= PF_SPLICED;
      sweep_one(h, list[i], &t);
    }
    spliced = k;
  }
  uint32_t p;
  while ((p = h->retired.head) != HL_NIL) {
    h->pages[p].flags &= (uint8_t)~PF_SPLICED;
    sweep_one(h, p, &t);
  }
  /* The pages on the list were partial before the retired ones were swept
   * (those joined the partial lists after it was taken): each is swept once.
   * (What the sweep freed is discharged below: it counts as free here.) */
  if (growth_check && k && free_small_bytes(h) + t.freed_bytes < growth_min(h, live_found)) {
    major = MAJOR_GROWTH;
    for (uint64_t i = 0; i < k; i++) {
      h->pages[list[i]].flags |= PF_SPLICED;
      sweep_one(h, list[i], &t);
    }
    spliced = k;
  }
  hl__sys_free(list);
  uint64_t small_freed = t.freed_objects;
  hl_large *dead_large = sweep_large(h, &t); /* (the large path discharges its own) */
  hl__discharge(h, HL_SMALL, t.freed_bytes, small_freed);
  h->tally.swept_pages += t.pages;
  /* compact: the live objects of sparse pages move, after a full mark only
   * (a minor cycle's marks are not the whole live set) */
  if (!minor && h->opt.compact != HL_COMPACT_NEVER && !rc) { /* (nothing moves after a failed
                                                                 verify: a bad header's words
                                                                 are no slots to update) */
    int erc = hl__evacuate(h);
    if (!rc) rc = erc;
  }

  if (major != MAJOR_NONE) {
    h->tally.major_sweeps++;
    h->tally.major_swept_pages += spliced;
    if (major == MAJOR_QUIET) h->tally.major_quiet++;
    if (major == MAJOR_PRESSURE) h->tally.major_pressure++;
    if (major == MAJOR_BACKSTOP) h->tally.major_backstop++;
    if (major == MAJOR_FORCED) h->tally.major_forced++;
    if (major == MAJOR_FULL_MARK) h->tally.major_full_mark++;
    if (major == MAJOR_GROWTH) h->tally.major_growth++;
    h->cycles_since_major = 0;
    h->pressure = false;
    hl__event(h, HL_EV_major_sweep, 5, (int64_t)major, (int64_t)spliced,
              (int64_t)h->ctr.since_cycle[HL_SMALL], (int64_t)h->ctr.since_cycle[HL_LARGE],
              (int64_t)quiet_limit);
  } else if (!minor) {
    h->cycles_since_major++; /* the backstop counts full marks only */
  }
  /* The pressure is this cycle's (a whole mark; a major sweep when the
   * policy allows one).  With major_sweep=never no cycle sweeps major, and
   * a flag left set made every later cycle a whole mark: no page tenured
   * and no minor cycle for the rest of the heap's life
   * (tests/c/memory_pressure_lasts_one_cycle.c).  (A caller's major=0
   * still leaves it to the next cycle, as before.) */
  if (!minor && h->opt.major_sweep == HL_MAJOR_NEVER) h->pressure = false;
  if (!h->opt.generational) adapt_trigger(h, &t);
  for (uint32_t q = h->partial_full.head; q != HL_NIL; q = h->pages[q].next)
    h->pages[q].flags &= (uint8_t)~PF_SPLICED;
  for (uint32_t c = 0; c < h->nclasses; c++)
    for (uint32_t q = h->partial_avail[c].head; q != HL_NIL; q = h->pages[q].next)
      h->pages[q].flags &= (uint8_t)~PF_SPLICED;

  uint64_t small_since = h->ctr.since_cycle[HL_SMALL];
  uint64_t large_since = h->ctr.since_cycle[HL_LARGE];
  h->ctr.since_cycle[HL_SMALL] = 0;
  h->ctr.since_cycle[HL_LARGE] = 0;
  if (minor) {
    h->tally.minor_cycles++;
    h->tally.promoted_bytes += marked_bytes;
    h->promoted_since_full += marked_bytes;
    adapt_nursery(h, marked_bytes, small_since + large_since);
  } else {
    /* a live set that grew by more than full_growth_ratio percent since the
     * last full mark is a structure being built: its pages are dense now and
     * may be garbage soon after (binary-trees' stretch tree) -- tenure once it
     * has stopped growing */
    uint64_t live = live_found;
    uint64_t grew = h->last_full_live / 100 * (uint64_t)h->opt.full_growth_ratio;
    bool growing = live > h->last_full_live + grew;
    h->last_full_live = live;
    h->promoted_since_full = 0;
    if (tenuring) hl__tenure_pages(h, !growing && (h->opt.generational || !precise));
  }
  /* gc_live_ratio grows the trigger by these; generational: the estimate */
  h->last_live_bytes = minor ? h->last_full_live + h->promoted_since_full : live_found;
  if (!h->opt.generational) h->growth_free = free_small_bytes(h);
  hl__alloc_limit_update(h);
  atomic_store(&h->cycle_requested, false);
  atomic_store(&h->cycle_reasons, 0u);
  /* pacing gives up after cycles in a row that free nothing large */
  if (t.large_freed) h->pacing_dry_cycles = 0;
  else h->pacing_dry_cycles++;

  uint64_t dt = hl__prim_now_ns() - t0;
  h->tally.gc_ns += dt;
  if (minor) h->tally.minor_gc_ns += dt;
  if (dt > h->tally.max_pause_ns) h->tally.max_pause_ns = dt;
  hl__event(h, HL_EV_cycle, 10, (int64_t)(major != MAJOR_NONE), (int64_t)dt, (int64_t)small_since,
            (int64_t)large_since, (int64_t)t.pages, (int64_t)t.freed_objects,
            (int64_t)h->last_live_bytes, (int64_t)trigger_in_force(h), (int64_t)reason,
            (int64_t)minor);

  if (h->opt.verify && !rc) {
    char msg[256];
    if (hl__check_locked(h, msg, sizeof msg)) rc = hl__verify_failed(h, 0, msg);
  }
  /* A cycle for memory keeps what it emptied for the allocation that asked
   * (it takes those pages next): releasing them first made it restore one,
   * a madvise and a refault for nothing, and ENOMEM when the restore failed
   * with every page of the heap just freed (fuzz_heap, restore failing).
   * The next cycle's trim releases what is left beyond the warm cache. */
  /* (gc_ns counts neither these frees nor the trim: both run unlocked) */
  free_dead_large(h, dead_large);
  if (reason != REASON_MEMORY) hl__trim_locked(h, reason == REASON_EXPLICIT);
  atomic_store(&h->last_cycle_end_ns, hl__prim_now_ns());
  h->cycles_completed++;
  h->in_cycle = false;
  pthread_cond_broadcast(&h->cycle_done);
  return rc;
}

/* Allocation-driven cycles: called before an allocation, lock held. */
static inline bool small_due(const hl_heap *h) {
  return h->ctr.since_cycle[HL_SMALL] >= trigger_in_force(h);
}
static inline bool large_due(const hl_heap *h) {
  return h->ctr.since_cycle[HL_LARGE] >= (uint64_t)h->opt.large_trigger_bytes;
}

/* (the allocation sequence has passed its safepoint already) */
void hl__maybe_collect(hl_heap *h) {
  HL_ASSERT_LOCKED(h);
  bool small = small_due(h), large = large_due(h);
  if (!small && !large) return;
  if (h->opt.collector == HL_COLLECTOR_BACKGROUND && hl__may_drop_lock(h)) {
    hl__request_cycle(h, small ? REASON_SMALL : REASON_LARGE);
    return;
  }
  if (h->in_cycle) return; /* one is running (in its trim): it will reset the counters */
  h->tally.cycle_requests++;
  hl__cycle(h, -1, small ? REASON_SMALL : REASON_LARGE);
}

uint64_t hl__trigger_in_force(const hl_heap *h) { return trigger_in_force(h); }

/* Where small allocation leaves the fast path: the small trigger in force,
 * or 0 while the large trigger is due (and below the trigger when
 * heap_limit_bytes is near).  The allocation runs stop there (small.c). */
static uint64_t alloc_limit(const hl_heap *h) {
  /* (0 on a manual heap) */
  uint64_t lim = h->opt.mode != HL_MODE_COLLECTED || large_due(h) ? 0 : trigger_in_force(h);
  /* heap_limit_bytes: the fast path also leaves when the bytes left under the
   * limit are used (the sequence then checks the limit) */
  uint64_t cap = (uint64_t)h->opt.heap_limit_bytes;
  if (cap && lim) {
    /* one object's margin: the fast path checks before it adds */
    uint64_t live = hl__limit_held(h) + h->small_max; /* (allocations in flight too) */
    uint64_t at = h->ctr.since_cycle[HL_SMALL] + (cap > live ? cap - live : 0);
    if (at < lim) lim = at;
  }
  return lim;
}

/* The allocation runs end at alloc_limit (small.c): when it drops below what
 * they were charged, they are given back, and the fast path, finding them
 * empty, takes the sequence. */
void hl__alloc_limit_update(hl_heap *h) {
  uint64_t lim = alloc_limit(h);
  if (lim < h->ctr.since_cycle[HL_SMALL] && h->opt.mode == HL_MODE_COLLECTED) {
    hl__aword_flush(h);
    lim = alloc_limit(h);
  }
  h->alloc_limit = lim;
}

