/*
 * release.c -- returning memory to the OS (seed 000, every review round):
 *
 *   trim     at the end of each sweep, empty pages beyond the warm cache are
 *            unlinked under the lock, advised OUTSIDE it -- one call per
 *            contiguous run, not one per page -- and the results published
 *            under it.  A refused release is never recorded as released: the
 *            page goes back to the free pool and a later trim retries it.
 *   fallback when the primary advice is refused, the fallback advice (Linux
 *            MADV_FREE, which stays charged) is tried and the page is
 *            recorded as such ...
 *   upgrade  ... and retried with the primary advice on later trims, at most
 *            upgrade_per_sweep ATTEMPTS per trim; walking past pages already
 *            upgraded costs nothing (upgrade_budget_counts=scanned is the
 *            seed's stalling defect).
 *
 * Reuse -- which page an allocation gets, and the restore before it is
 * formatted -- is the other half, in reuse.c.
 */
#include <errno.h>
#include <stdlib.h>

#include "../internal.h"

enum { OUT_REJECTED = 0, OUT_PRIMARY = RK_PRIMARY, OUT_FALLBACK = RK_FALLBACK };

static prim_op advice_op(int64_t advice) {
  return advice == HL_ADVICE_FREE ? PRIM_FREE : PRIM_DONTNEED;
}
static prim_op fallback_op(int64_t fb) {
  return fb == HL_FALLBACK_FREE ? PRIM_FREE : PRIM_DONTNEED;
}

/* Page and chunk numbers in ascending order, in place: a heapsort, which
 * allocates nothing.  glibc's qsort mallocs a buffer for more than 1 KiB of
 * elements, and in the preloaded library that malloc is the heap's own: the
 * whole-chunk plan sorts under the heap lock, and a malloc_trim of more than
 * 256 chunks (thp=madvise, a raised release_per_sweep, trims backed off by
 * refused releases) hung in its own malloc (session 42). */
static void sift_u32(uint32_t *a, size_t root, size_t n) {
  uint32_t v = a[root];
  for (size_t child; (child = 2 * root + 1) < n; root = child) {
    if (child + 1 < n && a[child + 1] > a[child]) child++;
    if (a[child] <= v) break;
    a[root] = a[child];
  }
  a[root] = v;
}
static void sort_u32(uint32_t *a, size_t n) {
  for (size_t i = n / 2; i-- > 0;) sift_u32(a, i, n);
  for (size_t end = n; end > 1;) {
    end--;
    uint32_t t = a[0];
    a[0] = a[end];
    a[end] = t;
    sift_u32(a, 0, end);
  }
}

typedef struct trim_tally {
  uint64_t calls, released, rejected, fallback, upgraded, upgrade_attempts, upgrade_calls;
  hl_gave_up gu;
} trim_tally;

void hl__gave_up_note(hl_gave_up *g, int site, prim_result r, uint64_t page) {
  if (!r.gave_up || g->any) return;
  *g = (hl_gave_up){.any = true, .site = site, .err = r.err, .retries = r.retries, .page = page};
}

void hl__gave_up_event(hl_heap *h, const hl_gave_up *g) {
  if (g->any)
    hl__event(h, HL_EV_syscall_gave_up, 4, (int64_t)g->site, (int64_t)g->err,
              (int64_t)g->retries, (int64_t)g->page);
}

/* The mark and allocation bits of released pages are not read again until
 * the page is formatted, so the OS pages of the side table that cover only
 * released pages go back too (1.6% of a 64 KiB page otherwise stays).  A
 * failure here is harmless: the bits just stay resident. */
static void release_bitmap(hl_heap *h, const uint64_t *from, uint32_t n) {
  size_t os = hl__prim_os_page_size();
  uintptr_t lo = (uintptr_t)from;
  uintptr_t hi = lo + (size_t)n * h->bits_stride * sizeof(uint64_t);
  lo = (lo + os - 1) / os * os;
  hi = hi / os * os;
  if (hi > lo) hl__prim_call(&h->prim, HL_SITE_meta, (void *)lo, hi - lo, PRIM_DONTNEED);
}
static void release_bits(hl_heap *h, uint32_t first, uint32_t n) {
#ifdef HL_PRELOAD
  /* (the pages' allocation bits are regions of the pool, kept with each
   * page for its next format: a few words, not a page's worth) */
  (void)release_bitmap;
  (void)h;
  (void)first;
  (void)n;
  return;
#endif
  /* a collected heap: marks and allocation bits interleaved, one run from
   * the first page's marks; a manual heap's marks were never touched */
  release_bitmap(h, h->opt.mode == HL_MODE_MANUAL ? hl__allocs(h, first) : hl__marks(h, first), n);
}

/* Release the run [first, first+n) (no lock held).  Returns the outcome. */
static int release_run(hl_heap *h, uint32_t first, uint32_t n, trim_tally *t) {
  uint8_t *addr = hl__page_addr(h, first);
  size_t len = (size_t)n << h->page_shift;
  int out = OUT_REJECTED;
  prim_result r = hl__prim_call(&h->prim, HL_SITE_release, addr, len, advice_op(h->opt.release_advice));
  t->calls++;
  if (!r.err) {
    out = OUT_PRIMARY;
  } else if (r.gave_up) {
    hl__gave_up_note(&t->gu, HL_SITE_release, r, first);
  } else if (h->opt.fallback_advice != HL_FALLBACK_NONE) {
    r = hl__prim_call(&h->prim, HL_SITE_fallback, addr, len, fallback_op(h->opt.fallback_advice));
    t->calls++;
    if (!r.err) out = OUT_FALLBACK;
    else hl__gave_up_note(&t->gu, HL_SITE_fallback, r, first);
  }
  if (out != OUT_REJECTED && h->opt.dump_toggle) {
    /* bmalloc's pairing: exclude the released range from core dumps.  On a
     * sub-range this splits the VMA; at vm.max_map_count it fails with
     * EAGAIN every time (seed 001).  Not recorded as released unless it took. */
    r = hl__prim_call(&h->prim, HL_SITE_dump, addr, len, PRIM_DONTDUMP);
    if (r.err) {
      out = OUT_REJECTED;
      hl__gave_up_note(&t->gu, HL_SITE_dump, r, first);
    } else {
      for (uint32_t i = 0; i < n; i++) h->pages[first + i].flags |= PF_DUMP_OFF;
    }
  }
  /* record_refused_release=1: the seed's defect -- the result of the advice
   * was ignored and every page filed as released. */
  if (out != OUT_REJECTED) release_bits(h, first, n);
  else if (h->opt.record_refused_release) out = OUT_PRIMARY;
  return out;
}

/* End of the contiguous run of sorted pages starting at i. */
static uint64_t run_end(const uint32_t *pages, uint64_t n, uint64_t i) {
  uint64_t j = i + 1;
  while (j < n && pages[j] == pages[j - 1] + 1) j++;
  return j;
}

/* How many empty pages this trim keeps resident.  warm_pages always; and
 * while the mutator is allocating (it took pages since the last trim), as
 * many as it took in the last warm_demand_trims intervals together:
 * releasing those would only have the next cycle fault them back in
 * (binary-trees released and refaulted 4 GiB at depth 20, page release on/off
 * 1.22x; a sum, not the largest interval, because a cycle triggered in the
 * middle of a phase splits its demand over two intervals).  An
 * interval in which nothing was taken ends the window at once, so a quiet
 * heap -- a burst that died, an explicit collect -- still goes down to
 * warm_pages at the next trim.  This is the decay jemalloc and mimalloc use
 * for their purge, counted in trims instead of milliseconds. */
static uint64_t warm_target(hl_heap *h) {
  uint64_t n = (uint64_t)h->opt.warm_demand_trims;
  uint64_t taken = h->taken_since_trim;
  h->taken_since_trim = 0;
  for (uint64_t i = n; i-- > 1;) h->demand[i] = h->demand[i - 1];
  h->demand[0] = taken;
  uint64_t warm = (uint64_t)h->opt.warm_pages;
  if (n == 0 || taken == 0) {
    memset(h->demand, 0, sizeof h->demand); /* quiet: the window closes */
    return warm;
  }
  uint64_t recent = 0;
  for (uint64_t i = 0; i < n; i++) recent += h->demand[i];
  return recent > warm ? recent : warm;
}

/* ---- huge pages (thp) ----
 * With thp on, the kernel may back each 2 MiB chunk of the reservation with
 * one huge page.  Releasing part of one splits it: the process's RSS drops
 * by what was released, but the machine gets that memory back only when
 * the kernel's deferred split runs (under memory pressure), and khugepaged
 * may fill the chunk again later.  So a trim releases whole chunks first --
 * chunks whose every page is carved and free or already released, coldest
 * first -- with one call over each run of whole chunks (2 MiB at a time:
 * the released pages of the chunk are covered too, since a touch of a chunk
 * whose pages were all released faults a whole huge page back in, and
 * khugepaged may have collapsed the chunk again), and only then single
 * pages from the free pool's cold end, as without thp; a chunk that may have
 * been a huge page and is released in part is a split, counted
 * (thp_splits) and told (event thp_split) -- also when the part is OS pages
 * inside a page that stays (subpage.c: releasing 4 KiB of a huge page
 * splits it just the same). */

typedef struct whole_chunks {
  uint32_t *chunks;  /* first pages of the whole chunks, sorted */
  uint8_t *outcome;  /* per chunk */
  uint32_t *held;    /* their released pages, in flight for the call */
  uint64_t nc, nheld;
} whole_chunks;

/* Is the chunk at c0 whole: every page carved, free or released, and no
 * free page carrying a stale release kind (init_page_state=0's defect keeps
 * its own path: the single-page pass files such a page without a call)? */
static bool chunk_whole(const hl_heap *h, uint32_t c0, uint32_t per, uint32_t *nfree) {
  *nfree = 0;
  if ((uint64_t)c0 + per > h->high_water) return false;
  for (uint32_t q = c0; q < c0 + per; q++) {
    const hl_page *d = &h->pages[q];
    if (d->state == PS_FREE && d->release == RK_NONE) ++*nfree;
    else if (!hl__released_state(d->state)) return false;
  }
  return true;
}

#define CH_SEEN 0x80 /* (during pick_chunks only) */

/* Move the free pages of whole chunks, coldest first, to in flight into
 * rel, and their released pages to in flight into w->held.  Returns how
 * many pages went into rel: a whole chunk is taken while fewer than take
 * pages are, even when its free pages go past take -- at most to `most`
 * (release_per_sweep) -- because taking only part of it would split its
 * huge page.  So a trim takes less than a chunk past take (it eats into the
 * warm cache by that much): a manual heap's trim takes about 17 pages of
 * 64 KiB, and a chunk whose 32 were free was split every time
 * (tests/c/manual_trim_gives_whole_chunks_back.c). */
static uint64_t pick_chunks(hl_heap *h, uint32_t *rel, uint64_t take, uint64_t most,
                            whole_chunks *w) {
  uint32_t per = 1u << h->chunk_shift;
  uint64_t n = 0, nc = 0;
  /* which chunks: rel holds their first pages until they are taken (a
   * chunk chosen has a free page, so there are at most take of them) */
  for (uint32_t p = h->free_pool.tail; p != HL_NIL && n < take; p = h->pages[p].prev) {
    uint32_t c = p >> h->chunk_shift, nfree;
    if (h->chunk[c] & CH_SEEN) continue;
    h->chunk[c] |= CH_SEEN;
    if (chunk_whole(h, c << h->chunk_shift, per, &nfree) && nfree && n + nfree <= most) {
      rel[nc++] = c << h->chunk_shift;
      n += nfree;
    }
  }
  for (uint32_t p = h->free_pool.tail; p != HL_NIL; p = h->pages[p].prev)
    h->chunk[p >> h->chunk_shift] &= (uint8_t)~CH_SEEN;
  if (nc == 0) return 0;
  uint64_t nheld = nc * per - n;
  w->chunks = hl__sys_malloc(nc * sizeof *w->chunks);
  w->outcome = hl__sys_malloc(nc);
  w->held = hl__sys_malloc((nheld ? nheld : 1) * sizeof *w->held);
  if (!w->chunks || !w->outcome || !w->held) {
    hl__sys_free(w->chunks);
    hl__sys_free(w->outcome);
    hl__sys_free(w->held);
    *w = (whole_chunks){0};
    return 0; /* single pages only, this time */
  }
  memcpy(w->chunks, rel, nc * sizeof *rel);
  sort_u32(w->chunks, nc);
  w->nc = nc;
  uint64_t k = 0;
  for (uint64_t i = 0; i < nc; i++) {
    for (uint32_t q = w->chunks[i]; q < w->chunks[i] + per; q++) {
      hl_page *d = &h->pages[q];
      if (d->state == PS_FREE) {
        hl__page_to_state(h, q, PS_IN_FLIGHT, false);
        rel[k++] = q;
      } else {
        /* released: in flight too, so no allocation restores it while the
         * call over its chunk runs; PF_PARKED remembers the reuse-failed
         * pool (as for the upgrade candidates) */
        if (d->state == PS_REUSE_FAILED) d->flags |= PF_PARKED;
        hl__page_to_state(h, q, PS_IN_FLIGHT, false);
        w->held[w->nheld++] = q;
      }
    }
  }
  return n;
}

/* The held released pages go back where they came from, at the tail. */
static void unhold(hl_heap *h, whole_chunks *w) {
  for (uint64_t i = 0; i < w->nheld; i++) {
    uint32_t q = w->held[i];
    bool parked = h->pages[q].flags & PF_PARKED;
    h->pages[q].flags &= (uint8_t)~PF_PARKED;
    hl__page_to_state(h, q, parked ? PS_REUSE_FAILED : PS_RELEASED, false);
  }
  hl__sys_free(w->chunks);
  hl__sys_free(w->outcome);
  hl__sys_free(w->held);
  *w = (whole_chunks){0};
}

/* Release the whole chunks: one call per run of adjacent chunks (no lock
 * held), the outcome per chunk, and per page of rel[0, nw) (sorted). */
static void release_chunks(hl_heap *h, whole_chunks *w, const uint32_t *rel, uint64_t nw,
                           uint8_t *outcome, trim_tally *t) {
  uint32_t per = 1u << h->chunk_shift;
  for (uint64_t i = 0, j; i < w->nc; i = j) {
    for (j = i + 1; j < w->nc && w->chunks[j] == w->chunks[j - 1] + per; j++) {
    }
    int out = t->gu.any ? OUT_REJECTED
                         : release_run(h, w->chunks[i], (uint32_t)((j - i) * per), t);
    memset(w->outcome + i, out, j - i);
  }
  for (uint64_t i = 0, c = 0; i < nw; i++) {
    while (w->chunks[c] + per <= rel[i]) c++;
    outcome[i] = w->outcome[c];
  }
}

/* After a trim's release (lock held): whole chunks released are empty; a
 * chunk that may have been one huge page and had single pages released is
 * split.  rel[nw, nr) sorted, outcome per page. */
static void chunks_after_release(hl_heap *h, whole_chunks *w, const uint32_t *rel,
                                 const uint8_t *outcome, uint64_t nw, uint64_t nr,
                                 uint64_t *upgraded, uint64_t *fallback) {
  uint32_t per = 1u << h->chunk_shift;
  for (uint64_t i = 0; i < w->nc; i++) {
    if (w->outcome[i] == OUT_REJECTED) continue;
    h->tally.thp_chunks_released++;
    h->chunk[w->chunks[i] >> h->chunk_shift] = CH_EMPTY;
  }
  /* the held pages were covered by their chunk's call: a fallback page
   * released again with the primary advice is upgraded -- and a primary
   * one covered by the fallback advice is a fallback page now.  (It may be
   * resident: a reuse of another page of the chunk faulted the whole huge
   * page back in.  Left filed as primary, the fallback's lazily freed pages
   * stayed charged for good, never an upgrade candidate: 1.9 MiB of
   * LazyFree per chunk.) */
  for (uint64_t i = 0, c = 0; i < w->nheld; i++) {
    uint32_t q = w->held[i];
    while (w->chunks[c] + per <= q) c++;
    hl_page *d = &h->pages[q];
    /* (in flight: fallback_count is not counting them) */
    if (w->outcome[c] == OUT_PRIMARY && d->release == RK_FALLBACK) {
      d->release = RK_PRIMARY;
      ++*upgraded;
    } else if (w->outcome[c] == OUT_FALLBACK && d->release == RK_PRIMARY) {
      d->release = RK_FALLBACK;
      ++*fallback;
    }
  }
  for (uint64_t i = nw, j; i < nr; i = j) {
    uint32_t c = rel[i] >> h->chunk_shift;
    uint64_t released = 0;
    for (j = i; j < nr && rel[j] >> h->chunk_shift == c; j++) released += outcome[j] != 0;
    if (released) hl__chunk_released_in_part(h, c, released, released << h->page_shift, false);
  }
}

/* The last, partly carved chunk c is split: the huge page covered its
 * uncarved rest too, which stays resident, for nothing, until pages are
 * carved there -- for the heap's life when they never are (1.5 MiB of a
 * heap whose 4.5 MiB fill was dropped).  Split, it costs no huge page:
 * given back with one call, the lock held (a carve would race with the
 * call).  A refused call is tried again by later trims, while c is still
 * the last chunk and not a huge page again. */
static bool release_tail(hl_heap *h, uint32_t c) {
  HL_ASSERT_LOCKED(h);
  uint64_t c0 = (uint64_t)c << h->chunk_shift, end = c0 + (1u << h->chunk_shift);
  if (end > h->npages_max) end = h->npages_max;
  if (h->chunk[c] == CH_HUGE || !(c0 < h->high_water && h->high_water < end)) {
    if (h->thp_tail_chunk == c) h->thp_tail_chunk = UINT32_MAX; /* nothing to retry */
    return false;
  }
  prim_result r = hl__prim_call(&h->prim, HL_SITE_release, hl__page_addr(h, h->high_water),
                            (size_t)(end - h->high_water) << h->page_shift,
                            advice_op(h->opt.release_advice));
  h->tally.release_calls++;
  h->thp_tail_chunk = r.err ? c : UINT32_MAX;
  /* its next fresh pages fault in one by one again: a fill populates them */
  if (h->thp_ready_chunk == c) h->thp_ready_chunk = UINT32_MAX;
  return r.err != 0;
}

void hl__chunk_released_in_part(hl_heap *h, uint32_t c, uint64_t released_pages,
                                uint64_t released_bytes, bool subpage) {
  HL_ASSERT_LOCKED(h);
  uint32_t per = 1u << h->chunk_shift, in_use = 0, c0 = c << h->chunk_shift;
  for (uint32_t q = c0; q < c0 + per && q < h->high_water; q++)
    in_use += !hl__released_state(h->pages[q].state);
  if (h->chunk[c] == CH_HUGE) {
    h->chunk[c] = CH_SPLIT;
    h->tally.thp_splits++;
    if (subpage) h->tally.thp_subpage_splits++;
    hl__event(h, HL_EV_thp_split, 4, (int64_t)c0, (int64_t)released_pages, (int64_t)in_use,
              (int64_t)released_bytes);
    release_tail(h, c);
  }
  /* every page released: no huge page there now, a touch may fault one */
  if (in_use == 0) h->chunk[c] = CH_EMPTY;
}

/* Backing off (seed 001's other half).  A call that gives up after its
 * bounded retries ends its trim, but the next trim would try again, and a
 * condition that does not clear (the map limit, a refusal that is not
 * transient) then costs every trim its whole retry budget -- 513 trims of
 * 100 retries of 1 ms made a 20 ms Lua script take 56 s.  So after a trim
 * gives up -- or releases nothing because every run was refused, primary
 * and fallback advice alike (trim_pages) -- the trims that are not asked for (allocation-driven cycles, the
 * manual mode's) wait: 100 ms, doubling after each trim that gives up again,
 * at most 10 s; a trim that does not give up ends the wait.  Stalled time
 * is then at most one retry budget per doubling (a 1% share of the time
 * once at the 10 s cap).  hl_trim and hl_collect are never skipped. */
#define BACKOFF_FIRST_NS 100000000ull
#define BACKOFF_MAX_NS 10000000000ull

void hl__backoff_step(hl_backoff *b, bool gave_up) {
  if (!gave_up) {
    b->ns = 0;
    return;
  }
  uint64_t ns = b->ns ? b->ns * 2 : BACKOFF_FIRST_NS;
  b->ns = ns < BACKOFF_MAX_NS ? ns : BACKOFF_MAX_NS;
  b->next_ns = hl__prim_now_ns() + b->ns;
}

static void backoff_update(hl_heap *h, bool gave_up) { hl__backoff_step(&h->trim_backoff, gave_up); }

/* Room for `words` uint32_t in h->scratch, the trims' lists and outcomes
 * (kept between trims, rewritten by each); false when refused.  In the
 * preloaded library a mapping of its own, as the large set's table
 * (util/ptrset.c): from glibc's heap (__libc_realloc), a scratch that grew
 * in a trim while the program's large blocks filled that heap was carved
 * above them -- and so was each trim's outcome array (malloc'd and freed,
 * parked in glibc's tcache) -- and kept them resident once the program
 * freed them (small blocks freed, then 4,000 blocks of 20,000 bytes: 80 MB
 * stayed; the real-programs hunt, session 45). */
static bool scratch_room(hl_heap *h, uint64_t words) {
  if (words <= h->scratch_cap) return true;
#ifdef HL_PRELOAD
  size_t ps = hl__prim_os_page_size();
  size_t bytes = (words * sizeof(uint32_t) + ps - 1) & ~(ps - 1);
  void *n = NULL;
  if (hl__prim_os_map(bytes, &n) != 0) return false;
  hl__release_scratch_free(h);
  h->scratch = n;
  h->scratch_cap = bytes / sizeof(uint32_t);
#else
  uint32_t *n = hl__sys_realloc(h->scratch, words * sizeof(uint32_t));
  if (!n) return false;
  h->scratch = n;
  h->scratch_cap = words;
#endif
  return true;
}

void hl__release_scratch_free(hl_heap *h) {
#ifdef HL_PRELOAD
  if (h->scratch) (void)hl__prim_os_unmap_or_drop(h->scratch, h->scratch_cap * sizeof(uint32_t));
#else
  hl__sys_free(h->scratch);
#endif
  h->scratch = NULL;
  h->scratch_cap = 0;
}

/* The whole pages of a trim: release `take` free pages from the cold end of
 * the free pool -- with thp, up to `most` when a whole chunk goes past take
 * (pick_chunks) -- and upgrade at most `budget` fallback pages.  Returns
 * whether a call gave up; *taken: the pages it took; *upgrade_used: the
 * upgrade budget it spent. */
static bool trim_pages(hl_heap *h, uint64_t take, uint64_t most, uint64_t budget,
                       uint64_t *taken, uint64_t *upgrade_used) {
  uint64_t budget0 = budget;
  *upgrade_used = 0;
  *taken = take;
  /* rel's room: take pages, and less than a chunk more when a whole chunk
   * goes past take (at most most) */
  uint64_t room = take;
  if (h->chunk && take) {
    room = take + (1u << h->chunk_shift) - 1;
    if (room > most) room = most;
  }
  uint64_t need = room + 2 * budget + (room + 3) / 4;
  if (!scratch_room(h, need)) return false; /* try again next trim */
  uint32_t *rel = h->scratch;             /* pages to release */
  uint32_t *upg = h->scratch + room;      /* upgrade candidates, list order */
  uint32_t *upg_sorted = upg + budget;    /* the same, by address */
  uint8_t *outcome = (uint8_t *)(upg_sorted + budget); /* each of rel's, room at most */
  uint64_t nr = 0, nu = 0, nw = 0;
  whole_chunks w = {0};

  /* The coldest pages: the free pool is pushed at its head when a page
   * empties, so its tail has been empty longest.  thp: whole chunks first
   * (rel[0, nw)). */
  if (h->chunk) nw = nr = pick_chunks(h, rel, take, most, &w);
  for (; nr < take; nr++) {
    uint32_t p = h->free_pool.tail;
    hl__page_to_state(h, p, PS_IN_FLIGHT, false);
    rel[nr] = p;
  }
  /* Fallback pages wait in the released pool, and in the reuse-failed pool
   * when a restore failed after they were released: both are walked, or the
   * latter would stay charged (MADV_FREE) for as long as restores fail. */
  hl_list *pools[2] = {&h->released_pool, &h->reuse_failed};
  for (int k = 0; k < 2 && budget && h->fallback_count; k++) {
    for (uint32_t p = pools[k]->head, next; p != HL_NIL && budget; p = next) {
      next = h->pages[p].next;
      bool fallback = h->pages[p].release == RK_FALLBACK;
      if (h->opt.upgrade_budget_counts == HL_BUDGET_SCANNED) budget--;
      if (!fallback) continue;
      if (h->opt.upgrade_budget_counts == HL_BUDGET_ATTEMPTS) budget--;
      if (k == 1) h->pages[p].flags |= PF_PARKED;
      hl__page_to_state(h, p, PS_IN_FLIGHT, false);
      upg[nu++] = p;
      if (h->fallback_count == 0) break; /* every fallback page is picked */
    }
  }
  *upgrade_used = budget0 - budget;
  *taken = nr;
  if (nr == 0 && nu == 0) return false;

  bool dropped = hl__drop_lock(h);
  uint64_t t0 = hl__prim_now_ns();
  trim_tally t = {0};

  sort_u32(rel, nw);
  if (nw) release_chunks(h, &w, rel, nw, outcome, &t);
  sort_u32(rel + nw, nr - nw);
  for (uint64_t i = nw, j; i < nr; i = j) {
    j = run_end(rel, nr, i);
    /* A page already carrying a release kind is filed as released without
     * a call.  Unreachable while format initialises the release state; with
     * init_page_state=0 this is the seed's defect (stale flag, no madvise). */
    uint64_t k = i;
    while (k < j) {
      if (h->pages[rel[k]].release != RK_NONE) {
        outcome[k] = h->pages[rel[k]].release == RK_FALLBACK ? OUT_FALLBACK : OUT_PRIMARY;
        k++;
        continue;
      }
      uint64_t e = k;
      while (e < j && h->pages[rel[e]].release == RK_NONE) e++;
      int out = t.gu.any ? OUT_REJECTED : release_run(h, rel[k], (uint32_t)(e - k), &t);
      memset(outcome + k, out, e - k);
      k = e;
    }
  }

  memcpy(upg_sorted, upg, nu * sizeof *upg);
  sort_u32(upg_sorted, nu);
  for (uint64_t i = 0, j; i < nu && !t.gu.any; i = j) {
    j = run_end(upg_sorted, nu, i);
    uint32_t n = (uint32_t)(j - i);
    t.upgrade_attempts += n;
    t.upgrade_calls++;
    prim_result r = hl__prim_call(&h->prim, HL_SITE_upgrade, hl__page_addr(h, upg_sorted[i]),
                              (size_t)n << h->page_shift, advice_op(h->opt.release_advice));
    if (!r.err) {
      for (uint64_t k = i; k < j; k++) h->pages[upg_sorted[k]].release = RK_PRIMARY;
      t.upgraded += n;
    } else {
      hl__gave_up_note(&t.gu, HL_SITE_upgrade, r, upg_sorted[i]);
    }
  }
  uint64_t dt = hl__prim_now_ns() - t0;
  hl__retake_lock(h, dropped);

  for (uint64_t i = 0; i < nr; i++) {
    uint32_t p = rel[i];
    if (outcome[i] == OUT_REJECTED) {
      /* Still a good empty page: allocatable, and retried by a later trim. */
      h->pages[p].flags &= (uint8_t)~PF_DUMP_OFF;
      hl__page_to_state(h, p, PS_FREE, false);
      t.rejected++;
    } else {
      h->pages[p].release = outcome[i];
      hl__sub_forget(h, p); /* the whole page is out now */
      hl__page_to_state(h, p, PS_RELEASED, false);
      t.released++;
      if (outcome[i] == OUT_FALLBACK) t.fallback++;
    }
  }
  if (h->chunk) {
    chunks_after_release(h, &w, rel, outcome, nw, nr, &t.upgraded, &t.fallback);
    unhold(h, &w);
  }
  /* Upgrade candidates go back where they came from in their list order:
   * the released pool's head (so its order is what it was: scanned mode
   * stalls on them), or the reuse-failed pool's tail. */
  for (uint64_t i = nu; i-- > 0;)
    if (!(h->pages[upg[i]].flags & PF_PARKED)) hl__page_to_state(h, upg[i], PS_RELEASED, true);
  for (uint64_t i = 0; i < nu; i++) {
    if (!(h->pages[upg[i]].flags & PF_PARKED)) continue;
    h->pages[upg[i]].flags &= (uint8_t)~PF_PARKED;
    hl__page_to_state(h, upg[i], PS_REUSE_FAILED, false);
  }

  h->tally.trims++;
  h->tally.trim_ns += dt;
  /* a trim whose every run was refused (primary and fallback: ENOMEM,
   * EINVAL -- madvise on mlock'ed pages -- anything that is not EAGAIN) backs
   * off too: the runs went back to the free pool, which stayed past the
   * threshold, and every later free re-ran the whole failing trim (a Python
   * program under the preload: 700x the trims, 7-24x slower) */
  backoff_update(h, t.gu.any || (t.released == 0 && t.rejected > 0));
  h->tally.release_calls += t.calls;
  h->tally.released_pages += t.released;
  h->tally.rejected_pages += t.rejected;
  h->tally.fallback_pages += t.fallback;
  h->tally.upgraded_pages += t.upgraded;
  h->tally.upgrade_attempts += t.upgrade_attempts;
  h->tally.upgrade_calls += t.upgrade_calls;
  hl__gave_up_event(h, &t.gu);
  hl__event(h, HL_EV_trim, 9, (int64_t)t.released, (int64_t)t.calls, (int64_t)t.rejected,
            (int64_t)t.fallback, (int64_t)t.upgraded, (int64_t)t.upgrade_attempts, (int64_t)dt,
            (int64_t)h->free_pool.count, (int64_t)t.gu.any);
  return t.gu.any != 0;
}

/* One trim pass down to `warm` free pages: at most release_per_sweep pages
 * released, whole and sub-page together.  Lock held and h->in_cycle set by
 * the caller.  Drops the lock around the syscalls unless the calling thread
 * holds the heap (hl_enter).  Whole pages first; then, with subpage_release,
 * the OS pages of partly live pages (subpage.c) with what is left of the
 * same budgets.  True when a call gave up (EAGAIN that did not clear). */
static bool trim_pass(hl_heap *h, bool forced, uint64_t warm) {
  uint64_t take = h->free_pool.count > warm ? h->free_pool.count - warm : 0;
  if (take > (uint64_t)h->opt.release_per_sweep) take = (uint64_t)h->opt.release_per_sweep;
  uint64_t budget = h->fallback_count ? (uint64_t)h->opt.upgrade_per_sweep : 0;
  uint64_t upgrade_used = 0, taken = 0;
  bool gave_up = (take || budget) && trim_pages(h, take, (uint64_t)h->opt.release_per_sweep,
                                                budget, &taken, &upgrade_used);
  /* the last chunk's rest, and the prefault helper's unused chunks, refused
   * before: tried again; refused again, the next try waits on a back-off of
   * their own, which a trim of pages does not end (an asked-for trim tries
   * at once).  Without it every trim paid the retry budget, 100 ms, the lock
   * held: 4 s of 4 stalled (the review, session 25). */
  bool leftovers = (h->chunk && h->thp_tail_chunk != UINT32_MAX) ||
                   h->thp_unused_lo != h->thp_unused_hi;
  if (leftovers && !gave_up && (forced || !hl__backoff_waiting(&h->leftover_backoff))) {
    bool refused = false;
    if (h->chunk && h->thp_tail_chunk != UINT32_MAX) refused = release_tail(h, h->thp_tail_chunk);
    if (!refused && h->thp_unused_lo != h->thp_unused_hi) refused = hl__prefault_retry(h);
    hl__backoff_step(&h->leftover_backoff, refused);
  }
  if (!h->opt.subpage_release || gave_up) return gave_up;
  int sub = hl__subpage_trim(h, (uint64_t)h->opt.release_per_sweep - taken,
                             (uint64_t)h->opt.upgrade_per_sweep - upgrade_used);
  if (sub >= 0) backoff_update(h, sub == 1);
  return sub == 1;
}

/* A cycle's trim, or one frees called for (manual mode): one pass, at most
 * release_per_sweep pages -- a drop of more goes back over the next
 * cycles.  Lock held and h->in_cycle set by the caller. */
void hl__trim_locked(hl_heap *h, bool forced) {
  HL_ASSERT_LOCKED(h);
  HL_ASSERT(h->in_cycle);
  if (!h->opt.page_release) return;
  if (!forced && hl__backoff_waiting(&h->trim_backoff)) {
    h->tally.trim_backoffs++;
    return;
  }
  trim_pass(h, forced, warm_target(h));
}

/* A trim outside a cycle (hl_trim: Heap.trim, Lua's h:trim, the preload's
 * malloc_trim): waits for one running (it may be in its trim with the lock
 * dropped), then releases everything beyond the warm cache -- in passes of
 * release_per_sweep pages, the lock dropped between them as within them, so
 * that the heap's other threads are not stalled for the whole of it.  It
 * was one pass: after a 1 GiB drop at page_size=4k a collect and a trim left
 * 1.19 GB resident, and an idle program kept it (the scale hunt, session
 * 28).  It stops when a pass released nothing (every run refused), gave up,
 * or after the passes the excess it found called for (frees meanwhile wait
 * for the next trim).  Lock held. */
void hl__trim_now(hl_heap *h) {
  HL_ASSERT_LOCKED(h);
  while (h->in_cycle) hl__wait(h, &h->cycle_done);
  h->in_cycle = true;
  if (h->opt.page_release) {
    uint64_t warm = warm_target(h), per = (uint64_t)h->opt.release_per_sweep;
    uint64_t excess = h->free_pool.count > warm ? h->free_pool.count - warm : 0;
    for (uint64_t passes = excess / per + 1;; passes--) {
      uint64_t before = h->free_pool.count;
      bool gave_up = trim_pass(h, true, warm);
      if (gave_up || passes <= 1 || h->free_pool.count <= warm || h->free_pool.count >= before)
        break;
      /* between passes, as around their syscalls: the heap is the other
       * threads' (and a cycle's, which may trim too) */
      h->in_cycle = false;
      pthread_cond_broadcast(&h->cycle_done);
      hl__retake_lock(h, hl__drop_lock(h));
      while (h->in_cycle) hl__wait(h, &h->cycle_done);
      h->in_cycle = true;
    }
  }
  /* large objects' mappings munmap refused (the map limit): every one again */
  hl__large_retry_pending(h);
  h->in_cycle = false;
  pthread_cond_broadcast(&h->cycle_done);
}

/* Manual mode has no sweep: a trim runs when frees leave enough empty pages
 * beyond the warm cache.  Lock held. */
void hl__trim_maybe(hl_heap *h) {
  HL_ASSERT_LOCKED(h);
  if (!h->opt.page_release || h->in_cycle) return;
  /* subpage_release: also once frees add up to the same number of pages'
   * worth of slots, which may have emptied OS pages of partial pages */
  bool sub = h->sub_flags && h->sub_freed >= h->manual_trim_threshold * h->page_size;
  if (h->free_pool.count <= (uint64_t)h->opt.warm_pages + h->manual_trim_threshold && !sub)
    return;
  h->in_cycle = true;
  hl__trim_locked(h, false);
  h->in_cycle = false;
  pthread_cond_broadcast(&h->cycle_done);
}
