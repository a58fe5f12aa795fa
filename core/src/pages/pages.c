/*
 * pages.c -- one large reservation carved into page_size pages; descriptors,
 * mark bits and allocation bits in side tables indexed by page number, so no
 * byte of metadata lives inside a page (the seed lost 16 KB of every 64 KB to
 * an in-page header).  Pools are intrusive lists threaded through the
 * descriptors; every carved page is in exactly one state.
 *
 * This is the mechanism of pages: where they are, which state and list each
 * is in, what a formatted page's side-table state is.  Which page an
 * allocation gets (the reuse policy) is release/reuse.c; the invariant
 * checker is check/check.c.  Everything here runs under the heap lock.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "../internal.h"

static void dump_sync(hl_heap *h);

/* ---- lists ---- */

/* Manual mode: page p joins (on) or leaves class c's avail list, if l is one. */
static inline void avail_note(hl_heap *h, const hl_list *l, uint32_t p, bool on) {
  if (!h->avail_bm) return;
  uintptr_t off = (uintptr_t)l - (uintptr_t)h->partial_avail;
  if (off >= sizeof h->partial_avail) return;
  uint32_t c = (uint32_t)(off / sizeof(hl_list)), r = p / 64;
  uint64_t *w = &h->avail_bm[(size_t)r * h->nclasses + c];
  if (on) {
    *w |= (uint64_t)1 << (p % 64);
    if (r < h->avail_lo[c]) h->avail_lo[c] = r;
  } else {
    *w &= ~((uint64_t)1 << (p % 64));
  }
}

uint32_t hl__avail_lowest(hl_heap *h, uint32_t c) {
  HL_ASSERT_LOCKED(h);
  uint32_t rows = (h->high_water + 63) / 64;
  for (uint32_t r = h->avail_lo[c]; r < rows; r++) {
    uint64_t x = h->avail_bm[(size_t)r * h->nclasses + c];
    if (x) {
      h->avail_lo[c] = r;
      return r * 64 + (uint32_t)__builtin_ctzll(x);
    }
  }
  h->avail_lo[c] = rows;
  return HL_NIL;
}

void hl__list_push_head(hl_heap *h, hl_list *l, uint32_t p) {
  avail_note(h, l, p, true);
  hl_page *d = &h->pages[p];
  d->prev = HL_NIL;
  d->next = l->head;
  if (l->head != HL_NIL) h->pages[l->head].prev = p;
  else l->tail = p;
  l->head = p;
  l->count++;
}

void hl__list_push_tail(hl_heap *h, hl_list *l, uint32_t p) {
  avail_note(h, l, p, true);
  hl_page *d = &h->pages[p];
  d->next = HL_NIL;
  d->prev = l->tail;
  if (l->tail != HL_NIL) h->pages[l->tail].next = p;
  else l->head = p;
  l->tail = p;
  l->count++;
}

void hl__list_remove(hl_heap *h, hl_list *l, uint32_t p) {
  avail_note(h, l, p, false);
  hl_page *d = &h->pages[p];
  if (d->prev != HL_NIL) h->pages[d->prev].next = d->next;
  else l->head = d->next;
  if (d->next != HL_NIL) h->pages[d->next].prev = d->prev;
  else l->tail = d->prev;
  d->next = d->prev = HL_NIL;
  l->count--;
}

/* The list a page in its current state belongs to (NULL: owned, in flight). */
hl_list *hl__list_of(hl_heap *h, uint32_t p) {
  hl_page *d = &h->pages[p];
  switch (d->state) {
  case PS_RETIRED: return &h->retired;
  case PS_PARTIAL: return (d->flags & PF_AVAIL) ? &h->partial_avail[d->cls] : &h->partial_full;
  case PS_FREE: return &h->free_pool;
  case PS_RELEASED: return &h->released_pool;
  case PS_REUSE_FAILED: return &h->reuse_failed;
  default: return NULL;
  }
}

static void leave_state(hl_heap *h, uint32_t p) {
  hl_page *d = &h->pages[p];
  hl_list *l = hl__list_of(h, p);
  if (l) hl__list_remove(h, l, p);
  if (hl__released_state(d->state) && d->release == RK_FALLBACK) h->fallback_count--;
  h->state_count[d->state]--;
}

/* Move page p to `state`, onto the head or tail of that state's list.  For
 * PS_PARTIAL the PF_AVAIL flag decides between the avail and full lists and is
 * computed here from the page's room. */
void hl__page_to_state(hl_heap *h, uint32_t p, int state, bool at_head) {
  HL_ASSERT_LOCKED(h);
  hl_page *d = &h->pages[p];
  leave_state(h, p);
  /* a page whose sub-page restore failed is held off the avail lists only
   * while partial (release/subpage.c) */
  if (hl_unlikely(h->sub_held) && state != PS_PARTIAL && (h->sub_flags[p] & SUB_FAILED))
    hl__sub_leave_partial(h, p);
  d->state = (uint8_t)state;
  if (state == PS_PARTIAL) {
    /* a tenured page takes no new objects (gc/mark.c, tenuring), nor one
     * whose OS pages a trim is advising or failed to restore (subpage.c) */
    if ((d->nfree > 0 || d->bump < d->nslots) && !(h->tenure[p] & TN_TENURED) &&
        !hl__sub_unavail(h, p))
      d->flags |= PF_AVAIL;
    else
      d->flags &= (uint8_t)~PF_AVAIL;
  } else {
    d->flags &= (uint8_t)~PF_AVAIL;
    /* an owned page's free slots change under the allocation word: scanned
     * again when it is partial once more */
    if (state == PS_OWNED) hl__sub_dirty(h, p);
  }
  h->state_count[state]++;
  if (hl__released_state(state) && d->release == RK_FALLBACK) h->fallback_count++;
  hl_list *l = hl__list_of(h, p);
  if (l) {
    if (at_head) hl__list_push_head(h, l, p);
    else hl__list_push_tail(h, l, p);
  }
}

/* ---- format ---- */

#ifdef HL_PRELOAD
/* Page p, formatted for `words` words of allocation bits, keeps its region
 * when it has that many (old_words; 0: none yet), else trades it for one
 * from the pool (a free region of that size, else the pool's unused part,
 * else its fixed bits). */
static void abits_take(hl_heap *h, uint32_t p, uint32_t old_words, uint32_t words) {
  uint64_t fixed = (uint64_t)p * h->bitmap_words, pool = (uint64_t)h->npages_max * h->bitmap_words;
  uint32_t had = h->abits_at[p];
  if (old_words == words && had != HL_NIL) return;
  if (old_words && had >= pool) { /* a pool region: back to its list */
    h->bits[had] = h->abits_free[old_words];
    h->abits_free[old_words] = had;
  }
  uint32_t at = h->abits_free[words];
  if (at != HL_NIL) {
    h->abits_free[words] = (uint32_t)h->bits[at];
  } else if (h->abits_bump + words <= 2 * pool && h->abits_bump + words < HL_NIL) {
    at = (uint32_t)h->abits_bump;
    h->abits_bump += words;
    /* (the pool grows without a carve when pages are formatted again for
     * other classes: its part of core dumps with it) */
    if (!h->opt.dump_unused) dump_sync(h);
  } else {
    at = (uint32_t)fixed;
  }
  h->abits_at[p] = at;
}
#endif

/* Make an empty page ready for size class cls.  Writes nothing into the page
 * itself (except poison when verify is on): all its state is out of line. */
void hl__page_format(hl_heap *h, uint32_t p, uint32_t cls) {
  HL_ASSERT_LOCKED(h);
  hl_page *d = &h->pages[p];
  /* Every state field is set here, the release state included, so a fresh
   * page never carries a stale "released" flag (seed 000, review round 1).
   * init_page_state=0 leaves the release state and flags as they were: the
   * seed's defect, visible when verify poisons fresh descriptors. */
  if (h->opt.init_page_state) {
    d->release = RK_NONE;
    d->flags = 0;
  }
  d->cls = (uint8_t)cls;
  h->tenure[p] = 0;
  /* thp: the chunk is touched again (release.c says what became of it) */
  if (h->chunk && h->chunk[p >> h->chunk_shift] == CH_EMPTY)
    h->chunk[p >> h->chunk_shift] = CH_HUGE;
#ifdef HL_PRELOAD
  uint32_t old_words = h->abits_at[p] == HL_NIL ? 0 : (d->nslots + 63) / 64;
#endif
  d->nslots = (uint32_t)(h->page_size / h->cls_size[cls]);
  d->bump = 0;
  d->used = 0;
  d->cursor = 0;
  d->nfree = 0;
  uint32_t words = (d->nslots + 63) / 64;
#ifdef HL_PRELOAD
  abits_take(h, p, old_words, words);
#endif
  /* a manual heap never marks: its mark bits stay untouched (and out of
   * its RSS: half of the side table) */
  if (h->opt.mode != HL_MODE_MANUAL) memset(hl__marks(h, p), 0, words * sizeof(uint64_t));
  memset(hl__allocs(h, p), 0, words * sizeof(uint64_t));
  if (h->opt.verify) hl__poison(hl__page_addr(h, p), h->page_size);
}

/* An emptied page loses its slots' state (its list is left to the caller's
 * hl__page_to_state, which still needs the old flags to find it). */
void hl__page_unformat(hl_heap *h, uint32_t p) {
  hl_page *d = &h->pages[p];
  d->bump = 0;
  d->used = 0;
  d->cursor = 0;
  d->nfree = 0;
}

void hl__pages_orphaned(hl_heap *h) {
  for (uint32_t p = 0; p < h->high_water && h->state_count[PS_IN_FLIGHT]; p++) {
    hl_page *d = &h->pages[p];
    if (d->state != PS_IN_FLIGHT) continue;
    if (d->release == RK_PRIMARY || d->release == RK_FALLBACK) {
      bool parked = (d->flags & PF_PARKED) != 0;
      d->flags &= (uint8_t)~PF_PARKED;
      hl__page_to_state(h, p, parked ? PS_REUSE_FAILED : PS_RELEASED, false);
    } else {
      /* (a fresh page's descriptor may hold verify's garbage) */
      d->release = RK_NONE;
      d->flags = 0;
      hl__page_unformat(h, p);
      hl__page_to_state(h, p, PS_FREE, false);
    }
  }
}

/* ---- carving ---- */

static void dump_grow(hl_heap *h);

/* The next page of the reservation, in flight and not yet formatted, or
 * HL_NIL when the reservation is exhausted. */
uint32_t hl__page_carve(hl_heap *h) {
  HL_ASSERT_LOCKED(h);
  if (h->high_water >= h->npages_max) return HL_NIL;
#ifdef HL_PRELOAD
  if (h->lock_carved) {
    int e = hl__prim_os_lock(h->base + ((uint64_t)h->high_water << h->page_shift), h->page_size,
                         h->lock_carved == HL_LOCK_ONFAULT);
    if (e == ENOMEM) { /* RLIMIT_MEMLOCK: not carved, as glibc's heap would not grow */
      h->lock_err = e;
      return HL_NIL;
    }
    /* refused for good (a sandbox's EPERM or ENOSYS): carved, unlocked, and
     * no more tries -- a failed call a page, every small malloc a glibc
     * block (129,137 refused calls in one run, the preload hunt); EAGAIN:
     * this page unlocked */
    if (e && e != EAGAIN) h->lock_carved = 0;
  }
#endif
  uint32_t p = h->high_water++;
  h->carved_end = h->base + ((uint64_t)h->high_water << h->page_shift);
  if (!h->opt.dump_unused && h->high_water > h->dump_pages) dump_grow(h);
  hl_page *d = &h->pages[p];
  /* verify: fresh descriptors arrive holding garbage, as memory recycled by
   * malloc did in the seed, so a field format forgets is caught. */
  if (h->opt.verify) memset(d, 0xA5, sizeof *d);
  d->state = PS_IN_FLIGHT;
  d->next = d->prev = HL_NIL;
#ifdef HL_PRELOAD
  h->abits_at[p] = HL_NIL;
#endif
  h->state_count[PS_IN_FLIGHT]++;
  return p;
}

/* ---- reservation and side tables ---- */

/* The heap's mappings -- the reservation and each side table -- and how much
 * of each the first `pages` pages can use (a bound: the preloaded heap's
 * allocation-bit pool grows as its bump says).  One list for the core
 * dump's prefixes below and mlockall's unused ranges. */
typedef struct {
  uint8_t *at;
  size_t bytes, used;
} region;

static size_t regions(hl_heap *h, uint64_t pages, region *r) {
  uint64_t bw8 = (uint64_t)h->bitmap_words * 8, half = (uint64_t)h->npages_max * bw8;
  uint64_t pool = pages * bw8;
#ifdef HL_PRELOAD
  if (h->abits_bump * 8 > half && h->abits_bump * 8 - half > pool) pool = h->abits_bump * 8 - half;
#endif
  bool manual = h->opt.mode == HL_MODE_MANUAL;
  region all[HL_REGIONS] = {
      {h->base, h->reserved, pages << h->page_shift},
      {(uint8_t *)h->pages, h->meta_bytes[0], pages * sizeof(hl_page)},
      /* a manual heap's bits are two tables (marks or a page's fixed bits,
       * then the allocation bits or the pool); a collected heap's one,
       * interleaved */
      {(uint8_t *)h->bits, manual ? half : h->meta_bytes[1], manual ? pages * bw8 : 2 * pages * bw8},
      {manual ? (uint8_t *)h->bits + half : NULL, h->meta_bytes[1] - half, pool},
      {h->tenure, h->meta_bytes[2], pages},
      {(uint8_t *)h->sub_bits, h->meta_bytes[3], pages * 2 * h->sub_words * 8},
      {h->sub_flags, h->meta_bytes[4], pages},
      {h->chunk, h->chunk_bytes, h->chunk ? (pages >> h->chunk_shift) + 1 : 0},
      {(uint8_t *)h->avail_bm, h->avail_bytes, (pages / 64 + 1) * h->nclasses * sizeof(uint64_t)},
#ifdef HL_PRELOAD
      {(uint8_t *)h->abits_at, h->abits_at_bytes, pages * sizeof(uint32_t)},
#endif
  };
  size_t n = 0;
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (all[i].at && all[i].bytes) {
      r[n] = all[i];
      if (r[n].used > r[n].bytes) r[n].used = r[n].bytes;
      n++;
    }
  return n;
}

#ifdef HL_PRELOAD
size_t hl__pages_unused_ranges(hl_heap *h, uintptr_t *lo, uintptr_t *hi, size_t max) {
  HL_ASSERT_LOCKED(h);
  region r[HL_REGIONS];
  size_t nr = regions(h, h->high_water, r), n = 0;
  /* the reservation past the carved pages; the side tables whole (the
   * library's, not the program's) */
  for (size_t i = 0; i < nr && n < max; i++) {
    lo[n] = (uintptr_t)r[i].at + (i == 0 ? r[i].used : 0);
    hi[n] = (uintptr_t)r[i].at + r[i].bytes;
    if (hi[n] > lo[n]) n++;
  }
  return n;
}
#endif

/* Core dumps (dump_unused=0).  A dump holds every anonymous mapping the
 * process wrote to, whole: its untouched pages are holes in a dump written
 * to a file, but zeros down a pipe (systemd-coredump, apport) and in gdb's
 * gcore -- the
 * gcore of a preloaded program that had malloc'ed 1 MiB was a 34.9 GB file,
 * all of it on disk: the 32 GiB reservation and the side tables made for
 * it.  So with dump_unused=0 (libheaplab-malloc.so's and the launchers'
 * default) each of them is advised MADV_DONTDUMP when made (the
 * whole mapping: its flags change, it does not split) and MADV_DODUMP over
 * the part the carved pages use as the heap grows, in steps that double it
 * (at least 1 MiB of pages): a heap of n bytes costs about log2(n / 1 MiB)
 * calls per mapping and its dump at most twice what it carved.  Each mapping
 * becomes two VMAs, dumped and not (hl_vma_count: 2 for the reservation);
 * at vm.max_map_count a call that would split is refused and the heap goes
 * on (its dump that of the pages advised so far, until a later call takes:
 * dump_sync). */
static int dump_advise(uint8_t *from, uint8_t *to, prim_op op) {
  size_t os = hl__prim_os_page_size();
  uintptr_t a = (uintptr_t)from / os * os, b = ((uintptr_t)to + os - 1) / os * os;
  return b > a ? hl__prim_os_advise((void *)a, b - a, op) : 0;
}

static void dump_init(hl_heap *h) {
  region r[HL_REGIONS];
  size_t n = regions(h, 0, r);
  for (size_t i = 0; i < n; i++) dump_advise(r[i].at, r[i].at + r[i].bytes, PRIM_DONTDUMP);
  h->dump_pages = 0;
  memset(h->dumped, 0, sizeof h->dumped);
}

/* Advise MADV_DODUMP what each mapping's used part gained since the last
 * call -- at least doubling what is advised, so that a table that grows
 * without a carve (the preloaded heap's allocation-bit pool, as pages are
 * formatted again for other classes) costs log calls too.  A call refused
 * (vm.max_map_count: the split) leaves that mapping's mark where it was:
 * the next call tries from there again (it was recorded as done, and the
 * first MiB of the heap stayed out of dumps for good, the session's review). */
static void dump_sync(hl_heap *h) {
  region r[HL_REGIONS];
  size_t n = regions(h, h->dump_pages, r);
  for (size_t i = 0; i < n; i++)
    if (r[i].used > h->dumped[i]) {
      size_t to = 2 * h->dumped[i] < r[i].bytes ? 2 * h->dumped[i] : r[i].bytes;
      if (to < r[i].used) to = r[i].used;
      if (dump_advise(r[i].at + h->dumped[i], r[i].at + to, PRIM_DODUMP) == 0) h->dumped[i] = to;
    }
}

static void dump_grow(hl_heap *h) {
  uint64_t least = ((uint64_t)1 << 20) >> h->page_shift;
  uint64_t pages = 2 * (uint64_t)h->high_water;
  if (pages < least) pages = least;
  /* thp: whole 2 MiB chunks, so that the boundary splits none (a chunk
   * across two VMAs cannot be one huge page) */
  if (h->chunk) pages = (pages + ((uint64_t)1 << h->chunk_shift) - 1) >> h->chunk_shift << h->chunk_shift;
  if (pages > h->npages_max) pages = h->npages_max;
  h->dump_pages = pages;
  dump_sync(h);
}

static int map_table(hl_heap *h, size_t bytes, void **out, size_t *kept) {
  size_t ps = hl__prim_os_page_size();
  bytes = (bytes + ps - 1) / ps * ps;
  prim_result r = hl__prim_reserve(&h->prim, bytes, out);
  if (r.err) return r.err;
  *kept = bytes;
  return 0;
}

int hl__pages_init(hl_heap *h, char *err, size_t errlen) {
  h->page_size = (uint64_t)h->opt.page_size;
  h->page_shift = (unsigned)__builtin_ctzll(h->page_size);
  uint64_t asked = (uint64_t)h->opt.reserve_bytes / h->page_size * h->page_size;
  uint64_t want = asked;
  /* Step down when refused (RLIMIT_AS, overcommit=2, a small VM) -- but not
   * below 64 MiB (or what was asked, if less): a heap that silently got a
   * sliver of what it asked for (the 5,000th heap of a process has 2 MiB of
   * address space left) fails later and obscurely; better a clear error now. */
  uint64_t floor = asked < ((uint64_t)64 << 20) ? asked : (uint64_t)64 << 20;
  if (floor < 16 * h->page_size) floor = 16 * h->page_size;
  /* thp: whole 2 MiB chunks, 2 MiB-aligned, so the kernel can back each
   * chunk with one huge page and a chunk is whole heap pages */
  size_t align = h->opt.thp != HL_THP_NEVER && h->page_size < PRIM_HUGE_BYTES ? PRIM_HUGE_BYTES : 0;
  if (align) {
    /* whole chunks, at least one (reserve_bytes may be 1 MiB) */
    want = asked = asked < align ? align : asked / align * align;
    if (floor < align) floor = align;
    floor = (floor + align - 1) / align * align;
  }
  /* Under an address-space limit, an ask that cannot fit in what is left
   * starts at half of that: the step-down kept the first size the kernel
   * took -- 256 MiB of a 293 MiB `ulimit -v` -- and the program's own
   * allocations failed after the heap was made (the hostile-environment
   * hunt, twenty-seventh session; the launchers and the preload already
   * split the limit, docs/clients.md).  An ask that fits is kept. */
  const char *limit_name;
  uint64_t limit;
  uint64_t room = hl__prim_os_address_room(&limit_name, &limit);
  if (limit_name && want > room) {
    uint64_t unit = align ? align : h->page_size;
    want = room / 2 / unit * unit;
    if (want < floor) want = floor;
  }
  void *base = NULL;
  int attempts = 0, last = 0;
  for (;;) {
    attempts++;
    prim_result r = hl__prim_reserve_aligned(&h->prim, want, align, &base);
    if (!r.err) break;
    last = r.err;
    base = NULL;
    if (want / 2 < floor) break;
    want = want / 2 / h->page_size * h->page_size;
    if (align) want = want / align * align;
  }
  if (!base) {
    char inj[200];
    if (hl__injected_faults(h, HL_SITE_reserve, inj, sizeof inj))
      hl__fmt_err(err, errlen,
                  "reserve: every reservation from the %" PRIu64 " bytes asked down to %" PRIu64
                  " failed (%s, %d attempt%s): %s", asked, want, hl__strerror(last), attempts,
                  hl__s((uint64_t)attempts), inj);
    else if (limit_name) /* (kept under 256 bytes: the bindings' message buffers) */
      hl__fmt_err(err, errlen,
                  "reserve: the kernel refused every reservation from the %" PRIu64
                  " bytes asked down to %" PRIu64 " (%s, %d attempt%s): no address space left "
                  "under %s, %" PRIu64 " bytes with %" PRIu64 " free",
                  asked, want, hl__strerror(last), attempts, hl__s((uint64_t)attempts), limit_name,
                  limit, room);
    else
      hl__fmt_err(err, errlen,
                  "reserve: the kernel refused every reservation from the %" PRIu64
                  " bytes asked down to %" PRIu64 " (%s, %d attempt%s: the address space "
                  "is exhausted -- RLIMIT_AS, or too many heaps open -- or a smaller "
                  "reserve_bytes is needed)",
                  asked, want, hl__strerror(last), attempts, hl__s((uint64_t)attempts));
    return HL_ENOMEM;
  }
  h->base = base;
  h->carved_end = base;
  h->reserved = want;
  h->npages_max = (uint32_t)(want >> h->page_shift);
  h->prim.base = (uintptr_t)base;
  h->prim.page_shift = h->page_shift;
  h->bitmap_words = (uint32_t)((h->page_size / HL_GRANULE + 63) / 64);

  void *t = NULL;
  int e;
  if ((e = map_table(h, (size_t)h->npages_max * sizeof(hl_page), &t, &h->meta_bytes[0]))) goto fail;
  h->pages = t;
  size_t bm = (size_t)h->npages_max * 2 * h->bitmap_words * sizeof(uint64_t);
  if ((e = map_table(h, bm, &t, &h->meta_bytes[1]))) goto fail;
  h->bits = t;
  if (h->opt.mode == HL_MODE_MANUAL) { /* two tables (internal.h) */
    h->bits_stride = h->bitmap_words;
    h->abits = h->bits + (size_t)h->npages_max * h->bitmap_words;
  } else { /* interleaved */
    h->bits_stride = 2 * h->bitmap_words;
    h->abits = h->bits + h->bitmap_words;
  }
  if ((e = map_table(h, h->npages_max, &t, &h->meta_bytes[2]))) goto fail;
  h->tenure = t;
#ifdef HL_PRELOAD
  if ((e = map_table(h, (size_t)h->npages_max * sizeof(uint32_t), &t, &h->abits_at_bytes)))
    goto fail;
  h->abits_at = t;
  for (uint32_t k = 0; k <= HL_ABITS_MAX_WORDS; k++) h->abits_free[k] = HL_NIL;
  h->abits_bump = (uint64_t)h->npages_max * h->bitmap_words;
#endif
  if (h->opt.mode == HL_MODE_MANUAL) {
    if ((e = map_table(h, (size_t)(h->npages_max / 64 + 1) * h->nclasses * sizeof(uint64_t), &t,
                       &h->avail_bytes)))
      goto fail;
    h->avail_bm = t;
  }
  if (h->opt.subpage_release) {
    /* which OS pages of each page are released (release/subpage.c): two
     * bitmaps of OS pages per page, and a flag byte */
    size_t os = hl__prim_os_page_size();
    h->os_shift = (unsigned)__builtin_ctzll(os);
    h->os_per_page = (uint32_t)(h->page_size / os);
    h->sub_words = (h->os_per_page + 63) / 64;
    if ((e = map_table(h, (size_t)h->npages_max * 2 * h->sub_words * sizeof(uint64_t), &t,
                       &h->meta_bytes[3])))
      goto fail;
    h->sub_bits = t;
    if ((e = map_table(h, h->npages_max, &t, &h->meta_bytes[4]))) goto fail;
    h->sub_flags = t;
  }
  if (align) {
    h->chunk_shift = (unsigned)__builtin_ctzll(PRIM_HUGE_BYTES / h->page_size);
    if ((e = map_table(h, (h->npages_max >> h->chunk_shift) + 1, &t, &h->chunk_bytes))) goto fail;
    h->chunk = t;
    h->thp_ready_chunk = UINT32_MAX;
    h->thp_tail_chunk = UINT32_MAX;
  }

  /* thp=never: THP would make the kernel back the reservation with 2 MiB
   * pages and inflate RSS.  Either advice is given once over the whole
   * range, which changes the flags of the whole VMA and so does not split
   * it. */
  prim_result r = hl__prim_call(&h->prim, HL_SITE_reserve, h->base, h->reserved,
                            h->opt.thp == HL_THP_NEVER ? PRIM_NOHUGEPAGE : PRIM_HUGEPAGE);
  h->tally.thp_disabled = h->opt.thp == HL_THP_NEVER && r.err == 0;
  if (h->opt.thp != HL_THP_NEVER) {
    /* Refused, or a kernel whose THP mode is never: the heap works as with
     * thp=never (4 KiB faults), says so in thp_enabled and thp_errno, and
     * populates no chunk (2 MiB of 4 KiB pages per chunk would only inflate
     * RSS).  The chunk table still keeps the release at 2 MiB first. */
    h->tally.thp_errno = (uint64_t)(r.err ? r.err : hl__prim_os_thp_available() ? 0 : EOPNOTSUPP);
    h->tally.thp_enabled = h->tally.thp_errno == 0;
  }
  h->tally.reserved_bytes = h->reserved;

  for (uint32_t c = 0; c < HL_MAX_CLASSES; c++) {
    h->owned[c] = HL_NIL;
    h->partial_avail[c] = (hl_list){HL_NIL, HL_NIL, 0};
  }
  hl_list *lists[] = {&h->retired, &h->partial_full, &h->free_pool, &h->released_pool,
                      &h->reuse_failed};
  for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
    *lists[i] = (hl_list){HL_NIL, HL_NIL, 0};
  if (!h->opt.dump_unused) dump_init(h);
  hl__event(h, HL_EV_heap_created, 4, (int64_t)h->reserved, (int64_t)h->page_size,
            (int64_t)h->tally.thp_disabled, (int64_t)attempts);
  return HL_OK;
fail:
  hl__fmt_err(err, errlen, "reserve: side tables for %" PRIu32 " pages refused (%s)",
              h->npages_max, hl__strerror(e));
  hl__pages_destroy(h);
  return HL_ENOMEM;
}

void hl__pages_destroy(hl_heap *h) {
  if (h->sub_flags) hl__prim_os_unreserve(h->sub_flags, h->meta_bytes[4]);
  if (h->sub_bits) hl__prim_os_unreserve(h->sub_bits, h->meta_bytes[3]);
  h->sub_flags = NULL;
  h->sub_bits = NULL;
  if (h->chunk) hl__prim_os_unreserve(h->chunk, h->chunk_bytes);
  h->chunk = NULL;
#ifdef HL_PRELOAD
  if (h->abits_at) hl__prim_os_unreserve(h->abits_at, h->abits_at_bytes);
  h->abits_at = NULL;
#endif
  if (h->avail_bm) hl__prim_os_unreserve(h->avail_bm, h->avail_bytes);
  h->avail_bm = NULL;
  if (h->tenure) hl__prim_os_unreserve(h->tenure, h->meta_bytes[2]);
  if (h->bits) hl__prim_os_unreserve(h->bits, h->meta_bytes[1]);
  if (h->pages) hl__prim_os_unreserve(h->pages, h->meta_bytes[0]);
  if (h->base) hl__prim_os_unreserve(h->base, h->reserved);
  h->tenure = NULL;
  h->bits = h->abits = NULL;
  h->pages = NULL;
  h->base = NULL;
}
