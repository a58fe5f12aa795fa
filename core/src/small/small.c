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
 * header wastes 8 bytes, not 56), then four per doubling up to small_max. */
void hl__classes_init(hl_heap *h) {
  uint32_t max = (uint32_t)((h->opt.small_max + HL_GRANULE - 1) / HL_GRANULE * HL_GRANULE);
  uint32_t n = 0;
  for (uint32_t s = HL_GRANULE; s <= max && s <= 512; s += HL_GRANULE) h->cls_size[n++] = s;
  for (uint32_t base = 512; base < max && n < HL_MAX_CLASSES; base *= 2) {
    for (uint32_t k = 1; k <= 4 && n < HL_MAX_CLASSES; k++) {
      uint32_t s = base + base / 4 * k;
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
  uint32_t c = 0;
  for (uint32_t i = 0; i < entries; i++) {
    uint32_t bytes = i * HL_GRANULE;
    while (c + 1 < n && h->cls_size[c] < bytes) c++;
    h->size_to_cls[i] = (uint8_t)c;
  }
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

bool hl__free_slot_intact(const void *slot, size_t n) {
  uint64_t seal[2];
  memcpy(seal, slot, sizeof seal);
  if (seal[0] == (SEAL_TAG ^ (uint64_t)(uintptr_t)slot) && seal[1] == seal_hash(slot, n))
    return true;
  return hl__poison_intact(slot, n);
}

/* Charge k slots of class cls (k < 0: give them back): reserved slots count
 * as allocated until a flush gives back the ones not taken.  (Not the
 * trigger's since_cycle: the allocation sequence charges that per object.) */
static void aword_charge(hl_heap *h, uint32_t cls, int64_t k) {
  hl__charge(h, HL_SMALL, k * (int64_t)h->cls_size[cls], k);
}

/* Bits [0, n) of a word (n may exceed 64). */
static inline uint64_t low_bits(uint32_t n) { return n >= 64 ? ~0ULL : ((1ULL << n) - 1); }

/* Reserve the next word of free slots of page p, owned by class cls, for
 * the class's allocation word: the lowest word with a free slot below bump
 * (at or after the cursor), else up to a word's worth of slots from bump.
 * With sub-page release, the released OS pages those slots lie in are
 * restored first (the one check, on this slow path only, is whether any
 * page of the heap has one out).  1 when reserved, 0 when the page is full,
 * -1 when a restore failed (the page takes no slot now; nothing changed). */
static int aword_reserve(hl_heap *h, uint32_t cls, uint32_t p) {
  hl_page *d = &h->pages[p];
  uint64_t *ab = hl__allocs(h, p);
  uint32_t w, n = 0;
  uint64_t mask;
  if (d->nfree) {
    /* ends: a free slot lies below bump, at or after the cursor */
    for (w = d->cursor; !(mask = ~ab[w] & low_bits(d->bump - w * 64)); w++) {
    }
  } else if (d->bump < d->nslots) {
    w = d->bump / 64;
    uint32_t lo = d->bump % 64;
    n = 64 - lo;
    if (n > d->nslots - d->bump) n = d->nslots - d->bump;
    mask = low_bits(n) << lo;
  } else {
    return 0;
  }
  uint32_t sz = h->cls_size[cls];
  if (hl_unlikely(h->sub_pages != 0) && hl__sub_any(h, p)) {
    uint64_t first = (uint64_t)(w * 64 + (uint32_t)__builtin_ctzll(mask)) * sz;
    uint64_t last = (uint64_t)(w * 64 + 63 - (uint32_t)__builtin_clzll(mask)) * sz + sz;
    if (!hl__sub_restore(h, p, first, last)) return -1;
  }
  if (n) {
    d->bump += n;
  } else {
    d->cursor = w;
    d->nfree -= (uint32_t)__builtin_popcountll(mask);
  }
  uint32_t k = (uint32_t)__builtin_popcountll(mask);
  d->used += k;
  aword_charge(h, cls, k);
  h->aword[cls] = (hl_aword){.free = mask,
                             .ab = ab + w,
                             .base = hl__page_addr(h, p) + (uint64_t)w * 64 * sz,
                             .sz = sz,
                             .page = p,
                             .refs = (d->flags & PF_REFS) != 0};
  return 1;
}

void hl__aword_flush(hl_heap *h) {
  HL_ASSERT_LOCKED(h);
  for (uint32_t c = 0; c < h->nclasses; c++) {
    hl_aword *a = &h->aword[c];
    if (!a->free) continue;
    uint32_t k = (uint32_t)__builtin_popcountll(a->free);
    hl_page *d = &h->pages[a->page];
    uint32_t w = (uint32_t)(a->ab - hl__allocs(h, a->page));
    d->used -= k;
    d->nfree += k; /* below bump now, free */
    if (w < d->cursor) d->cursor = w;
    aword_charge(h, c, -(int64_t)k);
    a->free = 0;
  }
}

uint32_t hl__page_free_slots(const hl_heap *h, uint32_t p) {
  const hl_page *d = &h->pages[p];
  uint32_t n = d->nfree + (d->nslots - d->bump);
  if (hl__formatted(d->state) && h->aword[d->cls].free && h->aword[d->cls].page == p)
    n += (uint32_t)__builtin_popcountll(h->aword[d->cls].free);
  return n;
}

/* Take one slot of class cls when its allocation word is empty.  Lock held.
 * (The common case is hl__small_take in internal.h.) */
void *hl__take_refill(hl_heap *h, uint32_t cls) {
  HL_ASSERT_LOCKED(h);
  for (;;) {
    /* (another thread may have reserved a word while the lock was dropped) */
    if (h->aword[cls].free) return hl__small_take(h, cls);
    uint32_t p = h->owned[cls];
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
     * 6.6-7.0 s, the same peak RSS). */
    if (h->opt.generational && h->free_pool.head != HL_NIL) p = HL_NIL;
    if (p == HL_NIL) {
      p = hl__acquire_page(h, cls);
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
  for (uint32_t w = 0; w < words; w++) live += (uint32_t)__builtin_popcountll(ab[w] & mb[w]);
  uint32_t dead = d->used - live;
  *freed_objects += dead;
  if (dead) hl__sub_dirty(h, p);
  if (live == 0) {
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
  uint32_t idx = (uint32_t)(off / sz);
  if (idx >= d->bump) return NULL;
  if (!interior && off % sz) return NULL;
  if (!hl__bit(hl__allocs(h, p), idx)) return NULL;
  return base + (uint64_t)idx * sz;
}
