/*
 * prefault.c -- thp_prefault: while a bulk phase (fill) carves fresh 2 MiB
 * chunks, a helper thread faults the next ones in ahead of it with
 * MADV_POPULATE_WRITE, on another CPU.
 *
 * Why: with huge pages the fill's time is mostly the kernel zeroing each
 * fresh 2 MiB page at its fault (docs/performance.md, fourth round), on the
 * allocating thread, while the second CPU sits idle.  The helper zeroes the
 * chunks ahead of the allocation cursor, so the kernel's zeroing runs beside
 * the fill's own writes.  It takes the farthest unclaimed chunk of its
 * window first; the fill, reaching a nearer chunk no one has claimed,
 * faults that one in itself -- the two threads zero chunks side by side,
 * each from its own end of the window, and the zeroing is shared between
 * the CPUs rather than all on the helper's (see pick()).
 *
 * Bounds -- it never faults in what the heap will not use, and never touches
 * memory the heap has released:
 *   - only chunks wholly above the pages carved when the phase started
 *     (never-carved memory: nothing there was ever released);
 *   - at most an estimate of the fresh pages the phase will carve (its
 *     objects' pages, less every empty and partial page it could take
 *     instead; its index nodes are not counted; no more than the room
 *     under heap_limit_bytes), and at most thp_prefault chunks ahead of
 *     the chunk the allocation is in;
 *   - a chunk the helper is faulting in is waited for (outside the heap
 *     lock) by any thread that carves its first page, so no page of it is
 *     handed out, let alone released, while the helper's call runs;
 *   - when the phase ends, the chunks the helper faulted in that no page was
 *     carved from (the phase was interrupted, failed, or found garbage to
 *     reuse) are given back with one MADV_DONTNEED (thp_prefault_unused).
 *
 * The helper is one thread per phase, joined before the phase returns: it
 * makes system calls only (no write to the heap's memory, no heap state);
 * its state is this file's struct under its own mutex, and its counts go
 * into the stats when the phase ends.  Its calls go through the fault site
 * populate; a refused call stops the helper (the chunks it did not fault in
 * fault in as without it) and is counted in thp_populate_refused.
 */
#include <errno.h>
#include <stdlib.h>

#include "../internal.h"

#define NONE HL_PF_NONE

/* A chunk of the helper's range [first, end) (internal.h): */
enum {
  FREE = HL_PF_FREE, /* nobody has claimed it */
  BUSY = HL_PF_BUSY, /* the helper is faulting it in */
  DONE = HL_PF_DONE, /* the helper faulted it in */
  OWN = HL_PF_OWN    /* the allocation reached it first (it faults it in), or refused */
};

struct hl_prefault {
  pthread_mutex_t mu;
  pthread_cond_t cv;        /* the cursor moved, or a chunk is done */
  pthread_t thread;
  prim_ctx *prim;
  uint8_t *base;
  uint8_t *bits;            /* the side-table bits of chunk 0's pages */
  size_t chunk_bits;        /* bytes of bits per chunk */
  uint32_t first, end;      /* chunks [first, end) are the helper's to take */
  uint32_t ahead;           /* at most this many chunks beyond the cursor */
  /* under mu: */
  uint32_t cursor;          /* the chunk the allocation is in */
  uint32_t unclaimed;       /* chunks still FREE */
  uint32_t failed;          /* the chunk whose call was refused, or NONE */
  bool stop;
  int err;
  uint64_t chunks, waits, wait_ns;
  uint8_t state[];          /* of chunk first + i */
};

/* The helper's next chunk: the FARTHEST unclaimed one in its window above
 * the cursor, so that the allocation, arriving at the near ones, finds
 * them either faulted in or unclaimed -- it then faults that one in
 * itself instead of waiting -- and the two threads zero side by side, each
 * at its own end of the window.  (Taking the nearest, the helper was always
 * at the chunk the allocation reached next: the allocation, faster at its
 * writes than the kernel at its zeroing, waited for it at every chunk, and
 * all the zeroing ran on one CPU.)  NONE when there is none.  mu held. */
uint32_t hl__prefault_pick(const uint8_t *state, uint32_t first, uint32_t end, uint32_t cursor,
                           uint32_t ahead) {
  if (end <= first) return NONE;
  uint64_t hi = (uint64_t)cursor + ahead;
  if (hi >= end) hi = end - 1;
  for (uint64_t c = hi; c > cursor && c >= first; c--)
    if (state[c - first] == FREE) return (uint32_t)c;
  return NONE;
}
static uint32_t pick(hl_prefault *pf) {
  return hl__prefault_pick(pf->state, pf->first, pf->end, pf->cursor, pf->ahead);
}

static void *helper_main(void *arg) {
  hl_prefault *pf = arg;
  pthread_mutex_lock(&pf->mu);
  for (;;) {
    uint32_t c;
    while (!pf->stop && pf->unclaimed && (c = pick(pf)) == NONE)
      prim_cond_wait(&pf->cv, &pf->mu);
    if (pf->stop || !pf->unclaimed) break;
    pf->state[c - pf->first] = BUSY;
    pf->unclaimed--;
    pthread_mutex_unlock(&pf->mu);
    prim_result r = hl__prim_call(pf->prim, HL_SITE_populate, pf->base + (size_t)c * PRIM_HUGE_BYTES,
                              PRIM_HUGE_BYTES, PRIM_POPULATE);
    if (!r.err) {
      /* and the OS pages of the bits only this chunk's pages use (format
       * writes them): one call instead of a fault each */
      size_t os = hl__prim_os_page_size();
      uintptr_t lo = (uintptr_t)(pf->bits + (size_t)c * pf->chunk_bits);
      uintptr_t hi = lo + pf->chunk_bits;
      lo = (lo + os - 1) / os * os;
      hi = hi / os * os;
      if (hi > lo) hl__prim_call(pf->prim, HL_SITE_populate, (void *)lo, hi - lo, PRIM_POPULATE);
    }
    pthread_mutex_lock(&pf->mu);
    if (r.err) {
      pf->state[c - pf->first] = OWN; /* not faulted in: the allocation's */
      pf->failed = c;
      pf->err = r.err;
      pf->stop = true; /* the rest fault in as without the helper */
    } else {
      pf->state[c - pf->first] = DONE;
      pf->chunks++;
    }
    pthread_cond_broadcast(&pf->cv);
  }
  pthread_mutex_unlock(&pf->mu);
  return NULL;
}

/* Fresh pages a phase writing `count` objects of `bytes` each (slot size)
 * will carve at least: its objects' pages, less the empty pages it may take
 * first and the room of the partial pages of their class. */
static uint64_t fresh_pages(hl_heap *h, uint64_t count, uint64_t bytes) {
  uint32_t cls = hl__class_of(h, bytes);
  uint64_t per = h->page_size / h->cls_size[cls];
  if (per == 0) return 0;
  uint64_t need = (count + per - 1) / per;
  uint64_t other = h->free_pool.count + h->released_pool.count + h->reuse_failed.count +
                   h->partial_avail[cls].count + 1 /* the owned page */;
  return need > other ? need - other : 0;
}

hl_prefault *hl__prefault_start(hl_heap *h, uint64_t count, uint64_t bytes) {
  HL_ASSERT_LOCKED(h);
  /* (another thread's phase may have its helper running: one at a time) */
  if (h->prefault || !h->chunk || !h->tally.thp_enabled || h->opt.thp_prefault == 0 ||
      h->populate_off || hl__prim_os_cpus() < 2)
    return NULL;
  uint32_t per = 1u << h->chunk_shift;
  uint64_t fresh = fresh_pages(h, count, bytes);
  /* heap_limit_bytes: the phase fails once its objects fill the room under
   * the limit, so it carves no more than that room's pages (with a 3 MiB
   * limit and thp_prefault=64 the helper faulted 12-14 chunks, all given
   * back unused); the room is what other threads' allocations in flight
   * (limit_pending, collected mode) leave of it, as the limit test counts */
  if (h->opt.heap_limit_bytes) {
    uint64_t limit = (uint64_t)h->opt.heap_limit_bytes, live = hl__limit_held(h);
    uint64_t room = live < limit ? (limit - live + h->page_size - 1) / h->page_size : 0;
    if (fresh > room) fresh = room;
  }
  /* chunks whose first page the phase will carve, above what is carved */
  uint64_t first = ((uint64_t)h->high_water + per - 1) >> h->chunk_shift;
  uint64_t end = fresh ? (((uint64_t)h->high_water + fresh - 1) >> h->chunk_shift) + 1 : 0;
  uint64_t max = (uint64_t)h->npages_max >> h->chunk_shift;
  if (end > max) end = max;
  /* the first chunk is the fill's own; a helper pays from the second on */
  if (end < first + 2) return NULL;
  size_t bytes_of = sizeof(hl_prefault) + (size_t)(end - first);
  hl_prefault *pf = hl__sys_malloc(bytes_of);
  if (!pf) return NULL; /* the phase faults its chunks in itself */
  memset(pf, 0, bytes_of); /* every chunk FREE */
  pf->prim = &h->prim;
  pf->base = h->base;
  pf->bits = (uint8_t *)(h->opt.mode == HL_MODE_MANUAL ? h->abits : h->bits);
  pf->chunk_bits = (size_t)per * h->bits_stride * sizeof(uint64_t);
#ifdef HL_PRELOAD
  pf->chunk_bits = 0; /* (allocation bits from a pool: internal.h) */
#endif
  pf->first = pf->cursor = (uint32_t)first;
  pf->end = (uint32_t)end;
  pf->unclaimed = (uint32_t)(end - first);
  pf->ahead = (uint32_t)h->opt.thp_prefault;
  pf->failed = NONE;
  if (pthread_mutex_init(&pf->mu, NULL)) goto fail;
  if (pthread_cond_init(&pf->cv, NULL)) {
    pthread_mutex_destroy(&pf->mu);
    goto fail;
  }
  hl__pin_code();
  if (pthread_create(&pf->thread, NULL, helper_main, pf)) {
    pthread_cond_destroy(&pf->cv);
    pthread_mutex_destroy(&pf->mu);
    goto fail;
  }
  h->prefault = pf;
  return pf;
fail:
  hl__sys_free(pf);
  return NULL;
}

bool hl__prefault_take(hl_heap *h, uint32_t c) {
  HL_ASSERT_LOCKED(h);
  hl_prefault *pf = h->prefault;
  if (!pf || c < pf->first) return false;
  bool dropped = false, done = false;
  pthread_mutex_lock(&pf->mu);
  uint8_t *st = c < pf->end ? &pf->state[c - pf->first] : NULL;
  if (st && *st == BUSY) {
    /* the helper is faulting it in: wait for it, the heap lock dropped
     * (another thread that carves meanwhile comes here too) */
    pthread_mutex_unlock(&pf->mu);
    dropped = hl__drop_lock(h);
    uint64_t t0 = hl__prim_now_ns();
    pthread_mutex_lock(&pf->mu);
    while (*st == BUSY) prim_cond_wait(&pf->cv, &pf->mu);
    pf->waits++;
    pf->wait_ns += hl__prim_now_ns() - t0;
  }
  if (st) {
    done = *st == DONE;
    if (*st == FREE) {
      *st = OWN; /* the allocation's own: the helper skips it */
      pf->unclaimed--;
    }
  }
  if (c > pf->cursor) pf->cursor = c;
  pthread_cond_broadcast(&pf->cv);
  pthread_mutex_unlock(&pf->mu);
  hl__retake_lock(h, dropped);
  return done;
}

void hl__prefault_stop(hl_heap *h, hl_prefault *pf) {
  HL_ASSERT_LOCKED(h);
  if (!pf) return;
  /* The heap lock stays held: no page is carved while the helper finishes
   * its last call, so the chunks beyond high_water below are still fresh. */
  pthread_mutex_lock(&pf->mu);
  pf->stop = true;
  pthread_cond_broadcast(&pf->cv);
  pthread_mutex_unlock(&pf->mu);
  prim_join(pf->thread);
  h->prefault = NULL;
  h->tally.thp_prefault_chunks += pf->chunks;
  h->tally.thp_prefault_waits += pf->waits;
  h->tally.thp_prefault_wait_ns += pf->wait_ns;
  if (pf->err) {
    h->tally.thp_populate_refused++;
    h->tally.thp_errno = (uint64_t)pf->err;
    /* refused for good (a kernel before 5.14, or one that forbids it): no
     * later phase starts a helper to be refused again, thp=madvise too
     * (populate_chunk's own refusal says the same for thp=populate) */
    if (hl__refused_for_good(pf->err)) h->populate_off = true;
  }
  /* faulted in by the helper, no page carved: given back, a call per run
   * of such chunks (chunks the allocation claimed are below high_water's
   * chunk, or it faulted them in itself) */
  uint32_t per = 1u << h->chunk_shift;
  uint64_t lo = ((uint64_t)h->high_water + per - 1) >> h->chunk_shift;
  if (lo < pf->first) lo = pf->first;
  for (uint64_t c = lo; c < pf->end;) {
    if (pf->state[c - pf->first] != DONE) {
      c++;
      continue;
    }
    uint64_t run = c;
    while (c < pf->end && pf->state[c - pf->first] == DONE) c++;
    prim_result r = hl__prim_call(&h->prim, HL_SITE_release, pf->base + run * PRIM_HUGE_BYTES,
                              (c - run) * PRIM_HUGE_BYTES, PRIM_DONTNEED);
    if (!r.err) {
      h->tally.thp_prefault_unused += c - run;
    } else {
      /* refused: later trims try again (hl__prefault_retry) -- left, the
       * chunks stayed resident for the heap's life, where resident_bytes
       * does not look (4-6 MiB after an interrupted fill: the release
       * hunt, session 25) */
      if (h->thp_unused_lo == h->thp_unused_hi || run < h->thp_unused_lo)
        h->thp_unused_lo = (uint32_t)run;
      if (c > h->thp_unused_hi) h->thp_unused_hi = (uint32_t)c;
    }
  }
  pthread_cond_destroy(&pf->cv);
  pthread_mutex_destroy(&pf->mu);
  hl__sys_free(pf);
}

/* A trim's retry of the helper's unused chunks whose give-back was refused:
 * those still above every carved page, with one call.  Lock held (no page
 * is carved meanwhile).  True when the call was refused again: the trims
 * back off (release.c), or every trim paid the retry budget, 100 ms, with
 * the lock held (the review, session 25: 4 s of 4 stalled). */
bool hl__prefault_retry(hl_heap *h) {
  HL_ASSERT_LOCKED(h);
  uint64_t lo = h->thp_unused_lo, hi = h->thp_unused_hi;
  uint64_t carved = ((uint64_t)h->high_water + (1u << h->chunk_shift) - 1) >> h->chunk_shift;
  if (lo < carved) lo = carved; /* (pages carved there since: theirs now) */
  if (h->prefault) return false; /* (a helper at work: its stop gives back) */
  if (lo >= hi) {
    h->thp_unused_lo = h->thp_unused_hi = 0;
    return false;
  }
  prim_result r = hl__prim_call(&h->prim, HL_SITE_release, h->base + lo * PRIM_HUGE_BYTES,
                            (hi - lo) * PRIM_HUGE_BYTES, PRIM_DONTNEED);
  h->tally.release_calls++;
  if (r.err) return true;
  h->tally.thp_prefault_unused += hi - lo;
  h->thp_unused_lo = h->thp_unused_hi = 0;
  if (h->thp_ready_chunk >= lo && h->thp_ready_chunk < hi) h->thp_ready_chunk = UINT32_MAX;
  return false;
}

uint64_t hl__prefault_reach(const hl_heap *h) {
  return h->prefault ? (uint64_t)h->prefault->end * PRIM_HUGE_BYTES : 0;
}
