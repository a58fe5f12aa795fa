/*
 * manual.h -- the manual mode's per-thread caches and their fast paths,
 * compiled into the front door (heap.c's hl_malloc, hl_free,
 * hl_free_sized): a pop or a push on this thread's cache of the size class,
 * no lock, no call.  Everything else is manual.c.
 */
#ifndef HL_MANUAL_H
#define HL_MANUAL_H

#include "../internal.h"

#define HL_TC_SPARES 8 /* bins of 16, 32, ... 2048 slots */

struct hl_tcache {
  _Atomic(hl_heap *) heap;     /* NULL once the heap is closed */
  hl_tcache *next_thread;      /* this thread's caches */
  hl_tcache *next_heap, *prev_heap; /* the heap's caches (heap lock) */
  uint32_t nclasses;
  uint32_t room;               /* slots allocated after this struct */
  _Atomic uint64_t mallocs, frees; /* written by the owner only */
  uint32_t used;               /* slots given to bins so far */
  uint32_t count[HL_MAX_CLASSES];
  uint32_t limit[HL_MAX_CLASSES]; /* the fast paths' bound: min(want, cap) */
  uint32_t want[HL_MAX_CLASSES];  /* blocks the class may cache now: from an OS page's
                                     worth (2..16), doubled by
                                     each refill and by a full cache's free, up to
                                     limit_max; a quarter while frees are emptying
                                     pages (manual.c) */
  uint32_t limit_max[HL_MAX_CLASSES]; /* tcache_bytes' worth, 16..tcache_blocks */
  uint32_t cap[HL_MAX_CLASSES];   /* what the class's bin holds: 0 until the class is used */
  uint32_t first[HL_MAX_CLASSES]; /* a class's bin: slots[first[cls]], cap[cls] long.
                                     Bins are handed out in the order classes are used
                                     and grow by doubling (moved): a thread that caches
                                     a few blocks of many classes touches a few hundred
                                     bytes of bins per class, not each bin's OS page */
  uint8_t lowered[HL_MAX_CLASSES]; /* want was cut by a free that emptied pages: frees do
                                      not double it again until a refill */
  uint32_t spare[HL_TC_SPARES];   /* bins a class outgrew, by size (16 << k slots), for
                                     the next class that needs that size: their first
                                     slot links the next (UINT32_MAX ends) */
  void *slots[];               /* inline: one load less on the hot path */
};

/* initial-exec: the fast paths read these without a __tls_get_addr call
 * (which made the compiler save registers on every malloc and free).  Small
 * enough for the static TLS glibc keeps for modules loaded by dlopen (the
 * Python extension).  The cache the fast paths use, and the heap (address
 * and serial) it is for: three independent thread-local loads instead of a
 * chain; a heap closed and another created at the same address differs in
 * serial.  The slow paths check the cache's own heap field, which closing
 * clears. */
#define HL_TLS _Thread_local __attribute__((tls_model("initial-exec")))
extern HL_TLS hl_tcache *hl__tls_cache;
extern HL_TLS const hl_heap *hl__tls_heap;
extern HL_TLS uint64_t hl__tls_serial;

static inline void hl__owner_inc(_Atomic uint64_t *c) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                        memory_order_relaxed);
}

static inline void **hl__bin_of(hl_tcache *tc, uint32_t cls) {
  return tc->slots + tc->first[cls];
}

/* This thread's cache for h if it has one already (the fast paths). */
static inline hl_tcache *hl__cache_of(const hl_heap *h) {
  if (hl_likely(hl__tls_heap == h && hl__tls_serial == h->serial)) return hl__tls_cache;
  return NULL;
}

/* A block of the class of `size` from tc, a cache of h, or NULL. */
static inline __attribute__((always_inline)) void *hl__tcache_take(const hl_heap *h, hl_tcache *tc,
                                                                  size_t size) {
  if (hl_likely(size <= h->small_max)) {
    uint32_t cls = hl__class_of(h, size);
    uint32_t n = tc->count[cls];
    if (hl_likely(n)) {
      tc->count[cls] = n - 1;
      hl__owner_inc(&tc->mallocs);
      void *b = hl__bin_of(tc, cls)[n - 1];
      /* (a cached block is never NULL: said, so that a caller's test of the
       * result folds into the tests above) */
      if (!b) __builtin_unreachable();
      return b;
    }
  }
  return NULL;
}

/* A cached block of the class of `size`, or NULL. */
static inline void *hl__tcache_pop(hl_heap *h, size_t size) {
  if (hl_likely(h)) {
    hl_tcache *tc = hl__cache_of(h);
    if (hl_likely(tc)) return hl__tcache_take(h, tc, size);
  }
  return NULL;
}

/* Push onto this thread's cache; false when there is no room or no cache. */
static inline bool hl__tcache_push(hl_heap *h, void *ptr, uint32_t cls) {
  hl_tcache *tc = hl__cache_of(h);
  if (hl_likely(tc && cls < tc->nclasses)) {
    uint32_t n = tc->count[cls];
    if (hl_likely(n < tc->limit[cls])) {
      hl__bin_of(tc, cls)[n] = ptr;
      tc->count[cls] = n + 1;
      hl__owner_inc(&tc->frees);
      return true;
    }
  }
  return false;
}

#endif
