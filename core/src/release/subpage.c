/*
 * subpage.c -- sub-page release (option subpage_release): a page that still
 * holds live slots, but has whole OS pages (4 KiB here) in which no slot is
 * allocated, gives those OS pages back.  Scattered survivors -- a burst that
 * died but for one object in a hundred -- otherwise keep every page of the
 * burst resident (E10).
 *
 * It is the whole-page trim's machinery on a finer grain, run by the same
 * trim (release.c calls it after the whole pages, with what is left of the
 * same budgets):
 *
 *   select   partial pages with a free OS page not yet out, in address
 *            order, at most release_per_sweep of them; each is marked
 *            SUB_BUSY and taken off its avail list (it takes no new object
 *            while its OS pages are advised), under the lock;
 *   release  outside the lock, one advice per contiguous run of OS pages:
 *            the primary advice, the fallback when it is refused (recorded
 *            as such: still charged, upgraded by later trims), a refused run
 *            left in and retried by a later trim -- never recorded as out;
 *   publish  under the lock: the out bits of what was released, the pages
 *            back on their lists;
 *   upgrade  fallback runs retried with the primary advice, at most
 *            upgrade_per_sweep pages' worth per trim;
 *   restore  before a slot in an out OS page is handed out (small.c, the
 *            allocation word; reuse.c, a warm page before it is formatted;
 *            evacuate.c, a destination page), at the restore fault site.  A
 *            restore that fails leaves the page SUB_FAILED: off the avail
 *            lists until the next trim puts it back to try again.
 *
 * Per page, two bitmaps of OS pages in a side table (h->sub_bits): "out"
 * (released) and "fallback" (of those, on the fallback advice), and a flag
 * byte (h->sub_flags, SUB_*).  An out OS page never overlaps an allocated
 * slot; the invariant checker verifies it against the allocation bitmap.  A
 * page released whole forgets its sub-page state (the whole page is out).
 *
 * Cost when nothing can be released: the allocation fast path is untouched
 * (it takes slots from a word already reserved); reserving a word reads one
 * counter, h->sub_pages, which is 0 while no OS page is out.
 *
 * The sub-page restore runs under the heap lock: on Linux it is no system
 * call at all (a page released with MADV_DONTNEED or MADV_FREE is simply
 * written again); on Darwin it is one MADV_FREE_REUSE of a few OS pages.
 */
#include <errno.h>
#include <stdlib.h>

#include "../internal.h"

enum { OUT_REJECTED = 0, OUT_PRIMARY = 1, OUT_FALLBACK = 2 };

typedef struct sub_cand {
  uint32_t p;
  uint64_t rel[HL_SUB_WORDS];  /* OS pages to release */
  uint64_t upg[HL_SUB_WORDS];  /* fallback OS pages to upgrade */
  uint64_t prim[HL_SUB_WORDS]; /* released with the primary advice */
  uint64_t fb[HL_SUB_WORDS];   /* released with the fallback advice */
  uint64_t up[HL_SUB_WORDS];   /* upgraded */
} sub_cand;

typedef struct sub_tally {
  uint64_t calls, runs, rejected, fallback, upgraded, released_os;
  hl_gave_up gu;
} sub_tally;

static inline uint64_t low_bits(uint32_t n) { return n >= 64 ? ~0ULL : ((1ULL << n) - 1); }

static inline bool bit(const uint64_t *m, uint32_t j) { return (m[j >> 6] >> (j & 63)) & 1; }

/* Set bits [a, b) of m. */
static void set_range(uint64_t *m, uint32_t a, uint32_t b) {
  for (uint32_t j = a; j < b; j++) m[j >> 6] |= 1ULL << (j & 63);
}

static uint64_t popcount(const uint64_t *m, uint32_t words) {
  uint64_t n = 0;
  for (uint32_t i = 0; i < words; i++) n += (uint64_t)hl__popcount64(m[i]);
  return n;
}

/* The next run [*a, *b) of set bits of m at or after `from`, below `n`;
 * false when there is none. */
static bool next_run(const uint64_t *m, uint32_t n, uint32_t from, uint32_t *a, uint32_t *b) {
  uint32_t j = from;
  while (j < n && !bit(m, j)) j++;
  if (j >= n) return false;
  *a = j;
  while (j < n && bit(m, j)) j++;
  *b = j;
  return true;
}

/* Whether slots [a, b] (inclusive) of an allocation bitmap are all free. */
static bool slots_free(const uint64_t *ab, uint32_t a, uint32_t b) {
  uint32_t wa = a >> 6, wb = b >> 6;
  if (wa == wb) return !(ab[wa] & (low_bits((b & 63) + 1) & ~low_bits(a & 63)));
  if (ab[wa] & ~low_bits(a & 63)) return false;
  for (uint32_t w = wa + 1; w < wb; w++)
    if (ab[w]) return false;
  return !(ab[wb] & low_bits((b & 63) + 1));
}

/* The slots OS page j of a page of `sz`-byte slots overlaps: [*s0, *s1];
 * false when it holds none (the tail beyond the last slot). */
static bool os_slots(const hl_heap *h, uint32_t nslots, uint32_t sz, uint32_t j, uint32_t *s0,
                     uint32_t *s1) {
  uint64_t lo = (uint64_t)j << h->os_shift, hi = lo + ((uint64_t)1 << h->os_shift);
  uint64_t first = lo / sz;
  if (first >= nslots) return false;
  uint64_t last = (hi - 1) / sz;
  if (last >= nslots) last = nslots - 1;
  *s0 = (uint32_t)first;
  *s1 = (uint32_t)last;
  return true;
}

/* The OS pages of formatted page p in which no slot is allocated. */
static void free_os_pages(const hl_heap *h, uint32_t p, uint64_t *m) {
  const hl_page *d = &h->pages[p];
  const uint64_t *ab = hl__allocs(h, p);
  uint32_t sz = h->cls_size[d->cls];
  memset(m, 0, HL_SUB_WORDS * sizeof(uint64_t));
  for (uint32_t j = 0, s0, s1; j < h->os_per_page; j++) {
    if (!os_slots(h, d->nslots, sz, j, &s0, &s1)) break;
    if (s0 >= d->bump || slots_free(ab, s0, s1)) m[j >> 6] |= 1ULL << (j & 63);
  }
}

/* verify: the free slots that straddle into an OS page about to be released
 * are poisoned whole first (a manual heap's sealed slot would otherwise come
 * back half poison, half its old bytes); the checker skips a free slot that
 * overlaps an out OS page, and a restore poisons what it brings back.  Only
 * the slot's bytes in OS pages not already out: a write into one released
 * before faulted it back in (resident while counted out) and left it part
 * poison, part zeros -- or, released with MADV_FREE and taken again, part
 * poison and part old bytes, which verify then reported as written after
 * free (the moving collector hunt, session 30).  Its restore poisons it. */
static void poison_slot(hl_heap *h, uint8_t *base, const uint64_t *out, uint64_t lo,
                        uint64_t hi) {
  for (uint64_t a = lo; a < hi;) {
    uint64_t b = ((a >> h->os_shift) + 1) << h->os_shift;
    if (b > hi) b = hi;
    if (!bit(out, (uint32_t)(a >> h->os_shift))) hl__poison(base + a, b - a);
    a = b;
  }
}

static void poison_straddlers(hl_heap *h, uint32_t p, const uint64_t *rel) {
  const hl_page *d = &h->pages[p];
  uint32_t sz = h->cls_size[d->cls];
  uint8_t *base = hl__page_addr(h, p);
  const uint64_t *out = hl__sub_out(h, p);
  for (uint32_t j = 0, s0, s1; j < h->os_per_page; j++) {
    if (!bit(rel, j) || !os_slots(h, d->nslots, sz, j, &s0, &s1)) continue;
    poison_slot(h, base, out, (uint64_t)s0 * sz, (uint64_t)s0 * sz + sz);
    poison_slot(h, base, out, (uint64_t)s1 * sz, (uint64_t)s1 * sz + sz);
  }
}

/* Release one run (no lock held): the primary advice, else the fallback. */
static int release_run(hl_heap *h, uint32_t p, uint8_t *addr, size_t len, sub_tally *t) {
  prim_op primary = h->opt.release_advice == HL_ADVICE_FREE ? PRIM_FREE : PRIM_DONTNEED;
  prim_result r = hl__prim_call(&h->prim, HL_SITE_release, addr, len, primary);
  t->calls++;
  if (!r.err) return OUT_PRIMARY;
  if (r.gave_up) {
    hl__gave_up_note(&t->gu, HL_SITE_release, r, p);
    return OUT_REJECTED;
  }
  if (h->opt.fallback_advice == HL_FALLBACK_NONE) return OUT_REJECTED;
  prim_op fb = h->opt.fallback_advice == HL_FALLBACK_FREE ? PRIM_FREE : PRIM_DONTNEED;
  r = hl__prim_call(&h->prim, HL_SITE_fallback, addr, len, fb);
  t->calls++;
  if (!r.err) return OUT_FALLBACK;
  hl__gave_up_note(&t->gu, HL_SITE_fallback, r, p);
  return OUT_REJECTED;
}

/* Advise every candidate's runs (no lock held). */
static void advise(hl_heap *h, sub_cand *c, size_t n, sub_tally *t) {
  prim_op primary = h->opt.release_advice == HL_ADVICE_FREE ? PRIM_FREE : PRIM_DONTNEED;
  for (size_t i = 0; i < n && !t->gu.any; i++) {
    uint8_t *base = hl__page_addr(h, c[i].p);
    uint32_t a, b;
    for (uint32_t j = 0; !t->gu.any && next_run(c[i].rel, h->os_per_page, j, &a, &b); j = b) {
      uint8_t *addr = base + ((uint64_t)a << h->os_shift);
      size_t len = (size_t)(b - a) << h->os_shift;
      int out = release_run(h, c[i].p, addr, len, t);
      if (out == OUT_PRIMARY) set_range(c[i].prim, a, b);
      else if (out == OUT_FALLBACK) set_range(c[i].fb, a, b);
    }
    for (uint32_t j = 0; !t->gu.any && next_run(c[i].upg, h->os_per_page, j, &a, &b); j = b) {
      prim_result r = hl__prim_call(&h->prim, HL_SITE_upgrade, base + ((uint64_t)a << h->os_shift),
                                (size_t)(b - a) << h->os_shift, primary);
      t->calls++;
      if (!r.err) {
        set_range(c[i].up, a, b);
        t->upgraded++;
      } else {
        hl__gave_up_note(&t->gu, HL_SITE_upgrade, r, c[i].p);
      }
    }
  }
}

/* A page taken off the lists (busy, failed) goes back on them, or to the
 * free pool when its last slot was freed meanwhile (manual mode). */
static void relist(hl_heap *h, uint32_t p) {
  hl_page *d = &h->pages[p];
  if (d->used == 0) {
    hl__page_unformat(h, p);
    hl__page_to_state(h, p, PS_FREE, true);
  } else {
    hl__page_to_state(h, p, PS_PARTIAL, false);
  }
}

/* Publish one candidate's outcome (lock held). */
static void publish(hl_heap *h, sub_cand *c, sub_tally *t) {
  uint32_t p = c->p;
  uint64_t *out = hl__sub_out(h, p), *fb = hl__sub_fb(h, p);
  bool had = hl__sub_any(h, p), rejected = false;
  for (uint32_t w = 0; w < h->sub_words; w++) {
    uint64_t got = c->prim[w] | c->fb[w];
    out[w] |= got;
    fb[w] |= c->fb[w];
    uint64_t up = c->up[w] & fb[w];
    fb[w] &= ~up;
    h->sub_out += (uint64_t)hl__popcount64(got);
    h->sub_fallback += (uint64_t)hl__popcount64(c->fb[w]);
    h->sub_fallback -= (uint64_t)hl__popcount64(up);
    t->released_os += (uint64_t)hl__popcount64(got);
    if (c->rel[w] & ~got) rejected = true;
  }
  if (!had && hl__sub_any(h, p)) h->sub_pages++;
  /* count runs the way they were advised */
  uint32_t a, b;
  for (uint32_t j = 0; next_run(c->rel, h->os_per_page, j, &a, &b); j = b) {
    /* a run is advised whole: its first bit says how it went */
    if (bit(c->prim, a)) t->runs++;
    else if (bit(c->fb, a)) {
      t->runs++;
      t->fallback++;
    } else {
      t->rejected++;
    }
  }
  uint8_t *f = &h->sub_flags[p];
  /* a refused run is still free and still in: the next trim tries again */
  if (rejected) hl__sub_dirty(h, p);
  *f &= (uint8_t)~SUB_BUSY;
  h->sub_held--;
  relist(h, p);
}

/* thp: OS pages released inside a 2 MiB chunk split the huge page that may
 * back it, as a whole page released from it does (release.c counts and
 * tells it).  The candidates are in address order. (Lock held.) */
static void chunks_split(hl_heap *h, const sub_cand *c, size_t n) {
  for (size_t i = 0, j; i < n; i = j) {
    uint32_t ch = c[i].p >> h->chunk_shift;
    uint64_t os = 0;
    for (j = i; j < n && c[j].p >> h->chunk_shift == ch; j++)
      for (uint32_t w = 0; w < h->sub_words; w++)
        os += (uint64_t)hl__popcount64(c[j].prim[w] | c[j].fb[w]);
    if (os) hl__chunk_released_in_part(h, ch, 0, os << h->os_shift, true);
  }
}

int hl__subpage_trim(hl_heap *h, uint64_t release_budget, uint64_t upgrade_budget) {
  HL_ASSERT_LOCKED(h);
  HL_ASSERT(h->in_cycle);
  if (!h->sub_flags) return -1;
  h->sub_freed = 0;
  /* nothing freed, no restore failed, no fallback run to upgrade since the
   * last scan: nothing to find (a trim per cycle would otherwise walk every
   * page's descriptor for nothing) */
  if (!h->sub_rescan && !h->sub_held && !h->sub_fallback) return -1;
  h->sub_rescan = false;
  uint64_t os = (uint64_t)1 << h->os_shift;
  sub_cand *c = NULL;
  size_t n = 0, cap = 0;
  uint64_t n_rel = 0, n_upg = 0;
  for (uint32_t p = 0; p < h->high_water; p++) {
    uint8_t *f = &h->sub_flags[p];
    hl_page *d = &h->pages[p];
    if (*f & SUB_FAILED) {
      /* a restore failed since the last trim: back on the lists, to try again */
      *f &= (uint8_t)~SUB_FAILED;
      h->sub_held--;
      relist(h, p);
      continue;
    }
    if (d->state != PS_PARTIAL || (*f & SUB_BUSY)) continue;
    uint64_t room = (uint64_t)(d->nfree + (d->nslots - d->bump)) * h->cls_size[d->cls];
    bool rel = !(*f & SUB_CLEAN) && n_rel < release_budget && room >= os;
    bool upg = h->sub_fallback && n_upg < upgrade_budget && popcount(hl__sub_fb(h, p), h->sub_words);
    if (!rel && !upg) {
      if (room < os) *f |= SUB_CLEAN; /* not one OS page's worth free */
      continue;
    }
    sub_cand x;
    memset(&x, 0, sizeof x);
    x.p = p;
    if (rel) {
      free_os_pages(h, p, x.rel);
      const uint64_t *out = hl__sub_out(h, p);
      for (uint32_t w = 0; w < h->sub_words; w++) x.rel[w] &= ~out[w];
      *f |= SUB_CLEAN; /* every free OS page is out, or about to be */
      if (popcount(x.rel, h->sub_words)) n_rel++;
      else rel = false;
    }
    if (upg) {
      memcpy(x.upg, hl__sub_fb(h, p), h->sub_words * sizeof(uint64_t));
      n_upg++;
    }
    if (!rel && !upg) continue;
    if (n == cap) {
      size_t nc = cap ? cap * 2 : 64;
      sub_cand *g = hl__sys_realloc(c, nc * sizeof *c);
      if (!g) {
        if (rel) hl__sub_dirty(h, p);
        break; /* what is picked goes ahead; the rest waits for the next trim */
      }
      c = g;
      cap = nc;
    }
    c[n++] = x;
    *f |= SUB_BUSY;
    h->sub_held++;
    if (d->flags & PF_AVAIL) hl__page_to_state(h, p, PS_PARTIAL, false); /* off its avail list */
    if (rel && h->opt.verify) poison_straddlers(h, p, x.rel);
  }
  /* the budget ran out before every page was looked at: the next trim goes on */
  if (n_rel >= release_budget) h->sub_rescan = true;
  if (n == 0) {
    hl__sys_free(c);
    return -1;
  }

  bool dropped = hl__drop_lock(h);
  uint64_t t0 = hl__prim_now_ns();
  sub_tally t = {0};
  advise(h, c, n, &t);
  uint64_t dt = hl__prim_now_ns() - t0;
  hl__retake_lock(h, dropped);

  for (size_t i = 0; i < n; i++) publish(h, &c[i], &t);
  if (h->chunk) chunks_split(h, c, n);
  hl__sys_free(c);
  h->tally.trim_ns += dt;
  h->tally.release_calls += t.calls;
  h->tally.subpage_runs += t.runs;
  h->tally.subpage_rejected_runs += t.rejected;
  h->tally.subpage_upgraded_runs += t.upgraded;
  hl__gave_up_event(h, &t.gu);
  hl__event(h, HL_EV_subpage_trim, 8, (int64_t)n, (int64_t)t.runs,
            (int64_t)(t.released_os << h->os_shift), (int64_t)t.rejected, (int64_t)t.fallback,
            (int64_t)t.upgraded, (int64_t)dt, (int64_t)t.gu.any);
  return t.gu.any ? 1 : 0;
}

bool hl__sub_restore(hl_heap *h, uint32_t p, uint64_t lo, uint64_t hi) {
  HL_ASSERT_LOCKED(h);
  if (!h->sub_pages || !hl__sub_any(h, p)) return true;
  uint64_t *out = hl__sub_out(h, p), *fb = hl__sub_fb(h, p);
  uint32_t j0 = (uint32_t)(lo >> h->os_shift);
  uint32_t j1 = (uint32_t)((hi - 1) >> h->os_shift) + 1;
  if (j1 > h->os_per_page) j1 = h->os_per_page;
  bool ok = true;
  uint32_t a, b;
  for (uint32_t j = j0; next_run(out, j1, j, &a, &b); j = b) {
    uint8_t *addr = hl__page_addr(h, p) + ((uint64_t)a << h->os_shift);
    size_t len = (size_t)(b - a) << h->os_shift;
    prim_result r = hl__prim_call(&h->prim, HL_SITE_restore, addr, len, PRIM_RESTORE);
    if (r.err) {
      h->tally.subpage_restore_failed++;
      hl__event(h, HL_EV_restore_failed, 3, (int64_t)p, (int64_t)r.err,
                (int64_t)h->opt.reuse_failed_order);
      if (r.gave_up)
        hl__event(h, HL_EV_syscall_gave_up, 4, (int64_t)HL_SITE_restore, (int64_t)r.err,
                  (int64_t)r.retries, (int64_t)p);
      if (!(h->sub_flags[p] & SUB_FAILED)) {
        h->sub_flags[p] |= SUB_FAILED;
        h->sub_held++;
      }
      ok = false;
      break;
    }
    h->tally.subpage_restores++;
    for (uint32_t k = a; k < b; k++) {
      uint64_t m = 1ULL << (k & 63);
      if (fb[k >> 6] & m) h->sub_fallback--;
      out[k >> 6] &= ~m;
      fb[k >> 6] &= ~m;
      h->sub_out--;
    }
    /* verify: what comes back holds free slots only, which carry poison */
    if (h->opt.verify) hl__poison(addr, len);
  }
  if (!hl__sub_any(h, p)) h->sub_pages--;
  return ok;
}

void hl__sub_forget(hl_heap *h, uint32_t p) {
  if (!h->sub_flags) return;
  h->sub_flags[p] &= (uint8_t)~SUB_CLEAN;
  if (!h->sub_pages || !hl__sub_any(h, p)) return;
  uint64_t *out = hl__sub_out(h, p), *fb = hl__sub_fb(h, p);
  h->sub_out -= popcount(out, h->sub_words);
  h->sub_fallback -= popcount(fb, h->sub_words);
  memset(out, 0, h->sub_words * sizeof(uint64_t));
  memset(fb, 0, h->sub_words * sizeof(uint64_t));
  h->sub_pages--;
}

void hl__sub_leave_partial(hl_heap *h, uint32_t p) {
  HL_ASSERT(!(h->sub_flags[p] & SUB_BUSY));
  h->sub_flags[p] &= (uint8_t)~SUB_FAILED;
  h->sub_held--;
}
