/*
 * mark.c -- precise marking through reference slots: the mark stack and its
 * drain (headers prefetched through a small FIFO), validating every slot
 * value against the allocation bits or the large set before following it,
 * the overflow rescan that never loses an object, the generational mode's
 * dirty-page scan and tenuring (with its remembered set), and the verify
 * check that no marked object refers to an unmarked one.
 *
 * What a cycle marks and when is gc/cycle.c; this file is how.  Everything
 * here runs under the heap lock, inside a cycle.
 */
#include <stdio.h>
#include <stdlib.h>

#include "../internal.h"

void *hl__resolve(hl_heap *h, const void *addr, bool interior) {
  if ((const uint8_t *)addr >= h->base && (const uint8_t *)addr < h->base + h->reserved)
    return hl__small_resolve(h, addr, interior);
  /* a large object resolves from its start only, interior or not */
  if (hl__large_contains(h, addr)) return (void *)addr;
  return NULL;
}

static bool mark_push(hl_heap *h, void *obj) {
  if (h->mark_top == h->mark_cap) {
    uint64_t cap = h->mark_cap ? h->mark_cap * 2 : 65536;
    void **n = hl__sys_realloc(h->mark_stack, cap * sizeof(void *));
    if (!n) return false;
    h->mark_stack = n;
    h->mark_cap = cap;
  }
  h->mark_stack[h->mark_top++] = obj;
  return true;
}

#define mark_overflowed (h->mark_overflow)
/* h->marked_bytes: bytes marked by this mark, what is really live.  The byte
 * counters after a sweep still hold the dead objects of partial pages no
 * sweep has visited, and a trigger grown from those grew the heap from its
 * own garbage. */

/* Objects are pushed marked but unread: the header is first read by drain,
 * after a prefetch (tracing a heap bigger than the cache is a cache miss per
 * object, half the mark time when the header was read here). */
static inline void mark_found(hl_heap *h, void *obj) {
  if (hl_unlikely(!mark_push(h, obj))) mark_overflowed = true;
}

static void mark_large(hl_heap *h, void *obj) {
  hl_large *l = hl__large_of(obj);
  if (l->mark) return;
  l->mark = 1;
  h->marked_bytes += l->size;
  mark_found(h, obj);
}

/* Mark obj (a handle's object: known to be a live object start). */
static void mark_one(hl_heap *h, void *obj) {
  if (hl__in_heap(h, obj)) {
    uint32_t p = hl__page_of(h, obj);
    uint32_t idx = hl__slot_index(h, (uint64_t)((uint8_t *)obj - hl__page_addr(h, p)), h->pages[p].cls);
    uint64_t *mb = hl__marks(h, p);
    if (hl__bit(mb, idx)) return;
    hl__bit_set(mb, idx);
    h->marked_bytes += h->cls_size[h->pages[p].cls];
    h->pages[p].flags |= PF_OLD;
    if (h->pages[p].flags & PF_REFS) mark_found(h, obj);
  } else {
    mark_large(h, obj);
  }
}

/* Mark what a slot or root word v refers to.  A word may hold anything a
 * client stored, so a small object is validated -- formatted page, below the
 * bump, allocation bit, and (precise) the exact start -- in the same page
 * lookup that marks it (hl__resolve's checks, without a second lookup). */
static inline void mark_value(hl_heap *h, void *v, bool interior) {
  if (!v) return;
  const uint8_t *a = v;
  if (hl__in_heap(h, a)) {
    uint32_t p = hl__page_of(h, a);
    hl_page *d = &h->pages[p];
    if (!hl__formatted(d->state)) return;
    uint8_t *base = hl__page_addr(h, p);
    uint64_t off = (uint64_t)(a - base);
    uint32_t idx = hl__slot_index(h, off, d->cls);
    if (idx >= d->bump) return;
    uint64_t start = (uint64_t)idx * h->cls_size[d->cls];
    if (!interior && start != off) return;
    if (!hl__bit(hl__allocs(h, p), idx)) return;
    uint64_t *mb = hl__marks(h, p);
    if (hl__bit(mb, idx)) return;
    hl__bit_set(mb, idx);
    h->marked_bytes += h->cls_size[d->cls];
    if (!(d->flags & PF_OLD)) d->flags |= PF_OLD;
    /* Pages of objects without slots (a fill's payloads) are marked without
     * a push: no header read, the miss per object the marker otherwise pays. */
    if (d->flags & PF_REFS) mark_found(h, base + start);
    return;
  }
  if (a >= h->base && a < h->base + h->reserved) return; /* reserved, not carved */
  if (hl__large_contains(h, a)) mark_large(h, v);
}

/* Trace everything pushed.  Popped objects wait in a small FIFO after a
 * prefetch, so their headers arrive while earlier objects are scanned. */
#define PREFETCH_DEPTH 16
static void drain(hl_heap *h) {
  void *fifo[PREFETCH_DEPTH];
  unsigned head = 0, n = 0;
  for (;;) {
    while (n < PREFETCH_DEPTH && h->mark_top) {
      void *o = h->mark_stack[--h->mark_top];
      __builtin_prefetch(o);
      fifo[(head + n++) % PREFETCH_DEPTH] = o;
    }
    if (!n) return;
    void *obj = fifo[head];
    head = (head + 1) % PREFETCH_DEPTH;
    n--;
    void **slots = hl__slots(obj);
    uint32_t refs = ((hl_objhdr *)obj)->refs;
    for (uint32_t i = 0; i < refs; i++) mark_value(h, slots[i], false);
  }
}

/* After a mark stack overflow: trace from every marked object again until
 * nothing new is found.  Slow, but never loses a live object. */
static void rescan_marked(hl_heap *h) {
  while (mark_overflowed) {
    mark_overflowed = false;
    for (uint32_t p = 0; p < h->high_water; p++) {
      hl_page *d = &h->pages[p];
      if (!hl__formatted(d->state)) continue;
      uint32_t sz = h->cls_size[d->cls];
      for (uint32_t i = 0; i < d->bump; i++) {
        if (!hl__bit(hl__marks(h, p), i)) continue;
        void *obj = hl__page_addr(h, p) + (uint64_t)i * sz;
        void **slots = hl__slots(obj);
        for (uint32_t k = 0; k < ((hl_objhdr *)obj)->refs; k++) mark_value(h, slots[k], false);
        drain(h);
      }
    }
    for (hl_large *l = h->large_head; l; l = l->next) {
      if (!l->mark) continue;
      void *obj = l + 1;
      void **slots = hl__slots(obj);
      for (uint32_t k = 0; k < ((hl_objhdr *)obj)->refs; k++) mark_value(h, slots[k], false);
      drain(h);
    }
  }
}

/* Trace the slots of one object already marked (the dirty-page scan). */
static void trace_slots(hl_heap *h, void *obj) {
  void **slots = hl__slots(obj);
  uint32_t refs = ((hl_objhdr *)obj)->refs;
  for (uint32_t k = 0; k < refs; k++) mark_value(h, slots[k], false);
  drain(h);
}

/* The marked objects of formatted page p, in address order:
 *   marked_iter it = marked_begin(h, p);
 *   for (void *obj; (obj = marked_next(&it));) ...
 * (a word's marks are read when the iteration reaches it) */
typedef struct marked_iter {
  const uint64_t *mb, *ab;
  uint8_t *base;
  uint32_t sz, w, words;
  uint64_t bits;
} marked_iter;

static inline marked_iter marked_begin(const hl_heap *h, uint32_t p) {
  const hl_page *d = &h->pages[p];
  marked_iter it = {hl__marks(h, p), hl__allocs(h, p), hl__page_addr(h, p),
                    h->cls_size[d->cls], 0, (d->bump + 63) / 64, 0};
  if (it.words) it.bits = it.mb[0] & it.ab[0];
  return it;
}

static inline void *marked_next(marked_iter *it) {
  while (!it->bits) {
    if (++it->w >= it->words) return NULL;
    it->bits = it->mb[it->w] & it->ab[it->w];
  }
  uint32_t i = it->w * 64 + (uint32_t)__builtin_ctzll(it->bits);
  it->bits &= it->bits - 1;
  return it->base + (uint64_t)i * it->sz;
}

/* Trace the slots of every marked object of formatted page p. */
static void trace_marked_on(hl_heap *h, uint32_t p) {
  marked_iter it = marked_begin(h, p);
  for (void *obj; (obj = marked_next(&it));) trace_slots(h, obj);
}

/* Generational, minor cycle: the old (marked) objects on pages the write
 * barrier dirtied may hold the only reference to a young object; trace them
 * again.  Their dirt is consumed: afterwards what they refer to is marked. */
static void mark_dirty(hl_heap *h) {
  for (uint32_t p = 0; p < h->high_water; p++) {
    hl_page *d = &h->pages[p];
    if (!(d->flags & PF_DIRTY)) continue;
    d->flags &= (uint8_t)~PF_DIRTY;
    if (!hl__formatted(d->state) || !(d->flags & PF_REFS)) continue;
    h->tally.dirty_pages_scanned++;
    trace_marked_on(h, p);
  }
  for (hl_large *l = h->large_head; l; l = l->next) {
    if (!l->dirty) continue;
    l->dirty = 0;
    if (l->mark) trace_slots(h, l + 1);
  }
}

/* ---- tenuring (generational) ----
 * A full mark clears the marks of every page and traces the whole live set
 * again -- binary-trees' long-lived tree, 2 M objects, 25 times.  A page that
 * is at least 7/8 live after two full marks in a row is tenured: later full
 * marks keep its marks (its objects stay live) and do not trace it, until a
 * whole mark (every tenure_full_marks-th full mark, an explicit collection,
 * pressure) untenures every page and marks everything.  A tenured page takes
 * no new objects.  Its objects' references to objects that are not tenured
 * are the full mark's remembered set: a page that may hold one (found when
 * it is tenured, or a store into it through the write barrier since) is
 * TN_REMEMBER, and a full mark traces its marked objects. */

/* Whether a marked object of page p refers to an object not tenured. */
static bool refers_untenured(hl_heap *h, uint32_t p) {
  if (!(h->pages[p].flags & PF_REFS)) return false;
  marked_iter it = marked_begin(h, p);
  for (void *obj; (obj = marked_next(&it));) {
    void **slots = hl__slots(obj);
    for (uint32_t k = 0; k < ((hl_objhdr *)obj)->refs; k++) {
      void *v = hl__resolve(h, slots[k], false);
      if (!v) continue;
      if (!hl__in_heap(h, v) || !(h->tenure[hl__page_of(h, v)] & TN_TENURED)) return true;
    }
  }
  return false;
}

static void mark_remembered(hl_heap *h) {
  if (!h->tenured_pages) return;
  for (uint32_t p = 0; p < h->high_water; p++) {
    if ((h->tenure[p] & (TN_TENURED | TN_REMEMBER)) != (TN_TENURED | TN_REMEMBER)) continue;
    h->tally.remembered_pages_scanned++;
    trace_marked_on(h, p);
  }
}

/* Before a whole mark: every page is untenured (its marks are cleared with
 * the others'). */
void hl__untenure_all(hl_heap *h) {
  HL_ASSERT_LOCKED(h);
  if (h->tenured_pages)
    for (uint32_t p = 0; p < h->high_water; p++) h->tenure[p] &= (uint8_t)~(TN_TENURED | TN_REMEMBER);
  h->tenured_pages = 0;
  h->tenured_bytes = 0;
}

/* After a full mark's sweep: tenure the pages dense now and at the last full
 * mark; drop TN_REMEMBER from tenured pages that no longer need it. */
void hl__tenure_pages(hl_heap *h) {
  HL_ASSERT_LOCKED(h);
  for (uint32_t p = 0; p < h->high_water; p++) {
    hl_page *d = &h->pages[p];
    uint8_t *tn = &h->tenure[p];
    if (*tn & TN_TENURED) {
      if ((*tn & TN_REMEMBER) && !refers_untenured(h, p)) *tn &= (uint8_t)~TN_REMEMBER;
      continue;
    }
    uint32_t live = 0;
    if (d->state == PS_PARTIAL) {
      const uint64_t *mb = hl__marks(h, p), *ab = hl__allocs(h, p);
      for (uint32_t w = 0; w < (d->bump + 63) / 64; w++)
        live += (uint32_t)__builtin_popcountll(mb[w] & ab[w]);
    }
    /* dense: 7/8 live, and swept (no dead object still allocated) */
    bool dense = live == d->used && (uint64_t)live * 8 >= (uint64_t)d->nslots * 7;
    if (!dense) {
      *tn &= (uint8_t)~TN_DENSE;
    } else if (!(*tn & TN_DENSE)) {
      *tn |= TN_DENSE;
    } else {
      *tn |= TN_TENURED;
      if (refers_untenured(h, p)) *tn |= TN_REMEMBER;
      h->tenured_pages++;
      h->tenured_bytes += (uint64_t)live * h->cls_size[d->cls];
      if (d->flags & PF_AVAIL) hl__page_to_state(h, p, PS_PARTIAL, false); /* off the avail list */
    }
  }
}

uint64_t hl__mark(hl_heap *h, bool minor) {
  HL_ASSERT_LOCKED(h);
  h->marked_bytes = 0;
  mark_overflowed = false;
  if (minor) mark_dirty(h);
  else mark_remembered(h);
  void *obj;
  HL_HANDLES_FOR_EACH(h, obj) {
    mark_one(h, obj);
    drain(h);
  }
  for (uint32_t r = 0; r < h->nregions; r++) {
    hl_root_region *rg = &h->regions[r];
    for (uint64_t w = 0; w < rg->words; w++) {
      mark_value(h, rg->base[w], rg->conservative);
      drain(h);
    }
  }
  rescan_marked(h);
  return h->marked_bytes;
}

/* A full mark starts from clear marks; the barrier's dirt is moot then.
 * Tenured pages keep theirs. */
static void clear_marks_of_list(hl_heap *h, hl_list *l) {
  for (uint32_t p = l->head; p != HL_NIL; p = h->pages[p].next) {
    if (h->tenure[p] & TN_TENURED) continue;
    memset(hl__marks(h, p), 0, (h->pages[p].nslots + 63) / 64 * sizeof(uint64_t));
    h->pages[p].flags &= (uint8_t)~(PF_DIRTY | PF_OLD);
  }
}

void hl__marks_clear(hl_heap *h) {
  HL_ASSERT_LOCKED(h);
  clear_marks_of_list(h, &h->retired);
  clear_marks_of_list(h, &h->partial_full);
  for (uint32_t c = 0; c < h->nclasses; c++) clear_marks_of_list(h, &h->partial_avail[c]);
  for (hl_large *l = h->large_head; l; l = l->next) l->mark = l->dirty = 0;
}

/* Verify, between mark and sweep: every reference held by a marked object
 * leads to a marked object.  In a minor cycle marked (old) objects are not
 * traced, so a reference from one to an unmarked object -- a store that
 * missed the write barrier -- is a live object this sweep would free.  (A
 * slot value that is not an object start is ignored, as the marker ignores
 * it.) */
static int slots_marked(hl_heap *h, void *obj, char *msg, size_t len) {
  void **slots = hl__slots(obj);
  for (uint32_t k = 0; k < ((hl_objhdr *)obj)->refs; k++) {
    void *v = hl__resolve(h, slots[k], false);
    if (!v) continue;
    bool marked;
    if (hl__in_heap(h, v)) {
      uint32_t q = hl__page_of(h, v);
      uint64_t off = (uint64_t)((uint8_t *)v - hl__page_addr(h, q));
      marked = hl__bit(hl__marks(h, q), hl__slot_index(h, off, h->pages[q].cls));
    } else {
      marked = hl__large_of(v)->mark;
    }
    if (!marked) {
      snprintf(msg, len, "marked object %p slot %u refers to unmarked object %p (a store "
               "without the write barrier?)", obj, k, v);
      return HL_ECHECK;
    }
  }
  return HL_OK;
}

int hl__check_marks_closed(hl_heap *h, char *msg, size_t len) {
  HL_ASSERT_LOCKED(h);
  for (uint32_t p = 0; p < h->high_water; p++) {
    hl_page *d = &h->pages[p];
    if (!hl__formatted(d->state) || !(d->flags & PF_REFS)) continue;
    marked_iter it = marked_begin(h, p);
    for (void *obj; (obj = marked_next(&it));)
      if (slots_marked(h, obj, msg, len)) return HL_ECHECK;
  }
  for (hl_large *l = h->large_head; l; l = l->next)
    if (l->mark && slots_marked(h, l + 1, msg, len)) return HL_ECHECK;
  return HL_OK;
}

/* One full cycle.  Lock held; returns with it held. */

/* After a failed check: trace from every marked object before sweeping, so
 * that nothing live is freed. */
void hl__mark_repair(hl_heap *h) {
  HL_ASSERT_LOCKED(h);
  mark_overflowed = true;
  rescan_marked(h);
}
