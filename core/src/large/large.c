/*
 * large.c -- the large ("legacy") path: objects above small_max go to the
 * system allocator, each behind an hl_large record linking it into the heap's
 * list (for sweeping and for freeing everything at close).  An open-addressing
 * set of live blocks lets the collector validate a pointer before it follows
 * it (conservative roots, slots of a dead object resurrected by one).
 * It has its own byte counter and trigger (large_trigger_bytes).
 */
#include <stdlib.h>

#include "../internal.h"

static uint64_t hash_ptr(const void *p, uint64_t cap) {
  uint64_t x = (uint64_t)(uintptr_t)p >> 4;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return x & (cap - 1);
}

static bool set_grow(hl_heap *h) {
  uint64_t cap = h->large_set_cap ? h->large_set_cap * 2 : 1024;
  void **n = calloc(cap, sizeof(void *));
  if (!n) return false;
  for (uint64_t i = 0; i < h->large_set_cap; i++) {
    void *p = h->large_set[i];
    if (!p) continue;
    uint64_t j = hash_ptr(p, cap);
    while (n[j]) j = (j + 1) & (cap - 1);
    n[j] = p;
  }
  free(h->large_set);
  h->large_set = n;
  h->large_set_cap = cap;
  return true;
}

static bool set_add(hl_heap *h, void *p) {
  if ((h->large_set_count + 1) * 2 > h->large_set_cap && !set_grow(h)) return false;
  uint64_t j = hash_ptr(p, h->large_set_cap);
  while (h->large_set[j]) j = (j + 1) & (h->large_set_cap - 1);
  h->large_set[j] = p;
  h->large_set_count++;
  return true;
}

/* Linear probing with backward-shift deletion: no tombstones. */
static void set_remove(hl_heap *h, void *p) {
  uint64_t cap = h->large_set_cap, j = hash_ptr(p, cap);
  while (h->large_set[j] && h->large_set[j] != p) j = (j + 1) & (cap - 1);
  if (!h->large_set[j]) return;
  h->large_set[j] = NULL;
  h->large_set_count--;
  for (uint64_t k = (j + 1) & (cap - 1); h->large_set[k]; k = (k + 1) & (cap - 1)) {
    void *q = h->large_set[k];
    uint64_t home = hash_ptr(q, cap);
    /* q may move into the hole at j if its home is not in (j, k]. */
    bool stays = (j < k) ? (home > j && home <= k) : (home > j || home <= k);
    if (stays) continue;
    h->large_set[j] = q;
    h->large_set[k] = NULL;
    j = k;
  }
}

bool hl__large_contains(const hl_heap *h, const void *block) {
  if (!h->large_set_cap) return false;
  uint64_t cap = h->large_set_cap, j = hash_ptr(block, cap);
  while (h->large_set[j]) {
    if (h->large_set[j] == block) return true;
    j = (j + 1) & (cap - 1);
  }
  return false;
}

/* A block of block_bytes after its hl_large record; NULL when malloc fails.
 * Lock held. */
void *hl__large_alloc(hl_heap *h, uint64_t block_bytes) {
  if (block_bytes > SIZE_MAX - sizeof(hl_large)) return NULL;
  hl_large *l = malloc(sizeof(hl_large) + block_bytes);
  if (!l) return NULL;
  void *block = l + 1;
  if (!set_add(h, block)) {
    free(l);
    return NULL;
  }
  l->size = block_bytes;
  l->mark = 0;
  l->dirty = 0;
  l->prev = NULL;
  l->next = h->large_head;
  if (h->large_head) h->large_head->prev = l;
  h->large_head = l;
  h->st.large_objects++;
  return block;
}

/* Resize a block with the system realloc (in place when it can; mremap for
 * big ones), keeping its record linked and its set entry current.  NULL when
 * realloc fails, the block untouched.  The caller keeps the byte counters.
 * Lock held. */
void *hl__large_realloc(hl_heap *h, hl_large *l, uint64_t block_bytes) {
  if (block_bytes > SIZE_MAX - sizeof(hl_large)) return NULL;
  /* set_add cannot fail below: each re-adds the one entry just removed */
  set_remove(h, l + 1);
  hl_large *n = realloc(l, sizeof(hl_large) + block_bytes);
  if (!n) {
    set_add(h, l + 1);
    return NULL;
  }
  if (n != l) {
    if (n->prev) n->prev->next = n;
    else h->large_head = n;
    if (n->next) n->next->prev = n;
  }
  n->size = block_bytes;
  set_add(h, n + 1);
  return n + 1;
}

/* Unlink and free.  The caller keeps the byte counters. Lock held. */
void hl__large_free(hl_heap *h, hl_large *l) {
  if (l->prev) l->prev->next = l->next;
  else h->large_head = l->next;
  if (l->next) l->next->prev = l->prev;
  set_remove(h, l + 1);
  h->st.large_objects--;
  free(l);
}

void hl__large_destroy_all(hl_heap *h) {
  hl_large *l = h->large_head;
  while (l) {
    hl_large *n = l->next;
    free(l);
    l = n;
  }
  h->large_head = NULL;
  free(h->large_set);
  h->large_set = NULL;
  h->large_set_cap = h->large_set_count = 0;
}
