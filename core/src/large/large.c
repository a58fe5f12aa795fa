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

/* The system block for a block of block_bytes after its hl_large record,
 * aligned to align (16, or a larger power of two: the system block is
 * over-allocated by align - 16 and the record, right before the block, keeps
 * the lead so that free finds the system block); NULL when malloc fails or
 * the sizes do not fit.  zero: the block reads as zeros -- from calloc, which
 * knows when its memory is fresh from the kernel and writes nothing then (a
 * memset of a fresh 1 MiB block faults in 256 pages nobody asked for).  No
 * lock needed: a manual heap calls it outside the heap lock, so that the
 * system allocator's own mmap, munmap and page faults do not hold every
 * other thread (hl__large_adopt links the block in). */
void *hl__large_sys_alloc(uint64_t block_bytes, size_t align, bool zero) {
  size_t extra = align > 16 ? align - 16 : 0;
  /* the lead is kept in 32 bits: alignments past 1 GiB are refused */
  if (align > ((size_t)1 << 30) || block_bytes > SIZE_MAX - sizeof(hl_large) - extra) return NULL;
  size_t total = sizeof(hl_large) + extra + block_bytes;
  void *raw = zero ? hl__sys_calloc(1, total) : hl__sys_malloc(total);
  hl__sys_handed_out();
  return raw;
}

#ifdef HL_TSAN
char hl__sys_order;
#endif

void hl__large_sys_free(void *raw) {
  if (!raw) return;
  hl__sys_handed_back();
  hl__sys_free(raw);
}

/* Put l at the head of h's list.  Lock held. */
static void link_head(hl_heap *h, hl_large *l) {
  HL_ASSERT_LOCKED(h);
  l->prev = NULL;
  l->next = h->large_head;
  if (h->large_head) h->large_head->prev = l;
  h->large_head = l;
}

/* Link raw, a system block from hl__large_sys_alloc(block_bytes, align),
 * into h as a large block: its record written, the set and the list
 * updated, its bytes charged.  NULL when the set cannot grow: raw is the
 * caller's then, for hl__sys_free.  Lock held. */
void *hl__large_adopt(hl_heap *h, void *raw, uint64_t block_bytes, size_t align) {
  HL_ASSERT_LOCKED(h);
  uintptr_t b = ((uintptr_t)raw + sizeof(hl_large) + (align > 16 ? align - 1 : 0)) &
                ~(uintptr_t)(align > 16 ? align - 1 : 0);
  hl_large *l = (hl_large *)b - 1;
  void *block = l + 1;
  if (hl__ptrset_add(&h->large_set, block) < 0) return NULL;
  l->size = block_bytes;
  l->mark = 0;
  l->dirty = 0;
  l->flags = 0;
  l->lead = (uint32_t)((uint8_t *)l - (uint8_t *)raw);
  link_head(h, l);
  hl__charge(h, HL_LARGE, (int64_t)block_bytes, 1);
  return block;
}

/* A large block of block_bytes, charged; NULL when the system refuses it.
 * Called with the lock held (a collected heap's allocation: the collector
 * must see every block it charged -- the record is adopted under it); the
 * system's call itself (an mmap, or malloc's own mmap and page faults) is
 * made with the lock dropped when this call may drop it, as a restore's is
 * (release/reuse.c): with large_map_bytes every object of 128 KiB or more is
 * an mmap, and every other thread of the heap waited for it.  Nothing of the
 * block is the heap's before the adoption, so a cycle meanwhile cannot see
 * it. */
void *hl__large_alloc(hl_heap *h, uint64_t block_bytes, bool zero) {
  HL_ASSERT_LOCKED(h);
  uint64_t map_min = (uint64_t)h->opt.large_map_bytes;
  /* large_map_bytes: a mapping of its own (zeroed by the kernel), so that
   * its memory goes back when it dies whatever glibc's dynamic mmap
   * threshold is by then.  (A refused mapping: the system malloc's, which
   * refuses it too when the kernel does.) */
  bool mapped = map_min && block_bytes <= SIZE_MAX - sizeof(hl_large) - 4096 &&
                block_bytes + sizeof(hl_large) >= map_min;
  void *raw = NULL;
  bool dropped = hl__drop_lock(h);
  if (mapped && hl__prim_os_map(sizeof(hl_large) + block_bytes, &raw) != 0) raw = NULL, mapped = false;
  if (!raw) raw = hl__large_sys_alloc(block_bytes, 16, zero);
  hl__retake_lock(h, dropped);
  if (!raw) return NULL;
  void *block = hl__large_adopt(h, raw, block_bytes, 16);
  if (!block) {
    if (mapped) hl__prim_os_unreserve(raw, sizeof(hl_large) + block_bytes);
    else hl__large_sys_free(raw);
    return NULL;
  }
  if (mapped) hl__large_of(block)->flags = HL_LARGE_MAPPED;
  return block;
}

static void *system_block(hl_large *l) { return (uint8_t *)l - l->lead; }

/* Free a record's memory: its mapping, or its system block. */
static void release_block(hl_large *l) {
  if (l->flags & HL_LARGE_MAPPED) hl__prim_os_unreserve(l, sizeof(hl_large) + l->size);
  else hl__large_sys_free(system_block(l));
}

void hl__large_detach(hl_heap *h, hl_large *l) {
  HL_ASSERT_LOCKED(h);
  if (l->prev) l->prev->next = l->next;
  else h->large_head = l->next;
  if (l->next) l->next->prev = l->prev;
  hl__ptrset_hold(&h->large_set, l + 1);
}

/* The system realloc of a detached record (in place when it can; mremap for
 * big ones); NULL when it fails, l untouched.  No lock: the record is the
 * caller's alone. */
hl_large *hl__large_sys_realloc(hl_large *l, uint64_t block_bytes) {
  if (block_bytes > SIZE_MAX - sizeof(hl_large)) return NULL;
  hl_large *n;
  if (l->lead == 0) {
    hl__sys_handed_back(); /* (after the last read of the record) */
    n = hl__sys_realloc(l, sizeof(hl_large) + block_bytes);
    hl__sys_handed_out();
  } else {
    /* an aligned block: realloc keeps no alignment (C says so), so it
     * moves to a plain one */
    n = hl__sys_malloc(sizeof(hl_large) + block_bytes);
    hl__sys_handed_out();
    if (n) {
      memcpy(n, l, sizeof(hl_large) + (l->size < block_bytes ? l->size : block_bytes));
      n->lead = 0;
      hl__large_sys_free(system_block(l));
    }
  }
  return n;
}

/* Back into the list and the set, block_bytes long.  The caller charges the
 * resize (hl__charge_resize).  Lock held. */
void *hl__large_attach(hl_heap *h, hl_large *l, uint64_t block_bytes) {
  HL_ASSERT_LOCKED(h);
  l->size = block_bytes;
  hl__ptrset_unhold(&h->large_set, l + 1);
  link_head(h, l);
  return l + 1;
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

/* Free the memory of records hl__large_unlink took out, chained by their
 * next field.  No lock: the records are the caller's alone. */
void hl__large_release_chain(hl_large *l) {
  while (l) {
    hl_large *n = l->next;
    release_block(l);
    l = n;
  }
}

void hl__large_destroy_all(hl_heap *h) {
  hl__large_release_chain(h->large_head);
  h->large_head = NULL;
  hl__ptrset_free(&h->large_set);
}
