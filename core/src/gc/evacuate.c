/*
 * evacuate.c -- evacuating compaction (option compact): after a full mark's
 * sweep, the live objects of sparse pages are copied into the free slots of
 * other pages of their size class, every reference to them is updated, and
 * the emptied pages go to the free pool, where the cycle's trim releases
 * them.  A heap in which a burst died but for one object in a hundred then
 * gives back nearly all of the burst's pages (E10).
 *
 *   choose    per size class, the partial pages below the live threshold
 *             (compact=sparse: compact_live_pct percent of their slots;
 *             always: any page with a free slot), sparsest first, as many as
 *             the free slots of the class's other pages can take.  A page
 *             with unswept garbage waits for the sweep that frees it (its
 *             live count is not its slot count); tenured pages are neither
 *             sources nor destinations.
 *   pin       objects a conservative root region points into (interior
 *             words too) never move: their pages stay.  Nothing moves at all
 *             while a thread holds the heap (hl_enter: its raw pointers are
 *             unknown; a cycle run in that thread is the only one that can
 *             run then) or while an internal path keeps raw pointers across
 *             an allocation (h->nomove: a fill, hl_obj_new_in).  What would
 *             have moved is counted in pinned_objects.
 *   copy      object by object into the lowest free slots of the densest
 *             destination pages (their released OS pages restored first,
 *             subpage_release); the copy keeps its mark (it is live, and old
 *             in generational mode: the header's HL_HDR_OLD, copied with it),
 *             and the old slot's first word becomes the forwarding address.
 *   update    every handle, every word of a precise root region, every slot
 *             of every marked object (small and large, tenured pages too) that
 *             holds the exact start of an evacuated object gets the new
 *             address.  The generational remembered set is page flags
 *             (PF_DIRTY, TN_REMEMBER), not addresses: no source or
 *             destination is tenured, so no flag changes meaning.  A value
 *             that is not an object start (an interior or stale word) was
 *             never a reference to the marker and is left as it is.
 *   free      the emptied pages are unformatted into the free pool.
 *
 * With verify on, a check after the update: no handle, precise root word or
 * slot of a marked object still holds the start of an evacuated object.
 * Everything here runs under the heap lock, inside a cycle, which is
 * stop-the-world: a mutator touches objects only under the lock (or holding
 * the heap, which keeps this from running), and the trim that drops the lock
 * runs after this is done.
 */
#include <stdio.h>
#include <stdlib.h>

#include "../internal.h"

typedef struct evac_page {
  uint32_t p, cls, live, room;
  bool source;   /* a candidate chosen for evacuation */
  bool dest;     /* may take objects (not held by a failed sub-page restore) */
} evac_page;

static int by_class_then_live(const void *a, const void *b) {
  const evac_page *x = a, *y = b;
  if (x->cls != y->cls) return x->cls < y->cls ? -1 : 1;
  if (x->live != y->live) return x->live < y->live ? -1 : 1;
  return x->p < y->p ? -1 : x->p > y->p;
}

static inline uint64_t low_bits(uint32_t n) { return n >= 64 ? ~0ULL : ((1ULL << n) - 1); }

/* Objects marked and allocated on formatted page p. */
static uint32_t live_on(const hl_heap *h, uint32_t p) {
  const hl_page *d = &h->pages[p];
  const uint64_t *mb = hl__marks(h, p), *ab = hl__allocs(h, p);
  uint32_t n = 0;
  for (uint32_t w = 0; w < (d->bump + 63) / 64; w++) n += hl__popcount64(mb[w] & ab[w]);
  return n;
}

/* A free slot of destination page p, taken: the lowest below bump, else
 * bump.  Marked (the object is live) and allocated. */
static uint8_t *take_slot(hl_heap *h, uint32_t p) {
  hl_page *d = &h->pages[p];
  uint64_t *ab = hl__allocs(h, p);
  uint32_t i;
  if (d->nfree) {
    uint32_t w = d->cursor;
    uint64_t m;
    while (!(m = ~ab[w] & low_bits(d->bump - w * 64))) w++;
    d->cursor = w;
    i = w * 64 + (uint32_t)__builtin_ctzll(m);
    d->nfree--;
  } else {
    HL_ASSERT(d->bump < d->nslots);
    i = d->bump++;
  }
  hl__bit_set(ab, i);
  hl__bit_set(hl__marks(h, p), i);
  d->used++;
  return hl__page_addr(h, p) + (uint64_t)i * h->cls_size[d->cls];
}

/* The evacuation in progress: which pages were emptied. */
typedef struct evac_state {
  uint8_t *evac;      /* per page (high_water): 1 = a source whose objects moved */
  uint64_t objects, bytes, pages;
} evac_state;

/* Where v now lives: the forwarding address when v is the start of a live
 * slot of an evacuated page, else v. */
static inline void *forward(const hl_heap *h, const evac_state *e, void *v) {
  if (!v || !hl__in_heap(h, v)) return v;
  uint32_t p = hl__page_of(h, v);
  if (!e->evac[p]) return v;
  const hl_page *d = &h->pages[p];
  uint64_t off = (uint64_t)((uint8_t *)v - hl__page_addr(h, p));
  uint32_t idx = hl__slot_index(h, off, d->cls);
  if ((uint64_t)idx * h->cls_size[d->cls] != off || idx >= d->bump ||
      !hl__bit(hl__allocs(h, p), idx))
    return v;
  return *(void **)v;
}

/* Whether v is the start of a live slot of an evacuated page (the verify
 * check after the update). */
static inline bool stale(const hl_heap *h, const evac_state *e, void *v) {
  return forward(h, e, v) != v;
}

static void update_slots(hl_heap *h, const evac_state *e, void *obj) {
  void **slots = hl__slots(obj);
  uint32_t refs = ((hl_objhdr *)obj)->refs;
  for (uint32_t k = 0; k < refs; k++) slots[k] = forward(h, e, slots[k]);
}

/* Every reference the heap knows of, forwarded. */
static void update_references(hl_heap *h, const evac_state *e) {
  for (uint32_t i = 0; i < h->handles_cap; i++)
    if (h->handles[i].obj) h->handles[i].obj = forward(h, e, h->handles[i].obj);
  /* A region's words are the client's memory, which it may be writing now
   * (collector=background): read with atomic loads, as the marker does, and
   * only a word holding an evacuated object is written -- by a
   * compare-and-swap with the value read, so a word the client stored
   * meanwhile is left as it stored it.  (Each word was written back,
   * forwarded or not: a store of the client's between the read and the
   * write was lost, the word went back to its older value.) */
  for (uint32_t r = 0; r < h->nregions; r++) {
    hl_root_region *rg = &h->regions[r];
    if (rg->conservative) continue; /* (what they point into is pinned) */
    for (uint64_t w = 0; w < rg->words; w++) {
      void *v = __atomic_load_n(&rg->base[w], __ATOMIC_RELAXED);
      void *to = forward(h, e, v);
      if (to != v)
        __atomic_compare_exchange_n(&rg->base[w], &v, to, false, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED);
    }
  }
  for (uint32_t p = 0; p < h->high_water; p++) {
    hl_page *d = &h->pages[p];
    if (!hl__formatted(d->state) || !(d->flags & PF_REFS) || e->evac[p]) continue;
    uint32_t sz = h->cls_size[d->cls];
    uint8_t *base = hl__page_addr(h, p);
    const uint64_t *mb = hl__marks(h, p), *ab = hl__allocs(h, p);
    for (uint32_t w = 0; w < (d->bump + 63) / 64; w++)
      for (uint64_t m = mb[w] & ab[w]; m; m &= m - 1)
        update_slots(h, e, base + (uint64_t)(w * 64 + (uint32_t)__builtin_ctzll(m)) * sz);
  }
  for (hl_large *l = h->large_head; l; l = l->next)
    if (l->mark) update_slots(h, e, l + 1);
}

/* verify: nothing still refers to an evacuated object. */
#define STALE(cond, ...)                                                       \
  do {                                                                         \
    if (cond) {                                                                \
      snprintf(msg, len, __VA_ARGS__);                                         \
      return HL_ECHECK;                                                        \
    }                                                                          \
  } while (0)

static int check_slots(hl_heap *h, const evac_state *e, void *obj, char *msg, size_t len) {
  void **slots = hl__slots(obj);
  for (uint32_t k = 0; k < ((hl_objhdr *)obj)->refs; k++)
    STALE(stale(h, e, slots[k]), "object %p slot %u still refers to %p in evacuated page %u",
          obj, k, slots[k], hl__page_of(h, slots[k]));
  return HL_OK;
}

static int check_no_stale(hl_heap *h, const evac_state *e, char *msg, size_t len) {
  for (uint32_t i = 0; i < h->handles_cap; i++)
    STALE(stale(h, e, h->handles[i].obj), "handle %u still holds %p in evacuated page %u", i,
          h->handles[i].obj, hl__page_of(h, h->handles[i].obj));
  for (uint32_t r = 0; r < h->nregions; r++) {
    hl_root_region *rg = &h->regions[r];
    if (rg->conservative) continue;
    for (uint64_t w = 0; w < rg->words; w++) {
      void *v = __atomic_load_n(&rg->base[w], __ATOMIC_RELAXED);
      STALE(stale(h, e, v), "root region %p word %llu still holds %p", (void *)rg->base,
            (unsigned long long)w, v);
    }
  }
  for (uint32_t p = 0; p < h->high_water; p++) {
    hl_page *d = &h->pages[p];
    if (!hl__formatted(d->state) || !(d->flags & PF_REFS) || e->evac[p]) continue;
    uint32_t sz = h->cls_size[d->cls];
    const uint64_t *mb = hl__marks(h, p), *ab = hl__allocs(h, p);
    for (uint32_t w = 0; w < (d->bump + 63) / 64; w++)
      for (uint64_t m = mb[w] & ab[w]; m; m &= m - 1) {
        int rc = check_slots(h, e, hl__page_addr(h, p) + (uint64_t)(w * 64 + (uint32_t)__builtin_ctzll(m)) * sz,
                             msg, len);
        if (rc) return rc;
      }
  }
  for (hl_large *l = h->large_head; l; l = l->next)
    if (l->mark) {
      int rc = check_slots(h, e, l + 1, msg, len);
      if (rc) return rc;
    }
  return HL_OK;
}

/* ---- identities (hl_ref_identity) ----
 * An object's address names it until compaction moves it, so in a heap
 * that compacts the identities asked for are numbers (IDENT_BASE below)
 * remembered in a table keyed by the object: a move re-keys the entry, and
 * an entry whose object died is dropped at the next compaction.  Only small
 * objects move; a large one is its address. */
struct hl_ident {
  void *obj; /* NULL: empty */
  uint64_t id;
};

/* The identities handed out in a heap whose objects may move: a number of
 * the process's (unique across heaps too), above every user-space address
 * (x86-64 and AArch64 stop at 2^57) so that no identity of a large object
 * or of a compact=never heap -- its address -- is ever one of them. */
#define IDENT_BASE ((uint64_t)1 << 60)
static _Atomic uint64_t ident_next = 1;

static uint64_t ident_slot(const void *obj, uint64_t cap) {
  uint64_t x = (uint64_t)(uintptr_t)obj >> 4;
  x *= 0x9E3779B97F4A7C15ull;
  return (x ^ (x >> 29)) & (cap - 1);
}

static void ident_put(struct hl_ident *t, uint64_t cap, void *obj, uint64_t id) {
  uint64_t i = ident_slot(obj, cap);
  while (t[i].obj && t[i].obj != obj) i = (i + 1) & (cap - 1);
  t[i] = (struct hl_ident){obj, id};
}

/* Rebuild the table: keys through `map` (NULL = dropped), in a table of
 * cap entries.  False when there is no memory (the old table stays). */
static bool ident_rebuild(hl_heap *h, uint64_t cap, void *(*map)(hl_heap *, const void *, void *),
                          const void *arg) {
  struct hl_ident *t = hl__sys_calloc(cap, sizeof *t);
  if (!t) return false;
  uint64_t n = 0;
  for (uint64_t i = 0; i < h->idents_cap; i++) {
    if (!h->idents[i].obj) continue;
    void *k = map ? map(h, arg, h->idents[i].obj) : h->idents[i].obj;
    if (!k) continue;
    ident_put(t, cap, k, h->idents[i].id);
    n++;
  }
  hl__sys_free(h->idents);
  h->idents = t;
  h->idents_cap = cap;
  h->idents_count = n;
  return true;
}

int hl__identity(hl_heap *h, void *obj, uint64_t *out) {
  HL_ASSERT_LOCKED(h);
  if (h->opt.compact == HL_COMPACT_NEVER || !hl__in_reservation(h, obj)) {
    *out = (uint64_t)(uintptr_t)obj;
    return HL_OK;
  }
  if (h->idents_cap) {
    uint64_t i = ident_slot(obj, h->idents_cap);
    for (; h->idents[i].obj; i = (i + 1) & (h->idents_cap - 1))
      if (h->idents[i].obj == obj) {
        *out = h->idents[i].id;
        return HL_OK;
      }
  }
  if ((h->idents_count + 1) * 2 > h->idents_cap &&
      !ident_rebuild(h, h->idents_cap ? h->idents_cap * 2 : 64, NULL, NULL))
    return hl__fail(h, HL_ENOMEM, "identity: out of memory");
  /* not the address: an object moved off it keeps it as its identity, and
   * a new object in the slot it left would get the same (3,584 of 40,000
   * new objects did in identities_are_unique_among_live_objects) */
  uint64_t id = IDENT_BASE | atomic_fetch_add_explicit(&ident_next, 1, memory_order_relaxed);
  ident_put(h->idents, h->idents_cap, obj, id);
  h->idents_count++;
  *out = id;
  return HL_OK;
}

void hl__identities_free(hl_heap *h) {
  hl__sys_free(h->idents);
  h->idents = NULL;
  h->idents_cap = h->idents_count = 0;
}

/* Pins: per page, how many distinct objects conservative root regions point
 * into, and objects that hold a root region's words (NULL when there are
 * none). */
static uint32_t *find_pins(hl_heap *h, bool *oom) {
  uint32_t *pins = NULL;
  hl_ptrset seen = {0};
  /* A region may lie in the heap's own pages (registered in an object's
   * payload): the objects holding its words stay where they are.  Moved,
   * they left the region's words in a freed slot -- poison, or another
   * object's payload once reused -- and what the region rooted unrooted
   * (tests/c/a_region_in_an_object_stays_with_it.c). */
  for (uint32_t r = 0; r < h->nregions; r++) {
    const hl_root_region *rg = &h->regions[r];
    uint8_t *lo = (uint8_t *)rg->base, *hi = lo + rg->words * sizeof(void *);
    if (hi <= h->base || lo >= h->carved_end) continue;
    if (lo < h->base) lo = h->base;
    if (hi > h->carved_end) hi = h->carved_end;
    for (uint8_t *a = lo; a < hi;) {
      uint32_t p = hl__page_of(h, a);
      uint8_t *pb = hl__page_addr(h, p), *pe = pb + h->page_size;
      const hl_page *d = &h->pages[p];
      if (hl__formatted(d->state)) {
        uint32_t sz = h->cls_size[d->cls];
        uint64_t last = (uint64_t)((hi < pe ? hi : pe) - 1 - pb) / sz;
        for (uint64_t i = (uint64_t)(a - pb) / sz; i <= last && i < d->bump; i++) {
          if (!hl__bit(hl__allocs(h, p), (uint32_t)i)) continue;
          if (!pins && !(pins = hl__sys_calloc(h->high_water, sizeof *pins))) goto oom;
          int n = hl__ptrset_add(&seen, pb + i * sz);
          if (n < 0) goto oom;
          pins[p] += (uint32_t)n;
        }
      }
      a = pe;
    }
  }
  for (uint32_t r = 0; r < h->nregions; r++) {
    hl_root_region *rg = &h->regions[r];
    if (!rg->conservative) continue;
    for (uint64_t w = 0; w < rg->words; w++) {
      void *obj = hl__small_resolve(h, __atomic_load_n(&rg->base[w], __ATOMIC_RELAXED), true);
      if (!obj) continue;
      if (!pins && !(pins = hl__sys_calloc(h->high_water, sizeof *pins))) goto oom;
      int a = hl__ptrset_add(&seen, obj);
      if (a < 0) goto oom;
      pins[hl__page_of(h, obj)] += (uint32_t)a;
    }
  }
  hl__ptrset_free(&seen);
  return pins;
oom:
  /* without the pins nothing may move */
  hl__ptrset_free(&seen);
  hl__sys_free(pins);
  *oom = true;
  return NULL;
}

/* The destinations of one class, densest first: dst[at] is being filled,
 * dst[at..prepared) have had their released OS pages restored, and `room`
 * free slots among them. */
typedef struct dest_cursor {
  evac_page *dst;
  size_t n, at, prepared;
  uint64_t room;
} dest_cursor;

/* Room for `need` more objects, restoring destinations as needed. */
static bool dest_room(hl_heap *h, dest_cursor *c, uint64_t need) {
  while (c->room < need && c->prepared < c->n) {
    evac_page *q = &c->dst[c->prepared++];
    if (h->sub_pages && !hl__sub_restore(h, q->p, 0, h->page_size)) {
      /* its OS pages will not come back: not a destination after all (it
       * waits off the avail lists, SUB_FAILED, for the next trim) */
      q->dest = false;
      continue;
    }
    hl__sub_dirty(h, q->p); /* its free OS pages are found again by the trim */
    c->room += h->pages[q->p].nslots - h->pages[q->p].used;
  }
  return c->room >= need;
}

static uint8_t *dest_slot(hl_heap *h, dest_cursor *c) {
  for (;; c->at++) {
    HL_ASSERT(c->at < c->prepared);
    const evac_page *q = &c->dst[c->at];
    const hl_page *d = &h->pages[q->p];
    if (q->dest && d->used < d->nslots) {
      c->room--;
      return take_slot(h, q->p);
    }
  }
}

/* Move every object of source page src into the destinations; false (and
 * nothing moved) when they have no room for all of them. */
static bool move_page(hl_heap *h, evac_state *e, const evac_page *src, dest_cursor *c) {
  if (!dest_room(h, c, src->live)) return false;
  hl_page *d = &h->pages[src->p];
  uint32_t sz = h->cls_size[d->cls];
  uint8_t *base = hl__page_addr(h, src->p);
  const uint64_t *ab = hl__allocs(h, src->p);
  for (uint32_t w = 0; w < (d->bump + 63) / 64; w++) {
    for (uint64_t m = ab[w]; m; m &= m - 1) {
      uint8_t *obj = base + (uint64_t)(w * 64 + (uint32_t)__builtin_ctzll(m)) * sz;
      uint8_t *to = dest_slot(h, c);
      memcpy(to, obj, sz);
      hl_page *dq = &h->pages[hl__page_of(h, to)];
      if (((hl_objhdr *)obj)->refs) dq->flags |= PF_REFS;
      *(void **)obj = to; /* the forwarding address */
      e->objects++;
      e->bytes += sz;
    }
  }
  e->evac[src->p] = 1;
  e->pages++;
  return true;
}

static uint64_t ident_cap(const hl_heap *h) {
  uint64_t cap = 64;
  while (cap < h->idents_count * 2) cap *= 2;
  return cap;
}

/* An identity's object after the move (e), or NULL when it died. */
static void *ident_map(hl_heap *h, const void *arg, void *obj) {
  const evac_state *e = arg;
  if (hl__small_resolve(h, obj, false) != obj) return NULL; /* freed */
  uint32_t p = hl__page_of(h, obj);
  uint64_t off = (uint64_t)((uint8_t *)obj - hl__page_addr(h, p));
  if (!hl__bit(hl__marks(h, p), hl__slot_index(h, off, h->pages[p].cls))) return NULL; /* dead */
  return e ? forward(h, e, obj) : obj;
}

int hl__evacuate(hl_heap *h) {
  HL_ASSERT_LOCKED(h);
  uint64_t t0 = hl__prim_now_ns();
  int rc = HL_OK;
  /* a thread holding the heap has raw pointers nobody knows of; so has a
   * fill, or hl_obj_new_in, that allocates while it keeps some */
  bool blocked = hl__held == h || h->nomove;
  bool oom = false;
  /* the identities of objects that died go first: a moved object may land
   * in the slot of one, and must not take its identity there */
  if (h->idents_count && !ident_rebuild(h, ident_cap(h), ident_map, NULL)) oom = true;
  uint32_t *pins = find_pins(h, &oom);
  blocked = blocked || oom;

  /* the candidates first (no array, no sort on a heap without one): the
   * partial pages below the threshold with no unswept garbage, per class */
  uint64_t pinned_objects = 0, pinned_pages = 0, ncand = 0;
  uint32_t cand_cls[HL_MAX_CLASSES] = {0};
  uint64_t cap = 0;
  for (uint32_t p = 0; p < h->high_water; p++) {
    hl_page *d = &h->pages[p];
    if (d->state != PS_PARTIAL || (h->tenure[p] & TN_TENURED) || d->used == 0) continue;
    bool sparse = h->opt.compact == HL_COMPACT_ALWAYS
                      ? d->used < d->nslots
                      : (uint64_t)d->used * 100 < (uint64_t)h->opt.compact_live_pct * d->nslots;
    /* unswept garbage (a partial page a minor sweep skipped): its slots are
     * not all live, and moving only the live ones would free the rest
     * unaccounted; the sweep that frees them comes first */
    if (!sparse || live_on(h, p) != d->used) continue;
    /* blocked first: every live object of the page stays, the ones a
     * conservative word pins among them (counting only those undercounted a
     * held heap's page that also had a conservative pin) */
    if (blocked) { /* nothing moves: what would have is pinned (no plan needed) */
      pinned_objects += d->used;
      pinned_pages++;
      continue;
    }
    if (pins && pins[p]) {
      pinned_objects += pins[p];
      pinned_pages++;
      continue;
    }
    cand_cls[d->cls]++;
    ncand++;
  }
  /* then every partial page of those classes: sources and destinations */
  for (uint32_t c = 0; c < h->nclasses; c++)
    if (cand_cls[c]) cap += h->partial_avail[c].count;
  if (ncand) cap += h->partial_full.count;
  uint64_t n = 0;
  evac_page *pg = cap ? hl__sys_malloc(cap * sizeof *pg) : NULL;
  if (!pg) {
    hl__sys_free(pins);
    ncand = 0; /* nothing to do, or no memory to do it with */
  }
  for (uint32_t p = 0; ncand && p < h->high_water && n < cap; p++) {
    hl_page *d = &h->pages[p];
    if (d->state != PS_PARTIAL || !cand_cls[d->cls] || (h->tenure[p] & TN_TENURED) ||
        d->used == 0)
      continue;
    evac_page x = {p, d->cls, d->used, d->nslots - d->used, false, !hl__sub_unavail(h, p)};
    bool sparse = h->opt.compact == HL_COMPACT_ALWAYS
                      ? d->used < d->nslots
                      : (uint64_t)d->used * 100 < (uint64_t)h->opt.compact_live_pct * d->nslots;
    x.source = sparse && !(pins && pins[p]) && live_on(h, p) == d->used; /* for now */
    pg[n++] = x;
  }
  if (pg) hl__sys_free(pins);
  if (n) qsort(pg, n, sizeof *pg, by_class_then_live);

  evac_state e = {0};
  for (uint64_t i = 0, j; i < n; i = j) {
    /* the pages of one class: [i, j), sparsest first */
    uint32_t cls = pg[i].cls;
    uint64_t room = 0;
    for (j = i; j < n && pg[j].cls == cls; j++)
      if (pg[j].dest) room += pg[j].room;
    /* the sources: the sparsest candidates whose objects the others' free
     * slots can take */
    uint64_t moved = 0, nsrc = 0;
    for (uint64_t k = i; k < j; k++) {
      if (!pg[k].source) continue;
      uint64_t r = room - (pg[k].dest ? pg[k].room : 0);
      if (moved + pg[k].live > r) {
        for (uint64_t q = k; q < j; q++) pg[q].source = false;
        break;
      }
      room = r;
      moved += pg[k].live;
      nsrc++;
    }
    if (!nsrc) continue;
    if (!e.evac && !(e.evac = hl__sys_calloc(h->high_water, 1))) break;
    /* the destinations: the others, densest first */
    evac_page *dst = hl__sys_malloc((j - i) * sizeof *dst);
    if (!dst) break;
    dest_cursor c = {dst, 0, 0, 0, 0};
    for (uint64_t k = j; k-- > i;)
      if (!pg[k].source && pg[k].dest && pg[k].room) dst[c.n++] = pg[k];
    for (uint64_t k = i; k < j; k++)
      if (pg[k].source && !move_page(h, &e, &pg[k], &c)) break;
    /* the destinations back on their lists: a page filled up leaves its avail
     * list, one whose restore failed is held off it */
    for (size_t k = 0; k < c.prepared; k++) hl__page_to_state(h, dst[k].p, PS_PARTIAL, false);
    hl__sys_free(dst);
  }

  if (h->idents_count && e.pages && !ident_rebuild(h, ident_cap(h), ident_map, &e)) {
    /* no memory for the re-keyed table: the moved objects' identities stay
     * under their old addresses, so a Python hash of one would change;
     * reported as a failure of the cycle */
    rc = hl__fail(h, HL_ENOMEM, "compaction: no memory to re-key the identity table");
  }
  if (e.pages) {
    update_references(h, &e);
    if (h->opt.verify) {
      char msg[200], what[220];
      if (check_no_stale(h, &e, msg, sizeof msg)) {
        snprintf(what, sizeof what, "compaction: %s", msg);
        rc = hl__verify_failed(h, 0, what);
      }
    }
    for (uint32_t p = 0; p < h->high_water; p++) {
      if (!e.evac[p]) continue;
      hl_page *d = &h->pages[p];
      uint32_t words = (d->nslots + 63) / 64;
      if (h->opt.verify) { /* (empty pages are poisoned whole: hl__free_page_written) */
        uint32_t sz = h->cls_size[d->cls];
        const uint64_t *ab = hl__allocs(h, p);
        for (uint32_t w = 0; w < words; w++)
          for (uint64_t m = ab[w]; m; m &= m - 1)
            hl__poison(hl__page_addr(h, p) + (uint64_t)(w * 64 + (uint32_t)__builtin_ctzll(m)) * sz,
                       sz);
      }
      memset(hl__allocs(h, p), 0, words * sizeof(uint64_t));
      memset(hl__marks(h, p), 0, words * sizeof(uint64_t));
      hl__page_unformat(h, p);
      hl__page_to_state(h, p, PS_FREE, true);
    }
    h->tally.compactions++;
  }
  hl__sys_free(e.evac);
  hl__sys_free(pg);
  uint64_t dt = hl__prim_now_ns() - t0;
  h->tally.evacuated_pages += e.pages;
  h->tally.evacuated_objects += e.objects;
  h->tally.evacuated_bytes += e.bytes;
  h->tally.pinned_objects += pinned_objects;
  h->tally.compact_ns += dt;
  if (e.pages || pinned_objects)
    hl__event(h, HL_EV_compact, 7, (int64_t)e.pages, (int64_t)e.objects, (int64_t)e.bytes,
              (int64_t)pinned_objects, (int64_t)pinned_pages, (int64_t)dt, (int64_t)blocked);
  return rc;
}
