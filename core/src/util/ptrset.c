/*
 * ptrset.c -- an open-addressing set of pointers: linear probing, at most
 * half full, backward-shift deletion (no tombstones).  The large path keeps
 * its live blocks in one (a pointer is validated before the collector follows
 * it), and the checksum its visited objects.
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

/* A table of cap empty slots; NULL when refused.  In the preloaded library
 * (HL_PRELOAD) a mapping of its own: from glibc's heap (__libc_calloc, where
 * the library's large blocks live too) each new table of the large set was
 * carved at the heap's top, above the program's large blocks, and stayed
 * there -- glibc gives back only the free memory above its last chunk in
 * use, so when the program freed those blocks the table kept them resident
 * (redis-server, 17,647 values of 17,000 bytes, FLUSHALL: 7% of the memory
 * back, where jemalloc gives 99%; the real-programs hunt, session 45). */
static void **table_new(uint64_t cap) {
#ifdef HL_PRELOAD
  void *t = NULL;
  return hl__prim_os_map(cap * sizeof(void *), &t) == 0 ? t : NULL;
#else
  return hl__sys_calloc(cap, sizeof(void *));
#endif
}

static void table_free(void **t, uint64_t cap) {
#ifdef HL_PRELOAD
  if (t) (void)hl__prim_os_unmap_or_drop(t, cap * sizeof(void *));
#else
  (void)cap;
  hl__sys_free(t);
#endif
}

static bool grow(hl_ptrset *s) {
  uint64_t cap = s->cap ? s->cap * 2 : 1024;
  void **n = table_new(cap);
  if (!n) return false;
  for (uint64_t i = 0; i < s->cap; i++) {
    void *p = s->slots[i];
    if (!p) continue;
    uint64_t j = hash_ptr(p, cap);
    while (n[j]) j = (j + 1) & (cap - 1);
    n[j] = p;
  }
  table_free(s->slots, s->cap);
  s->slots = n;
  s->cap = cap;
  return true;
}

int hl__ptrset_add(hl_ptrset *s, void *p) {
  if ((s->count + s->held + 1) * 2 > s->cap && !grow(s)) return -1;
  uint64_t j = hash_ptr(p, s->cap);
  while (s->slots[j]) {
    if (s->slots[j] == p) return 0;
    j = (j + 1) & (s->cap - 1);
  }
  s->slots[j] = p;
  s->count++;
  return 1;
}

bool hl__ptrset_contains(const hl_ptrset *s, const void *p) {
  if (!s->cap) return false;
  uint64_t j = hash_ptr(p, s->cap);
  while (s->slots[j]) {
    if (s->slots[j] == p) return true;
    j = (j + 1) & (s->cap - 1);
  }
  return false;
}

void hl__ptrset_remove(hl_ptrset *s, const void *p) {
  if (!s->cap) return;
  uint64_t cap = s->cap, j = hash_ptr(p, cap);
  while (s->slots[j] && s->slots[j] != p) j = (j + 1) & (cap - 1);
  if (!s->slots[j]) return;
  s->slots[j] = NULL;
  s->count--;
  for (uint64_t k = (j + 1) & (cap - 1); s->slots[k]; k = (k + 1) & (cap - 1)) {
    void *q = s->slots[k];
    uint64_t home = hash_ptr(q, cap);
    /* q may move into the hole at j if its home is not in (j, k]. */
    bool stays = (j < k) ? (home > j && home <= k) : (home > j || home <= k);
    if (stays) continue;
    s->slots[j] = q;
    s->slots[k] = NULL;
    j = k;
  }
}

/* Take p out, keeping its room: (count + held) * 2 <= cap holds after
 * every add, so the add that puts it back (hl__ptrset_unhold) never grows
 * the table -- it cannot fail, whatever was added meanwhile. */
void hl__ptrset_hold(hl_ptrset *s, const void *p) {
  hl__ptrset_remove(s, p);
  s->held++;
}
void hl__ptrset_unhold(hl_ptrset *s, void *p) {
  s->held--;
  int r = hl__ptrset_add(s, p);
  HL_ASSERT(r >= 0);
  (void)r;
}

void hl__ptrset_free(hl_ptrset *s) {
  table_free(s->slots, s->cap);
  s->slots = NULL;
  s->cap = s->count = s->held = 0;
}
