/*
 * manual.c -- manual mode: malloc-like allocation with explicit (sized or
 * unsized) free on the same BiBOP pages, pools, trim, release and restore as
 * the collected heap, so real interpreters (Lua through lua_newstate, CPython
 * through PyMem_SetAllocator) run on heaplab's page machinery unchanged.
 *
 * Hot path: a per-thread cache of blocks per size class (tcache_blocks
 * blocks, or tcache_bytes' worth for the bigger classes).  malloc pops from
 * it, free pushes to it, and only a refill or a flush (half a cache at a
 * time) takes the heap lock.  Blocks in a cache count as used by their
 * pages.  A page whose last block comes home goes to the free pool, and a
 * trim runs when the free pool has grown past the warm cache by
 * manual_trim_threshold pages (there is no sweep to run it).
 *
 * A sized free (Lua) takes the class from the size and never reads the page
 * descriptor; an unsized one (CPython) reads the class from the descriptor.
 * Large blocks are resized by the system realloc (in place when it can).
 * With verify on there is no cache, and every free is checked under the lock.
 *
 * fork(): the heaps that have been used are locked around a fork (atfork
 * handlers), so a child never inherits a heap lock held by a thread that
 * does not exist in it.
 */
#include <errno.h>
#include <stdlib.h>

#include "../internal.h"

struct hl_tcache {
  _Atomic(hl_heap *) heap;     /* NULL once the heap is closed */
  hl_tcache *next_thread;      /* this thread's caches */
  hl_tcache *next_heap, *prev_heap; /* the heap's caches (heap lock) */
  uint32_t cap;                /* blocks per class at most (tcache_blocks) */
  uint32_t shift;              /* a class's slots start at cls << shift */
  uint32_t nclasses;
  uint32_t room;               /* slots allocated after this struct */
  _Atomic uint64_t mallocs, frees; /* written by the owner only */
  uint32_t count[HL_MAX_CLASSES];
  uint32_t limit[HL_MAX_CLASSES]; /* blocks of each class: tcache_bytes' worth, 16..cap */
  void *slots[];               /* inline: one load less on the hot path */
};

/* initial-exec: the fast paths read these without a __tls_get_addr call
 * (which made the compiler save registers on every malloc and free).  48
 * bytes, within the static TLS glibc keeps for modules loaded by dlopen (the
 * Python extension). */
#define TLS _Thread_local __attribute__((tls_model("initial-exec")))

static pthread_mutex_t tc_global = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t tc_key;
static pthread_once_t tc_once = PTHREAD_ONCE_INIT;
static TLS hl_tcache *tls_list;
/* The cache the fast paths use, and the heap (address and serial) it is
 * for.  Three independent thread-local loads instead of a chain; a heap
 * closed and another created at the same address differs in serial.  The
 * slow paths check the cache's own heap field, which closing clears. */
static TLS hl_tcache *tls_cache;
static TLS const hl_heap *tls_heap;
static TLS uint64_t tls_serial;

static inline void owner_inc(_Atomic uint64_t *c) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                        memory_order_relaxed);
}

static inline bool in_reservation(const hl_heap *h, const void *p) {
  return (uintptr_t)p - (uintptr_t)h->base < h->reserved;
}

static inline void **bin_of(hl_tcache *tc, uint32_t cls) {
  return tc->slots + ((size_t)cls << tc->shift);
}

/* This thread's cache for h if it has one already (the fast paths). */
static inline hl_tcache *cache_of(const hl_heap *h) {
  if (hl_likely(tls_heap == h && tls_serial == h->serial)) return tls_cache;
  return NULL;
}

static inline hl_tcache *use_cache(hl_tcache *tc, const hl_heap *h) {
  tls_cache = tc;
  tls_heap = h;
  tls_serial = h->serial;
  return tc;
}

static inline void forget_cache(void) {
  tls_cache = NULL;
  tls_heap = NULL;
  tls_serial = 0;
}

/* ---- heaps known to the fork handlers ---- */

#define FORK_HEAPS 64
static hl_heap *_Atomic fork_heaps[FORK_HEAPS];
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static TLS hl_heap *tls_registered;
static TLS uint64_t tls_registered_serial; /* a new heap may reuse an address */

static void fork_prepare(void) {
  pthread_mutex_lock(&tc_global);
  for (int i = 0; i < FORK_HEAPS; i++) {
    hl_heap *h = atomic_load(&fork_heaps[i]);
    if (!h) continue;
    pthread_mutex_lock(&h->lock);
    /* a trim advising outside the lock must finish first: in the child it
     * would never publish its pages */
    while (h->in_cycle) pthread_cond_wait(&h->cycle_done, &h->lock);
  }
}

static void fork_done(void) {
  for (int i = FORK_HEAPS; i-- > 0;) {
    hl_heap *h = atomic_load(&fork_heaps[i]);
    if (h) pthread_mutex_unlock(&h->lock);
  }
  pthread_mutex_unlock(&tc_global);
}

static void fork_init(void) { pthread_atfork(fork_prepare, fork_done, fork_done); }

/* Called on the slow paths: the first time a thread meets a heap, make
 * sure the fork handlers know it.  Beyond FORK_HEAPS live manual heaps the
 * extra ones are not protected across fork. */
static void fork_register(hl_heap *h) {
  if (hl_likely(tls_registered == h && tls_registered_serial == h->serial)) return;
  pthread_once(&fork_once, fork_init);
  for (int i = 0; i < FORK_HEAPS; i++)
    if (atomic_load(&fork_heaps[i]) == h) {
      tls_registered = h;
      tls_registered_serial = h->serial;
      return;
    }
  pthread_mutex_lock(&tc_global);
  bool present = false;
  for (int i = 0; i < FORK_HEAPS && !present; i++) present = atomic_load(&fork_heaps[i]) == h;
  for (int i = 0; i < FORK_HEAPS && !present; i++) {
    if (atomic_load(&fork_heaps[i])) continue;
    atomic_store(&fork_heaps[i], h);
    present = true;
  }
  pthread_mutex_unlock(&tc_global);
  tls_registered = h;
  tls_registered_serial = h->serial;
}

/* ---- thread caches ---- */

/* Return n cached blocks of class cls to their pages.  Lock held. */
static void give_back(hl_heap *h, void **blocks, uint32_t n, uint32_t cls) {
  uint64_t freed = 0;
  for (uint32_t i = 0; i < n; i++) freed += hl__small_give_checked(h, blocks[i]);
  h->st.small_live_bytes -= freed * h->cls_size[cls];
  h->st.objects_freed += freed;
}

static void flush_all(hl_tcache *tc, hl_heap *h) {
  pthread_mutex_lock(&h->lock);
  for (uint32_t c = 0; c < tc->nclasses; c++) {
    give_back(h, bin_of(tc, c), tc->count[c], c);
    tc->count[c] = 0;
  }
  h->st.tcache_flushes++;
  hl__trim_maybe(h);
  pthread_mutex_unlock(&h->lock);
}

static void detach(hl_tcache *tc, hl_heap *h) {
  if (tc->prev_heap) tc->prev_heap->next_heap = tc->next_heap;
  else h->tcaches = tc->next_heap;
  if (tc->next_heap) tc->next_heap->prev_heap = tc->prev_heap;
  tc->next_heap = tc->prev_heap = NULL;
  /* keep the counts of a thread that is gone */
  h->st.manual_mallocs += atomic_load(&tc->mallocs);
  h->st.manual_frees += atomic_load(&tc->frees);
  atomic_store(&tc->mallocs, 0);
  atomic_store(&tc->frees, 0);
  atomic_store(&tc->heap, NULL);
}

/* Thread exit: flush every cache whose heap is still open, free them all. */
static void tc_destructor(void *arg) {
  hl_tcache *tc = arg;
  pthread_mutex_lock(&tc_global);
  while (tc) {
    hl_tcache *next = tc->next_thread;
    hl_heap *h = atomic_load(&tc->heap);
    if (h) {
      flush_all(tc, h);
      pthread_mutex_lock(&h->lock);
      detach(tc, h);
      pthread_mutex_unlock(&h->lock);
    }
    free(tc);
    tc = next;
  }
  pthread_mutex_unlock(&tc_global);
  tls_list = NULL;
  forget_cache();
  tls_registered = NULL;
}

static void tc_init_key(void) { pthread_key_create(&tc_key, tc_destructor); }

/* This thread's cache for h, created on first use; NULL without a cache. */
static hl_tcache *tcache_for(hl_heap *h) {
  if (h->opt.tcache_blocks == 0 || h->opt.verify || h->opt.mode != HL_MODE_MANUAL) return NULL;
  uint32_t cap = (uint32_t)h->opt.tcache_blocks, shift = 0;
  while ((1u << shift) < cap) shift++;
  uint32_t room = h->nclasses << shift;
  hl_tcache *free_one = NULL;
  for (hl_tcache *tc = tls_list; tc; tc = tc->next_thread) {
    hl_heap *th = atomic_load_explicit(&tc->heap, memory_order_relaxed);
    if (th == h) return use_cache(tc, h);
    if (!th && !free_one && tc->room >= room) free_one = tc;
  }
  pthread_once(&tc_once, tc_init_key);
  hl_tcache *tc = free_one;
  if (!tc) {
    tc = calloc(1, sizeof *tc + room * sizeof(void *));
    if (!tc) return NULL;
    tc->room = room;
    tc->next_thread = tls_list;
    tls_list = tc;
    pthread_setspecific(tc_key, tls_list);
  }
  tc->cap = cap;
  tc->shift = shift;
  tc->nclasses = h->nclasses;
  memset(tc->count, 0, sizeof tc->count);
  /* small classes are the busy ones: they may cache more blocks than the
   * big ones for the same bytes */
  for (uint32_t c = 0; c < h->nclasses; c++) {
    uint64_t n = h->opt.tcache_bytes ? (uint64_t)h->opt.tcache_bytes / h->cls_size[c] : cap;
    tc->limit[c] = (uint32_t)(n > cap ? cap : n < 16 ? (cap < 16 ? cap : 16) : n);
  }
  atomic_store(&tc->mallocs, 0);
  atomic_store(&tc->frees, 0);
  pthread_mutex_lock(&tc_global);
  pthread_mutex_lock(&h->lock);
  tc->prev_heap = NULL;
  tc->next_heap = h->tcaches;
  if (h->tcaches) h->tcaches->prev_heap = tc;
  h->tcaches = tc;
  atomic_store(&tc->heap, h);
  pthread_mutex_unlock(&h->lock);
  pthread_mutex_unlock(&tc_global);
  return use_cache(tc, h);
}

static int mode_check(hl_heap *h, const char *what) {
  if (h->opt.mode != HL_MODE_MANUAL)
    return hl__fail(h, HL_EMODE, "%s: needs a manual heap (mode=manual)", what);
  return HL_OK;
}

/* ---- malloc ---- */

static NOINLINE void *malloc_large(hl_heap *h, size_t size) {
  if (!h || mode_check(h, "malloc")) return NULL;
  fork_register(h);
  pthread_mutex_lock(&h->lock);
  void *p = hl__large_alloc(h, size);
  if (p) {
    h->st.large_bytes_since_cycle += size;
    h->st.large_allocated_bytes += size;
    h->st.large_live_bytes += size;
    h->st.objects_allocated++;
    h->st.manual_mallocs++;
  } else {
    hl__fail(h, HL_ENOMEM, "malloc: the system allocator refused %zu bytes", size);
  }
  pthread_mutex_unlock(&h->lock);
  return p;
}

/* Refill: half a cache of blocks in one visit under the lock (or the one
 * block asked for, without a cache). */
static NOINLINE void *malloc_slow(hl_heap *h, uint32_t cls) {
  if (mode_check(h, "malloc")) return NULL;
  fork_register(h);
  hl_tcache *tc = tcache_for(h);
  if (tc && tc->count[cls]) {
    /* the thread came back from another heap: its cache here has blocks */
    owner_inc(&tc->mallocs);
    return bin_of(tc, cls)[--tc->count[cls]];
  }
  uint32_t want = tc ? (tc->limit[cls] + 1) / 2 : 1;
  void *first = NULL;
  uint32_t got = 0;
  pthread_mutex_lock(&h->lock);
  void **bin = tc ? bin_of(tc, cls) : NULL;
  while (got < want) {
    void *b = hl__small_take(h, cls);
    if (!b) break;
    if (!first) first = b;
    else bin[tc->count[cls]++] = b;
    got++;
  }
  /* (the stats were charged when the blocks' word was reserved) */
  if (tc) h->st.tcache_refills++;
  else if (first) h->st.manual_mallocs++;
  if (!first) hl__fail(h, HL_ENOMEM, "malloc: the reservation of %llu bytes is exhausted",
                       (unsigned long long)h->reserved);
  pthread_mutex_unlock(&h->lock);
  if (tc && first) owner_inc(&tc->mallocs);
  return first;
}

static NOINLINE __attribute__((cold)) void *malloc_miss(hl_heap *h, size_t size) {
  if (!h || size > h->small_max) return malloc_large(h, size);
  return malloc_slow(h, hl__class_of(h, size));
}

/* The fast path keeps nothing live into the miss call, so the compiler
 * needs no saved registers here (measured: 6 instructions a call less). */
void *hl_malloc(hl_heap *h, size_t size) {
  if (hl_likely(h && size <= h->small_max)) {
    hl_tcache *tc = cache_of(h);
    if (hl_likely(tc)) {
      uint32_t cls = hl__class_of(h, size);
      uint32_t n = tc->count[cls];
      if (hl_likely(n)) {
        tc->count[cls] = n - 1;
        owner_inc(&tc->mallocs);
        return bin_of(tc, cls)[n - 1];
      }
    }
  }
  return malloc_miss(h, size);
}

void *hl_calloc(hl_heap *h, size_t count, size_t size) {
  if (!h) return NULL;
  if (size && count > SIZE_MAX / size) {
    hl__fail(h, HL_EINVAL, "calloc: %zu x %zu overflows", count, size);
    return NULL;
  }
  void *p = hl_malloc(h, count * size);
  if (p) memset(p, 0, count * size);
  return p;
}

/* ---- free ---- */

static NOINLINE void free_large(hl_heap *h, void *ptr) {
  if (mode_check(h, "free")) return;
  fork_register(h);
  pthread_mutex_lock(&h->lock);
  if (hl__large_contains(h, ptr)) {
    hl_large *l = hl__large_of(ptr);
    h->st.large_live_bytes -= l->size;
    h->st.manual_frees++;
    h->st.objects_freed++;
    hl__large_free(h, l);
  } else {
    hl__fail(h, HL_EINVAL, "free: %p is not a block of this heap", ptr);
  }
  pthread_mutex_unlock(&h->lock);
}

/* A small block that did not fit the cache (or there is none).  The class
 * comes from the page descriptor here, whatever the caller said. */
static NOINLINE void free_small_slow(hl_heap *h, void *ptr) {
  if (mode_check(h, "free")) return;
  uint32_t cls = h->pages[hl__page_of(h, ptr)].cls;
  if (cls >= h->nclasses) {
    hl__fail(h, HL_EINVAL, "free: %p is not a live block", ptr);
    return;
  }
  fork_register(h);
  hl_tcache *tc = tcache_for(h);
  if (!tc) {
    pthread_mutex_lock(&h->lock);
    if (hl__small_give_checked(h, ptr)) {
      h->st.small_live_bytes -= h->cls_size[cls];
      h->st.objects_freed++;
      h->st.manual_frees++;
    } else {
      hl__fail(h, HL_EINVAL, "free: %p is not a live block (double free?)", ptr);
    }
    hl__trim_maybe(h);
    pthread_mutex_unlock(&h->lock);
    return;
  }
  /* cache full: send its older half home, keep the newer (warmer) half
   * (not full: the thread came back from another heap) */
  void **s = bin_of(tc, cls);
  uint32_t half = tc->count[cls] < tc->limit[cls] ? 0 : tc->count[cls] / 2;
  if (half) {
    pthread_mutex_lock(&h->lock);
    give_back(h, s, half, cls);
    h->st.tcache_flushes++;
    hl__trim_maybe(h);
    pthread_mutex_unlock(&h->lock);
    memmove(s, s + half, (tc->count[cls] - half) * sizeof(void *));
    tc->count[cls] -= half;
  }
  s[tc->count[cls]++] = ptr;
  owner_inc(&tc->frees);
}

/* Push onto this thread's cache; false when there is no room or no cache. */
static inline bool cache_push(hl_heap *h, void *ptr, uint32_t cls) {
  hl_tcache *tc = cache_of(h);
  if (hl_likely(tc && cls < tc->nclasses)) {
    uint32_t n = tc->count[cls];
    if (hl_likely(n < tc->limit[cls])) {
      bin_of(tc, cls)[n] = ptr;
      tc->count[cls] = n + 1;
      owner_inc(&tc->frees);
      return true;
    }
  }
  return false;
}

void hl_free(hl_heap *h, void *ptr) {
  if (hl_unlikely(!h || !ptr)) return;
  if (hl_likely(in_reservation(h, ptr))) {
    if (cache_push(h, ptr, h->pages[hl__page_of(h, ptr)].cls)) return;
    free_small_slow(h, ptr);
    return;
  }
  free_large(h, ptr);
}

static NOINLINE void free_sized_verify(hl_heap *h, void *ptr, size_t size) {
  size_t usable = hl_usable_size(h, ptr);
  if (usable && (size > usable || (in_reservation(h, ptr) &&
                                   hl__class_of(h, size) != h->pages[hl__page_of(h, ptr)].cls))) {
    hl__fail(h, HL_EINVAL, "free_sized: %p freed with size %zu but its block holds %zu", ptr,
             size, usable);
    return;
  }
  hl_free(h, ptr);
}

/* The size names the class: a block of size <= small_max is always small
 * (only realloc moves a block between the paths, and it moves it). */
void hl_free_sized(hl_heap *h, void *ptr, size_t size) {
  if (hl_unlikely(!h || !ptr)) return;
  if (hl_unlikely(h->opt.verify)) {
    free_sized_verify(h, ptr, size);
    return;
  }
  if (hl_likely(size <= h->small_max && in_reservation(h, ptr))) {
    if (cache_push(h, ptr, hl__class_of(h, size))) return;
    free_small_slow(h, ptr);
    return;
  }
  hl_free(h, ptr);
}

size_t hl_usable_size(hl_heap *h, const void *ptr) {
  if (!h || !ptr) return 0;
  size_t n = 0;
  pthread_mutex_lock(&h->lock);
  if (in_reservation(h, ptr)) {
    if (hl__small_resolve(h, ptr, false) == ptr) n = h->cls_size[h->pages[hl__page_of(h, ptr)].cls];
  } else if (hl__large_contains(h, ptr)) {
    n = hl__large_of(ptr)->size;
  }
  pthread_mutex_unlock(&h->lock);
  return n;
}

/* ---- realloc ---- */

/* Large to large: the system realloc, in place when it can (mremap for the
 * big ones).  NULL on failure, the old block untouched. */
static NOINLINE void *realloc_large(hl_heap *h, void *ptr, size_t new_size) {
  pthread_mutex_lock(&h->lock);
  if (!hl__large_contains(h, ptr)) {
    hl__fail(h, HL_EINVAL, "realloc: %p is not a block of this heap", ptr);
    pthread_mutex_unlock(&h->lock);
    return NULL;
  }
  uint64_t old = hl__large_of(ptr)->size;
  void *q = hl__large_realloc(h, hl__large_of(ptr), new_size);
  if (q) {
    h->st.large_live_bytes = h->st.large_live_bytes - old + new_size;
    if (new_size > old) {
      h->st.large_allocated_bytes += new_size - old;
      h->st.large_bytes_since_cycle += new_size - old;
    }
  } else {
    hl__fail(h, HL_ENOMEM, "realloc: the system allocator refused %zu bytes", new_size);
  }
  pthread_mutex_unlock(&h->lock);
  return q;
}

/* old_size is the caller's size of the block (Lua passes it exactly; 0 =
 * unknown, as from CPython).  A known size names the class without reading
 * the page descriptor; the copy is never longer than the block. */
void *hl_realloc(hl_heap *h, void *ptr, size_t old_size, size_t new_size) {
  if (!h) return NULL;
  if (!ptr) return hl_malloc(h, new_size);
  if (mode_check(h, "realloc")) return NULL;
  if (new_size == 0) {
    hl_free_sized(h, ptr, old_size);
    return NULL;
  }
  size_t usable;
  if (in_reservation(h, ptr)) {
    uint32_t cls;
    if (old_size && old_size <= h->small_max && !h->opt.verify) {
      cls = hl__class_of(h, old_size);
    } else {
      cls = h->pages[hl__page_of(h, ptr)].cls;
      /* verify: a freed or interior pointer is refused, not moved */
      if (cls >= h->nclasses || (h->opt.verify && hl_usable_size(h, ptr) == 0)) {
        hl__fail(h, HL_EINVAL, "realloc: %p is not a live block (freed?)", ptr);
        return NULL;
      }
    }
    if (new_size <= h->small_max && hl__class_of(h, new_size) == cls) return ptr;
    usable = h->cls_size[cls];
  } else {
    if (new_size > h->small_max) return realloc_large(h, ptr, new_size);
    pthread_mutex_lock(&h->lock);
    bool known = hl__large_contains(h, ptr);
    usable = known ? hl__large_of(ptr)->size : 0;
    pthread_mutex_unlock(&h->lock);
    if (!known) {
      hl__fail(h, HL_EINVAL, "realloc: %p is not a block of this heap", ptr);
      return NULL;
    }
  }
  size_t copy = old_size && old_size < usable ? old_size : usable;
  if (copy > new_size) copy = new_size;
  void *q = hl_malloc(h, new_size);
  if (!q) return NULL;
  memcpy(q, ptr, copy);
  if (old_size && !h->opt.verify) hl_free_sized(h, ptr, old_size);
  else hl_free(h, ptr);
  return q;
}

/* ---- threads and teardown ---- */

void hl_thread_flush(hl_heap *h) {
  if (!h) return;
  for (hl_tcache *tc = tls_list; tc; tc = tc->next_thread)
    if (atomic_load(&tc->heap) == h) {
      flush_all(tc, h);
      return;
    }
}

void hl__manual_destroy(hl_heap *h) {
  pthread_mutex_lock(&tc_global);
  for (int i = 0; i < FORK_HEAPS; i++)
    if (atomic_load(&fork_heaps[i]) == h) atomic_store(&fork_heaps[i], NULL);
  pthread_mutex_lock(&h->lock);
  while (h->tcaches) detach(h->tcaches, h);
  pthread_mutex_unlock(&h->lock);
  pthread_mutex_unlock(&tc_global);
  if (tls_registered == h) tls_registered = NULL;
  if (tls_heap == h) forget_cache();
}

void hl__manual_stats(hl_heap *h, hl_stats *st) {
  for (hl_tcache *tc = h->tcaches; tc; tc = tc->next_heap) {
    st->manual_mallocs += atomic_load_explicit(&tc->mallocs, memory_order_relaxed);
    st->manual_frees += atomic_load_explicit(&tc->frees, memory_order_relaxed);
  }
}
