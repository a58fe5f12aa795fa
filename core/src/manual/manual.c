/*
 * manual.c -- manual mode: malloc-like allocation with explicit (sized or
 * unsized) free on the same BiBOP pages, pools, trim, release and restore as
 * the collected heap, so real interpreters (Lua through lua_newstate, CPython
 * through PyMem_SetAllocator) run on heaplab's page machinery unchanged.
 *
 * Hot path: a per-thread cache of blocks per size class.  malloc pops from
 * it, free pushes to it, and only a refill or a flush (half a cache at a
 * time) takes the heap lock.  Blocks in a cache count as used by their
 * pages.  A page whose last block comes home goes to the free pool, and a
 * trim runs when the free pool has grown past the warm cache by
 * manual_trim_threshold pages (there is no sweep to run it).
 */
#include <errno.h>
#include <stdlib.h>

#include "../internal.h"

struct hl_tcache {
  _Atomic(hl_heap *) heap;     /* NULL once the heap is closed */
  hl_tcache *next_thread;      /* this thread's caches */
  hl_tcache *next_heap, *prev_heap; /* the heap's caches (heap lock) */
  uint32_t cap;
  uint32_t nclasses;
  _Atomic uint64_t mallocs, frees; /* written by the owner only */
  uint32_t count[HL_MAX_CLASSES];
  void **slots;                /* nclasses * cap */
};

static pthread_mutex_t tc_global = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t tc_key;
static pthread_once_t tc_once = PTHREAD_ONCE_INIT;
static _Thread_local hl_tcache *tls_last;
static _Thread_local hl_tcache *tls_list;

static inline void owner_inc(_Atomic uint64_t *c) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                        memory_order_relaxed);
}

/* Return blocks [0, n) of class cls of tc to their pages.  Lock held. */
static void give_back(hl_heap *h, void **blocks, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    uint32_t cls = h->pages[hl__page_of(h, blocks[i])].cls;
    if (hl__small_give_checked(h, blocks[i])) {
      h->st.small_live_bytes -= h->cls_size[cls];
      h->st.objects_freed++;
    }
  }
}

static void flush_all(hl_tcache *tc, hl_heap *h) {
  pthread_mutex_lock(&h->lock);
  for (uint32_t c = 0; c < tc->nclasses; c++) {
    give_back(h, tc->slots + (size_t)c * tc->cap, tc->count[c]);
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
    free(tc->slots);
    free(tc);
    tc = next;
  }
  pthread_mutex_unlock(&tc_global);
  tls_list = tls_last = NULL;
}

static void tc_init_key(void) { pthread_key_create(&tc_key, tc_destructor); }

/* This thread's cache for h, created on first use; NULL without a cache. */
static hl_tcache *tcache_for(hl_heap *h) {
  if (h->opt.tcache_blocks == 0 || h->opt.verify || h->opt.mode != HL_MODE_MANUAL) return NULL;
  hl_tcache *free_one = NULL;
  for (hl_tcache *tc = tls_list; tc; tc = tc->next_thread) {
    hl_heap *th = atomic_load_explicit(&tc->heap, memory_order_relaxed);
    if (th == h) return tls_last = tc;
    if (!th && !free_one) free_one = tc;
  }
  pthread_once(&tc_once, tc_init_key);
  hl_tcache *tc = free_one;
  uint32_t cap = (uint32_t)h->opt.tcache_blocks;
  if (!tc) {
    tc = calloc(1, sizeof *tc);
    if (!tc) return NULL;
    tc->next_thread = tls_list;
    tls_list = tc;
    pthread_setspecific(tc_key, tls_list);
  }
  free(tc->slots);
  tc->slots = malloc((size_t)h->nclasses * cap * sizeof(void *));
  if (!tc->slots) return NULL;
  tc->cap = cap;
  tc->nclasses = h->nclasses;
  memset(tc->count, 0, sizeof tc->count);
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
  return tls_last = tc;
}

static int mode_check(hl_heap *h, const char *what) {
  if (h->opt.mode != HL_MODE_MANUAL)
    return hl__fail(h, HL_EMODE, "%s: needs a manual heap (mode=manual)", what);
  return HL_OK;
}

static void *large_malloc(hl_heap *h, size_t size) {
  if (mode_check(h, "malloc")) return NULL;
  pthread_mutex_lock(&h->lock);
  uint64_t bytes = size < 16 ? 16 : size;
  void *p = hl__large_alloc(h, bytes, false);
  if (p) {
    h->st.large_bytes_since_cycle += bytes;
    h->st.large_allocated_bytes += bytes;
    h->st.large_live_bytes += bytes;
    h->st.manual_mallocs++;
  } else {
    hl__fail(h, HL_ENOMEM, "malloc: the system allocator refused %zu bytes", size);
  }
  pthread_mutex_unlock(&h->lock);
  return p;
}

static void *malloc_slow(hl_heap *h, uint32_t cls) {
  if (mode_check(h, "malloc")) return NULL;
  hl_tcache *tc = tcache_for(h);
  uint32_t want = tc ? (tc->cap + 1) / 2 : 1;
  void *first = NULL;
  uint32_t got = 0;
  pthread_mutex_lock(&h->lock);
  uint32_t sz = h->cls_size[cls];
  while (got < want) {
    void *b = hl__small_take(h, cls);
    if (!b) break;
    if (!first) first = b;
    else tc->slots[(size_t)cls * tc->cap + tc->count[cls]++] = b;
    got++;
  }
  h->st.small_allocated_bytes += (uint64_t)got * sz;
  h->st.small_live_bytes += (uint64_t)got * sz;
  h->st.objects_allocated += got;
  if (tc) h->st.tcache_refills++;
  else if (first) h->st.manual_mallocs++;
  if (!first) hl__fail(h, HL_ENOMEM, "malloc: the reservation of %llu bytes is exhausted",
                       (unsigned long long)h->reserved);
  pthread_mutex_unlock(&h->lock);
  if (tc && first) owner_inc(&tc->mallocs);
  return first;
}

void *hl_malloc(hl_heap *h, size_t size) {
  if (hl_unlikely(!h)) return NULL;
  if (hl_likely(size <= h->small_max)) {
    uint32_t cls = hl__class_of(h, size);
    hl_tcache *tc = tls_last;
    if (hl_likely(tc && atomic_load_explicit(&tc->heap, memory_order_relaxed) == h)) {
      uint32_t n = tc->count[cls];
      if (hl_likely(n)) {
        tc->count[cls] = n - 1;
        owner_inc(&tc->mallocs);
        return tc->slots[(size_t)cls * tc->cap + n - 1];
      }
    }
    return malloc_slow(h, cls);
  }
  return large_malloc(h, size);
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

static void free_large(hl_heap *h, void *ptr) {
  if (mode_check(h, "free")) return;
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

static void free_slow(hl_heap *h, void *ptr, uint32_t cls) {
  if (mode_check(h, "free")) return;
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
  /* cache full: send its older half home, keep the newer (warmer) half */
  void **s = tc->slots + (size_t)cls * tc->cap;
  uint32_t half = tc->count[cls] / 2;
  pthread_mutex_lock(&h->lock);
  give_back(h, s, half);
  h->st.tcache_flushes++;
  hl__trim_maybe(h);
  pthread_mutex_unlock(&h->lock);
  memmove(s, s + half, (tc->count[cls] - half) * sizeof(void *));
  tc->count[cls] -= half;
  s[tc->count[cls]++] = ptr;
  owner_inc(&tc->frees);
}

static inline bool in_reservation(const hl_heap *h, const void *p) {
  return (const uint8_t *)p >= h->base && (const uint8_t *)p < h->base + h->reserved;
}

void hl_free(hl_heap *h, void *ptr) {
  if (hl_unlikely(!h || !ptr)) return;
  if (hl_likely(in_reservation(h, ptr))) {
    uint32_t cls = h->pages[hl__page_of(h, ptr)].cls;
    hl_tcache *tc = tls_last;
    if (hl_likely(tc && atomic_load_explicit(&tc->heap, memory_order_relaxed) == h &&
                  cls < tc->nclasses && tc->count[cls] < tc->cap)) {
      tc->slots[(size_t)cls * tc->cap + tc->count[cls]++] = ptr;
      owner_inc(&tc->frees);
      return;
    }
    if (cls >= h->nclasses) {
      if (!mode_check(h, "free")) hl__fail(h, HL_EINVAL, "free: %p is not a live block", ptr);
      return;
    }
    free_slow(h, ptr, cls);
    return;
  }
  free_large(h, ptr);
}

void hl_free_sized(hl_heap *h, void *ptr, size_t size) {
  if (!h || !ptr) return;
  if (h->opt.verify) {
    size_t usable = hl_usable_size(h, ptr);
    if (usable && (size > usable || (in_reservation(h, ptr) &&
                                     hl__class_of(h, size) != h->pages[hl__page_of(h, ptr)].cls))) {
      hl__fail(h, HL_EINVAL, "free_sized: %p freed with size %zu but its block holds %zu", ptr,
               size, usable);
      return;
    }
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

/* old_size is the caller's size of the block (Lua passes it exactly; 0 =
 * unknown, as from CPython).  It only shortens the copy: the block's own
 * usable size is what is trusted. */
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
    uint32_t cls = h->pages[hl__page_of(h, ptr)].cls;
    /* verify: a freed or interior pointer is refused, not moved */
    if (cls >= h->nclasses || (h->opt.verify && hl_usable_size(h, ptr) == 0)) {
      hl__fail(h, HL_EINVAL, "realloc: %p is not a live block (freed?)", ptr);
      return NULL;
    }
    usable = h->cls_size[cls];
    if (new_size <= h->small_max && hl__class_of(h, new_size) == cls) return ptr;
  } else {
    pthread_mutex_lock(&h->lock);
    if (!hl__large_contains(h, ptr)) {
      hl__fail(h, HL_EINVAL, "realloc: %p is not a block of this heap", ptr);
      pthread_mutex_unlock(&h->lock);
      return NULL;
    }
    usable = hl__large_of(ptr)->size;
    pthread_mutex_unlock(&h->lock);
  }
  size_t copy = old_size && old_size < usable ? old_size : usable;
  if (copy > new_size) copy = new_size;
  void *q = hl_malloc(h, new_size);
  if (!q) return NULL;
  memcpy(q, ptr, copy);
  hl_free(h, ptr);
  return q;
}

void hl_thread_flush(hl_heap *h) {
  if (!h) return;
  hl_tcache *tc = tls_last;
  if (!tc || atomic_load(&tc->heap) != h) {
    tc = NULL;
    for (hl_tcache *t = tls_list; t; t = t->next_thread)
      if (atomic_load(&t->heap) == h) tc = t;
  }
  if (tc) flush_all(tc, h);
}

void hl__manual_destroy(hl_heap *h) {
  pthread_mutex_lock(&tc_global);
  pthread_mutex_lock(&h->lock);
  while (h->tcaches) detach(h->tcaches, h);
  pthread_mutex_unlock(&h->lock);
  pthread_mutex_unlock(&tc_global);
}

void hl__manual_stats(hl_heap *h, hl_stats *st) {
  for (hl_tcache *tc = h->tcaches; tc; tc = tc->next_heap) {
    st->manual_mallocs += atomic_load_explicit(&tc->mallocs, memory_order_relaxed);
    st->manual_frees += atomic_load_explicit(&tc->frees, memory_order_relaxed);
  }
}
