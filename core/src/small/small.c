/*
 * small.c -- BiBOP small objects: size classes, allocation inside a page
 * (the lowest free slot in the allocation bitmap, then bump), giving a slot back (manual mode) and
 * sweeping one page against the out-of-line mark and allocation bits.
 * Every function here runs under the heap lock.
 */
#include <stdlib.h>

#include "../internal.h"

#define POISON_BYTE 0xDB

/* Classes: every 16 bytes up to 512 (so a 256-byte payload plus its 8-byte
 * header wastes 8 bytes, not 56), then four per doubling up to small_max --
 * but eight from 512 bytes to 1 KiB in libheaplab-malloc.so.  Each class
 * keeps its own pages, so its pages are touched up to the most blocks it
 * ever held; a malloc's mid-sized blocks (strings, values, buffers, no
 * header to round up) fill fewer pages with the finer steps: bench-preload
 * server's class maxima (experiments/bench/class_model.c) 58,291 KiB with
 * four, 56,888 with eight (eight above 1 KiB too: 56,905, and 16 more
 * classes, each with a page and cache of its own).  The collected heaps keep
 * four: their experiments' figures were measured with them. */
#ifdef HL_PRELOAD
#define MID_CLASSES 8
#else
#define MID_CLASSES 4
#endif
void hl__classes_init(hl_heap *h) {
  uint32_t max = (uint32_t)((h->opt.small_max + HL_GRANULE - 1) / HL_GRANULE * HL_GRANULE);
  uint32_t n = 0;
  for (uint32_t s = HL_GRANULE; s <= max && s <= 512; s += HL_GRANULE) h->cls_size[n++] = s;
  for (uint32_t base = 512; base < max && n < HL_MAX_CLASSES; base *= 2) {
    uint32_t per = base == 512 ? MID_CLASSES : 4;
    for (uint32_t k = 1; k <= per && n < HL_MAX_CLASSES; k++) {
      uint32_t s = base + base / per * k;
      s = (s + HL_GRANULE - 1) / HL_GRANULE * HL_GRANULE;
      if (s > max) s = max;
      if (s > h->cls_size[n - 1]) h->cls_size[n++] = s;
      if (s == max) break;
    }
  }
  if (h->cls_size[n - 1] < max && n < HL_MAX_CLASSES) h->cls_size[n++] = max;
  h->nclasses = n;
  h->small_max = max;
  for (uint32_t k = 0; k < n; k++)
    h->cls_recip[k] = (((uint64_t)1 << HL_RECIP_SHIFT) + h->cls_size[k] - 1) / h->cls_size[k];
  uint32_t entries = max / HL_GRANULE + 1;
  h->size_to_cls = hl__sys_malloc(entries);
  /* the fast path's table: every object of payload and slots up to
   * small_max each, so it needs no bound check on the bytes */
  uint32_t fast_entries = (uint32_t)((hl__obj_bytes(max, max) + HL_GRANULE - 1) / HL_GRANULE + 1);
#ifdef HL_PRELOAD
  /* libheaplab-malloc.so makes no objects (hl_obj_new is not exported), and
   * a manual heap's table is all aword_none: 72 KiB written for nothing */
  if (h->opt.mode == HL_MODE_MANUAL) fast_entries = 1;
#endif
  h->aword_of = hl__sys_malloc(fast_entries * sizeof *h->aword_of);
  if (!h->size_to_cls || !h->aword_of) {
    hl__sys_free(h->size_to_cls);
    hl__sys_free(h->aword_of);
    h->size_to_cls = NULL;
    h->aword_of = NULL;
    return;
  }
  uint32_t c = 0;
  for (uint32_t i = 0; i < entries; i++) {
    uint32_t bytes = i * HL_GRANULE;
    while (c + 1 < n && h->cls_size[c] < bytes) c++;
    h->size_to_cls[i] = (uint8_t)c;
  }
  /* empty: cur + sz > end */
  for (uint32_t k = 0; k < n; k++) h->aword[k] = (hl_aword){.sz = h->cls_size[k], .page = HL_NIL};
  h->aword_none = (hl_aword){.cur = NULL, .end = NULL, .sz = HL_GRANULE, .page = HL_NIL};
  /* (a manual heap's objects never take the fast path: every entry empty) */
  bool collected = h->opt.mode == HL_MODE_COLLECTED;
  for (uint32_t i = 0; i < fast_entries; i++)
    h->aword_of[i] = collected && i < entries ? &h->aword[h->size_to_cls[i]] : &h->aword_none;
}

void hl__poison(void *p, size_t n) { memset(p, POISON_BYTE, n); }

bool hl__poison_intact(const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++)
    if (b[i] != POISON_BYTE) return false;
  return true;
}

/* Manual mode, verify: a block freed by its owner keeps its bytes -- a
 * client may read its own free pattern back (CPython's debug hooks fill a
 * freed block with 0xDD and _PyObject_IsFreed looks for it) -- except the
 * first 16, which hold a seal: a tag and a hash of the rest, both keyed by
 * the slot's address.  (malloc implementations keep their free-list links
 * there, glibc's tcache too, so clients expect those bytes to change.)  A
 * write after free breaks the seal.  Slots are at least HL_GRANULE (16)
 * bytes and multiples of 16. */
#define SEAL_TAG 0xDBF7EEDDB10C4A5Eull
static uint64_t seal_hash(const uint8_t *slot, size_t n) {
  uint64_t x = (uint64_t)(uintptr_t)slot * 0x9E3779B97F4A7C15ull;
  for (size_t i = 16; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, slot + i, 8);
    x = (x ^ w) * 0x100000001B3ull;
    x ^= x >> 29;
  }
  return x;
}

void hl__seal_freed(void *slot, size_t n) {
  uint64_t seal[2] = {SEAL_TAG ^ (uint64_t)(uintptr_t)slot, seal_hash(slot, n)};
  memcpy(slot, seal, sizeof seal);
}

uint64_t hl__free_page_written(const hl_heap *h, uint32_t p, bool skip_out) {
  const uint64_t os = hl__prim_os_page_size(), pw = 0x0101010101010101ull * POISON_BYTE;
  const uint64_t *out = skip_out && h->sub_flags ? hl__sub_out(h, p) : NULL;
  const uint8_t *base = hl__page_addr(h, p);
  for (uint64_t j = 0; j < h->page_size / os; j++) {
    if (out && ((out[j >> 6] >> (j & 63)) & 1)) continue; /* (released: not read) */
    const uint8_t *b = base + j * os;
    uint64_t first;
    memcpy(&first, b, 8);
    if (first != pw && first != 0) return j * os;
    for (uint64_t i = 8; i < os; i += 8) {
      uint64_t w;
      memcpy(&w, b + i, 8);
      if (w != first) return j * os + i;
    }
  }
  return UINT64_MAX;
}

bool hl__free_slot_intact(const void *slot, size_t n) {
  uint64_t seal[2];
  memcpy(seal, slot, sizeof seal);
  if (seal[0] == (SEAL_TAG ^ (uint64_t)(uintptr_t)slot) && seal[1] == seal_hash(slot, n))
    return true;
  return hl__poison_intact(slot, n);
}

size_t hl__free_slot_damage(const void *slot, size_t n, bool *exact) {
  *exact = true;
  if (hl__free_slot_intact(slot, n)) return n;
  uint64_t tag;
  memcpy(&tag, slot, sizeof tag);
  if (tag == (SEAL_TAG ^ (uint64_t)(uintptr_t)slot)) {
    *exact = false; /* the seal's hash: somewhere past its tag */
    return 8;
  }
  const uint8_t *b = slot;
  size_t i = 0;
  while (i < n && b[i] == POISON_BYTE) i++;
  return i < n ? i : 0;
}

/* Charge k slots of class cls (k < 0: give them back): reserved slots count
 * as allocated until a flush gives back the ones not taken -- and, in the
 * collected mode, as allocated since the last cycle: the trigger's bytes are
 * charged for the whole run too (below). */
static void aword_charge(hl_heap *h, uint32_t cls, int64_t k) {
  hl__charge(h, HL_SMALL, k * (int64_t)h->cls_size[cls], k);
  if (h->opt.mode == HL_MODE_COLLECTED)
    h->ctr.since_cycle[HL_SMALL] += (uint64_t)(k * (int64_t)h->cls_size[cls]);
}

#define RUN_MAX 256 /* slots of a run at most (aword_reserve) */

/* Collected mode: the most slots a run may have so that the trigger's count
 * (charged for whole runs) passes alloc_limit no sooner than it did when
 * every object was charged as it was taken -- the run stops at the first
 * slot at or past the limit, so the fast path needs no compare with it, and
 * a cycle starts at the same byte (a cycle started early moves where the
 * minor cycles fall in binary-trees' trees: its peak RSS went from 207 to 229
 * MiB when the charge was a whole word's, docs/performance.md, change 14).
 * At least 1: with the background collector a cycle requested has not run
 * yet, and allocation goes on one slot at a time until it has. */
static uint32_t run_cap(const hl_heap *h, uint64_t sz) {
  if (h->opt.mode != HL_MODE_COLLECTED)
    return h->manual_run && h->manual_run < RUN_MAX ? h->manual_run : RUN_MAX;
  uint64_t since = h->ctr.since_cycle[HL_SMALL], lim = h->alloc_limit;
  if (lim <= since) return 1;
  uint64_t k = (lim - since + sz - 1) / sz;
  return k < RUN_MAX ? (uint32_t)k : RUN_MAX;
}

/* Bits [0, n) of a word (n may exceed 64). */
static inline uint64_t low_bits(uint32_t n) { return n >= 64 ? ~0ULL : ((1ULL << n) - 1); }

/* Set or clear the bits [i, i + n) of a bitmap. */
static void bits_set(uint64_t *bm, uint32_t i, uint32_t n, bool set) {
  while (n) {
    uint32_t b = i % 64, m = 64 - b < n ? 64 - b : n;
    uint64_t mask = low_bits(m) << b;
    if (set) bm[i / 64] |= mask;
    else bm[i / 64] &= ~mask;
    i += m;
    n -= m;
  }
}

/* The free slots from slot i on, up to slot limit: zero allocation bits. */
static uint32_t free_run(const uint64_t *ab, uint32_t i, uint32_t limit) {
  uint32_t start = i;
  while (i < limit) {
    uint64_t x = ab[i / 64] >> (i % 64); /* bit 0: slot i */
    if (x) {
      i += (uint32_t)__builtin_ctzll(x);
      break;
    }
    i += 64 - i % 64;
  }
  return (i < limit ? i : limit) - start;
}

/* Reserve the next run of free slots of page p, owned by class cls, for
 * the class's allocation run: the lowest run of free slots below bump (from
 * the cursor's word on), else slots from bump -- at most RUN_MAX, and in the
 * collected mode no further than the trigger (run_cap).  Its allocation bits
 * are set and it is charged now (an object with slots taken from it has its
 * slot cleared when taken: hl__slot_zero).  1 when
 * reserved, 0 when the page is full, -1 when a released OS page of the run
 * would not come back (sub-page release; the page takes no slot now).  (A run of RUN_MAX 32-byte slots is 8 KiB: the
 * refill, a few hundred instructions through the allocation sequence, comes
 * once per 256 objects.) */
static int aword_reserve(hl_heap *h, uint32_t cls, uint32_t p) {
  hl_page *d = &h->pages[p];
  uint64_t *ab = hl__allocs(h, p);
  uint64_t sz = h->cls_size[cls];
  uint32_t cap = run_cap(h, sz), first, k;
  bool from_bump;
  if (d->nfree) {
    /* ends: a free slot lies below bump, at or after the cursor */
    uint32_t w;
    uint64_t free;
    for (w = d->cursor; !(free = ~ab[w] & low_bits(d->bump - w * 64)); w++) {
    }
    d->cursor = w;
    first = w * 64 + (uint32_t)__builtin_ctzll(free);
    k = free_run(ab, first, d->bump < first + cap ? d->bump : first + cap);
    from_bump = false;
  } else if (d->bump < d->nslots) {
    first = d->bump;
    k = d->nslots - d->bump < cap ? d->nslots - d->bump : cap;
    from_bump = true;
  } else {
    return 0;
  }
  /* sub-page release: the released OS pages the run lies in come back
   * first (the one check on this slow path: does any page of the heap have
   * one out); when one would not, nothing has changed */
  if (hl_unlikely(h->sub_pages != 0) && hl__sub_any(h, p) &&
      !hl__sub_restore(h, p, (uint64_t)first * sz, (uint64_t)(first + k) * sz))
    return -1;
  if (from_bump) d->bump += k;
  else d->nfree -= k;
  bits_set(ab, first, k, true);
  d->used += k;
  aword_charge(h, cls, k);
  uint8_t *at = hl__page_addr(h, p) + (uint64_t)first * sz;
  bool refs = (d->flags & PF_REFS) != 0;
  h->aword[cls] = (hl_aword){.cur = at, .end = at + k * sz, .sz = sz, .page = p,
                             .refs_max = refs ? UINT64_MAX : 0};
  return 1;
}

/* Slots [0, run) of class cls's run not taken yet. */
static inline uint32_t aword_left(const hl_aword *a) {
  return a->end > a->cur ? (uint32_t)((uint64_t)(a->end - a->cur) / a->sz) : 0;
}

void hl__aword_flush(hl_heap *h) {
  HL_ASSERT_LOCKED(h);
  for (uint32_t c = 0; c < h->nclasses; c++) {
    hl_aword *a = &h->aword[c];
    uint32_t k = aword_left(a);
    if (k) {
      hl_page *d = &h->pages[a->page];
      uint32_t first = (uint32_t)((uint64_t)(a->cur - hl__page_addr(h, a->page)) / a->sz);
      bits_set(hl__allocs(h, a->page), first, k, false);
      d->used -= k;
      d->nfree += k; /* below bump now, free */
      if (first / 64 < d->cursor) d->cursor = first / 64;
      aword_charge(h, c, -(int64_t)k); /* (their bytes untouched: verify's poison intact) */
    }
    a->cur = a->end = NULL;
  }
}

void hl__aword_refs(hl_heap *h, uint32_t cls) {
  HL_ASSERT_LOCKED(h);
  hl_aword *a = &h->aword[cls];
  a->refs_max = UINT64_MAX;
  h->pages[a->page].flags |= PF_REFS;
}

uint32_t hl__page_free_slots(const hl_heap *h, uint32_t p) {
  const hl_page *d = &h->pages[p];
  uint32_t n = d->nfree + (d->nslots - d->bump);
  if (hl__formatted(d->state) && h->aword[d->cls].page == p) n += aword_left(&h->aword[d->cls]);
  return n;
}

/* Take one slot of class cls when its allocation word is empty.  Lock held.
 * (The common case is hl__small_take in internal.h.) */
void *hl__take_refill(hl_heap *h, uint32_t cls) {
  HL_ASSERT_LOCKED(h);
  /* a manual refill's run (manual_run): another thread's refill may set it,
   * and end it at 0 (RUN_MAX), while hl__acquire_page drops the lock -- a
   * run of its size was then reserved and charged past this refill's want
   * and the room heap_limit_bytes held for it (manual.c malloc_small) */
  uint32_t run = h->manual_run;
  for (;;) {
    /* (another thread may have reserved a run while the lock was dropped) */
    if (aword_left(&h->aword[cls])) return hl__small_take(h, cls);
    uint32_t p = h->owned[cls];
    if (h->avail_bm) {
      /* Manual mode: address-ordered first fit -- the class's lowest page
       * with free slots serves, and inside it the lowest free slots (then
       * its untouched tail): a class's touched pages stay near the most
       * blocks it ever held, where the owned page's tail went on being
       * touched while holes the frees left in other pages waited
       * (bench-preload classes: 610 KiB of holes at 64 KiB of cache per
       * class, 1,440 KiB at 16 KiB). */
      uint32_t lo = hl__avail_lowest(h, cls);
      if (lo != HL_NIL && (p == HL_NIL || lo < p)) {
        if (p != HL_NIL) {
          h->owned[cls] = HL_NIL;
          hl_page *d = &h->pages[p];
          if (d->used == 0 && !(h->sub_held && (h->sub_flags[p] & SUB_BUSY))) {
            hl__page_unformat(h, p);
            hl__page_to_state(h, p, PS_FREE, true);
          } else {
            hl__page_to_state(h, p, PS_PARTIAL, false);
          }
        }
        hl__page_to_state(h, lo, PS_OWNED, false);
        h->owned[cls] = p = lo;
      }
    }
    if (p != HL_NIL) {
      int got = aword_reserve(h, cls, p);
      if (got > 0) continue;
      h->owned[cls] = HL_NIL;
      if (got == 0) {
        /* Full: it waits for the next sweep. */
        hl__page_to_state(h, p, PS_RETIRED, false);
      } else {
        /* A released OS page would not come back (SUB_FAILED now): the page
         * waits, off the avail lists, for a trim to try again. */
        hl__page_to_state(h, p, PS_PARTIAL, false);
      }
      continue;
    }
    p = h->partial_avail[cls].head;
    /* Generational: an empty (warm) page before a partial one.  A partial
     * page holds old objects, so every store into its young objects costs
     * the write barrier a mark-bit read, and its holes are found in the
     * bitmap instead of by bump (binary-trees at depth 20: 6.4 s against
     * 6.6-7.0 s, the same peak RSS).  Not when the empty pages are the
     * last room: once the reservation is carved and no more than one empty
     * page per class is left, each cycle moved a busy class to one more of
     * them, its partial pages kept their room, and another class found no
     * page at all (fuzz_heap: a fill's 16-byte objects on three pages, one
     * per minor cycle in it, and its index refused with 86 KB live). */
    if (h->opt.generational && h->free_pool.head != HL_NIL && !hl__pages_scarce(h)) p = HL_NIL;
    if (p == HL_NIL) {
      p = hl__acquire_page(h, cls);
      h->manual_run = run;
      if (p == HL_NIL) return NULL;
      if (h->owned[cls] != HL_NIL) {
        /* Another thread took an owned page while the lock was dropped
         * for a restore; keep ours as room for later. */
        hl__page_to_state(h, p, PS_PARTIAL, true);
        continue;
      }
    }
    hl__page_to_state(h, p, PS_OWNED, false);
    h->owned[cls] = p;
  }
}

/* Manual mode: give a slot back to its page.  Lock held.  Returns false for
 * a pointer that is not a live slot (double free, foreign pointer). */
bool hl__small_give_checked(hl_heap *h, void *slot) {
  HL_ASSERT_LOCKED(h);
  uint32_t p = hl__page_of(h, slot);
  hl_page *d = &h->pages[p];
  if (!hl__formatted(d->state)) return false;
  uint32_t sz = h->cls_size[d->cls];
  uint8_t *base = hl__page_addr(h, p);
  uint64_t off = (uint64_t)((uint8_t *)slot - base);
  uint32_t idx = (uint32_t)(off / sz);
  if (off % sz || idx >= d->bump) return false;
  uint64_t *ab = hl__allocs(h, p);
  if (!hl__bit(ab, idx)) return false;
  hl__bit_clear(ab, idx);
  if (h->opt.verify) hl__seal_freed(slot, sz);
  if (idx / 64 < d->cursor) d->cursor = idx / 64;
  d->nfree++;
  d->used--;
  if (h->sub_flags) {
    hl__sub_dirty(h, p);
    h->sub_freed += sz;
  }
  /* (a page a trim is advising stays put: the trim files it when done) */
  if (d->used == 0 && d->state != PS_OWNED &&
      !(h->sub_held && (h->sub_flags[p] & SUB_BUSY))) {
    hl__page_unformat(h, p);
    hl__page_to_state(h, p, PS_FREE, true);
  } else if (d->state == PS_RETIRED || (d->state == PS_PARTIAL && !(d->flags & PF_AVAIL))) {
    hl__page_to_state(h, p, PS_PARTIAL, false);
  }
  return true;
}


/* Sweep one formatted page: every allocated slot without a mark is freed.
 * A page with nothing live is detected from the bitmaps alone and never
 * written to.  Returns the bytes still live. */
uint64_t hl__sweep_page(hl_heap *h, uint32_t p, uint64_t *freed_objects) {
  HL_ASSERT_LOCKED(h);
  hl_page *d = &h->pages[p];
  uint32_t sz = h->cls_size[d->cls];
  uint32_t words = (d->nslots + 63) / 64;
  uint64_t *ab = hl__allocs(h, p);
  const uint64_t *mb = hl__marks(h, p);
  uint32_t live = 0;
  for (uint32_t w = 0; w < words; w++) live += hl__popcount64(ab[w] & mb[w]);
  uint32_t dead = d->used - live;
  *freed_objects += dead;
  if (dead) hl__sub_dirty(h, p);
  if (live == 0) {
    /* verify: the page goes to the free pool poisoned whole (its other
     * bytes are: format poisoned them, a sweep poisons what it frees), so
     * that a write after free is found there too (hl__free_page_written) */
    if (h->opt.verify) {
      uint8_t *base = hl__page_addr(h, p);
      for (uint32_t w = 0; w < words; w++)
        for (uint64_t kill = ab[w]; kill; kill &= kill - 1)
          hl__poison(base + (uint64_t)(w * 64 + (uint32_t)__builtin_ctzll(kill)) * sz, sz);
    }
    memset(ab, 0, words * sizeof(uint64_t));
    d->used = 0;
    return 0;
  }
  if (dead) {
    /* Freeing is clearing allocation bits: the dead slots themselves are not
     * touched (except to poison them when verifying). */
    uint8_t *base = hl__page_addr(h, p);
    uint32_t first = UINT32_MAX;
    for (uint32_t w = 0; w < words; w++) {
      uint64_t kill = ab[w] & ~mb[w];
      if (!kill) continue;
      if (first == UINT32_MAX) first = w;
      ab[w] &= mb[w];
      if (h->opt.verify)
        for (; kill; kill &= kill - 1)
          hl__poison(base + (uint64_t)(w * 64 + (uint32_t)__builtin_ctzll(kill)) * sz, sz);
    }
    if (first < d->cursor) d->cursor = first;
    d->nfree += dead;
    d->used = live;
  }
  return (uint64_t)live * sz;
}

/* The start of the live small object containing (interior) or starting at
 * addr, or NULL. */
void *hl__small_resolve(const hl_heap *h, const void *addr, bool interior) {
  if (!hl__in_heap(h, addr)) return NULL;
  uint32_t p = hl__page_of(h, addr);
  const hl_page *d = &h->pages[p];
  if (!hl__formatted(d->state)) return NULL;
  uint32_t sz = h->cls_size[d->cls];
  uint8_t *base = hl__page_addr(h, p);
  uint64_t off = (uint64_t)((const uint8_t *)addr - base);
  uint32_t idx = hl__slot_index(h, off, d->cls); /* (no divide: hl_ref_get resolves each slot) */
  if (idx >= d->bump) return NULL;
  if (!interior && off != (uint64_t)idx * sz) return NULL;
  if (!hl__bit(hl__allocs(h, p), idx)) return NULL;
  return base + (uint64_t)idx * sz;
}
