/*
 * large.c -- the large ("legacy") path: objects and blocks above small_max go
 * to the system allocator, each behind an hl_large record linking it into
 * the heap's list (for sweeping and for freeing everything at close).  A set
 * of live blocks (util/ptrset.c) lets the collector validate a pointer before
 * it follows it (conservative roots, slots of a dead object resurrected by
 * one).  The path charges and discharges its own bytes (hl__charge), for both
 * modes; its trigger is large_trigger_bytes (gc/cycle.c).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../internal.h"

static void unmap_or_pend(hl_heap *h, void *raw, uint64_t block_bytes);

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
  return zero ? hl__sys_calloc(1, total) : hl__sys_malloc(total);
}

#ifdef HL_TSAN
char hl__sys_order;
#endif

void hl__large_sys_free(void *raw) {
  if (!raw) return;
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
  h->large_set_refused = false;
  if (!raw) return NULL;
  void *block = hl__large_adopt(h, raw, block_bytes, 16);
  if (!block) {
    h->large_set_refused = true;
    if (mapped) unmap_or_pend(h, raw, block_bytes);
    else hl__large_sys_free(raw);
    return NULL;
  }
  if (mapped) hl__large_of(block)->flags = HL_LARGE_MAPPED;
  return block;
}

static void *system_block(hl_large *l) { return (uint8_t *)l - l->lead; }

/* ---- mappings the kernel would not unmap ----
 *
 * A mapped block's munmap fails with ENOMEM at vm.max_map_count when the
 * block lies inside a VMA merged with its neighbours (the blocks mapped
 * before and after it, or the program's own mappings): unmapping it would
 * split the VMA in two.  The result was ignored: the bytes stayed mapped and
 * resident while large_live_bytes said them freed, and hl_heap_free lost
 * them for good (375 MB resident where 198 MB was right; the scale hunt,
 * session 28).  Now a refused block's pages but the first go back with
 * MADV_DONTNEED -- which never splits a VMA -- and the range goes on the
 * heap's pending list, its record (in the first page) chaining it: no
 * allocation, which could fail at the limit too.  The list is retried at
 * each cycle's end (its first range; the rest when that one goes), by
 * hl_trim (every range) and at hl_heap_free, which reports on stderr what
 * it could not unmap.  The event large_unmap_pending says each change. */

static size_t map_bytes(const hl_large *l) { return sizeof(hl_large) + (size_t)l->size; }

/* munmap a mapped block; false when the kernel refuses.  The first refusal
 * gives the pages after the record's back (the record chains the range). */
static bool unmap_block(hl_large *l, bool first, hl_unmap_tally *t) {
  size_t bytes = map_bytes(l);
  int err = hl__prim_os_unreserve(l, bytes);
  if (err == 0) return true;
  if (!t->err) t->err = err;
  if (first) {
    size_t ps = hl__prim_os_page_size();
    /* (refused too -- an mlock'ed range -- the pages stay resident: the
     * range is pending all the same, and retried) */
    if (bytes > ps) (void)hl__prim_os_advise((uint8_t *)l + ps, bytes - ps, PRIM_DONTNEED);
  }
  return false;
}

static void keep(hl_large *l, hl_unmap_tally *t) {
  l->prev = NULL;
  l->next = t->kept;
  t->kept = l;
}

/* Free a record's memory: its mapping, or its system block. */
static void release_block(hl_large *l, hl_unmap_tally *t) {
  if (!(l->flags & HL_LARGE_MAPPED)) {
    hl__large_sys_free(system_block(l));
    return;
  }
  if (unmap_block(l, true, t)) return;
  l->flags |= HL_LARGE_PENDING;
  t->refused++;
  t->refused_bytes += map_bytes(l);
  keep(l, t);
}

/* A fresh mapping hl__large_alloc could not adopt.  Lock held. */
static void unmap_or_pend(hl_heap *h, void *raw, uint64_t block_bytes) {
  hl_large *l = raw;
  memset(l, 0, sizeof *l);
  l->size = block_bytes;
  l->flags = HL_LARGE_MAPPED;
  hl_unmap_tally t = {0};
  release_block(l, &t);
  hl__large_unmap_done(h, &t);
}

hl_large *hl__large_pending_take(hl_heap *h) {
  HL_ASSERT_LOCKED(h);
  if (h->unmap_retrying || !h->unmap_pending) return NULL;
  hl_large *l = h->unmap_pending;
  h->unmap_pending = NULL;
  h->unmap_retrying = true;
  return l;
}

void hl__large_retry(hl_large *l, bool all, hl_unmap_tally *t) {
  bool refused = false;
  while (l) {
    hl_large *n = l->next;
    t->retried++;
    size_t bytes = map_bytes(l); /* (read before the unmap) */
    if (!refused && unmap_block(l, false, t)) {
      t->unmapped++;
      t->unmapped_bytes += bytes;
    } else {
      refused = !all;
      keep(l, t);
    }
    l = n;
  }
}

void hl__large_unmap_done(hl_heap *h, hl_unmap_tally *t) {
  HL_ASSERT_LOCKED(h);
  if (t->retried) h->unmap_retrying = false;
  for (hl_large *l = t->kept, *n; l; l = n) {
    n = l->next;
    l->next = h->unmap_pending;
    h->unmap_pending = l;
  }
  t->kept = NULL;
  h->unmap_pending_n += t->refused;
  h->unmap_pending_n -= t->unmapped;
  h->unmap_pending_bytes += t->refused_bytes;
  h->unmap_pending_bytes -= t->unmapped_bytes;
  if (t->refused || t->unmapped)
    hl__event(h, HL_EV_large_unmap_pending, 7, (int64_t)t->refused, (int64_t)t->refused_bytes,
              (int64_t)t->err, (int64_t)t->unmapped, (int64_t)t->unmapped_bytes,
              (int64_t)h->unmap_pending_n, (int64_t)h->unmap_pending_bytes);
}

void hl__large_retry_pending(hl_heap *h) {
  HL_ASSERT_LOCKED(h);
  HL_ASSERT(h->in_cycle);
  hl_large *pending = hl__large_pending_take(h);
  if (!pending) return;
  hl_unmap_tally t = {0};
  bool dropped = hl__drop_lock(h);
  hl__large_retry(pending, true, &t);
  hl__retake_lock(h, dropped);
  hl__large_unmap_done(h, &t);
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
    n = hl__sys_realloc(l, sizeof(hl_large) + block_bytes); /* (after the last read of the record) */
  } else {
    /* an aligned block: realloc keeps no alignment (C says so), so it
     * moves to a plain one */
    n = hl__sys_malloc(sizeof(hl_large) + block_bytes);
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
void hl__large_release_chain(hl_large *l, hl_unmap_tally *t) {
  while (l) {
    hl_large *n = l->next;
    release_block(l, t);
    l = n;
  }
}

/* A chain sorted by address (a merge sort of the linked records). */
static hl_large *sort_by_address(hl_large *l) {
  if (!l || !l->next) return l;
  hl_large *slow = l, *fast = l->next;
  while (fast && fast->next) slow = slow->next, fast = fast->next->next;
  hl_large *b = slow->next;
  slow->next = NULL;
  hl_large *a = sort_by_address(l);
  b = sort_by_address(b);
  hl_large head, *tail = &head;
  while (a && b) {
    if ((uintptr_t)a < (uintptr_t)b) tail->next = a, a = a->next;
    else tail->next = b, b = b->next;
    tail = tail->next;
  }
  tail->next = a ? a : b;
  return head.next;
}

/* Every block's memory at the heap's close, and every pending range's.  A
 * range in the middle of a merged VMA cannot go at the map limit, but one
 * at the VMA's end can (the VMA shrinks: no split), and then its neighbour
 * is at the end: the ranges are unmapped in address order, up and down,
 * while a pass unmaps any.  What is left (a range between mappings not the
 * heap's, in one VMA) is given back whole with MADV_DONTNEED and said on
 * stderr: the program's address space keeps it. */
void hl__large_destroy_all(hl_heap *h) {
  hl_unmap_tally t = {0};
  hl__large_release_chain(h->large_head, &t);
  h->large_head = NULL;
  hl_large *left = t.kept;
  for (hl_large *l = h->unmap_pending, *n; l; l = n) {
    n = l->next;
    l->next = left;
    left = l;
  }
  h->unmap_pending = NULL;
  left = sort_by_address(left);
  /* (keep() chains what a pass leaves in reverse: the next pass goes the
   * other way; two passes in a row that unmap nothing end it) */
  for (int pass = 0, idle = 0; left && idle < 2 && pass < 64; pass++) {
    hl_unmap_tally r = {0};
    hl__large_retry(left, true, &r);
    if (!t.err) t.err = r.err;
    left = r.kept;
    idle = r.unmapped ? 0 : idle + 1;
  }
  uint64_t n = 0, bytes = 0;
  for (hl_large *l = left, *next; l; l = next) {
    next = l->next;
    size_t b = map_bytes(l);
    n++;
    bytes += b;
    (void)hl__prim_os_advise(l, b, PRIM_DONTNEED);
  }
  if (n)
    hl__say(
            "heaplab: hl_heap_free: %" PRIu64 " large object mapping(s) (%" PRIu64
            " bytes) could not be unmapped (munmap: %s -- vm.max_map_count reached, each "
            "inside a VMA merged with mappings not the heap's): they stay mapped, their "
            "pages given back\n",
            n, bytes, hl__strerror(t.err));
  h->unmap_pending_n = h->unmap_pending_bytes = 0;
  hl__ptrset_free(&h->large_set);
}
