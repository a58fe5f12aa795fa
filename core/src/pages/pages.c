/*
 * pages.c -- one large reservation carved into page_size pages; descriptors,
 * mark bits and allocation bits in side tables indexed by page number, so no
 * byte of metadata lives inside a page (the seed lost 16 KB of every 64 KB to
 * an in-page header).  Pools are intrusive lists threaded through the
 * descriptors; every carved page is in exactly one state.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "../internal.h"

/* ---- lists ---- */

void hl__list_push_head(hl_heap *h, hl_list *l, uint32_t p) {
  hl_page *d = &h->pages[p];
  d->prev = HL_NIL;
  d->next = l->head;
  if (l->head != HL_NIL) h->pages[l->head].prev = p;
  else l->tail = p;
  l->head = p;
  l->count++;
}

void hl__list_push_tail(hl_heap *h, hl_list *l, uint32_t p) {
  hl_page *d = &h->pages[p];
  d->next = HL_NIL;
  d->prev = l->tail;
  if (l->tail != HL_NIL) h->pages[l->tail].next = p;
  else l->head = p;
  l->tail = p;
  l->count++;
}

void hl__list_remove(hl_heap *h, hl_list *l, uint32_t p) {
  hl_page *d = &h->pages[p];
  if (d->prev != HL_NIL) h->pages[d->prev].next = d->next;
  else l->head = d->next;
  if (d->next != HL_NIL) h->pages[d->next].prev = d->prev;
  else l->tail = d->prev;
  d->next = d->prev = HL_NIL;
  l->count--;
}

uint32_t hl__list_pop_head(hl_heap *h, hl_list *l) {
  uint32_t p = l->head;
  if (p != HL_NIL) hl__list_remove(h, l, p);
  return p;
}

uint32_t hl__list_pop_tail(hl_heap *h, hl_list *l) {
  uint32_t p = l->tail;
  if (p != HL_NIL) hl__list_remove(h, l, p);
  return p;
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
  hl_page *d = &h->pages[p];
  leave_state(h, p);
  d->state = (uint8_t)state;
  if (state == PS_PARTIAL) {
    /* a tenured page takes no new objects (gc.c) */
    if ((d->nfree > 0 || d->bump < d->nslots) && !(h->tenure[p] & TN_TENURED)) d->flags |= PF_AVAIL;
    else d->flags &= (uint8_t)~PF_AVAIL;
  } else {
    d->flags &= (uint8_t)~PF_AVAIL;
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

/* Make an empty page ready for size class cls.  Writes nothing into the page
 * itself (except poison when verify is on): all its state is out of line. */
void hl__page_format(hl_heap *h, uint32_t p, uint32_t cls, bool fresh) {
  hl_page *d = &h->pages[p];
  (void)fresh;
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
  d->nslots = (uint32_t)(h->page_size / h->cls_size[cls]);
  d->bump = 0;
  d->used = 0;
  d->cursor = 0;
  d->nfree = 0;
  uint32_t words = (d->nslots + 63) / 64;
  memset(hl__marks(h, p), 0, words * sizeof(uint64_t));
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

/* ---- acquisition ---- */

/* A bulk phase will write every byte of the page it just took: fault it in
 * with one call instead of one fault per OS page.  Outside the lock (the page
 * is in flight) unless the thread holds the heap; a failure only means the
 * page faults in the ordinary way. */
static void populate(hl_heap *h, uint32_t p) {
  if (!h->bulk) return;
  bool drop = hl__may_drop_lock(h);
  if (drop) pthread_mutex_unlock(&h->lock);
  prim_result r = prim_call(&h->prim, HL_SITE_populate, hl__page_addr(h, p), h->page_size,
                            PRIM_POPULATE);
  if (drop) pthread_mutex_lock(&h->lock);
  if (!r.err) h->st.populated_pages++;
}

/* Take an empty page for class cls: a warm free page, else a released one
 * (restored BEFORE it is formatted; at most reuse_attempts tries), else a
 * fresh page.  Returns the page in state PS_IN_FLIGHT, formatted, or HL_NIL.
 * May drop the heap lock around a restore syscall. */
uint32_t hl__acquire_page(hl_heap *h, uint32_t cls) {
  uint32_t p = h->free_pool.head;
  if (p != HL_NIL) {
    hl__page_to_state(h, p, PS_IN_FLIGHT, false);
    hl__page_format(h, p, cls, false);
    h->st.warm_reused_pages++;
    h->taken_since_trim++;
    return p;
  }
  for (int64_t attempt = 0; attempt < h->opt.reuse_attempts; attempt++) {
    p = h->released_pool.head;
    if (p == HL_NIL) p = h->reuse_failed.head;
    if (p == HL_NIL) break;
    hl__page_to_state(h, p, PS_IN_FLIGHT, false);
    /* restore_before_format=0 is the seed's defect: format writes into a
     * range the kernel still considers released. */
    if (!h->opt.restore_before_format) hl__page_format(h, p, cls, false);
    if (hl__restore_page(h, p) == 0) {
      populate(h, p);
      if (h->opt.restore_before_format) hl__page_format(h, p, cls, false);
      h->st.reused_pages++;
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
  }
  if (h->high_water >= h->npages_max) return HL_NIL;
  p = h->high_water++;
  h->carved_end = h->base + ((uint64_t)h->high_water << h->page_shift);
  hl_page *d = &h->pages[p];
  /* verify: fresh descriptors arrive holding garbage, as memory recycled by
   * malloc did in the seed, so a field format forgets is caught. */
  if (h->opt.verify) memset(d, 0xA5, sizeof *d);
  d->state = PS_IN_FLIGHT;
  d->next = d->prev = HL_NIL;
  h->state_count[PS_IN_FLIGHT]++;
  populate(h, p);
  hl__page_format(h, p, cls, true);
  h->st.fresh_pages++;
  h->taken_since_trim++;
  return p;
}

/* ---- reservation and side tables ---- */

static int map_table(hl_heap *h, size_t bytes, void **out, size_t *kept) {
  size_t ps = prim_os_page_size();
  bytes = (bytes + ps - 1) / ps * ps;
  prim_result r = prim_reserve(&h->prim, bytes, out);
  if (r.err) return r.err;
  *kept = bytes;
  return 0;
}

int hl__pages_init(hl_heap *h, char *err, size_t errlen) {
  h->page_size = (uint64_t)h->opt.page_size;
  h->page_shift = (unsigned)__builtin_ctzll(h->page_size);
  uint64_t want = (uint64_t)h->opt.reserve_bytes / h->page_size * h->page_size;
  uint64_t floor = 16 * h->page_size;
  void *base = NULL;
  int attempts = 0, last = 0;
  /* Step down when refused (RLIMIT_AS, overcommit=2, a small VM). */
  for (;;) {
    attempts++;
    prim_result r = prim_reserve(&h->prim, want, &base);
    if (!r.err) break;
    last = r.err;
    base = NULL;
    if (want / 2 < floor) break;
    want = want / 2 / h->page_size * h->page_size;
  }
  if (!base) {
    hl__fmt_err(err, errlen,
                "reserve: the kernel refused every reservation down to %" PRIu64
                " bytes (%s, %d attempts)",
                want, strerror(last), attempts);
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
  if ((e = map_table(h, h->npages_max, &t, &h->meta_bytes[2]))) goto fail;
  h->tenure = t;

  /* THP would make the kernel back the reservation with 2 MiB pages and
   * inflate RSS; advised once over the whole range, which changes the flags
   * of the whole VMA and so does not split it. */
  prim_result r = prim_call(&h->prim, HL_SITE_reserve, h->base, h->reserved, PRIM_NOHUGEPAGE);
  h->st.thp_disabled = r.err == 0;
  h->st.reserved_bytes = h->reserved;

  for (uint32_t c = 0; c < HL_MAX_CLASSES; c++) {
    h->owned[c] = HL_NIL;
    h->partial_avail[c] = (hl_list){HL_NIL, HL_NIL, 0};
  }
  hl_list *lists[] = {&h->retired, &h->partial_full, &h->free_pool, &h->released_pool,
                      &h->reuse_failed};
  for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
    *lists[i] = (hl_list){HL_NIL, HL_NIL, 0};
  hl__event(h, HL_EV_heap_created, 4, (int64_t)h->reserved, (int64_t)h->page_size,
            (int64_t)h->st.thp_disabled, (int64_t)attempts);
  return HL_OK;
fail:
  hl__fmt_err(err, errlen, "reserve: side tables for %" PRIu32 " pages refused (%s)",
              h->npages_max, strerror(e));
  hl__pages_destroy(h);
  return HL_ENOMEM;
}

void hl__pages_destroy(hl_heap *h) {
  if (h->tenure) prim_os_unreserve(h->tenure, h->meta_bytes[2]);
  if (h->bits) prim_os_unreserve(h->bits, h->meta_bytes[1]);
  if (h->pages) prim_os_unreserve(h->pages, h->meta_bytes[0]);
  if (h->base) prim_os_unreserve(h->base, h->reserved);
  h->tenure = NULL;
  h->bits = NULL;
  h->pages = NULL;
  h->base = NULL;
}

/* ---- invariants ---- */

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      snprintf(msg, len, __VA_ARGS__);                                         \
      return HL_ECHECK;                                                        \
    }                                                                          \
  } while (0)

static int check_list(hl_heap *h, hl_list *l, const char *name, char *msg, size_t len) {
  uint64_t n = 0;
  uint32_t prev = HL_NIL;
  for (uint32_t p = l->head; p != HL_NIL; p = h->pages[p].next) {
    CHECK(p < h->high_water, "%s: page %" PRIu32 " beyond high water", name, p);
    CHECK(h->pages[p].prev == prev, "%s: page %" PRIu32 " has a broken back link", name, p);
    CHECK(hl__list_of(h, p) == l, "%s: page %" PRIu32 " in state %d is on the wrong list",
          name, p, h->pages[p].state);
    prev = p;
    CHECK(++n <= h->high_water, "%s: cycle in list", name);
  }
  CHECK(l->tail == prev, "%s: tail is not the last page", name);
  CHECK(n == l->count, "%s: count %" PRIu64 " but %" PRIu64 " pages linked", name, l->count, n);
  return HL_OK;
}

int hl__check_locked(hl_heap *h, char *msg, size_t len) {
  hl__aword_flush(h); /* reserved slots count as used until then */
  uint64_t per_state[PS_COUNT] = {0};
  uint64_t owned = 0, fallback = 0, tenured = 0;
  for (uint32_t p = 0; p < h->high_water; p++) {
    hl_page *d = &h->pages[p];
    CHECK(d->state > PS_UNUSED && d->state < PS_COUNT, "page %" PRIu32 ": bad state %d", p,
          d->state);
    per_state[d->state]++;
    if (hl__released_state(d->state) && d->release == RK_FALLBACK) fallback++;
    if (d->state == PS_RELEASED || d->state == PS_REUSE_FAILED)
      CHECK(d->release != RK_NONE, "page %" PRIu32 ": released without a release kind", p);
    if (d->state == PS_FREE)
      CHECK(d->used == 0 && d->release == RK_NONE, "page %" PRIu32 ": free page not empty/clean",
            p);
    if (d->state == PS_OWNED) {
      CHECK(d->cls < h->nclasses && h->owned[d->cls] == p,
            "page %" PRIu32 ": owned but not its class's page", p);
      owned++;
    }
    if (h->tenure[p] & TN_TENURED) {
      CHECK(d->state == PS_PARTIAL && !(d->flags & PF_AVAIL),
            "page %" PRIu32 ": tenured, but in state %d%s", p, d->state,
            d->flags & PF_AVAIL ? " on an avail list" : "");
      tenured++;
    }
    if (!hl__formatted(d->state)) continue;
    CHECK(d->cls < h->nclasses, "page %" PRIu32 ": bad class %d", p, d->cls);
    uint32_t sz = h->cls_size[d->cls];
    CHECK(d->nslots == h->page_size / sz, "page %" PRIu32 ": nslots %" PRIu32, p, d->nslots);
    CHECK(d->bump <= d->nslots, "page %" PRIu32 ": bump beyond slots", p);
    const uint64_t *ab = hl__allocs(h, p);
    uint32_t allocated = 0;
    for (uint32_t w = 0; w < (d->nslots + 63) / 64; w++)
      allocated += (uint32_t)__builtin_popcountll(ab[w]);
    CHECK(allocated == d->used, "page %" PRIu32 ": %" PRIu32 " allocation bits but used %" PRIu32,
          p, allocated, d->used);
    uint32_t nfree = 0;
    uint8_t *base = hl__page_addr(h, p);
    for (uint32_t i = 0; i < d->nslots; i++) {
      if (i >= d->bump) {
        CHECK(!hl__bit(ab, i), "page %" PRIu32 ": slot %" PRIu32 " allocated beyond bump", p, i);
        continue;
      }
      if (hl__bit(ab, i)) continue;
      nfree++;
      CHECK(i / 64 >= d->cursor, "page %" PRIu32 ": free slot %" PRIu32 " below the cursor", p, i);
      if (h->opt.verify)
        CHECK(hl__free_slot_intact(base + (uint64_t)i * sz, sz),
              "page %" PRIu32 ": free slot %" PRIu32 " was written after it was freed", p, i);
    }
    CHECK(nfree == d->nfree, "page %" PRIu32 ": nfree %" PRIu32 " but %" PRIu32 " free", p,
          d->nfree, nfree);
    CHECK(d->used + d->nfree == d->bump,
          "page %" PRIu32 ": used %" PRIu32 " + free %" PRIu32 " != bump %" PRIu32, p, d->used,
          d->nfree, d->bump);
  }
  uint64_t sum = 0;
  for (int s = 1; s < PS_COUNT; s++) {
    CHECK(per_state[s] == h->state_count[s], "state %d: counted %" PRIu64 ", found %" PRIu64, s,
          h->state_count[s], per_state[s]);
    sum += per_state[s];
  }
  CHECK(sum == h->high_water, "pages in states %" PRIu64 " != carved %" PRIu32, sum,
        h->high_water);
  CHECK(fallback == h->fallback_count, "fallback pages %" PRIu64 " but counted %" PRIu64,
        fallback, h->fallback_count);
  CHECK(tenured == h->st.tenured_pages, "tenured pages %" PRIu64 " but counted %" PRIu64,
        tenured, h->st.tenured_pages);
  uint64_t owned_expected = 0;
  for (uint32_t c = 0; c < h->nclasses; c++) owned_expected += h->owned[c] != HL_NIL;
  CHECK(owned == owned_expected, "owned pages %" PRIu64 " but %" PRIu64 " classes own one",
        owned, owned_expected);
  int rc;
  if ((rc = check_list(h, &h->retired, "retired", msg, len))) return rc;
  if ((rc = check_list(h, &h->partial_full, "partial", msg, len))) return rc;
  for (uint32_t c = 0; c < h->nclasses; c++)
    if ((rc = check_list(h, &h->partial_avail[c], "partial(avail)", msg, len))) return rc;
  if ((rc = check_list(h, &h->free_pool, "free", msg, len))) return rc;
  if ((rc = check_list(h, &h->released_pool, "released", msg, len))) return rc;
  if ((rc = check_list(h, &h->reuse_failed, "reuse-failed", msg, len))) return rc;
  return HL_OK;
}
