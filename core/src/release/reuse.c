/*
 * reuse.c -- the other half of release: which empty page an allocation gets,
 * and restoring a released page before it is used again.
 *
 *   acquire  a warm free page first (its released OS pages restored first,
 *            subpage_release); else a released one (restored BEFORE it
 *            is formatted; at most reuse_attempts tries, a page whose restore
 *            fails is parked in the reuse-failed pool); else a fresh page.
 *   restore  on Linux a page released with MADV_DONTNEED or MADV_FREE needs
 *            no call; the restore *site* still runs (and with dump_toggle
 *            issues MADV_DODUMP) so that an injected failure takes exactly the
 *            path a real Darwin MADV_FREE_REUSE failure would.
 *   populate a bulk phase (fill) writes every byte of a page it takes: fault
 *            it in with one call instead of one fault per OS page.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "../internal.h"

/* A restore or populate that gave up (EAGAIN past syscall_retry_max: at
 * vm.max_map_count with dump_toggle, MADV_DODUMP says it every time) cost
 * the retry budget -- 100 ms by default -- and the next page's call would
 * pay it again: every page a fill took cost up to 4 of them (a 1 MiB fill
 * 14 s, a Lua script 252 s: the release hunt, session 25).  After one, the
 * calls wait (hl_backoff), as the trims do; a skipped call is counted. */
static bool backing_off(hl_heap *h, const hl_backoff *b) {
  if (!hl__backoff_waiting(b)) return false;
  h->tally.reuse_backoffs++;
  return true;
}

/* Fault page p in with one call (a bulk phase only).  Outside the lock (the
 * page is in flight) unless the thread holds the heap; a failure only means
 * the page faults in the ordinary way (a refusal for good: every later page
 * too -- it was asked again for each, 181 failing calls in two fills of
 * 10 MiB; tests/c/populate_refused_for_good_is_asked_once.c).  Returns 1
 * when it took. */
static int populate(hl_heap *h, uint32_t p) {
  if (!h->bulk || h->populate_off) return 0;
  if (backing_off(h, &h->populate_backoff)) return 0;
  bool dropped = hl__drop_lock(h);
  prim_result r = hl__prim_call(&h->prim, HL_SITE_populate, hl__page_addr(h, p), h->page_size,
                            PRIM_POPULATE);
  hl__retake_lock(h, dropped);
  if (!r.err) h->tally.populated_pages++;
  else if (hl__refused_for_good(r.err)) h->populate_off = true;
  hl__backoff_step(&h->populate_backoff, r.gave_up);
  return !r.err;
}

/* thp=populate: the first page carved of a 2 MiB chunk faults the whole
 * chunk in with one MADV_POPULATE_WRITE, so the kernel backs it with a huge
 * page at once (thp=madvise: at the first touch, a fault).  A refusal is
 * recorded (thp_populate_refused, thp_errno) and the chunk faults in at
 * first touch as with madvise; a kernel without the advice (EINVAL before
 * Linux 5.14) or one that forbids it is not asked again.  Returns 1 when it
 * took. */
static int populate_chunk(hl_heap *h, uint32_t p) {
  if (h->opt.thp != HL_THP_POPULATE || !h->tally.thp_enabled || h->populate_off) return 0;
  if (backing_off(h, &h->populate_backoff)) return 0;
  bool dropped = hl__drop_lock(h);
  prim_result r = hl__prim_call(&h->prim, HL_SITE_populate, hl__page_addr(h, p), PRIM_HUGE_BYTES,
                            PRIM_POPULATE);
  hl__retake_lock(h, dropped);
  hl__backoff_step(&h->populate_backoff, r.gave_up);
  if (!r.err) {
    h->tally.thp_populated_chunks++;
    /* and the chunk's side-table bits, which format is about to write: one
     * call instead of 8 faults of 4 KiB (850 for a 192 MiB fill); a
     * failure only means they fault in as before */
    uint8_t *bits;
    size_t len;
    hl__chunk_bits(h, p >> h->chunk_shift, &bits, &len);
    if (len) {
      dropped = hl__drop_lock(h);
      hl__prim_call(&h->prim, HL_SITE_populate, bits, len, PRIM_POPULATE);
      hl__retake_lock(h, dropped);
    }
    return 1;
  }
  h->tally.thp_populate_refused++;
  h->tally.thp_errno = (uint64_t)r.err;
  if (hl__refused_for_good(r.err)) h->populate_off = true;
  return 0;
}

/* A fresh page p: fault it in ahead of its first writes where that pays.
 * With huge pages on, the chunk's first page is where the kernel backs the
 * whole chunk (populate: one call over 2 MiB; madvise: a bulk phase's
 * populate of that page faults the huge page), so its other pages need no
 * call of their own once that took. */
static void populate_fresh(hl_heap *h, uint32_t p) {
  if (!h->chunk || !h->tally.thp_enabled) {
    populate(h, p);
    return;
  }
  uint32_t c = p >> h->chunk_shift;
  if ((p & ((1u << h->chunk_shift) - 1)) == 0) {
    /* thp_prefault: the helper may have faulted it in already */
    if (hl__prefault_take(h, c) || populate_chunk(h, p) || populate(h, p)) h->thp_ready_chunk = c;
  } else if (h->thp_ready_chunk != c) {
    populate(h, p);
  }
}

/* Restore page p (in flight) before it is formatted.  0 or errno; *gave_up:
 * the call gave up (EAGAIN past the retry budget). */
static int restore_page(hl_heap *h, uint32_t p, bool *gave_up) {
  hl_page *d = &h->pages[p];
  uint8_t *addr = hl__page_addr(h, p);
  bool dump = (d->flags & PF_DUMP_OFF) != 0;
  bool dropped = (dump || hl__prim_os_op_is_syscall(PRIM_RESTORE)) && hl__drop_lock(h);
  prim_result r = hl__prim_call(&h->prim, HL_SITE_restore, addr, h->page_size, PRIM_RESTORE);
  int site = HL_SITE_restore;
  if (!r.err && dump) {
    r = hl__prim_call(&h->prim, HL_SITE_dump, addr, h->page_size, PRIM_DODUMP);
    site = HL_SITE_dump;
  }
  hl__retake_lock(h, dropped);
  h->tally.restore_calls++;
  *gave_up = r.gave_up;
  if (r.err) {
    h->tally.restore_failed_pages++;
    h->last_restore_err = r.err;
    hl__event(h, HL_EV_restore_failed, 3, (int64_t)p, (int64_t)r.err,
              (int64_t)h->opt.reuse_failed_order);
    if (r.gave_up)
      hl__event(h, HL_EV_syscall_gave_up, 4, (int64_t)site, (int64_t)r.err, (int64_t)r.retries,
                (int64_t)p);
    return r.err;
  }
  d->release = RK_NONE;
  d->flags &= (uint8_t)~PF_DUMP_OFF;
  return 0;
}

/* A page carved from the reservation, formatted; HL_NIL when none. */
static uint32_t fresh_page(hl_heap *h, uint32_t cls) {
  uint32_t p = hl__page_carve(h);
  if (p == HL_NIL) return HL_NIL;
  populate_fresh(h, p);
  hl__page_format(h, p, cls);
  h->tally.fresh_pages++;
  h->taken_since_trim++;
  return p;
}

/* verify, collected mode: an empty page about to be formatted again still
 * holds only its poison (or zeros where it was released): its format would
 * wipe what a write after free left.  Reported, counted; the allocation
 * goes on. */
static void verify_empty(hl_heap *h, uint32_t p, const char *what) {
  if (!h->opt.verify || h->opt.mode != HL_MODE_COLLECTED) return;
  uint64_t off = hl__free_page_written(h, p, false);
  if (off == UINT64_MAX) return;
  char msg[256];
  hl__free_page_describe(h, p, off, what, msg, sizeof msg);
  hl__verify_failed(h, (uint64_t)(uintptr_t)(hl__page_addr(h, p) + off), msg);
}

uint32_t hl__acquire_page(hl_heap *h, uint32_t cls) {
  HL_ASSERT_LOCKED(h);
  uint32_t p = h->free_pool.head;
  if (p != HL_NIL) {
    hl__page_to_state(h, p, PS_IN_FLIGHT, false);
    /* A page emptied with some OS pages out (subpage_release) is restored
     * before it is formatted, like a released page; one that will not come
     * back waits at the cold end of the free pool (a trim releases it whole,
     * which needs no restore of the parts), and the released pools or a
     * fresh page serve instead. */
    if (h->sub_pages && !hl__sub_restore(h, p, 0, h->page_size)) {
      hl__page_to_state(h, p, PS_FREE, false); /* (drops SUB_FAILED: not partial) */
    } else {
      verify_empty(h, p, "free, taken again");
      hl__page_format(h, p, cls);
      h->tally.warm_reused_pages++;
      h->taken_since_trim++;
      return p;
    }
  }
  /* while restores back off, a fresh page if there is one (else the
   * released pools after all) */
  bool fresh_first = (h->released_pool.count || h->reuse_failed.count) &&
                     h->high_water < h->npages_max &&
                     backing_off(h, &h->restore_backoff);
  if (fresh_first && (p = fresh_page(h, cls)) != HL_NIL) return p;
  for (int64_t attempt = 0; attempt < h->opt.reuse_attempts; attempt++) {
    p = h->released_pool.head;
    if (p == HL_NIL) p = h->reuse_failed.head;
    if (p == HL_NIL) break;
    hl__page_to_state(h, p, PS_IN_FLIGHT, false);
    /* restore_before_format=0 is the seed's defect: format writes into a
     * range the kernel still considers released. */
    if (!h->opt.restore_before_format) hl__page_format(h, p, cls);
    bool gave_up = false;
    int rc = restore_page(h, p, &gave_up);
    hl__backoff_step(&h->restore_backoff, gave_up);
    if (rc == 0) {
      populate(h, p);
      if (h->opt.restore_before_format) verify_empty(h, p, "released, taken again");
      if (h->opt.restore_before_format) hl__page_format(h, p, cls);
      h->tally.reused_pages++;
      h->taken_since_trim++;
      return p;
    }
    /* Park the page.  fifo: at the tail of the reuse-failed pool, so the next
     * try reaches a different page.  lifo: back at the head of the pool it
     * came from -- the seed's defect, where the next try pops the same bad
     * page and one page hides the whole pool. */
    if (h->opt.reuse_failed_order == HL_ORDER_FIFO)
      hl__page_to_state(h, p, PS_REUSE_FAILED, false);
    else
      hl__page_to_state(h, p, PS_RELEASED, true);
    if (gave_up && !fresh_first) break; /* (the next one would wait as long) */
  }
  return fresh_first ? HL_NIL : fresh_page(h, cls);
}

void hl__fail_no_page(hl_heap *h, const char *what) {
  HL_ASSERT_LOCKED(h);
  uint64_t parked = h->released_pool.count + h->reuse_failed.count;
#ifdef HL_PRELOAD
  if (h->lock_err && h->high_water < h->npages_max) {
    hl__fail(h, HL_ENOMEM, "%s: the next page of the reservation could not be locked "
             "(the program's mlockall(MCL_FUTURE): %s)", what, hl__strerror(h->lock_err));
    h->lock_err = 0;
    return;
  }
#endif
  if (parked && h->last_restore_err)
    hl__fail(h, HL_ENOMEM,
             "%s: no page to take: the reservation of %" PRIu64 " bytes is used up; %" PRIu64
             " released pages are left and their restores fail (the last: %s)",
             what, h->reserved, parked, hl__strerror(h->last_restore_err));
  else
    hl__fail(h, HL_ENOMEM, "%s: the reservation of %" PRIu64 " bytes is exhausted (reserve_bytes)",
             what, h->reserved);
}
