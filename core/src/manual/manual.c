/*
 * manual.c -- manual mode: malloc-like allocation with explicit (sized or
 * unsized) free on the same BiBOP pages, pools, trim, release and restore as
 * the collected heap, so real interpreters (Lua through lua_newstate, CPython
 * through PyMem_SetAllocator) run on heaplab's page machinery unchanged.
 *
 * Hot path: a per-thread cache of blocks per size class (tcache_blocks
 * blocks, or tcache_bytes' worth for the bigger classes).  malloc pops from
 * it, free pushes to it (manual.h, compiled into heap.c's entries), and only
 * a refill or a flush (half a cache at a time) takes the heap lock.  Blocks
 * in a cache count as used by their pages.  A page whose last block comes
 * home goes to the free pool, and a trim runs when the free pool has grown
 * past the warm cache by manual_trim_threshold pages (there is no sweep to
 * run it).
 *
 * A sized free (Lua) takes the class from the size and never reads the page
 * descriptor; an unsized one (CPython) reads the class from the descriptor.
 * Large blocks are resized by the system realloc (in place when it can).
 * With verify on there is no cache, and every free is checked under the lock.
 *
 * Locking is the heap's one helper (hl__lock): a thread that holds the heap
 * with hl_enter allocates and frees under the lock it holds, and takes no
 * thread cache of that heap (creating one takes the caches' global lock,
 * which comes before a heap's, and with it held a heap's lock is only tried:
 * tc_global_and).  fork() is the registry's (registry.c): the caches'
 * global lock is taken first.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <stdio.h>

#include "manual.h"

static pthread_mutex_t tc_global = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t tc_key;
static pthread_once_t tc_once = PTHREAD_ONCE_INIT;
static HL_TLS hl_tcache *tls_list;
/* This thread is exiting: its caches went (tc_destructor).  Whatever it
 * frees or allocates after that -- glibc's own thread-exit frees (the
 * strerror buffer, dlerror's result) come after every pthread_key
 * destructor -- goes to the heap under the lock: a cache created then was
 * never destroyed (20 KiB and a block leaked per thread, 200 MB after
 * 10,000 threads that had called strerror). */
static HL_TLS bool tls_exited;
/* This thread is making its cache: the pthread_setspecific that registers
 * it allocates when the key's index is past glibc's first 32 (a program that
 * made 32 keys before its first malloc) -- with the preloaded library,
 * through this heap.  That malloc takes no cache: it found the cache half
 * made, linked it to the heap twice and left it linked to itself (the stats
 * walked that list for ever). */
static HL_TLS volatile bool tls_making; /* (volatile: glibc declares pthread_setspecific
                                           a leaf, which "calls nothing of this file",
                                           and GCC dropped the store before the call) */
/* This thread's calls go to the heaps themselves, under their locks, not
 * through its caches (hl__manual_caches_bypassed): the preloaded library's
 * report at exit, which may run in a signal handler that interrupted this
 * thread while it held tc_global alone -- making its cache, between taking
 * tc_global and trying the heap's lock (tc_global_and), the cache not yet
 * findable -- and whose first malloc made another cache and waited for
 * tc_global for ever (exit_in_signal_handler, 1 of 2,000 runs on a loaded
 * machine). */
static HL_TLS volatile bool tls_bypass;
/* tc_global's mark for the preloaded library's guard (internal.h,
 * HL__REENTRY_CHECK), as the heap's lock has hl__lock_holder: this thread
 * holds tc_global.  A thread that holds it and takes it again waited for
 * itself for ever, in silence: a signal handler that interrupted it there
 * (making its cache, tcache_for; freeing a heap; exiting) and mallocs a
 * cache of its own -- the half-made one is not yet its heap's -- or forks
 * (fork_prepare takes tc_global first), or ends the thread (tc_destructor).
 * It says so and aborts now (preload scenario malloc_in_signal_handler,
 * first_cache; session 45).  Set after the taking, cleared before the
 * release; volatile: a static the compiler sees escape nowhere, whose
 * stores it could move across the mutex calls. */
#ifdef HL_PRELOAD
static HL_TLS volatile bool tc_global_mine;
#define TC_GLOBAL_MINE(v) (tc_global_mine = (v))
#else
#define TC_GLOBAL_MINE(v) ((void)0)
#endif
static void tc_global_lock(const char *what) {
  HL__REENTRY_CHECK(tc_global_mine, what, "the thread caches' lock");
  pthread_mutex_lock(&tc_global);
  TC_GLOBAL_MINE(true);
}
static void tc_global_unlock(void) {
  TC_GLOBAL_MINE(false);
  pthread_mutex_unlock(&tc_global);
}
HL_TLS hl_tls_cache hl__tls;
/* The thread's caches by their heap's serial: an open-addressing table
 * (linear probing, at most half full) -- the list was searched on every
 * switch of heap, 99 us a malloc and free round robin over 3,000 heaps (the
 * scale hunt, session 28).  Holds the caches of tls_list but the spare. */
static HL_TLS hl_tcache **tls_index;
static HL_TLS uint32_t tls_index_mask, tls_index_n;
/* Caches of this thread that closing their heap detached (another thread's
 * hl_heap_free: it counts them here, the thread frees them -- the list and
 * the index are its own -- at its next slow path, a refill or a flush or a
 * switch of heap; closing a heap frees the closing thread's own at once).
 * They stayed on the thread's list until it exited, 292 KiB each: 10,000
 * heaps made and freed by one thread kept 2.99 GB of glibc's mapped blocks. */
static HL_TLS _Atomic uint32_t tls_detached;
/* One detached cache kept for the thread's next heap (a thread making and
 * freeing heaps in turn mallocs no cache each time).  On tls_list, not in
 * the index. */
static HL_TLS hl_tcache *tls_spare;
static _Atomic uint64_t tcaches_alive; /* process-wide: hl__tcaches_alive() */

uint64_t hl__tcaches_alive(void) { return atomic_load_explicit(&tcaches_alive, memory_order_relaxed); }

static inline hl_tcache *use_cache(hl_tcache *tc, const hl_heap *h) {
  hl__tls = (hl_tls_cache){tc, h, h->serial};
  return tc;
}

static inline void forget_cache(void) { hl__tls = (hl_tls_cache){0}; }

/* tc_global comes before a heap's lock, but a thread that holds a heap
 * (hl_enter) takes it too: making its first cache of another heap, freeing
 * a manual heap, exiting.  So a thread holding tc_global never waits for a
 * heap's lock: it tries it, and when another thread has it, lets go of
 * tc_global while it waits (a thread B making its first cache of h2 held
 * tc_global waiting for h2, whose holder A waited for tc_global to make its
 * first cache of h1: both hung for ever -- the embedding hunt, session 28).
 * fork_prepare, the one exception, waits for a heap lock a few ms at most
 * and then lets go of everything (registry.c).  True when h is locked now,
 * tc_global held; false with neither held. */
static bool tc_global_and(hl_heap *h, const char *what) {
  tc_global_lock(what);
  if (pthread_mutex_trylock(&h->lock) == 0) {
    hl__owner_set(h);
    return true;
  }
  tc_global_unlock();
  return false;
}

/* tc_global and h's lock, both held on return: h waited for alone.  what:
 * the call, for the guard's message. */
static void tc_global_then(hl_heap *h, const char *what) {
  while (!tc_global_and(h, what)) {
    hl__lock_raw(h);
    hl__unlock_raw(h);
  }
}

void hl__manual_fork_prepare(void) { tc_global_lock("fork()"); }
void hl__manual_fork_done(void) { tc_global_unlock(); }

/* ---- thread caches ---- */

/* Return n cached blocks of class cls to their pages.  Lock held. */
static void give_back(hl_heap *h, void **blocks, uint32_t n, uint32_t cls) {
  HL_ASSERT_LOCKED(h);
  uint64_t freed = 0;
  for (uint32_t i = 0; i < n; i++) freed += hl__small_give_checked(h, blocks[i]);
  hl__discharge(h, HL_SMALL, freed * h->cls_size[cls], freed);
}

/* Lock held. */
static void flush_all_locked(hl_tcache *tc, hl_heap *h) {
  HL_ASSERT_LOCKED(h);
  for (uint32_t c = 0; c < tc->nclasses; c++) {
    give_back(h, hl__bin_of(tc, c), hl__cnt(tc, c), c);
    tc->given += hl__cnt(tc, c);
    hl__cnt_set(tc, c, 0);
    tc->low[c] = 0;
  }
  h->tally.tcache_flushes++;
  hl__trim_maybe(h);
}

static void flush_all(hl_tcache *tc, hl_heap *h) {
  bool locked = hl__lock(h);
  flush_all_locked(tc, h);
  hl__unlock(h, locked);
}

/* The cache's counts of mallocs and frees (manual.h).  Lock held.  While
 * its thread runs: frees as of the tick read, and mallocs no more than were
 * made -- the tick first, with acquire, then the bins' counts, which hold
 * the pushes of all the frees it counts (hl__tick's release). */
static void counts(hl_tcache *tc, uint64_t *mallocs, uint64_t *frees) {
  uint64_t tick = atomic_load_explicit(&tc->tick, memory_order_acquire);
  uint64_t cached = 0;
  for (uint32_t c = 0; c < tc->nclasses; c++) cached += hl__cnt(tc, c);
  *frees = tc->fend - tick;
  *mallocs = tc->taken + *frees - tc->given - cached;
}

/* ---- the thread's index of its caches ---- */

static inline uint32_t index_home(uint64_t serial) {
  return (uint32_t)((serial * 0x9E3779B97F4A7C15ull) >> 32) & tls_index_mask;
}

static hl_tcache *index_find(uint64_t serial) {
  if (!tls_index) return NULL;
  for (uint32_t i = index_home(serial);; i = (i + 1) & tls_index_mask) {
    hl_tcache *tc = tls_index[i];
    if (!tc || tc->serial == serial) return tc;
  }
}

static void index_put(hl_tcache *tc) {
  uint32_t i = index_home(tc->serial);
  while (tls_index[i]) i = (i + 1) & tls_index_mask;
  tls_index[i] = tc;
}

/* Room for one more; false when the table cannot grow. */
static bool index_reserve(void) {
  if (tls_index && (tls_index_n + 1) * 2 <= tls_index_mask + 1) return true;
  uint32_t cap = tls_index ? (tls_index_mask + 1) * 2 : 16;
  hl_tcache **old = tls_index, **n = hl__sys_calloc(cap, sizeof *n);
  if (!n) return false;
  uint32_t old_cap = old ? tls_index_mask + 1 : 0;
  tls_index = n;
  tls_index_mask = cap - 1;
  for (uint32_t i = 0; i < old_cap; i++)
    if (old[i]) index_put(old[i]);
  hl__sys_free(old);
  return true;
}

/* Out of the index: the entries after it in its probe run move back. */
static void index_remove(hl_tcache *tc) {
  if (!tls_index) return;
  uint32_t i = index_home(tc->serial);
  while (tls_index[i] && tls_index[i] != tc) i = (i + 1) & tls_index_mask;
  if (!tls_index[i]) return;
  tls_index[i] = NULL;
  tls_index_n--;
  for (uint32_t j = (i + 1) & tls_index_mask; tls_index[j]; j = (j + 1) & tls_index_mask) {
    hl_tcache *e = tls_index[j];
    uint32_t home = index_home(e->serial);
    /* e may fill the hole at i unless its home lies in (i, j] */
    if (((j - home) & tls_index_mask) >= ((j - i) & tls_index_mask)) {
      tls_index[i] = e;
      tls_index[j] = NULL;
      i = j;
    }
  }
}

/* Off the thread's list, freed: tc is detached, out of the index.  The key
 * holds the list's head (tc_destructor walks from it): set again when that
 * was tc -- the key's slot exists by now, nothing is allocated. */
static void cache_free(hl_tcache *tc) {
  if (tc->prev_thread) tc->prev_thread->next_thread = tc->next_thread;
  else tls_list = tc->next_thread;
  if (tc->next_thread) tc->next_thread->prev_thread = tc->prev_thread;
  if (!tc->prev_thread) {
    tls_making = true;
    pthread_setspecific(tc_key, tls_list);
    tls_making = false;
  }
  if (hl__tls.cache == tc) forget_cache();
  atomic_fetch_sub_explicit(&tcaches_alive, 1, memory_order_relaxed);
  hl__sys_free(tc);
}

/* Free tc, a detached cache of this thread's (or keep it as the spare). */
static void cache_drop(hl_tcache *tc) {
  index_remove(tc);
  if (tls_spare) cache_free(tc);
  else tls_spare = tc;
}

/* The caches other threads' hl_heap_free detached: freed (one kept). */
static NOINLINE void reap_detached(void) {
  atomic_store_explicit(&tls_detached, 0, memory_order_relaxed);
  for (hl_tcache *tc = tls_list, *next; tc; tc = next) {
    next = tc->next_thread;
    if (tc != tls_spare && !atomic_load(&tc->heap)) cache_drop(tc);
  }
}

/* Lock held. */
static void detach(hl_tcache *tc, hl_heap *h) {
  HL_ASSERT_LOCKED(h);
  if (tc->prev_heap) tc->prev_heap->next_heap = tc->next_heap;
  else h->tcaches = tc->next_heap;
  if (tc->next_heap) tc->next_heap->prev_heap = tc->prev_heap;
  tc->next_heap = tc->prev_heap = NULL;
  /* keep the counts of a thread that is gone */
  uint64_t mallocs, frees;
  counts(tc, &mallocs, &frees);
  h->tally.manual_mallocs += mallocs;
  h->tally.manual_frees += frees;
  tc->fend = atomic_load(&tc->tick);
  tc->taken = tc->given = 0;
  atomic_store(&tc->heap, NULL);
}

/* hl__manual_destroy: detached for its heap's closing, by another thread's
 * call or this one's.  tc_global and the heap lock held: a thread frees its
 * caches -- and its counter -- only after taking tc_global (tc_destructor)
 * or owning them (cache_drop, reap_detached: detached ones only). */
static void detach_closing(hl_tcache *tc, hl_heap *h) {
  _Atomic uint32_t *count = tc->detached; /* (read first: once detached, its thread may free it) */
  detach(tc, h);
  atomic_fetch_add_explicit(count, 1, memory_order_relaxed);
}

/* Thread exit: flush every cache whose heap is still open, free them all. */
static void tc_destructor(void *arg) {
  hl_tcache *tc = arg;
  tc_global_lock("the exit of a thread (its thread caches' flush)");
  for (int64_t backoff = 50; tc;) {
    hl_tcache *next = tc->next_thread;
    hl_heap *h = atomic_load(&tc->heap);
    if (h) {
      /* (this thread may hold it: hl_enter) */
      bool locked = hl__held != h;
      /* ... or hold its lock otherwise: the thread ends inside the heap -- a
       * signal handler that interrupted it under the lock calls
       * pthread_exit, or an asynchronous cancellation lands there.  The
       * trylock below failed for ever then, the lock its own (it slept and
       * tried again, its joiner waiting; session 44): the preloaded
       * library's guard says so and aborts (hl__reentered; a no-op in the
       * other builds, whose programs hold no lock the guard knows of). */
      if (locked) hl__reentry_check("the exit of a thread (its thread caches' flush)");
      if (locked && pthread_mutex_trylock(&h->lock) != 0) {
        /* another thread has it: wait without tc_global (tc_global_and),
         * then look again -- the heap may have been freed meanwhile
         * (hl__manual_destroy detaches this cache) */
        tc_global_unlock();
        hl__prim_sleep_us(backoff);
        backoff = backoff < 2000 ? backoff * 2 : backoff;
        tc_global_lock("the exit of a thread (its thread caches' flush)");
        continue;
      }
      if (locked) hl__owner_set(h);
      flush_all_locked(tc, h);
      detach(tc, h);
      hl__unlock(h, locked);
    }
    hl__sys_free(tc);
    atomic_fetch_sub_explicit(&tcaches_alive, 1, memory_order_relaxed);
    tc = next;
  }
  tc_global_unlock();
  hl__sys_free(tls_index);
  tls_index = NULL;
  tls_index_n = tls_index_mask = 0;
  tls_spare = NULL;
  tls_list = NULL;
  tls_exited = true;
  forget_cache();
}

/* The key's destructor is this library's code, run by every thread that
 * made a cache, at its exit -- which may come after the program dlclosed
 * the library (a plugin, a language module): that thread ran it in unmapped
 * code (SIGSEGV in glibc's thread exit), and each dlopen/dlclose cycle left
 * a key behind.  So the code is pinned first, as by the helper threads
 * (hl__pin_code, registry.c).  And a key that cannot be made (the program
 * took all 1,024) means no cache: the heap allocates under its lock.  The
 * result was not read, and the caches were stored under key 0 -- another
 * owner's, its value overwritten. */
static bool tc_key_made;
static void tc_init_key(void) {
  hl__pin_code();
  tc_key_made = pthread_key_create(&tc_key, tc_destructor) == 0;
}

/* A class's cache starts small and grows with use: want starts at an OS
 * page's worth of blocks (2..BIN_FIRST), and each refill -- or a free into a
 * full cache -- doubles it up to limit_max; its bin is as long as it needs,
 * from the cache's room in the order the classes are used.  A thread that allocates a few blocks of many
 * classes (a thread per connection; a program's start) caches a few of each
 * and writes a few hundred bytes of bins per class, where every class in use
 * wrote half its limit's pointers (4 KiB for the small classes) and took that
 * many slots from the pages: 1,000 threads freeing 50 blocks of 16..1016 bytes
 * each held 199 MB against mimalloc's 162 and glibc's 39. */
#define BIN_FIRST 16

static inline void limit_update(hl_tcache *tc, uint32_t cls) {
  tc->limit[cls] = tc->want[cls] < tc->cap[cls] ? tc->want[cls] : tc->cap[cls];
}

/* The class's cache may hold twice as many blocks, up to its limit. */
static inline void want_grow(hl_tcache *tc, uint32_t cls) {
  uint32_t w = tc->want[cls] * 2;
  tc->want[cls] = w < tc->limit_max[cls] ? w : tc->limit_max[cls];
}

/* What a class may cache at first: an OS page's worth, 2..16 blocks (the
 * first refill takes half).  Also the least the GC leaves it. */
static inline uint32_t want_first(hl_heap *h, hl_tcache *tc, uint32_t cls) {
  uint32_t w = 4096 / h->cls_size[cls];
  w = w < 2 ? 2 : w > BIN_FIRST ? BIN_FIRST : w;
  return w < tc->limit_max[cls] ? w : tc->limit_max[cls];
}

/* k when a bin of c slots is 16 << k long (a size other classes reuse), else -1 */
static int spare_kind(uint32_t c) {
  for (int k = 0; k < HL_TC_SPARES; k++)
    if (c == (uint32_t)BIN_FIRST << k) return k;
  return -1;
}

/* Class cls's bin holds at least n blocks (n <= limit_max): a longer bin --
 * one another class outgrew, else from the room -- its blocks copied.  (Sizes
 * 16, 32, ... then limit_max: a class takes under 3 x limit_max slots of the
 * room in all.)  The outgrown bins' reuse halves what a busy thread's bins
 * touch: every class of a manual heap grown to its limit, 96 KiB handed out
 * for 95 KiB of final bins, against 212 KiB without it. */
static void bin_reserve(hl_tcache *tc, uint32_t cls, uint32_t n) {
  uint32_t cap = tc->cap[cls];
  if (n > cap) {
    uint32_t c = cap ? cap * 2 : BIN_FIRST;
    while (c < n) c *= 2;
    if (c > tc->limit_max[cls]) c = tc->limit_max[cls];
    /* a bin of that size another class outgrew, else fresh room (there is
     * always room: 3 x the limits) */
    int k = spare_kind(c);
    uint32_t at = UINT32_MAX;
    if (k >= 0 && tc->spare[k] != UINT32_MAX) {
      at = tc->spare[k];
      tc->spare[k] = (uint32_t)(uintptr_t)tc->slots[at];
    } else if (tc->used + c <= tc->room) {
      at = tc->used;
      tc->used += c;
    }
    if (at != UINT32_MAX) {
      memcpy(tc->slots + at, tc->slots + tc->first[cls], hl__cnt(tc, cls) * sizeof(void *));
      int old = cap ? spare_kind(cap) : -1;
      if (old >= 0) { /* the outgrown bin, for the next class of its size */
        tc->slots[tc->first[cls]] = (void *)(uintptr_t)tc->spare[old];
        tc->spare[old] = tc->first[cls];
      }
      tc->first[cls] = at;
      tc->cap[cls] = c;
    }
  }
  limit_update(tc, cls);
}

/* This thread's cache for h, created on first use; NULL without a cache
 * (none configured, verify, or the heap held by this thread).  Called
 * without the lock. */
static hl_tcache *tcache_for(hl_heap *h) {
  if (h->opt.tcache_blocks == 0 || h->opt.verify || hl__held == h || tls_exited || tls_making ||
      tls_bypass)
    return NULL;
  if (hl_unlikely(atomic_load_explicit(&tls_detached, memory_order_relaxed))) reap_detached();
  hl_tcache *found = index_find(h->serial);
  if (found && atomic_load_explicit(&found->heap, memory_order_relaxed) == h)
    return use_cache(found, h);
  if (!index_reserve()) return NULL;
  uint32_t cap = (uint32_t)h->opt.tcache_blocks;
  /* small classes are the busy ones: they may cache more blocks than the
   * big ones for the same bytes.  The room: a bin grows 16, 32, ... up to
   * its limit, each size handed out once -- under three times the limit */
  uint32_t limit[HL_MAX_CLASSES], room = 0;
  for (uint32_t c = 0; c < h->nclasses; c++) {
    uint64_t n = h->opt.tcache_bytes ? (uint64_t)h->opt.tcache_bytes / h->cls_size[c] : cap;
    limit[c] = (uint32_t)(n > cap ? cap : n < 16 ? (cap < 16 ? cap : 16) : n);
    room += 3 * limit[c];
  }
  hl_tcache *spare = tls_spare;
  if (spare && spare->room < room) { /* too small for this heap's: freed */
    tls_spare = NULL;
    cache_free(spare);
    spare = NULL;
  }
  pthread_once(&tc_once, tc_init_key);
  if (!tc_key_made) return NULL;
  hl_tcache *tc = spare;
  if (tc) {
    tls_spare = NULL;
  } else {
    /* the slots are written before they are read (count says how many):
     * not zeroed, so only the bins handed out cost memory (a calloc'd 416
     * KiB cache wrote 150 KiB of it in glibc's heap) */
    tc = hl__sys_malloc(sizeof *tc + room * sizeof(void *));
    if (!tc) return NULL;
    memset(tc, 0, sizeof *tc);
    tc->room = room;
    tc->detached = &tls_detached;
    tc->next_thread = tls_list;
    if (tls_list) tls_list->prev_thread = tc;
    tls_list = tc;
    atomic_fetch_add_explicit(&tcaches_alive, 1, memory_order_relaxed);
    tls_making = true;
    pthread_setspecific(tc_key, tls_list);
    tls_making = false;
  }
  tc->nclasses = h->nclasses;
  tc->used = 0;
  memset(tc->count, 0, sizeof tc->count);
  memset(tc->low, 0, sizeof tc->low);
  memset(tc->limit, 0, sizeof tc->limit); /* (no bin yet: the first push or pop misses) */
  memset(tc->cap, 0, sizeof tc->cap);
  memset(tc->first, 0, sizeof tc->first);
  memset(tc->lowered, 0, sizeof tc->lowered);
  memset(tc->dipped, 0, sizeof tc->dipped);
  for (int k = 0; k < HL_TC_SPARES; k++) tc->spare[k] = UINT32_MAX;
  for (uint32_t c = 0; c < h->nclasses; c++) {
    tc->limit_max[c] = limit[c];
    tc->want[c] = want_first(h, tc, c);
  }
  /* (published under the locks below, before the stats can read them) */
  tc->gc_period = h->opt.tcache_gc_events ? (uint64_t)h->opt.tcache_gc_events : HL_TC_NO_GC;
  tc->gc_next = 0;
  atomic_store(&tc->tick, tc->gc_period);
  tc->fend = tc->gc_period;
  tc->taken = tc->given = 0;
  tc->serial = h->serial;
  index_put(tc);
  tls_index_n++;
  /* (h waited for without tc_global) */
  tc_global_then(h, "a call of the malloc family (making its thread's cache)");
  tc->prev_heap = NULL;
  tc->next_heap = h->tcaches;
  if (h->tcaches) h->tcaches->prev_heap = tc;
  h->tcaches = tc;
  atomic_store(&tc->heap, h);
  hl__unlock_raw(h);
  tc_global_unlock();
  return use_cache(tc, h);
}

/* ---- flush and GC ---- */

/* Send the `give` oldest blocks of class cls's bin home -- the bottom of the
 * stack, the blocks that waited longest -- and keep the rest.  The one flush
 * of a bin: a free into a full cache and the GC's visit.  Lock held (the
 * stats read the counts under it).
 *
 * When that empties pages, the thread is freeing a structure (a server's
 * FLUSHALL, an interpreter's collection) and the blocks it keeps cached
 * would each pin a page: freed in hash or list order they come from as
 * many pages as there are blocks -- 1,000 cached 32-byte blocks held
 * 1,000 64 KiB pages (75 MiB of 140) after redis-server's FLUSHALL.  So
 * the class's limit drops to a quarter (at least 16) and the cache keeps
 * half of that; the next refill doubles it back (malloc_small).  Returns
 * the blocks sent home. */
static uint32_t bin_flush(hl_heap *h, hl_tcache *tc, uint32_t cls, uint32_t give) {
  HL_ASSERT_LOCKED(h);
  void **s = hl__bin_of(tc, cls);
  uint32_t n = hl__cnt(tc, cls);
  uint64_t free_before = h->free_pool.count;
  give_back(h, s, give, cls);
  if (h->free_pool.count > free_before && tc->want[cls] > 16) {
    uint32_t lim = tc->want[cls] / 4 < 16 ? 16 : tc->want[cls] / 4;
    tc->want[cls] = lim;
    tc->lowered[cls] = 1;
    limit_update(tc, cls);
    if (n - give > lim / 2) {
      give_back(h, s + give, n - give - lim / 2, cls);
      give = n - lim / 2;
    }
  }
  h->tally.tcache_flushes++;
  hl__trim_maybe(h);
  memmove(s, s + give, (n - give) * sizeof(void *));
  hl__cnt_set(tc, cls, n - give);
  tc->given += give;
  if (tc->low[cls] > n - give) tc->low[cls] = n - give;
  return give;
}

/* The thread-cache GC (jemalloc's tcache GC, incremental): the thread's
 * clock ran out (tcache_gc_events frees, and blocks taken by refills, since
 * it was last set).  Visit one class -- the next with a bin, round robin --
 * and give back three quarters of the blocks that stayed below its
 * low-water mark since its last visit (blocks the thread never needed: the
 * bottom of the stack, which the pops did not reach), halve what the class
 * may cache (a refill takes half of it; each refill doubles it again), and
 * set the mark to what the bin holds now.  A class the thread uses keeps
 * what it needs between two visits; one it stopped using drains by 3/4 a
 * visit, and the pages its blocks pinned go home -- a thread that freed a
 * structure and went on with other work kept every cached block (and with
 * 1 MiB pages every page of the class) until it allocated from that class
 * again, exited or called hl_thread_flush.  The clock is the count of frees
 * too (fend - tick): set back here, under the lock. */
NOINLINE void hl__tcache_event(hl_heap *h, hl_tcache *tc) {
  bool locked = hl__lock(h);
  if (atomic_load_explicit(&tc->tick, memory_order_relaxed) == 0) {
    tc->fend += tc->gc_period;
    atomic_store_explicit(&tc->tick, tc->gc_period, memory_order_relaxed);
  }
  uint32_t cls = UINT32_MAX;
  if (tc->gc_period != HL_TC_NO_GC) {
    for (uint32_t i = 0, c = tc->gc_next; i < tc->nclasses; i++, c = c + 1 < tc->nclasses ? c + 1 : 0)
      if (tc->cap[c]) {
        cls = c;
        break;
      }
  }
  if (cls != UINT32_MAX) {
    tc->gc_next = cls + 1 < tc->nclasses ? cls + 1 : 0;
    h->tally.tcache_gc_visits++;
    uint32_t low = tc->low[cls];
    if (low && !tc->dipped[cls]) {
      uint32_t w = tc->want[cls] / 2, w0 = want_first(h, tc, cls);
      tc->want[cls] = w > w0 ? w : w0;
      limit_update(tc, cls);
      uint32_t give = bin_flush(h, tc, cls, low - low / 4);
      h->tally.tcache_gc_flushes++;
      h->tally.tcache_gc_bytes += (uint64_t)give * h->cls_size[cls];
    }
    tc->low[cls] = hl__cnt(tc, cls);
    tc->dipped[cls] = 0;
  }
  hl__unlock(h, locked);
}

/* The fast pop stopped at the bin's low-water mark (manual.h). */
NOINLINE void *hl__tcache_dip(hl_tcache *tc, uint32_t cls) {
  uint32_t n = hl__cnt(tc, cls) - 1;
  tc->low[cls] = n;
  tc->dipped[cls] = 1;
  hl__cnt_set(tc, cls, n);
  return hl__bin_of(tc, cls)[n];
}

/* ---- malloc ---- */

/* heap_limit_bytes: a manual heap has nothing to collect; an allocation that
 * would take the live bytes (thread caches included) past it fails -- those
 * of other threads' refills in flight counted as live (limit_pending,
 * malloc_small).  Lock held. */
static bool over_limit(hl_heap *h, uint64_t bytes, const char *what) {
  uint64_t cap = (uint64_t)h->opt.heap_limit_bytes;
  if (!cap) return false;
  hl__aword_flush(h);
  if (hl__limit_held(h) + bytes <= cap) return false;
  hl__fail_limit_reached(h, what, "", bytes);
  return true;
}

/* A large block of size bytes aligned to align, charged.  The system
 * allocator runs before the heap lock is taken (its mmap, page faults and
 * its own arena locks held every other thread of a preloaded program: 4
 * threads churning small blocks beside 2 churning blocks of 1..3 MiB, the
 * small ones took 2-3x as long); the limit is checked and the block charged
 * and adopted in one visit after, so a block the limit refuses was made for
 * nothing and goes back.  NULL on refusal (errors set). */
static void *large_new(hl_heap *h, size_t size, size_t align, bool zero, const char *what) {
  /* heap_limit_bytes: a block larger than the whole limit is refused before
   * the system allocator makes it, as in the collected mode (hl__past_whole_limit,
   * one message).  (It was made and then refused: 600 MiB mapped under a 512
   * MiB limit -- the review of session 30's pacing changes.)  The options
   * are fixed once the heap is made: read without the lock. */
  if (hl_unlikely(h->opt.heap_limit_bytes != 0 && size > (uint64_t)h->opt.heap_limit_bytes)) {
    bool locked = hl__lock(h);
    hl__past_whole_limit(h, size, what);
    hl__unlock(h, locked);
    return NULL;
  }
  void *raw = hl__large_sys_alloc(size, align, zero);
  bool locked = hl__lock(h);
  void *p = NULL;
  if (!over_limit(h, size, what)) {
    p = raw ? hl__large_adopt(h, raw, size, align) : NULL;
    if (p) h->tally.manual_mallocs++;
    else if (raw) /* (the block was made: freed below) */
      hl__fail(h, HL_ENOMEM, "%s: no memory to track a large block of %zu bytes: the heap's "
               "set of large blocks could not grow", what, size);
    else hl__fail(h, HL_ENOMEM, "%s: the system allocator refused %zu bytes", what, size);
  }
  hl__unlock(h, locked);
  if (!p) hl__large_sys_free(raw);
  return p;
}

static NOINLINE void *malloc_large(hl_heap *h, size_t size, bool zero) {
  return large_new(h, size, 16, zero, zero ? "calloc" : "malloc");
}

/* verify: a free block about to be handed out (or leaving the quarantine:
 * `what` says which call) must hold its seal or its poison -- a write after
 * free, or an overflow of the block before it, broke them.  hl_heap_check
 * finds it too, but nothing ran the check in a program (the preloaded
 * library, the launchers): the next malloc handed the damaged block out and
 * the damage went unseen.  The heap's error says where, verify_failures
 * counts it and a verify_failed event names it; the block is handed out all
 * the same (its new owner writes it), and the preloaded library aborts
 * (hl__preload_verify_failed).  Lock held; false when damaged. */
static NOINLINE __attribute__((cold)) bool block_damaged(hl_heap *h, void *slot, size_t sz,
                                                         const char *what) {
  bool exact;
  size_t at = hl__free_slot_damage(slot, sz, &exact);
  if (at == sz) return false;
  uint32_t p = hl__page_of(h, slot);
  uint64_t off = (uint64_t)((uint8_t *)slot - hl__page_addr(h, p));
  char before[64] = "the memory before it";
  if (off >= sz) snprintf(before, sizeof before, "the block before it, %p", (void *)((uint8_t *)slot - sz));
  char msg[256];
  snprintf(msg, sizeof msg, "%s: free block %p (class %zu bytes) was written after it was freed, "
           "at offset %zu%s (or an overflow of %s)", what, slot, sz, at,
           exact ? "" : " or past it", before);
  (void)hl__verify_failed(h, (uint64_t)(uintptr_t)slot, msg); /* (counted, an event) */
  return true;
}

/* The preloaded library: verify found damage (the heap's error says it). */
static inline void damage_found(hl_heap *h, bool damaged) {
#ifdef HL_PRELOAD
  if (hl_unlikely(damaged)) hl__preload_verify_failed(h);
#else
  (void)h;
  (void)damaged;
#endif
}

/* ---- verify's quarantine ----
 * Under verify a freed block is not reused at once.  A freed small slot went
 * below its page's cursor and was the next one handed out (address-ordered
 * first fit), so a stale second free -- free(p), q = malloc() at p, free(p)
 * again -- freed the live q with no report, and a large block's second free
 * freed the live block the system allocator had put at its address (the
 * verify hunt, session 29).  A FIFO holds the last HL_QUARANTINE_BLOCKS
 * blocks freed, or HL_QUARANTINE_BYTES of them, small and large: a small one
 * keeps its allocation bit (its bytes discharged: it no longer counts as
 * live) and carries its seal; a large one is unlinked and discharged, its
 * system block kept (its bytes are not sealed: a write into it is not
 * seen).  A free or realloc of a block in it is refused as a double free,
 * its usable size reads 0, hl_heap_check checks its seal, and a small block
 * leaving it is checked as a block handed out is (block_damaged) before its
 * slot goes back to its page.  A free's scan of at most 256 entries: verify's
 * cost.  (The bounds are fixed, not options: verify is a debugging mode.) */
#define HL_QUARANTINE_BLOCKS 256
#define HL_QUARANTINE_BYTES ((uint64_t)64 << 20)
typedef struct hl_quarantine {
  void *block[HL_QUARANTINE_BLOCKS];
  void *raw[HL_QUARANTINE_BLOCKS]; /* a large block's system block; NULL: a small block */
  uint64_t size[HL_QUARANTINE_BLOCKS];
  uint32_t head, n;
  uint64_t bytes;
} hl_quarantine;

bool hl__manual_quarantined(const hl_heap *h, const void *ptr) {
  HL_ASSERT_LOCKED((hl_heap *)h); /* (the assertion takes no const) */
  const hl_quarantine *q = h->quarantine;
  if (!q) return false;
  for (uint32_t i = 0; i < q->n; i++)
    if (q->block[(q->head + i) % HL_QUARANTINE_BLOCKS] == ptr) return true;
  return false;
}

/* A block out of the quarantine (or never in it): a small block's slot back
 * to its page, after its check; a large block's memory to the system.  Lock
 * held; true when damaged. */
static bool quarantine_leave(hl_heap *h, void *b, void *raw, uint64_t size) {
  if (raw) {
    hl__large_sys_free(raw);
    return false;
  }
  bool damaged = block_damaged(h, b, size, "quarantine");
  hl__small_give_checked(h, b);
  return damaged;
}

/* b (raw: a large block's system block) into the quarantine; the oldest
 * blocks leave as the bounds say.  Lock held; true when a block that left
 * was damaged. */
static bool quarantine_add(hl_heap *h, void *b, void *raw, uint64_t size) {
  HL_ASSERT_LOCKED(h);
  hl_quarantine *q = h->quarantine;
  if (!q) q = h->quarantine = hl__sys_calloc(1, sizeof *q);
  if (!q) return quarantine_leave(h, b, raw, size); /* (no memory: not held back) */
  bool damaged = false;
  while (q->n && (q->n == HL_QUARANTINE_BLOCKS || q->bytes + size > HL_QUARANTINE_BYTES)) {
    uint32_t i = q->head;
    q->head = (i + 1) % HL_QUARANTINE_BLOCKS;
    q->n--;
    q->bytes -= q->size[i];
    damaged |= quarantine_leave(h, q->block[i], q->raw[i], q->size[i]);
  }
  uint32_t i = (q->head + q->n) % HL_QUARANTINE_BLOCKS;
  q->block[i] = b;
  q->raw[i] = raw;
  q->size[i] = size;
  q->bytes += size;
  q->n++;
  return damaged;
}

int hl__manual_quarantine_check(hl_heap *h, char *msg, size_t len) {
  HL_ASSERT_LOCKED(h);
  const hl_quarantine *q = h->quarantine;
  for (uint32_t k = 0; q && k < q->n; k++) {
    uint32_t i = (q->head + k) % HL_QUARANTINE_BLOCKS;
    if (q->raw[i]) continue;
    bool exact;
    size_t at = hl__free_slot_damage(q->block[i], q->size[i], &exact);
    if (at != q->size[i]) {
      snprintf(msg, len, "free block %p (class %" PRIu64 " bytes, in verify's quarantine) was "
               "written after it was freed, at offset %zu%s", q->block[i], q->size[i], at,
               exact ? "" : " or past it");
      return HL_ECHECK;
    }
  }
  return HL_OK;
}

/* The heap closes: the large blocks held go back to the system. */
static void quarantine_destroy(hl_heap *h) {
  hl_quarantine *q = h->quarantine;
  if (!q) return;
  for (uint32_t k = 0; k < q->n; k++) hl__large_sys_free(q->raw[(q->head + k) % HL_QUARANTINE_BLOCKS]);
  hl__sys_free(q);
  h->quarantine = NULL;
}

void *hl__manual_large_freed(hl_heap *h, hl_large *l, bool *damaged) {
  HL_ASSERT_LOCKED(h);
  void *b = l + 1;
  uint64_t size = l->size;
  void *raw = hl__large_unlink(h, l); /* (discharged there) */
  if (!h->opt.verify) return raw;
  *damaged = quarantine_add(h, b, raw, size);
  return NULL;
}

/* Refill: half a cache of blocks in one visit under the lock (or the one
 * block asked for, without a cache). */
static NOINLINE void *malloc_small(hl_heap *h, uint32_t cls, const char *what) {
  hl_tcache *tc = tcache_for(h);
  if (tc && hl__cnt(tc, cls)) {
    /* the thread came back from another heap: its cache here has blocks */
    uint32_t n = hl__cnt(tc, cls) - 1;
    if (tc->low[cls] > n) tc->low[cls] = n;
    hl__cnt_set(tc, cls, n);
    return hl__bin_of(tc, cls)[n];
  }
  /* allocating again: the class's cache grows (a refill takes half of it),
   * and one cut by a burst of frees grows back */
  if (tc) {
    if (tc->cap[cls]) want_grow(tc, cls);
    tc->lowered[cls] = 0;
    tc->dipped[cls] = 1;
    bin_reserve(tc, cls, tc->want[cls]);
  }
  uint32_t want = tc && tc->limit[cls] ? (tc->limit[cls] + 1) / 2 : 1;
  void *first = NULL;
  uint32_t got = 0;
  uint64_t sz = h->cls_size[cls];
  int64_t held = 0; /* heap_limit_bytes: the blocks wanted and not taken yet */
  bool locked = hl__lock(h);
  if (h->opt.heap_limit_bytes) {
    if (over_limit(h, sz, what)) {
      hl__unlock(h, locked);
      return NULL;
    }
    /* no more cached than the limit leaves room for -- and that room held
     * (limit_pending) until the blocks are taken: a page the loop takes may
     * drop the lock (a released page's restore under dump_toggle, a fresh
     * chunk's populate under thp=populate), and every other thread's test
     * passed meanwhile on the same live bytes, 8 threads up to 252 KiB past
     * a 64 MiB limit (tests/c/manual_heap_limit_holds_with_threads.c) --
     * the collected mode's overshoot, held the same way (gc/alloc.c) */
    uint64_t room = (uint64_t)h->opt.heap_limit_bytes - hl__limit_held(h);
    if ((uint64_t)want * sz > room) want = (uint32_t)(room / sz);
    held = (int64_t)(want * sz);
    hl__limit_hold(h, held);
  }
  void **bin = tc ? hl__bin_of(tc, cls) : NULL;
  bool damaged = false;
  while (got < want) {
    /* the run reserved holds what is still wanted, no more -- without a
     * cache, one slot: the class's lowest free one, so a block freed is the
     * next handed out (a run of 256 went on through fresh slots) */
    h->manual_run = want - got;
    void *b = hl__small_take(h, cls); /* (charged when its word was reserved) */
    if (!b) break;
    /* (verify has no cache: one block, checked) */
    if (hl_unlikely(h->opt.verify) && block_damaged(h, b, h->cls_size[cls], what)) damaged = true;
    if (!first) first = b;
    else {
      uint32_t n = hl__cnt(tc, cls);
      bin[n] = b;
      hl__cnt_set(tc, cls, n + 1);
    }
    got++;
    /* (charged with its run: no longer held) */
    if (held) {
      hl__limit_hold(h, -(int64_t)sz);
      held -= (int64_t)sz;
    }
  }
  h->manual_run = 0;
  if (held) hl__limit_hold(h, -held); /* (no page: the room not taken goes back) */
  bool due = false;
  if (tc) {
    h->tally.tcache_refills++;
    /* the blocks taken count on the GC's clock, as frees do (not in the
     * count of frees) */
    tc->taken += got;
    uint64_t t = atomic_load_explicit(&tc->tick, memory_order_relaxed);
    uint64_t d = got < t ? got : t;
    atomic_store_explicit(&tc->tick, t - d, memory_order_relaxed);
    tc->fend -= d;
    due = t == d;
  } else if (first) {
    h->tally.manual_mallocs++;
  }
  if (!first)
    hl__fail_no_page(h, what);
  hl__unlock(h, locked);
  if (due) hl__tcache_event(h, tc);
  damage_found(h, damaged);
  return first;
}

void *hl__manual_malloc(hl_heap *h, size_t size) {
  if (size > h->small_max) return malloc_large(h, size, false);
  return malloc_small(h, hl__class_of(h, size), "malloc");
}

/* A small block for hl_calloc (not zeroed here): its refusal names calloc. */
void *hl__manual_calloc_small(hl_heap *h, size_t size) {
  void *p = hl__tcache_pop(h, size);
  return p ? p : malloc_small(h, hl__class_of(h, size), "calloc");
}

void *hl__manual_calloc_large(hl_heap *h, size_t size) { return malloc_large(h, size, true); }

/* The preloaded library's block of any size: a small one or, when the
 * small path has no page left -- the reservation exhausted (a tight
 * `ulimit -v` steps it down; HEAPLAB_RESERVE_BYTES) -- a large one, as
 * glibc goes on serving from mmap when its heap cannot grow: a program that
 * would run on glibc failed with ENOMEM.  heap_limit_bytes still refuses
 * (malloc_large checks it).  The core's hl_malloc keeps failing there: an
 * experiment may ask for the exhaustion. */
void *hl__manual_malloc_any(hl_heap *h, size_t size) {
  void *p = hl__manual_malloc(h, size);
  if (hl_unlikely(!p) && size <= h->small_max) p = malloc_large(h, size, false);
  return p;
}

/* hl__manual_malloc for a caller whose refusals name it: a realloc's new
 * block said "malloc:" (the C API hunt, session 33). */
static NOINLINE void *manual_malloc_as(hl_heap *h, size_t size, const char *what) {
  if (size > h->small_max) return large_new(h, size, 16, false, what);
  return malloc_small(h, hl__class_of(h, size), what);
}

/* A block a realloc moves to, or memalign's unaligned one: hl_malloc's,
 * and in the preloaded library a large one when no small page is left.
 * The heap is a manual one (the callers are); what names the call in a
 * refusal's message. */
static inline void *alloc_block(hl_heap *h, size_t size, const char *what) {
  void *p = hl__tcache_pop(h, size);
  if (hl_likely(p != NULL)) return p;
  p = manual_malloc_as(h, size, what);
#ifdef HL_PRELOAD
  if (hl_unlikely(!p) && size <= h->small_max) p = large_new(h, size, 16, false, what);
#endif
  return p;
}

/* A block of size bytes aligned to align (a power of two).  Up to 16: any
 * block.  Up to the OS page size, for a small size: the first class at least
 * max(size, align) bytes whose size is a multiple of align -- its slots are
 * aligned, since pages start at page-aligned addresses and hold no header
 * (every power of two up to small_max is a class).  Otherwise the large path
 * over-allocates and keeps the lead (large.c).  The preload library's
 * memalign family; NULL when there is no memory. */
void *hl__manual_memalign(hl_heap *h, size_t align, size_t size) {
  if (align <= HL_GRANULE) return alloc_block(h, size, "malloc");
  size_t want = size > align ? size : align;
  if (align <= hl__prim_os_page_size() && want <= h->small_max) {
    for (uint32_t c = hl__class_of(h, want); c < h->nclasses; c++)
      if (h->cls_size[c] % align == 0) {
        void *p = hl__malloc(h, h->cls_size[c]);
        if (p) return p;
        break; /* no small page left: the large path aligns it */
      }
  }
  return large_new(h, size, align, false, "memalign");
}

/* ---- free ---- */

void hl__manual_free_large(hl_heap *h, void *ptr) {
  bool locked = hl__lock(h);
  void *raw = NULL;
  bool damaged = false;
  if (hl__large_contains(h, ptr)) {
    h->tally.manual_frees++;
    raw = hl__manual_large_freed(h, hl__large_of(ptr), &damaged);
  } else if (h->opt.verify && hl__manual_quarantined(h, ptr)) {
    hl__fail(h, HL_EINVAL, "free: %p is a freed large block (double free?)", ptr);
  } else {
    const hl_large *in = hl__manual_inside_large(h, ptr);
    if (in)
      hl__fail(h, HL_EINVAL, "free: %p is inside the live large block %p (%" PRIu64 " bytes), not "
               "a block", ptr, (const void *)(in + 1), in->size);
    else
      hl__fail(h, HL_EINVAL, "free: %p is not a block of this heap", ptr);
  }
  hl__unlock(h, locked);
  hl__large_sys_free(raw); /* (outside the lock: large_new says why) */
  damage_found(h, damaged);
}

/* Why ptr, a pointer into the reservation, is no block `what` can take --
 * the messages said "not a live block (double free?)" for an interior
 * pointer and for a page never carved as well.  Lock held. */
static NOINLINE __attribute__((cold)) void not_a_block(hl_heap *h, const void *ptr,
                                                      const char *what) {
  if (!hl__in_heap(h, ptr) || !hl__formatted(h->pages[hl__page_of(h, ptr)].state)) {
    hl__fail(h, HL_EINVAL, "%s: %p is in no formatted page of this heap (not a block)", what, ptr);
    return;
  }
  const void *in = hl__small_resolve(h, ptr, true);
  bool freed = h->opt.verify && hl__manual_quarantined(h, in ? in : ptr);
  if (in && in != ptr)
    hl__fail(h, HL_EINVAL, "%s: %p is inside the %s block %p (interior pointer)", what, ptr,
             freed ? "freed" : "live", in);
  else if (freed)
    hl__fail(h, HL_EINVAL, "%s: %p is a freed block (double free?)", what, ptr);
  else
    hl__fail(h, HL_EINVAL, "%s: %p is not a live block (double free?)", what, ptr);
}

const hl_large *hl__manual_inside_large(const hl_heap *h, const void *ptr) {
  HL_ASSERT_LOCKED((hl_heap *)h); /* (the assertion takes no const) */
  const uint8_t *p = ptr;
  for (const hl_large *l = h->large_head; l; l = l->next) {
    const uint8_t *lo = (const uint8_t *)l - l->lead, *hi = (const uint8_t *)(l + 1) + l->size;
    if (lo <= p && p < hi) return l;
  }
  return NULL;
}

/* verify: a small block freed goes to the quarantine (above); a block in it
 * is a double free.  Lock held; false when refused, *damaged when a block
 * that left the quarantine was damaged. */
static bool free_small_verify(hl_heap *h, void *ptr, uint32_t cls, bool *damaged) {
  if (hl__manual_quarantined(h, ptr) || hl__small_resolve(h, ptr, false) != ptr) {
    not_a_block(h, ptr, "free");
    return false;
  }
  uint32_t sz = h->cls_size[cls];
  hl__seal_freed(ptr, sz);
  hl__discharge(h, HL_SMALL, sz, 1);
  h->tally.manual_frees++;
  *damaged = quarantine_add(h, ptr, NULL, sz);
  return true;
}

/* A small block that did not fit the cache (or there is none).  The class
 * comes from the page descriptor here, whatever the caller said. */
bool hl__manual_free_small(hl_heap *h, void *ptr) {
  uint32_t cls = h->pages[hl__page_of(h, ptr)].cls;
  if (cls >= h->nclasses) {
    bool locked = hl__lock(h);
    not_a_block(h, ptr, "free");
    hl__unlock(h, locked);
    return false;
  }
  hl_tcache *tc = tcache_for(h);
  if (!tc) {
    bool locked = hl__lock(h);
    bool ok, damaged = false;
    if (h->opt.verify) {
      ok = free_small_verify(h, ptr, cls, &damaged);
    } else if ((ok = hl__small_give_checked(h, ptr))) {
      hl__discharge(h, HL_SMALL, h->cls_size[cls], 1);
      h->tally.manual_frees++;
    } else {
      not_a_block(h, ptr, "free");
    }
    hl__trim_maybe(h);
    hl__unlock(h, locked);
    damage_found(h, damaged);
    return ok;
  }
  /* cache full: send its older half home (bin_flush), keep the newer
   * (warmer) half (not full: the thread came back from another heap) */
  uint32_t n = hl__cnt(tc, cls);
  if (n >= tc->limit[cls]) {
    /* full: a cache that has not grown to its limit grows (unless a free
     * emptied pages since the last refill), and a bin that does not hold
     * what the class may cache now grows */
    if (n >= tc->want[cls] && !tc->lowered[cls]) want_grow(tc, cls);
    if (n < tc->want[cls]) bin_reserve(tc, cls, n + 1);
  }
  /* (at least one: a cache of one block -- tcache_blocks=1 -- gave none
   * home and pushed the block past its bin, into the next class's) */
  uint32_t give = n < tc->limit[cls] ? 0 : n > 1 ? n / 2 : n;
  if (give) {
    bool locked = hl__lock(h);
    bin_flush(h, tc, cls, give);
    hl__unlock(h, locked);
  }
  n = hl__cnt(tc, cls);
  hl__bin_of(tc, cls)[n] = ptr;
  hl__cnt_set(tc, cls, n + 1);
  if (hl__tick(tc)) hl__tcache_event(h, tc);
  return true;
}

size_t hl__manual_usable_size(hl_heap *h, const void *ptr) {
  size_t n = 0;
  bool locked = hl__lock(h);
  if (hl__in_reservation(h, ptr)) {
    if (hl__small_resolve(h, ptr, false) == ptr && !(h->opt.verify && hl__manual_quarantined(h, ptr)))
      n = h->cls_size[h->pages[hl__page_of(h, ptr)].cls];
  } else if (hl__large_contains(h, ptr)) {
    n = hl__large_of(ptr)->size;
  }
  hl__unlock(h, locked);
  return n;
}

/* verify: a sized free whose size does not match its block is refused: more
 * than the block holds, another class's size for a small block; for a large
 * one a size of the small path (hl_malloc's large blocks are larger than
 * small_max; only realloc moves a block between the paths, and it moves it)
 * or less than half what the block holds.  A large block holds what was asked
 * for, or -- a realloc's -- up to a quarter more than the size asked
 * (hl__manual_large_want), or a shrink that stayed in place
 * (hl__large_stays: down to half): so the size its owner knows is from half
 * its size to its size.  A large block of 100,000 bytes freed with size 600
 * was freed (only sizes up to small_max and past the block were refused).
 * (The preloaded library's large blocks of small sizes -- memalign's, or the
 * reservation exhausted -- hold what was asked: the same bounds.) */
bool hl__manual_free_sized_ok(hl_heap *h, void *ptr, size_t size) {
  size_t usable = hl__manual_usable_size(h, ptr);
  bool small = hl__in_reservation(h, ptr);
  bool bad;
  if (!usable) bad = false; /* (not a live block: the free says so) */
  else if (small) bad = size > usable || hl__class_of(h, size) != h->pages[hl__page_of(h, ptr)].cls;
  else bad = size > usable || size < usable / 2 || (size <= h->small_max && usable > h->small_max);
  if (bad && !small && size <= usable) {
    hl__fail(h, HL_EINVAL, "free_sized: %p freed with size %zu but its block holds %zu (a large "
             "block's size is from %zu to %zu)", ptr, size, usable,
             usable / 2 > h->small_max || usable <= h->small_max ? usable / 2 : h->small_max + 1,
             usable);
    return false;
  }
  if (bad) {
    /* a block that holds the size under another class: an aligned block
     * (aligned_alloc(64, 100) holds 128), which C23 frees with
     * free_aligned_sized -- the preloaded library's (the preload hunt,
     * session 32: the message said only that the sizes differ; the block
     * cannot tell how it was asked for, so the hint says "if": a malloc
     * block freed with too small a size gets it too) */
#ifdef HL_PRELOAD
    const bool preload = true;
#else
    const bool preload = false;
#endif
    hl__fail(h, HL_EINVAL, "free_sized: %p freed with size %zu but its block holds %zu%s", ptr,
             size, usable, preload && size <= usable
                               ? " (if it is an aligned block -- aligned_alloc, memalign, "
                                 "posix_memalign, valloc, pvalloc -- free it with "
                                 "free_aligned_sized)"
                               : "");
    return false;
  }
  return true;
}

/* free_aligned_sized(ptr, align, size) (C23): the block of an aligned
 * allocation of size bytes at align -- ptr aligned so, size within the
 * block.  It was never checked. */
bool hl__manual_free_aligned_sized_ok(hl_heap *h, void *ptr, size_t align, size_t size) {
  size_t usable = hl__manual_usable_size(h, ptr);
  if (!usable) return true; /* (not a live block: the free says so) */
  bool pow2 = align && !(align & (align - 1));
  if (size > usable || !pow2 || (uintptr_t)ptr % align) {
    hl__fail(h, HL_EINVAL, "free_aligned_sized: %p freed with alignment %zu and size %zu but its "
             "block holds %zu%s", ptr, align, size, usable,
             !pow2 ? " (the alignment is not a power of two)"
             : (uintptr_t)ptr % align ? " (the block is not so aligned)" : "");
    return false;
  }
  return true;
}

/* ---- realloc ---- */

/* Large to large: the system realloc, in place when it can (mremap for the
 * big ones).  A block that grows gets a quarter more than asked (its usable
 * size says so) and one that shrinks by less than half stays as it is: a
 * buffer grown in small steps -- a string builder, a server's query buffer
 * -- costs O(log n) system reallocs, not one per step (each an mremap once
 * blocks are mapped: 0.27 s of system time in bench-preload realloc).  NULL
 * on failure, the old block untouched. */
size_t hl__manual_large_want(hl_heap *h, uint64_t old, size_t new_size) {
  HL_ASSERT_LOCKED(h);
  size_t want = new_size;
  if (new_size > old && new_size < SIZE_MAX / 2 && new_size < old + old / 4) want = old + old / 4;
  /* the slack must not carry a block over the system allocator's mapping
   * threshold when the size asked stays under it: in glibc's heap the block
   * grows in place at the top; past the threshold it moves to a mapping of
   * its own, the copy and the old block both resident (bench-preload
   * realloc: its peak RSS 3.5-4.2 MiB, glibc alone 2.7) */
  uint64_t thr = h->sys_map_threshold, room = thr > 64 ? thr - 64 : 0;
  if (want != new_size && room && sizeof(hl_large) + new_size <= room &&
      sizeof(hl_large) + want > room)
    want = room - sizeof(hl_large);
  if (want != new_size && h->opt.heap_limit_bytes &&
      hl__limit_held(h) + (want - old) > (uint64_t)h->opt.heap_limit_bytes)
    want = new_size; /* the slack must not break the limit */
  return want;
}

/* Lock held on entry and on return, let go around the system realloc
 * (locked: this call took it, hl__lock's result).  The block is detached
 * meanwhile -- out of the list and the set, so no other thread reaches it
 * -- and its growth charged, so that heap_limit_bytes holds while the
 * system allocator runs.  (Apart from realloc_large_locked, whose common
 * case -- the block stays -- then needs no registers saved: this body in
 * it cost every call an instruction, +0.4% on bench-preload realloc.) */
static NOINLINE void *realloc_large_move(hl_heap *h, void *ptr, uint64_t old, size_t new_size,
                                         bool locked) {
  HL_ASSERT_LOCKED(h);
  if (new_size > old && over_limit(h, new_size - old, "realloc")) return NULL;
  size_t want = hl__manual_large_want(h, old, new_size), got = want;
  int64_t grow = want > old ? (int64_t)(want - old) : 0;
  hl_large *l = hl__large_of(ptr);
  hl__large_detach(h, l);
  hl__charge(h, HL_LARGE, grow, 0);
  h->large_moving++;
  h->large_moving_bytes += old + (uint64_t)grow;
  hl__unlock(h, locked);
  hl_large *n = hl__large_sys_realloc(l, want);
  if (!n && want != new_size) n = hl__large_sys_realloc(l, got = new_size);
  if (locked) hl__lock_raw(h);
  hl__charge(h, HL_LARGE, -grow, 0);
  h->large_moving_bytes -= old + (uint64_t)grow;
  /* a fork may wait for the last one (registry.c's fork_prepare) */
  if (--h->large_moving == 0) pthread_cond_broadcast(&h->cycle_done);
  if (!n) {
    hl__large_attach(h, l, old);
    hl__fail(h, HL_ENOMEM, "realloc: the system allocator refused %zu bytes", new_size);
    return NULL;
  }
  hl__charge_resize(h, old, got);
  return hl__large_attach(h, n, got);
}

static inline void *realloc_large_locked(hl_heap *h, void *ptr, uint64_t old, size_t new_size,
                                         bool locked) {
  HL_ASSERT_LOCKED(h);
  if (hl__large_stays(old, new_size)) return ptr;
  return realloc_large_move(h, ptr, old, new_size, locked);
}

/* verify: a large block that does not stay where it is moves by a new block
 * (of the size the system realloc would have been asked for), the copy and
 * hl_free -- into the quarantine, as any free: the system realloc freed or
 * unmapped the old block itself, past the quarantine, and a second free or
 * a realloc of the old pointer was a foreign pointer's (the preloaded
 * library gave it to glibc: an abort) or freed what the system had put
 * there since.  Lock held on entry, not on return (locked: hl__lock's
 * result). */
static NOINLINE void *realloc_large_verify(hl_heap *h, void *ptr, uint64_t old, size_t new_size,
                                           bool locked) {
  size_t want = hl__manual_large_want(h, old, new_size);
  hl__unlock(h, locked);
  void *q = alloc_block(h, want, "realloc");
  if (!q && want != new_size) q = alloc_block(h, new_size, "realloc");
  if (!q) return NULL;
  memcpy(q, ptr, old < new_size ? old : new_size);
  hl_free(h, ptr);
  return q;
}

/* The message for a realloc of ptr, no large block of h.  Lock held. */
static void realloc_not_large(hl_heap *h, const void *ptr) {
  if (h->opt.verify && hl__manual_quarantined(h, ptr))
    hl__fail(h, HL_EINVAL, "realloc: %p is a freed large block", ptr);
  else
    hl__fail(h, HL_EINVAL, "realloc: %p is not a block of this heap", ptr);
}

static NOINLINE void *realloc_large(hl_heap *h, void *ptr, size_t new_size) {
  bool locked = hl__lock(h);
  void *q = NULL;
  uint64_t old = hl__large_contains(h, ptr) ? hl__large_of(ptr)->size : 0;
  if (!old) realloc_not_large(h, ptr);
  else if (h->opt.verify && !hl__large_stays(old, new_size))
    return realloc_large_verify(h, ptr, old, new_size, locked);
  else q = realloc_large_locked(h, ptr, old, new_size, locked);
  hl__unlock(h, locked);
  return q;
}

/* A large block shrunk to a small one: moved (the copy is never longer
 * than either). */
static void *large_to_small(hl_heap *h, void *ptr, size_t usable, size_t new_size) {
  void *q = alloc_block(h, new_size, "realloc");
  if (!q) return NULL;
  memcpy(q, ptr, usable < new_size ? usable : new_size);
  hl_free(h, ptr);
  return q;
}

/* The preload library's realloc of a pointer outside the reservation: one
 * visit under the lock both asks whether it is a large block of h and, for
 * one that grows within its slack (a buffer grown in small steps: most
 * calls), answers -- two visits took 40% of bench-preload realloc's time.
 * *foreign: not h's (the block is untouched, NULL returned). */
void *hl__manual_realloc_outside(hl_heap *h, void *ptr, size_t new_size, bool *foreign) {
  bool locked = hl__lock(h);
  bool mine = hl__large_contains(h, ptr);
  uint64_t old = mine ? hl__large_of(ptr)->size : 0;
  *foreign = !mine;
  void *q = NULL;
  if (mine && new_size > h->small_max && h->opt.verify && !hl__large_stays(old, new_size))
    return realloc_large_verify(h, ptr, old, new_size, locked);
  if (mine && new_size > h->small_max) q = realloc_large_locked(h, ptr, old, new_size, locked);
  hl__unlock(h, locked);
  if (mine && new_size <= h->small_max) q = large_to_small(h, ptr, old, new_size);
  return q;
}

/* ptr is not NULL and new_size not 0 (heap.c).  old_size is the caller's
 * size of the block (Lua passes it exactly; 0 = unknown, as from CPython).
 * A known size names the class without reading the page descriptor; the
 * copy is never longer than the block. */
void *hl__manual_realloc(hl_heap *h, void *ptr, size_t old_size, size_t new_size) {
  size_t usable;
  if (hl__in_reservation(h, ptr)) {
    uint32_t cls;
    if (old_size && old_size <= h->small_max && !h->opt.verify) {
      cls = hl__class_of(h, old_size);
    } else {
      cls = h->pages[hl__page_of(h, ptr)].cls;
      /* verify: a freed or interior pointer is refused, not moved */
      if (cls >= h->nclasses || (h->opt.verify && hl__manual_usable_size(h, ptr) == 0)) {
        hl__fail(h, HL_EINVAL, "realloc: %p is not a live block (freed?)", ptr);
        return NULL;
      }
    }
    if (new_size <= h->small_max && hl__class_of(h, new_size) == cls) return ptr;
    usable = h->cls_size[cls];
  } else {
    if (new_size > h->small_max) return realloc_large(h, ptr, new_size);
    bool locked = hl__lock(h);
    bool known = hl__large_contains(h, ptr);
    usable = known ? hl__large_of(ptr)->size : 0;
    if (!known) realloc_not_large(h, ptr);
    hl__unlock(h, locked);
    if (!known) return NULL;
  }
  size_t copy = old_size && old_size < usable ? old_size : usable;
  if (copy > new_size) copy = new_size;
  void *q = alloc_block(h, new_size, "realloc");
  if (!q) return NULL;
  memcpy(q, ptr, copy);
  if (old_size && !h->opt.verify) hl_free_sized(h, ptr, old_size);
  else hl_free(h, ptr);
  return q;
}

/* ---- threads and teardown ---- */

void hl__manual_caches_bypassed(bool on) {
  tls_bypass = on;
  /* (and the inline fast path, manual.h, told: it finds no cache, and the
   * slow path, tcache_for, takes none -- nor a cache it may have been
   * half-way through updating when the handler came) */
  if (on) forget_cache();
}

void hl__manual_thread_flush(hl_heap *h) {
  hl_tcache *tc = index_find(h->serial);
  if (tc && atomic_load(&tc->heap) == h) flush_all(tc, h);
}

/* Called by hl_heap_free without the lock. */
void hl__manual_destroy(hl_heap *h) {
  quarantine_destroy(h);
  tc_global_then(h, "hl_heap_free"); /* (h waited for without tc_global) */
  while (h->tcaches) detach_closing(h->tcaches, h);
  hl__unlock_raw(h);
  tc_global_unlock();
  if (hl__tls.heap == h) forget_cache();
  /* this thread's: freed now (the others' at their next slow path) */
  hl_tcache *own = tls_exited ? NULL : index_find(h->serial);
  if (own && !atomic_load(&own->heap)) {
    atomic_fetch_sub_explicit(&tls_detached, 1, memory_order_relaxed);
    cache_drop(own);
  }
}

/* The counts still in the live threads' caches.  Lock held.  The frees
 * are exact as of each cache's read; the mallocs read beside running
 * threads may fall short of what was made (by a push whose tick the read
 * missed, or a pop: counts()) -- short of what an earlier read gave, and
 * even of the frees when they are near.  Reported: the most of this read,
 * the last one reported and the frees, each no more than the mallocs made
 * by the end of this read (every free follows its malloc), so the count
 * never goes down, nor below the frees, and is exact once the threads'
 * calls are done.  (The differences as signed: a cache's share alone may
 * be "negative", the frees of blocks other threads allocated.) */
void hl__manual_stats(hl_heap *h, hl_stats *st) {
  HL_ASSERT_LOCKED(h);
  for (hl_tcache *tc = h->tcaches; tc; tc = tc->next_heap) {
    uint64_t mallocs, frees;
    counts(tc, &mallocs, &frees);
    st->manual_mallocs += mallocs;
    st->manual_frees += frees;
  }
  if ((int64_t)(h->manual_mallocs_shown - st->manual_mallocs) > 0)
    st->manual_mallocs = h->manual_mallocs_shown;
  if ((int64_t)(st->manual_frees - st->manual_mallocs) > 0) st->manual_mallocs = st->manual_frees;
  h->manual_mallocs_shown = st->manual_mallocs;
}
