/*
 * check.c -- the whole-heap invariant checker (hl_heap_check, and every
 * cycle with verify=true): every carved page in exactly one state and on the
 * right list, the lists' links and counts, each formatted page's slot
 * accounting against its allocation bitmap, tenured pages off the avail
 * lists, the large blocks' list against the set and the counters, the
 * sub-page state (no released OS page under an allocated slot, the counts),
 * every handle on a live object (so none was left behind by an evacuation),
 * every object's header within its slot or block (hl__check_headers: an
 * overflow of the block before it), and with verify on, that every free
 * slot still holds its poison.  Lock held.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

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
  CHECK(n == l->count, "%s: count %" PRIu64 " but %" PRIu64 " page%s linked", name, l->count, n,
        hl__s(n));
  return HL_OK;
}

/* Whether bytes [lo, hi) of page p overlap a released OS page (or the page
 * is being advised: its free slots may be read back as zero any moment). */
static bool overlaps_out(const hl_heap *h, uint32_t p, uint64_t lo, uint64_t hi) {
  if (!h->sub_flags) return false;
  if (h->sub_flags[p] & SUB_BUSY) return true;
  const uint64_t *out = hl__sub_out(h, p);
  for (uint64_t j = lo >> h->os_shift; j <= (hi - 1) >> h->os_shift; j++)
    if ((out[j >> 6] >> (j & 63)) & 1) return true;
  return false;
}

/* Sub-page state of page p (subpage_release): fallback bits within the out
 * bits, nothing beyond the page's OS pages, no out OS page under an
 * allocated slot, the flags where they may be.  Counts into the totals. */
static int check_sub(hl_heap *h, uint32_t p, uint64_t *out_n, uint64_t *fb_n, uint64_t *pages_n,
                     uint64_t *held_n, char *msg, size_t len) {
  const hl_page *d = &h->pages[p];
  const uint64_t *out = hl__sub_out(h, p), *fb = hl__sub_fb(h, p);
  uint8_t f = h->sub_flags[p];
  uint64_t n = 0;
  for (uint32_t w = 0; w < h->sub_words; w++) {
    CHECK(!(fb[w] & ~out[w]), "page %" PRIu32 ": a fallback OS page that is not out", p);
    uint32_t lo = w * 64;
    if (lo + 64 > h->os_per_page)
      CHECK(!(out[w] >> (h->os_per_page - lo)), "page %" PRIu32 ": out bits beyond its %" PRIu32
            " OS page%s", p, h->os_per_page, hl__s(h->os_per_page));
    n += (uint64_t)hl__popcount64(out[w]);
    *fb_n += (uint64_t)hl__popcount64(fb[w]);
  }
  *out_n += n;
  *pages_n += n != 0;
  if (f & (SUB_BUSY | SUB_FAILED)) {
    (*held_n)++;
    CHECK(d->state == PS_PARTIAL && !(d->flags & PF_AVAIL),
          "page %" PRIu32 ": sub-page %s, but in state %d%s", p,
          f & SUB_BUSY ? "busy" : "restore failed", d->state,
          d->flags & PF_AVAIL ? " on an avail list" : "");
    CHECK(!(f & SUB_BUSY) || h->in_cycle, "page %" PRIu32 ": sub-page busy outside a trim", p);
  }
  if (n && hl__released_state(d->state))
    CHECK(0, "page %" PRIu32 ": released whole but still has %" PRIu64 " OS page%s out", p, n,
          hl__s(n));
  if (!n || !hl__formatted(d->state)) return HL_OK;
  uint32_t sz = h->cls_size[d->cls];
  const uint64_t *ab = hl__allocs(h, p);
  for (uint32_t i = 0; i < d->bump; i++) {
    if (!hl__bit(ab, i)) continue;
    uint64_t lo = (uint64_t)i * sz, hi = lo + sz;
    for (uint64_t j = lo >> h->os_shift; j <= (hi - 1) >> h->os_shift; j++)
      CHECK(!((out[j >> 6] >> (j & 63)) & 1),
            "page %" PRIu32 ": slot %" PRIu32 " is allocated but OS page %" PRIu64
            " under it is released", p, i, j);
  }
  return HL_OK;
}

/* Every handle holds a live object: the start of an allocated slot of a
 * formatted page, or a large block (a handle an evacuation forgot would
 * point into a page that is free now). */
static int check_handles(hl_heap *h, char *msg, size_t len) {
  for (uint32_t i = 0; i < h->handles_cap; i++) {
    void *obj = h->handles[i].obj;
    if (!obj) continue;
    h->verify_addr = (uint64_t)(uintptr_t)obj; /* (named if a check below fails) */
    if (hl__in_reservation(h, obj))
      CHECK(hl__small_resolve(h, obj, false) == obj,
            "handle %" PRIu32 " holds %p, which is not a live object (page %" PRIu32 ")", i, obj,
            hl__page_of(h, obj));
    else
      CHECK(hl__large_contains(h, obj), "handle %" PRIu32 " holds %p, not an object", i, obj);
  }
  return HL_OK;
}

/* The large path: the list's blocks, each in the set, are what the counters
 * hold, with the blocks a manual realloc has out of the list meanwhile. */
static int check_large(hl_heap *h, char *msg, size_t len) {
  uint64_t n = 0, bytes = 0;
  const hl_large *prev = NULL;
  for (const hl_large *l = h->large_head; l; l = l->next) {
    CHECK(l->prev == prev, "large block %p has a broken back link", (const void *)(l + 1));
    CHECK(hl__large_contains(h, l + 1), "large block %p is not in the set", (const void *)(l + 1));
    CHECK(++n <= h->ctr.large_objects, "large list: more blocks than the %" PRIu64 " counted",
          h->ctr.large_objects);
    CHECK(!(l->flags & HL_LARGE_PENDING), "large block %p is live and pending an unmap",
          (const void *)(l + 1));
    bytes += l->size;
    prev = l;
  }
  CHECK(n + h->large_moving == h->ctr.large_objects && bytes + h->large_moving_bytes ==
        h->ctr.live[HL_LARGE], "large list: %" PRIu64 " block%s of %" PRIu64 " bytes (and %" PRIu32
        " being moved, %" PRIu64 " bytes), counted %" PRIu64 " of %" PRIu64, n, hl__s(n), bytes,
        h->large_moving, h->large_moving_bytes, h->ctr.large_objects, h->ctr.live[HL_LARGE]);
  /* the dead blocks munmap refused (large.c): each still mapped (its record
   * page: mincore says ENOMEM of an unmapped one), out of the set, and the
   * list what its counts say -- unless a retry has it out (in_cycle) */
  uint64_t pn = 0, pb = 0;
  for (const hl_large *l = h->unmap_pending; l; l = l->next) {
    CHECK(++pn <= h->unmap_pending_n, "unmap pending list: more ranges than the %" PRIu64
          " counted", h->unmap_pending_n);
    CHECK((l->flags & (HL_LARGE_MAPPED | HL_LARGE_PENDING)) ==
              (HL_LARGE_MAPPED | HL_LARGE_PENDING),
          "unmap pending range %p is not flagged mapped and pending", (const void *)l);
    CHECK(!hl__large_contains(h, l + 1), "unmap pending range %p is a live block",
          (const void *)l);
    int err = hl__prim_os_mapped(l, 1);
    CHECK(err == 0, "unmap pending range %p (%" PRIu64 " bytes) is not mapped (mincore: %s)",
          (const void *)l, sizeof(hl_large) + l->size, hl__strerror(err));
    pb += sizeof(hl_large) + l->size;
  }
  CHECK(h->unmap_retrying || (pn == h->unmap_pending_n && pb == h->unmap_pending_bytes),
        "unmap pending list: %" PRIu64 " range%s of %" PRIu64 " bytes, counted %" PRIu64
        " of %" PRIu64, pn, hl__s(pn), pb, h->unmap_pending_n, h->unmap_pending_bytes);
  return HL_OK;
}

int hl__verify_failed(hl_heap *h, uint64_t addr, const char *msg) {
  h->tally.verify_failures++;
  hl__event(h, HL_EV_verify_failed, 3, (int64_t)(addr ? addr : h->verify_addr),
            (int64_t)h->tally.verify_failures, (int64_t)h->in_cycle);
  h->verify_addr = 0;
  return hl__fail(h, HL_ECHECK, "verify: %s", msg);
}

void hl__free_page_describe(hl_heap *h, uint32_t p, uint64_t off, const char *what,
                            char *msg, size_t len) {
  const hl_page *d = &h->pages[p];
  uint8_t *a = hl__page_addr(h, p) + off;
  h->verify_addr = (uint64_t)(uintptr_t)a;
  if (d->cls < h->nclasses) {
    uint32_t sz = h->cls_size[d->cls];
    snprintf(msg, len, "page %" PRIu32 " (%s; its last class %" PRIu32 " bytes): %p, in the "
             "slot at %p, was written after its objects were freed", p, what, sz, (void *)a,
             (void *)(hl__page_addr(h, p) + off / sz * sz));
  } else {
    snprintf(msg, len, "page %" PRIu32 " (%s): %p was written after the page was freed", p,
             what, (void *)a);
  }
}

void hl__hdr_describe(hl_heap *h, const void *obj, char *msg, size_t len) {
  const hl_objhdr *hd = obj;
  h->verify_addr = (uint64_t)(uintptr_t)obj;
  if (!hl__in_reservation(h, obj)) {
    snprintf(msg, len, "large object %p: header refs %" PRIu32 " size %#" PRIx32 " does not fit "
             "its %" PRIu64 "-byte block (overwritten? an overflow of the block before it?)", obj,
             hd->refs, hd->size, hl__large_of(obj)->size);
    return;
  }
  uint32_t p = hl__page_of(h, obj);
  const hl_page *d = &h->pages[p];
  uint32_t sz = h->cls_size[d->cls];
  uint8_t *base = hl__page_addr(h, p);
  uint32_t i = (uint32_t)((uint64_t)((const uint8_t *)obj - base) / sz);
  char before[64];
  if (i == 0)
    snprintf(before, sizeof before, "the end of the page before it");
  else
    snprintf(before, sizeof before, "the %s at %p",
             hl__bit(hl__allocs(h, p), i - 1) ? "object" : "free slot",
             (void *)(base + (uint64_t)(i - 1) * sz));
  if (hl__hdr_fits(h, obj))
    snprintf(msg, len, "object %p (page %" PRIu32 " slot %" PRIu32 "): header refs %" PRIu32
             " on a page of objects without slots (overwritten? an overflow of %s?)", obj, p, i,
             hd->refs, before);
  else
    snprintf(msg, len, "object %p (page %" PRIu32 " slot %" PRIu32 "): header refs %" PRIu32
             " size %" PRIu32 " does not fit its %" PRIu32 "-byte slot (overwritten? an overflow "
             "of %s?)", obj, p, i, hd->refs, hd->size & ~HL_HDR_OLD, sz, before);
}

int hl__check_headers(hl_heap *h, char *msg, size_t len) {
  HL_ASSERT_LOCKED(h);
  if (h->opt.mode != HL_MODE_COLLECTED) return HL_OK; /* (a manual block has no header) */
  hl__aword_flush(h); /* (a reserved slot holds no object yet) */
  for (uint32_t p = 0; p < h->high_water; p++) {
    const hl_page *d = &h->pages[p];
    if (!hl__formatted(d->state)) continue;
    uint32_t sz = h->cls_size[d->cls];
    bool refs = (d->flags & PF_REFS) != 0;
    const uint64_t *ab = hl__allocs(h, p);
    uint8_t *base = hl__page_addr(h, p);
    for (uint32_t w = 0; w < (d->bump + 63) / 64; w++)
      for (uint64_t bits = ab[w]; bits; bits &= bits - 1) {
        uint8_t *obj = base + (uint64_t)(w * 64 + (uint32_t)__builtin_ctzll(bits)) * sz;
        if (!hl__hdr_fits(h, obj) || (!refs && ((hl_objhdr *)obj)->refs)) {
          hl__hdr_describe(h, obj, msg, len);
          return HL_ECHECK;
        }
      }
  }
  for (const hl_large *l = h->large_head; l; l = l->next)
    if (!hl__hdr_fits(h, l + 1)) {
      hl__hdr_describe(h, l + 1, msg, len);
      return HL_ECHECK;
    }
  return HL_OK;
}

int hl__check_locked(hl_heap *h, char *msg, size_t len) {
  HL_ASSERT_LOCKED(h);
  hl__aword_flush(h); /* reserved slots count as used until then */
  uint64_t per_state[PS_COUNT] = {0};
  uint64_t owned = 0, fallback = 0, tenured = 0;
  uint64_t sub_out = 0, sub_fb = 0, sub_pages = 0, sub_held = 0;
  int rc;
  for (uint32_t p = 0; p < h->high_water; p++) {
    hl_page *d = &h->pages[p];
    if (h->sub_flags &&
        (rc = check_sub(h, p, &sub_out, &sub_fb, &sub_pages, &sub_held, msg, len)))
      return rc;
    CHECK(d->state > PS_UNUSED && d->state < PS_COUNT, "page %" PRIu32 ": bad state %d", p,
          d->state);
    per_state[d->state]++;
    if (hl__released_state(d->state) && d->release == RK_FALLBACK) fallback++;
    if (d->state == PS_RELEASED || d->state == PS_REUSE_FAILED)
      CHECK(d->release != RK_NONE, "page %" PRIu32 ": released without a release kind", p);
    if (d->state == PS_FREE) {
      CHECK(d->used == 0 && d->release == RK_NONE, "page %" PRIu32 ": free page not empty/clean",
            p);
      /* verify: a free page is poisoned whole (a write after free into a
       * page its sweep emptied went unseen, and the page's next format
       * wiped it) */
      uint64_t off;
      if (h->opt.verify && h->opt.mode == HL_MODE_COLLECTED &&
          (off = hl__free_page_written(h, p, true)) != UINT64_MAX) {
        hl__free_page_describe(h, p, off, "free", msg, len);
        return HL_ECHECK;
      }
    }
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
      allocated += hl__popcount64(ab[w]);
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
      /* (a free slot over a released OS page reads back as zero) */
      h->verify_addr = (uint64_t)(uintptr_t)(base + (uint64_t)i * sz);
      if (h->opt.verify && !overlaps_out(h, p, (uint64_t)i * sz, (uint64_t)i * sz + sz) &&
          !hl__free_slot_intact(base + (uint64_t)i * sz, sz)) {
        /* (an object before it may have overflowed into it: named too) */
        char before[80] = "";
        if (i && hl__bit(ab, i - 1))
          snprintf(before, sizeof before, ", or by an overflow of the object at %p",
                   (void *)(base + (uint64_t)(i - 1) * sz));
        CHECK(0, "page %" PRIu32 ": free slot %" PRIu32 " at %p (class %" PRIu32 " bytes) was "
              "written after it was freed%s", p, i, (void *)(base + (uint64_t)i * sz), sz, before);
      }
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
  CHECK(owned == owned_expected, "owned pages %" PRIu64 " but %" PRIu64 " class%s own%s one",
        owned, owned_expected, owned_expected == 1 ? "" : "es", owned_expected == 1 ? "s" : "");
  if (h->sub_flags) {
    CHECK(sub_out == h->sub_out && sub_fb == h->sub_fallback,
          "sub-page: %" PRIu64 " OS page%s out (%" PRIu64 " fallback) but counted %" PRIu64
          " (%" PRIu64 ")", sub_out, hl__s(sub_out), sub_fb, h->sub_out, h->sub_fallback);
    CHECK(sub_pages == h->sub_pages, "sub-page: %" PRIu64 " page%s with OS pages out but "
          "counted %" PRIu64, sub_pages, hl__s(sub_pages), h->sub_pages);
    CHECK(sub_held == h->sub_held, "sub-page: %" PRIu64 " page%s held but counted %" PRIu64,
          sub_held, hl__s(sub_held), h->sub_held);
  }
  if (h->opt.mode == HL_MODE_COLLECTED && (rc = check_handles(h, msg, len))) return rc;
  if ((rc = check_large(h, msg, len))) return rc;
  if ((rc = hl__check_headers(h, msg, len))) return rc;
  if ((rc = check_list(h, &h->retired, "retired", msg, len))) return rc;
  if ((rc = check_list(h, &h->partial_full, "partial", msg, len))) return rc;
  for (uint32_t c = 0; c < h->nclasses; c++)
    if ((rc = check_list(h, &h->partial_avail[c], "partial(avail)", msg, len))) return rc;
  /* manual mode: the avail bitmap holds exactly the avail lists' pages, and
   * no bit of a class lies below its avail_lo */
  if (h->avail_bm)
    for (uint32_t p = 0; p < h->high_water; p++)
      for (uint32_t c = 0; c < h->nclasses; c++) {
        bool bit = (h->avail_bm[(size_t)(p / 64) * h->nclasses + c] >> (p % 64)) & 1;
        CHECK(bit == (hl__list_of(h, p) == &h->partial_avail[c]),
              "avail bitmap: page %" PRIu32 " class %" PRIu32 " bit %d, on its avail list %d", p,
              c, bit, hl__list_of(h, p) == &h->partial_avail[c]);
        CHECK(!bit || p / 64 >= h->avail_lo[c], "avail bitmap: page %" PRIu32 " below class %"
              PRIu32 "'s lowest row %" PRIu32, p, c, h->avail_lo[c]);
      }
  if ((rc = check_list(h, &h->free_pool, "free", msg, len))) return rc;
  if ((rc = check_list(h, &h->released_pool, "released", msg, len))) return rc;
  if ((rc = check_list(h, &h->reuse_failed, "reuse-failed", msg, len))) return rc;
  return HL_OK;
}
