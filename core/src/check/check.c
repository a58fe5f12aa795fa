/*
 * check.c -- the whole-heap invariant checker (hl_heap_check, and every
 * cycle with verify=true): every carved page in exactly one state and on the
 * right list, the lists' links and counts, each formatted page's slot
 * accounting against its allocation bitmap, tenured pages off the avail
 * lists, and with verify on, that every free slot still holds its poison.
 * Lock held.
 */
#include <inttypes.h>
#include <stdio.h>

#include "../internal.h"


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
  HL_ASSERT_LOCKED(h);
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
  CHECK(tenured == h->tenured_pages, "tenured pages %" PRIu64 " but counted %" PRIu64,
        tenured, h->tenured_pages);
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
