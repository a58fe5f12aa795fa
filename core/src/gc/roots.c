/*
 * roots.c -- handles (the roots bindings hold) and registered root regions.
 *
 * A handle value packs the heap's tag, a generation and a table index, so a
 * released handle, a handle of another heap and a made-up number are all
 * detected instead of dereferenced:
 *     bits 63..48 heap tag | 47..32 generation | 31..0 index + 1
 * The encoding is this file's alone.  Lock held everywhere.
 */
#include <stdlib.h>

#include "../internal.h"

#define REF_INDEX(r) ((uint32_t)((r) & 0xffffffffu))
#define REF_GEN(r) ((uint32_t)(((r) >> 32) & 0xffffu))
#define REF_TAG(r) ((uint16_t)((r) >> 48))

int hl__handle_new(hl_heap *h, void *obj, hl_ref *out) {
  HL_ASSERT_LOCKED(h);
  if (h->handles_free == HL_NIL) {
    uint32_t cap = h->handles_cap ? h->handles_cap * 2 : 256;
    if (cap > (1u << 31)) return hl__fail(h, HL_ENOMEM, "handles: table is full");
    hl_handle *n = hl__sys_realloc(h->handles, (size_t)cap * sizeof *n);
    if (!n) return hl__fail(h, HL_ENOMEM, "handles: cannot grow the table to %u", cap);
    for (uint32_t i = h->handles_cap; i < cap; i++) {
      n[i].obj = NULL;
      n[i].gen = 1;
      n[i].next_free = i + 1 < cap ? i + 1 : h->handles_free;
    }
    h->handles_free = h->handles_cap;
    h->handles = n;
    h->handles_cap = cap;
  }
  uint32_t i = h->handles_free;
  hl_handle *e = &h->handles[i];
  h->handles_free = e->next_free;
  e->obj = obj;
  h->handles_live++;
  *out = ((uint64_t)h->tag << 48) | ((uint64_t)(e->gen & 0xffffu) << 32) | (uint64_t)(i + 1);
  return HL_OK;
}

static int lookup(hl_heap *h, hl_ref ref, hl_handle **out) {
  HL_ASSERT_LOCKED(h);
  if (ref == 0) return hl__fail(h, HL_EINVAL, "handle is null");
  /* (no heap has tag 0: such a number is no handle, and was named another
   * heap's -- the C API hunt, session 26) */
  if (REF_TAG(ref) == 0)
    return hl__fail(h, HL_EINVAL, "handle 0x%llx is not a handle (no heap's tag)",
                    (unsigned long long)ref);
  if (REF_TAG(ref) != h->tag)
    return hl__fail(h, HL_EFOREIGN, "handle 0x%llx belongs to another heap (or is no handle)",
                    (unsigned long long)ref);
  uint32_t i = REF_INDEX(ref);
  if (i == 0 || i > h->handles_cap)
    return hl__fail(h, HL_ESTALE, "handle 0x%llx is unknown", (unsigned long long)ref);
  hl_handle *e = &h->handles[i - 1];
  if (!e->obj || (e->gen & 0xffffu) != REF_GEN(ref))
    return hl__fail(h, HL_ESTALE, "handle 0x%llx was released", (unsigned long long)ref);
  *out = e;
  return HL_OK;
}

int hl__handle_get(hl_heap *h, hl_ref ref, void **obj) {
  hl_handle *e = NULL;
  int rc = lookup(h, ref, &e);
  if (rc) return rc;
  *obj = e->obj;
  return HL_OK;
}

/* The caller's ref is known live (it just made or looked it up). */
void hl__handle_set(hl_heap *h, hl_ref ref, void *obj) {
  HL_ASSERT_LOCKED(h);
  hl_handle *e = &h->handles[REF_INDEX(ref) - 1];
  HL_ASSERT(REF_INDEX(ref) >= 1 && REF_INDEX(ref) <= h->handles_cap && e->obj);
  e->obj = obj;
}

/* A released slot's generation goes up, so the released handle no longer
 * matches it.  The generation is 16 bits: a slot whose generation would wrap
 * is retired instead of reused (16 bytes per 65,535 reuses), so a stale
 * handle can never match a later object of its slot. */
int hl__handle_release(hl_heap *h, hl_ref ref) {
  hl_handle *e = NULL;
  int rc = lookup(h, ref, &e);
  if (rc) return rc;
  e->obj = NULL;
  h->handles_live--;
  if (e->gen >= 0xffffu) {
    h->handles_retired++;
    return HL_OK;
  }
  e->gen++;
  uint32_t i = (uint32_t)(e - h->handles);
  e->next_free = h->handles_free;
  h->handles_free = i;
  return HL_OK;
}

void hl__handles_destroy(hl_heap *h) {
  hl__sys_free(h->handles);
  h->handles = NULL;
  h->handles_cap = h->handles_live = 0;
  h->handles_free = HL_NIL;
  hl__sys_free(h->regions);
  h->regions = NULL;
  h->nregions = h->regions_cap = 0;
}

/* Root regions: arrays of words scanned as roots (precise, or conservative:
 * any word that points into an object keeps it). */
int hl__roots_add(hl_heap *h, void *base, uint64_t words, int conservative) {
  HL_ASSERT_LOCKED(h);
  /* the base names the region (hl__roots_remove): one region a base */
  for (uint32_t i = 0; i < h->nregions; i++)
    if (h->regions[i].base == base)
      return hl__fail(h, HL_EINVAL, "roots_add: a region at %p is already registered "
                      "(hl_roots_remove it first)", base);
  if (h->nregions == h->regions_cap) {
    uint32_t cap = h->regions_cap ? h->regions_cap * 2 : 8;
    hl_root_region *n = hl__sys_realloc(h->regions, cap * sizeof *n);
    if (!n) return hl__fail(h, HL_ENOMEM, "roots_add: out of memory");
    h->regions = n;
    h->regions_cap = cap;
  }
  h->regions[h->nregions++] = (hl_root_region){base, words, conservative != 0};
  return HL_OK;
}

int hl__roots_remove(hl_heap *h, void *base) {
  HL_ASSERT_LOCKED(h);
  for (uint32_t i = 0; i < h->nregions; i++) {
    if (h->regions[i].base == base) {
      h->regions[i] = h->regions[--h->nregions];
      return HL_OK;
    }
  }
  return hl__fail(h, HL_EINVAL, "roots_remove: %p is not a registered region", base);
}
