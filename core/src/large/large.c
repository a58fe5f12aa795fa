/*
 * large.c -- the large ("legacy") path: objects and blocks above small_max go
 * to the system allocator, each behind an hl_large record linking it into
 * the heap's list (for sweeping and for freeing everything at close).  A set
 * of live blocks (util/ptrset.c) lets the collector validate a pointer before
 * it follows it (conservative roots, slots of a dead object resurrected by
 * one).  The path charges and discharges its own bytes (hl__charge), for both
 * modes; its trigger is large_trigger_bytes (gc/cycle.c).
 */
#include <stdlib.h>

#include "../internal.h"

bool hl__large_contains(const hl_heap *h, const void *block) {
  return hl__ptrset_contains(&h->large_set, block);
}

/* A block of block_bytes after its hl_large record, aligned to align (16,
 * or a larger power of two: the system block is over-allocated by align - 16
 * and the record, right before the block, keeps the lead so that free finds
 * the system block), charged; NULL when malloc fails.  zero: the block reads
 * as zeros -- from calloc, which knows when its memory is fresh from the
 * kernel and writes nothing then (a memset of a fresh 1 MiB block faults in
 * 256 pages nobody asked for).  Lock held. */
void *hl__large_alloc_aligned(hl_heap *h, uint64_t block_bytes, size_t align, bool zero) {
  HL_ASSERT_LOCKED(h);
  size_t extra = align > 16 ? align - 16 : 0;
  /* the lead is kept in 32 bits: alignments past 1 GiB are refused */
  if (align > ((size_t)1 << 30) || block_bytes > SIZE_MAX - sizeof(hl_large) - extra) return NULL;
  size_t total = sizeof(hl_large) + extra + block_bytes;
  uint8_t *raw = zero ? hl__sys_calloc(1, total) : hl__sys_malloc(total);
  if (!raw) return NULL;
  uintptr_t b = ((uintptr_t)raw + sizeof(hl_large) + (align > 16 ? align - 1 : 0)) &
                ~(uintptr_t)(align > 16 ? align - 1 : 0);
  hl_large *l = (hl_large *)b - 1;
  void *block = l + 1;
  if (hl__ptrset_add(&h->large_set, block) < 0) {
    hl__sys_free(raw);
    return NULL;
  }
  l->size = block_bytes;
  l->mark = 0;
  l->dirty = 0;
  l->unused = 0;
  l->lead = (uint32_t)((uint8_t *)l - raw);
  l->prev = NULL;
  l->next = h->large_head;
  if (h->large_head) h->large_head->prev = l;
  h->large_head = l;
  hl__charge(h, HL_LARGE, (int64_t)block_bytes, 1);
  return block;
}

void *hl__large_alloc(hl_heap *h, uint64_t block_bytes, bool zero) {
  return hl__large_alloc_aligned(h, block_bytes, 16, zero);
}

static void *system_block(hl_large *l) { return (uint8_t *)l - l->lead; }

/* Resize a block with the system realloc (in place when it can; mremap for
 * big ones), keeping its record linked, its set entry current and the
 * counters right.  NULL when realloc fails, the block untouched.  Lock held. */
void *hl__large_realloc(hl_heap *h, hl_large *l, uint64_t block_bytes) {
  HL_ASSERT_LOCKED(h);
  if (block_bytes > SIZE_MAX - sizeof(hl_large)) return NULL;
  uint64_t old = l->size;
  /* the add below cannot fail: each re-adds the one entry just removed */
  hl__ptrset_remove(&h->large_set, l + 1);
  hl_large *n;
  if (l->lead == 0) {
    n = hl__sys_realloc(l, sizeof(hl_large) + block_bytes);
  } else {
    /* an aligned block: realloc keeps no alignment (C says so), so it
     * moves to a plain one */
    n = hl__sys_malloc(sizeof(hl_large) + block_bytes);
    if (n) {
      memcpy(n, l, sizeof(hl_large) + (old < block_bytes ? old : block_bytes));
      n->lead = 0;
      hl__sys_free(system_block(l));
    }
  }
  if (!n) {
    hl__ptrset_add(&h->large_set, l + 1);
    return NULL;
  }
  if (n != l) {
    if (n->prev) n->prev->next = n;
    else h->large_head = n;
    if (n->next) n->next->prev = n;
  }
  n->size = block_bytes;
  hl__ptrset_add(&h->large_set, n + 1);
  hl__charge_resize(h, old, block_bytes);
  return n + 1;
}

void *hl__large_unlink(hl_heap *h, hl_large *l) {
  HL_ASSERT_LOCKED(h);
  if (l->prev) l->prev->next = l->next;
  else h->large_head = l->next;
  if (l->next) l->next->prev = l->prev;
  hl__ptrset_remove(&h->large_set, l + 1);
  hl__discharge(h, HL_LARGE, l->size, 1);
  return system_block(l);
}

/* Unlink, discharge and free.  Lock held. */
void hl__large_free(hl_heap *h, hl_large *l) { hl__sys_free(hl__large_unlink(h, l)); }

void hl__large_destroy_all(hl_heap *h) {
  hl_large *l = h->large_head;
  while (l) {
    hl_large *n = l->next;
    hl__sys_free(system_block(l));
    l = n;
  }
  h->large_head = NULL;
  hl__ptrset_free(&h->large_set);
}
