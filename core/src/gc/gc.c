/*
 * gc.c -- the collected heap: object allocation, precise mark through
 * reference slots, sweep, and the cycle policy (major sweeps, adaptive
 * trigger).  Everything here runs under the heap lock; the only part of a
 * cycle that drops it is the trim's syscalls (release.c).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "../internal.h"

/* ---- allocation ---- */

int hl__check_alloc_args(hl_heap *h, uint64_t size, uint64_t refs) {
  if (h->opt.mode != HL_MODE_COLLECTED)
    return hl__fail(h, HL_EMODE, "alloc: objects need a collected heap (this one is manual)");
  if (size > HL_MAX_SIZE)
    return hl__fail(h, HL_EINVAL, "alloc: size %llu exceeds the maximum of %llu bytes",
                    (unsigned long long)size, (unsigned long long)HL_MAX_SIZE);
  if (refs > HL_MAX_REFS)
    return hl__fail(h, HL_EINVAL, "alloc: refs %llu exceeds the maximum of %llu slots",
                    (unsigned long long)refs, (unsigned long long)HL_MAX_REFS);
  return HL_OK;
}

/* The header and empty slots of a new object.  A few slots are cleared
 * inline: the call to memset cost as much as the rest of a small
 * allocation. */
#define FEW_REFS 4
static inline void obj_init_few(void *obj, uint32_t size_field, uint64_t refs /* <= FEW_REFS */) {
  ((hl_objhdr *)obj)->size = size_field;
  ((hl_objhdr *)obj)->refs = (uint32_t)refs;
  void **slots = hl__slots(obj);
  switch (refs) {
  case 4: slots[3] = NULL; /* fallthrough */
  case 3: slots[2] = NULL; /* fallthrough */
  case 2: slots[1] = NULL; /* fallthrough */
  case 1: slots[0] = NULL; /* fallthrough */
  default: break;
  }
}
static inline void obj_init(void *obj, uint32_t size_field, uint64_t refs) {
  if (refs <= FEW_REFS) {
    obj_init_few(obj, size_field, refs);
  } else {
    ((hl_objhdr *)obj)->size = size_field;
    ((hl_objhdr *)obj)->refs = (uint32_t)refs;
    memset(hl__slots(obj), 0, refs * sizeof(void *));
  }
}

/* Whether a small allocation of `bytes` may skip the cycle check: no cycle
 * is due (alloc_limit: 0 while the large trigger is due, and on a manual
 * heap) and no background collector waits for this thread. */
static inline bool small_no_cycle(const hl_heap *h, uint64_t bytes) {
  return bytes <= h->small_max && h->st.small_bytes_since_cycle < h->alloc_limit &&
         !atomic_load_explicit(&h->collector_waiting, memory_order_relaxed);
}

/* A new small object in the slot just taken from class word a: the
 * trigger's count, the header, empty slots.
 * The trigger's count is exact: a cycle starts at the same byte whatever the
 * word reservations (where minor cycles land decides what is promoted:
 * charging by word, 2 KiB early, moved binary-trees' peak RSS by 10%).  The
 * other stats were charged when the slot's word was reserved. */
static inline void *small_init(hl_heap *h, hl_aword *a, void *obj, uint64_t size,
                               uint64_t refs) {
  h->st.small_bytes_since_cycle += a->sz;
  obj_init(obj, (uint32_t)size, refs);
  return obj;
}

/* A small object of class cls: NULL (and the error) when memory cannot be
 * had. */
static inline void *small_obj(hl_heap *h, uint32_t cls, uint64_t size, uint64_t refs) {
  void *obj = hl__small_take(h, cls);
  if (hl_unlikely(!obj)) {
    hl__fail(h, HL_ENOMEM, "alloc: the reservation of %llu bytes is exhausted",
             (unsigned long long)h->reserved);
    return NULL;
  }
  hl_aword *a = &h->aword[cls];
  if (refs && hl_unlikely(!a->refs)) {
    a->refs = true;
    h->pages[a->page].flags |= PF_REFS;
  }
  return small_init(h, a, obj, size, refs);
}

/* What a raw-object call (hl_obj_new, hl_obj_new_in) tries first: the heap
 * held by this thread (hl_enter), a small object with at most FEW_REFS
 * slots, no cycle due, a slot reserved in its class's allocation word on a
 * page already flagged PF_REFS when the object has slots.  NULL, with
 * nothing done, when any of that does not hold: the caller then takes the
 * general path.  No call in it, so the raw-object calls save no registers on
 * their common path. */
static inline void *obj_fast(hl_heap *h, uint64_t size, uint64_t refs) {
  if (hl_unlikely(hl__held != h || size > h->small_max || refs > FEW_REFS)) return NULL;
  uint64_t bytes = sizeof(hl_objhdr) + refs * sizeof(void *) + size;
  if (hl_unlikely(!small_no_cycle(h, bytes))) return NULL; /* (a manual heap too) */
  hl_aword *a = &h->aword[hl__class_of(h, bytes)];
  uint64_t m = a->free;
  if (hl_unlikely(!m || (refs && !a->refs))) return NULL;
  return small_init(h, a, hl__aword_take(a, m), size, refs);
}

/* Allocate an object (lock held, arguments checked).  Slots start empty; the
 * payload is not cleared.  NULL when memory cannot be had. */
void *hl__obj_alloc(hl_heap *h, uint64_t size, uint64_t refs, bool force_large) {
  uint64_t bytes = sizeof(hl_objhdr) + refs * sizeof(void *) + size;
  void *obj;
  if (!force_large && bytes <= h->small_max) {
    return small_obj(h, hl__class_of(h, bytes), size, refs);
  } else {
    obj = hl__large_alloc(h, bytes);
    if (!obj) {
      hl__fail(h, HL_ENOMEM, "alloc: the system allocator refused %llu bytes",
               (unsigned long long)bytes);
      return NULL;
    }
    h->st.large_bytes_since_cycle += bytes;
    h->st.large_allocated_bytes += bytes;
    h->st.large_live_bytes += bytes;
    hl__alloc_limit_update(h); /* the large trigger may be due now */
  }
  h->st.objects_allocated++;
  obj_init(obj, HL_SIZE_LARGE, refs);
  return obj;
}

/* The write barrier's out-of-line part (hl__store): obj is on a page with
 * old objects, or large.  When obj itself is old (marked), its page or block
 * is dirtied. */
void hl__store_old(hl_heap *h, void *obj) {
  if (hl__in_heap(h, obj)) {
    uint32_t p = hl__page_of(h, obj);
    hl_page *d = &h->pages[p];
    uint64_t off = (uint64_t)((uint8_t *)obj - hl__page_addr(h, p));
    if (hl__bit(hl__marks(h, p), hl__slot_index(h, off, d->cls))) {
      d->flags |= PF_DIRTY;
      if (h->tenure[p] & TN_TENURED) h->tenure[p] |= TN_REMEMBER;
    }
  } else {
    hl_large *l = hl__large_of(obj);
    if (l->mark) l->dirty = 1;
  }
}

/* ---- the write barrier without a heap (hl_obj_set) ----
 * hl_obj_set(obj, slot, value) names no heap, yet in generational mode the
 * store must dirty the object's page in its heap's side table.  Collected
 * heaps register their reservation here; a store looks its object up only
 * while some generational heap exists (otherwise it is a plain store).  An
 * object in no registered reservation is a large object: its block header
 * has the dirty flag (harmless for a heap that is not generational). */
typedef struct heap_range {
  const uint8_t *lo, *hi;
  hl_heap *heap;
} heap_range;
static pthread_rwlock_t registry_lock = PTHREAD_RWLOCK_INITIALIZER;
static heap_range *registry;
static uint32_t registry_n, registry_cap;
static _Atomic uint32_t generational_heaps;

int hl__registry_add(hl_heap *h) {
  int rc = HL_OK;
  pthread_rwlock_wrlock(&registry_lock);
  if (registry_n == registry_cap) {
    uint32_t cap = registry_cap ? registry_cap * 2 : 8;
    heap_range *n = realloc(registry, cap * sizeof *n);
    if (!n) rc = HL_ENOMEM;
    else registry = n, registry_cap = cap;
  }
  if (!rc) {
    registry[registry_n++] = (heap_range){h->base, h->base + h->reserved, h};
    if (h->opt.generational) atomic_fetch_add(&generational_heaps, 1);
  }
  pthread_rwlock_unlock(&registry_lock);
  return rc;
}

void hl__registry_remove(hl_heap *h) {
  pthread_rwlock_wrlock(&registry_lock);
  for (uint32_t i = 0; i < registry_n; i++) {
    if (registry[i].heap != h) continue;
    registry[i] = registry[--registry_n];
    if (h->opt.generational) atomic_fetch_sub(&generational_heaps, 1);
    break;
  }
  if (!registry_n) { /* nothing outlives the last heap (a module may be unloaded) */
    free(registry);
    registry = NULL;
    registry_cap = 0;
  }
  pthread_rwlock_unlock(&registry_lock);
}

void hl__store_any(void *obj, uint64_t slot, void *value) {
  hl__slots(obj)[slot] = value;
  if (!value || !atomic_load_explicit(&generational_heaps, memory_order_relaxed)) return;
  const uint8_t *a = obj;
  pthread_rwlock_rdlock(&registry_lock);
  hl_heap *h = NULL;
  for (uint32_t i = 0; i < registry_n && !h; i++)
    if (a >= registry[i].lo && a < registry[i].hi) h = registry[i].heap;
  if (!h) hl__large_of(obj)->dirty = 1;
  else if (h->opt.generational) hl__store(h, obj, slot, value);
  pthread_rwlock_unlock(&registry_lock);
}

/* ---- resolving and marking ---- */

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
    void **n = realloc(h->mark_stack, cap * sizeof(void *));
    if (!n) return false;
    h->mark_stack = n;
    h->mark_cap = cap;
  }
  h->mark_stack[h->mark_top++] = obj;
  return true;
}

#define mark_overflowed (h->mark_overflow)

/* Bytes marked by this cycle: what is really live.  The byte counters after
 * a sweep still hold the dead objects of partial pages no sweep has visited,
 * and a trigger grown from those grew the heap from its own garbage. */
static _Thread_local uint64_t marked_bytes;

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
  marked_bytes += l->size;
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
    marked_bytes += h->cls_size[h->pages[p].cls];
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
    marked_bytes += h->cls_size[d->cls];
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
    h->st.dirty_pages_scanned++;
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
  if (!h->st.tenured_pages) return;
  for (uint32_t p = 0; p < h->high_water; p++) {
    if ((h->tenure[p] & (TN_TENURED | TN_REMEMBER)) != (TN_TENURED | TN_REMEMBER)) continue;
    h->st.remembered_pages_scanned++;
    trace_marked_on(h, p);
  }
}

/* Before a whole mark: every page is untenured (its marks are cleared with
 * the others'). */
static void untenure_all(hl_heap *h) {
  if (h->st.tenured_pages)
    for (uint32_t p = 0; p < h->high_water; p++) h->tenure[p] &= (uint8_t)~(TN_TENURED | TN_REMEMBER);
  h->st.tenured_pages = 0;
  h->tenured_bytes = 0;
}

/* After a full mark's sweep: tenure the pages dense now and at the last full
 * mark; drop TN_REMEMBER from tenured pages that no longer need it. */
static void tenure_pages(hl_heap *h) {
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
      h->st.tenured_pages++;
      h->tenured_bytes += (uint64_t)live * h->cls_size[d->cls];
      if (d->flags & PF_AVAIL) hl__page_to_state(h, p, PS_PARTIAL, false); /* off the avail list */
    }
  }
}

static void mark_roots(hl_heap *h, bool minor) {
  marked_bytes = 0;
  mark_overflowed = false;
  if (minor) mark_dirty(h);
  else mark_remembered(h);
  for (uint32_t i = 0; i < h->handles_cap; i++) {
    void *obj = h->handles[i].obj;
    if (obj) {
      mark_one(h, obj);
      drain(h);
    }
  }
  for (uint32_t r = 0; r < h->nregions; r++) {
    hl_root_region *rg = &h->regions[r];
    for (uint64_t w = 0; w < rg->words; w++) {
      mark_value(h, rg->base[w], rg->conservative);
      drain(h);
    }
  }
  rescan_marked(h);
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

/* ---- sweeping ---- */

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
 * generational mode it is old until then), as small objects do. */
static void sweep_large(hl_heap *h, sweep_tally *t) {
  hl_large *l = h->large_head;
  while (l) {
    hl_large *n = l->next;
    if (!l->mark) {
      h->st.large_live_bytes -= l->size;
      t->freed_objects++;
      t->large_freed++;
      hl__large_free(h, l);
    }
    l = n;
  }
}

static uint64_t trigger_in_force(const hl_heap *h) {
  if (h->opt.generational) return (uint64_t)h->opt.young_bytes;
  return h->trigger + h->last_live_bytes / 100 * (uint64_t)h->opt.gc_live_ratio;
}

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
  if (!h->opt.generational || reason == REASON_EXPLICIT || h->pressure) return false;
  if (h->opt.major_sweep == HL_MAJOR_ALWAYS) return false;
  return h->promoted_since_full < full_trigger(h);
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
  uint64_t recent = h->st.small_bytes_since_cycle;
  if (h->opt.quiet_counts_large) recent += h->st.large_bytes_since_cycle;
  if (recent < limit) return MAJOR_QUIET;
  if (h->opt.major_backstop_cycles > 0 &&
      h->cycles_since_major + 1 >= (uint64_t)h->opt.major_backstop_cycles)
    return MAJOR_BACKSTOP;
  return MAJOR_NONE;
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

static int check_marks_closed(hl_heap *h, char *msg, size_t len) {
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
int hl__cycle(hl_heap *h, int major_req, int reason) {
  while (h->in_cycle) pthread_cond_wait(&h->cycle_done, &h->lock);
  h->in_cycle = true;
  uint64_t t0 = prim_now_ns();
  h->st.cycles++;

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
  bool tenuring = !minor && h->opt.generational && h->opt.tenure_full_marks > 0;
  if (!minor && h->opt.generational) {
    if (!tenuring || reason == REASON_EXPLICIT || h->pressure ||
        ++h->full_marks_since_whole >= (uint64_t)h->opt.tenure_full_marks) {
      untenure_all(h);
      h->full_marks_since_whole = 0;
      h->st.whole_marks++;
    }
  }
  uint64_t tenured_before = h->tenured_bytes; /* full marks do not count them */

  uint64_t tm = prim_now_ns(); /* mark_ns: clearing the marks, then marking */
  if (!minor) {
    clear_marks_of_list(h, &h->retired);
    clear_marks_of_list(h, &h->partial_full);
    for (uint32_t c = 0; c < h->nclasses; c++) clear_marks_of_list(h, &h->partial_avail[c]);
    for (hl_large *l = h->large_head; l; l = l->next) l->mark = l->dirty = 0;
  }
  mark_roots(h, minor);
  h->st.mark_ns += prim_now_ns() - tm;
  int rc = HL_OK;
  if (h->opt.verify) {
    char msg[256];
    if (check_marks_closed(h, msg, sizeof msg)) {
      rc = hl__fail(h, HL_ECHECK, "verify: %s", msg);
      h->st.verify_failures++;
      /* and nothing is lost: trace from every marked object before sweeping */
      mark_overflowed = true;
      rescan_marked(h);
    }
  }

  sweep_tally t = {0};
  /* Partial pages first (taken off their lists before retired pages can
   * join them), then everything retired since the last cycle. */
  uint64_t spliced = 0;
  if (sweep_partials) {
    uint64_t n = h->state_count[PS_PARTIAL];
    uint32_t *list = n ? malloc(n * sizeof(uint32_t)) : NULL;
    if (list || !n) {
      uint64_t k = 0;
      /* (tenured pages are on partial_full: nothing on them is unmarked) */
      for (uint32_t p = h->partial_full.head; p != HL_NIL; p = h->pages[p].next)
        if (!(h->tenure[p] & TN_TENURED)) list[k++] = p;
      for (uint32_t c = 0; c < h->nclasses; c++)
        for (uint32_t p = h->partial_avail[c].head; p != HL_NIL; p = h->pages[p].next)
          list[k++] = p;
      for (uint64_t i = 0; i < k; i++) {
        if (major != MAJOR_NONE) h->pages[list[i]].flags |= PF_SPLICED;
        sweep_one(h, list[i], &t);
      }
      spliced = k;
      free(list);
    }
  }
  uint32_t p;
  while ((p = h->retired.head) != HL_NIL) {
    h->pages[p].flags &= (uint8_t)~PF_SPLICED;
    sweep_one(h, p, &t);
  }
  sweep_large(h, &t);
  h->st.small_live_bytes -= t.freed_bytes;
  h->st.objects_freed += t.freed_objects;
  h->st.swept_pages += t.pages;

  if (major != MAJOR_NONE) {
    h->st.major_sweeps++;
    h->st.major_swept_pages += spliced;
    if (major == MAJOR_QUIET) h->st.major_quiet++;
    if (major == MAJOR_PRESSURE) h->st.major_pressure++;
    if (major == MAJOR_BACKSTOP) h->st.major_backstop++;
    if (major == MAJOR_FORCED) h->st.major_forced++;
    if (major == MAJOR_FULL_MARK) h->st.major_full_mark++;
    h->cycles_since_major = 0;
    h->pressure = false;
    hl__event(h, HL_EV_major_sweep, 5, (int64_t)major, (int64_t)spliced,
              (int64_t)h->st.small_bytes_since_cycle, (int64_t)h->st.large_bytes_since_cycle,
              (int64_t)quiet_limit);
  } else if (!minor) {
    h->cycles_since_major++; /* the backstop counts full marks only */
  }
  if (!h->opt.generational) adapt_trigger(h, &t);
  for (uint32_t q = h->partial_full.head; q != HL_NIL; q = h->pages[q].next)
    h->pages[q].flags &= (uint8_t)~PF_SPLICED;
  for (uint32_t c = 0; c < h->nclasses; c++)
    for (uint32_t q = h->partial_avail[c].head; q != HL_NIL; q = h->pages[q].next)
      h->pages[q].flags &= (uint8_t)~PF_SPLICED;

  uint64_t small_since = h->st.small_bytes_since_cycle;
  uint64_t large_since = h->st.large_bytes_since_cycle;
  h->st.small_bytes_since_cycle = 0;
  h->st.large_bytes_since_cycle = 0;
  if (minor) {
    h->st.minor_cycles++;
    h->st.promoted_bytes += marked_bytes;
    h->promoted_since_full += marked_bytes;
  } else {
    h->last_full_live = marked_bytes + tenured_before;
    h->promoted_since_full = 0;
    if (tenuring) tenure_pages(h);
  }
  /* gc_live_ratio grows the trigger by these; generational: the estimate */
  h->last_live_bytes = minor ? h->last_full_live + h->promoted_since_full : marked_bytes;
  h->st.gc_trigger_bytes = trigger_in_force(h);
  hl__alloc_limit_update(h);
  atomic_store(&h->cycle_requested, false);
  /* pacing gives up after cycles in a row that free nothing large */
  if (t.large_freed) h->pacing_dry_cycles = 0;
  else h->pacing_dry_cycles++;

  uint64_t dt = prim_now_ns() - t0;
  h->st.gc_ns += dt;
  if (minor) h->st.minor_gc_ns += dt;
  if (dt > h->st.max_pause_ns) h->st.max_pause_ns = dt;
  hl__event(h, HL_EV_cycle, 10, (int64_t)(major != MAJOR_NONE), (int64_t)dt, (int64_t)small_since,
            (int64_t)large_since, (int64_t)t.pages, (int64_t)t.freed_objects,
            (int64_t)h->last_live_bytes, (int64_t)h->st.gc_trigger_bytes, (int64_t)reason,
            (int64_t)minor);

  if (h->opt.verify && !rc) {
    char msg[256];
    if (hl__check_locked(h, msg, sizeof msg)) {
      rc = hl__fail(h, HL_ECHECK, "verify: %s", msg);
      h->st.verify_failures++;
    }
  }
  hl__trim_locked(h);
  atomic_store(&h->last_cycle_end_ns, prim_now_ns());
  h->cycles_completed++;
  h->in_cycle = false;
  pthread_cond_broadcast(&h->cycle_done);
  return rc;
}

/* Allocation-driven cycles: called before an allocation, lock held. */
static inline bool small_due(const hl_heap *h) {
  return h->st.small_bytes_since_cycle >= trigger_in_force(h);
}
static inline bool large_due(const hl_heap *h) {
  return h->st.large_bytes_since_cycle >= (uint64_t)h->opt.large_trigger_bytes;
}

void hl__maybe_collect(hl_heap *h) {
  if (atomic_load_explicit(&h->collector_waiting, memory_order_relaxed)) hl__safepoint(h);
  bool small = small_due(h), large = large_due(h);
  if (!small && !large) return;
  if (h->opt.collector == HL_COLLECTOR_BACKGROUND && hl__may_drop_lock(h)) {
    hl__request_cycle(h);
    return;
  }
  if (h->in_cycle) return; /* one is running (in its trim): it will reset the counters */
  h->st.cycle_requests++;
  hl__cycle(h, -1, small ? REASON_SMALL : REASON_LARGE);
}

uint64_t hl__trigger_in_force(const hl_heap *h) { return trigger_in_force(h); }

/* The one number the allocation fast path compares with: the small trigger
 * in force, or 0 while the large trigger is due.  Set after every cycle and
 * every large allocation. */
void hl__alloc_limit_update(hl_heap *h) {
  /* (0 on a manual heap: the raw-object fast path relies on it) */
  h->alloc_limit = h->opt.mode != HL_MODE_COLLECTED || large_due(h) ? 0 : trigger_in_force(h);
}

/* hl__maybe_collect then hl__obj_alloc as one call: the pair every
 * allocation of the C API makes (hl_obj_new, hl_obj_new_in, hl_fill).  The
 * common case -- a small object, no cycle due, room on the owned page -- is
 * one compare against alloc_limit and the inline slot take, no call. */
static inline void *obj_new(hl_heap *h, uint64_t size, uint64_t refs) {
  uint64_t bytes = sizeof(hl_objhdr) + refs * sizeof(void *) + size;
  if (hl_likely(small_no_cycle(h, bytes))) return small_obj(h, hl__class_of(h, bytes), size, refs);
  if (atomic_load_explicit(&h->collector_waiting, memory_order_relaxed) || small_due(h) ||
      large_due(h))
    hl__maybe_collect(h);
  return hl__obj_alloc(h, size, refs, false);
}

void *hl__obj_new(hl_heap *h, uint64_t size, uint64_t refs) { return obj_new(h, size, refs); }

/* ---- the raw-object API (heaplab.h), here so that the fast path above is
 * compiled into it ---- */

/* The raw-object calls are a C client's allocation path: the argument
 * checks call out only when one fails. */
static inline bool obj_args_bad(hl_heap *h, uint64_t size, uint64_t refs) {
  if (hl_likely(h->opt.mode == HL_MODE_COLLECTED && size <= HL_MAX_SIZE && refs <= HL_MAX_REFS))
    return false;
  return hl__check_alloc_args(h, size, refs) != HL_OK;
}

static NOINLINE void *obj_new_general(hl_heap *h, uint64_t size, uint64_t refs) {
  if (!h || obj_args_bad(h, size, refs)) return NULL;
  bool locked = hl__lock(h);
  uint64_t bytes = sizeof(hl_objhdr) + refs * sizeof(void *) + size;
  if (bytes > h->small_max) hl__large_paced(h, bytes);
  void *obj = obj_new(h, size, refs);
  hl__unlock(h, locked);
  return obj;
}

static NOINLINE void *obj_new_in_general(hl_heap *h, void *parent, uint64_t slot,
                                          uint64_t size, uint64_t refs) {
  if (!h || !parent || obj_args_bad(h, size, refs)) return NULL;
  if (slot >= ((hl_objhdr *)parent)->refs) {
    hl__fail(h, HL_ERANGE, "obj_new_in: slot %" PRIu64 " out of range", slot);
    return NULL;
  }
  bool locked = hl__lock(h);
  uint64_t bytes = sizeof(hl_objhdr) + refs * sizeof(void *) + size;
  if (bytes > h->small_max) hl__large_paced(h, bytes);
  void *obj = obj_new(h, size, refs);
  if (obj) hl__store(h, parent, slot, obj);
  hl__unlock(h, locked);
  return obj;
}

void *hl_obj_new(hl_heap *h, uint64_t size, uint64_t refs) {
  void *obj = h ? obj_fast(h, size, refs) : NULL;
  return hl_likely(obj != NULL) ? obj : obj_new_general(h, size, refs);
}

void *hl_obj_new_in(hl_heap *h, void *parent, uint64_t slot, uint64_t size, uint64_t refs) {
  if (hl_likely(h && parent && slot < ((hl_objhdr *)parent)->refs)) {
    void *obj = obj_fast(h, size, refs);
    if (hl_likely(obj != NULL)) {
      hl__store(h, parent, slot, obj);
      return obj;
    }
  }
  return obj_new_in_general(h, parent, slot, size, refs);
}
