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
#define HL_TC_NO_GC ((uint64_t)1 << 62) /* a GC clock that never runs out */

struct hl_tcache {
  _Atomic(hl_heap *) heap;     /* NULL once the heap is closed */
  hl_tcache *next_thread, *prev_thread; /* this thread's caches */
  uint64_t serial;             /* its heap's serial: the key of the thread's index */
  _Atomic uint32_t *detached;  /* its thread's count of caches closing a heap
                                  detached (manual.c: the thread frees them) */
  hl_tcache *next_heap, *prev_heap; /* the heap's caches (heap lock) */
  uint32_t nclasses;
  uint32_t room;               /* slots allocated after this struct */
  /* The counts of frees and mallocs, and the GC's clock (gc_event).  tick
   * counts down the blocks that come into the cache -- each free (the fast
   * path's decrement, owner only) and each block a refill takes -- and a
   * visit is due when it reaches 0; fend is what the count of frees is then:
   * frees = fend - tick.  A malloc counts nothing: mallocs = the blocks
   * refills took + frees - the blocks flushed - the blocks cached now (every
   * block that came in went out by a malloc or a flush, or is still there).
   * fend, taken and given change, and tick is set back, only under the heap
   * lock, where the stats read them (hl__manual_stats).  The thread's
   * pushes, pops and ticks go on meanwhile: a push stores the bin's count,
   * then the tick with release order; the stats load the tick with acquire,
   * then the counts -- each free the tick counts is in the counts read, so
   * a read never counts more mallocs than were made (it may count fewer,
   * by the pushes whose tick it missed and the pops it missed; the stats
   * report the most they reported before, which is the exact count again
   * once the thread's calls are done).  Read the other way, a read could
   * count both a block's free and a malloc it was not yet -- one more than
   * the next read (manual_mallocs went 10452 -> 10450). */
  _Atomic uint64_t tick;
  uint64_t fend, taken, given;
  uint64_t gc_period;          /* tcache_gc_events, or HL_TC_NO_GC */
  uint32_t gc_next;            /* the class the next visit starts looking at */
  uint32_t used;               /* slots given to bins so far */
  uint32_t count[HL_MAX_CLASSES]; /* (owner writes; the stats read: hl__cnt, atomic) */
  uint32_t low[HL_MAX_CLASSES]; /* the fewest blocks the bin held since the GC's last visit:
                                   the fast pop takes a block only above it, so a pop
                                   that would go below calls out (malloc_small) and
                                   lowers it -- the test costs what `count != 0` did */
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
  uint8_t dipped[HL_MAX_CLASSES]; /* popped below its low-water mark (or refilled) since
                                     the GC's last visit: the thread uses the class */
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
 * and serial) it is for: independent thread-local loads instead of a chain,
 * from one struct, so that the thread-local address is worked out once; a
 * heap closed and another created at the same address differs in serial.
 * cache is set only with heap (never NULL then) and cleared with it, so a
 * set cache and heap == h say h is not NULL: the fast paths test neither h
 * nor the pointer they free (NULL is outside every reservation) and leave
 * both to their misses.  The slow paths check the cache's own heap field,
 * which closing clears. */
#define HL_TLS _Thread_local __attribute__((tls_model("initial-exec")))
typedef struct hl_tls_cache {
  hl_tcache *cache;
  const hl_heap *heap;
  uint64_t serial;
} hl_tls_cache;
extern HL_TLS hl_tls_cache hl__tls;

/* One free on a cache's clock (owner only), after its block's push (the
 * bin's count stored): true when it runs out and the GC's visit is due.
 * Where the count of frees went up by one before, the same load, subtract
 * and store, and a branch on the subtraction's flags.  The store releases
 * the push's (the stats read the tick, then the counts: struct hl_tcache);
 * on x86 a plain store still, which only the compiler may not move the
 * count's store past. */
static inline bool hl__tick(hl_tcache *tc) {
  uint64_t v = atomic_load_explicit(&tc->tick, memory_order_relaxed) - 1;
  atomic_store_explicit(&tc->tick, v, memory_order_release);
  return hl_unlikely(v == 0);
}

/* A bin's count: written by its thread only, read by the stats (under the
 * heap lock, while the thread runs: the count of mallocs is derived from
 * it).  Relaxed atomics under ThreadSanitizer; plain loads and stores
 * otherwise, which is what relaxed atomics compile to on the targets
 * heaplab builds for -- but gcc does not fold an atomic's offset into its
 * address: an instruction more on each fast path (a lea). */
#if defined(__SANITIZE_THREAD__)
#define HL__CNT_ATOMIC 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HL__CNT_ATOMIC 1
#endif
#endif
static inline uint32_t hl__cnt(hl_tcache *tc, uint32_t cls) {
#ifdef HL__CNT_ATOMIC
  return __atomic_load_n(&tc->count[cls], __ATOMIC_RELAXED);
#else
  return tc->count[cls];
#endif
}
static inline void hl__cnt_set(hl_tcache *tc, uint32_t cls, uint32_t n) {
#ifdef HL__CNT_ATOMIC
  __atomic_store_n(&tc->count[cls], n, __ATOMIC_RELAXED);
#else
  tc->count[cls] = n;
#endif
}

/* The thread-cache GC's visit (manual.c), called when the clock ran out
 * after a push.  Out of line: a tail call of the fast path. */
void hl__tcache_event(hl_heap *h, hl_tcache *tc);

/* A pop that would take the bin below its low-water mark: the mark goes
 * down by one (manual.c).  Never NULL (the bin holds blocks), so that a
 * caller's test of the result needs nothing kept across the call. */
__attribute__((returns_nonnull)) void *hl__tcache_dip(hl_tcache *tc, uint32_t cls);

static inline void **hl__bin_of(hl_tcache *tc, uint32_t cls) {
  return tc->slots + tc->first[cls];
}

/* This thread's cache for h if it has one already (the fast paths). */
static inline hl_tcache *hl__cache_of(const hl_heap *h) {
  hl_tcache *tc = hl__tls.cache;
  if (hl_likely(tc != NULL && hl__tls.heap == h && hl__tls.serial == h->serial)) return tc;
  return NULL;
}

/* A block of the class of `size` from tc, a cache of h, or NULL. */
static inline __attribute__((always_inline)) void *hl__tcache_take(const hl_heap *h, hl_tcache *tc,
                                                                  size_t size) {
  if (hl_likely(size <= h->small_max)) {
    uint32_t cls = hl__class_of(h, size);
    uint32_t n = hl__cnt(tc, cls);
    if (hl_likely(n > tc->low[cls])) {
      hl__cnt_set(tc, cls, n - 1);
      void *b = hl__bin_of(tc, cls)[n - 1];
      /* (a cached block is never NULL: said, so that a caller's test of the
       * result folds into the tests above) */
      if (!b) __builtin_unreachable();
      return b;
    }
    if (n) return hl__tcache_dip(tc, cls);
  }
  return NULL;
}

/* A cached block of the class of `size`, or NULL (also for h NULL). */
static inline void *hl__tcache_pop(hl_heap *h, size_t size) {
  hl_tcache *tc = hl__cache_of(h);
  if (hl_likely(tc)) return hl__tcache_take(h, tc, size);
  return NULL;
}

/* Put ptr, a block of class cls, into tc, a cache of h; false when there
 * is no room. */
static inline __attribute__((always_inline)) bool hl__tcache_put(hl_heap *h, hl_tcache *tc,
                                                                 void *ptr, uint32_t cls) {
  if (hl_likely(cls < tc->nclasses)) {
    uint32_t n = hl__cnt(tc, cls);
    if (hl_likely(n < tc->limit[cls])) {
      hl__bin_of(tc, cls)[n] = ptr;
      hl__cnt_set(tc, cls, n + 1);
      if (hl__tick(tc)) hl__tcache_event(h, tc);
      return true;
    }
  }
  return false;
}

#ifdef HL_PRELOAD
/* verify found damage (the heap's error says what): the preloaded library
 * says so on stderr and aborts, as a debugging malloc does. */
__attribute__((noreturn, cold)) void hl__preload_verify_failed(hl_heap *h);
#endif

#endif
