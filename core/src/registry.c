/*
 * registry.c -- the process-wide list of heaps, both modes.  It serves:
 *
 *   the write barrier  hl_obj_set names no heap: the registry finds the
 *                      heap (generational or tenuring) whose reservation holds
 *                      the object
 *                      (gc/barrier.c)
 *   fork()             atfork handlers take every heap's locks (after the
 *                      manual mode's thread-cache lock): the heap lock, the
 *                      collector's request lock and the error lock, then the
 *                      samplers' locks (sampler.c), so that a
 *                      child never inherits a lock held by a thread that
 *                      does not exist in it, and wait for a trim advising
 *                      outside the lock to publish its pages first, and for
 *                      a manual realloc of a large block outside the lock to
 *                      put it back.  In the
 *                      child, the condition variables are made anew (their
 *                      waiters did not come along) and a background
 *                      collector, whose thread did not either, is started
 *                      again at its next request (gc/collector.c).
 *
 * Lock order, everywhere: the thread caches' global lock (manual.c), then
 * the registry, then a heap's lock, then the samplers' (sampler.c).  A thread holding a heap (hl_enter) may
 * still wait for the others: so the thread caches' lock is held only while
 * heap locks are tried (manual.c, tc_global_and), and fork_prepare waits
 * for a heap lock a few ms at most before it lets go of all (below).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct heap_range {
  const uint8_t *lo, *hi;
  hl_heap *heap;
} heap_range;

static pthread_rwlock_t registry_lock = PTHREAD_RWLOCK_INITIALIZER;
/* In address order, the highest first (reservations do not overlap; the
 * kernel maps each new one below the last, so a new heap's is appended). */
static heap_range *registry;
static uint32_t registry_n, registry_cap;
/* Bit t: a live heap has handle tag t.  A new heap's tag was found by
 * reading every live heap's (a cache miss each, under the write lock): with
 * 20,000 heaps live hl_heap_new took 0.7 ms, 80% of it there (perf), 61,311
 * heaps were made in 105 s, and with 65,535 live the next one read them
 * 65,535 times over before it failed -- hours.  (The many-heaps hunt of
 * the C API, session 36.) */
static uint64_t tags_used[65536 / 64];

static bool tag_used(uint16_t t) { return tags_used[t / 64] >> (t % 64) & 1; }

/* The index of the first range that begins at or below a (registry_n if
 * none).  Registry lock held. */
static uint32_t first_at_or_below(const uint8_t *a) {
  uint32_t lo = 0, hi = registry_n;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (registry[mid].lo > a) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
static _Atomic uint32_t barrier_heaps;      /* hl__barrier_on: generational or tenuring */
static _Atomic uint32_t generational_heaps; /* of them, generational */
_Atomic uint32_t hl__verify_heaps;         /* verify=true: hl_obj_set checks its value */
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

/* How long fork_prepare waits for one heap's lock before it lets go of all
 * it took and starts again, and how long it backs off then (doubling up to
 * FORK_BACKOFF_MAX_US). */
#define FORK_LOCK_WAIT_NS ((uint64_t)5 * 1000 * 1000)
#define FORK_BACKOFF_US 200
#define FORK_BACKOFF_MAX_US 10000

/* Heap h's locks for fork: false, holding none of them, when another
 * thread kept its heap lock past FORK_LOCK_WAIT_NS. */
static bool fork_take(hl_heap *h) {
  if (hl__held != h) { /* (this thread may hold it: hl_enter) */
    hl__reentry_check("fork()"); /* (from a handler that interrupted the heap: retried for ever) */
    if (prim_mutex_lock_within(&h->lock, FORK_LOCK_WAIT_NS)) return false;
    hl__owner_set(h);
    /* a trim advising outside the lock must finish first: in the child it
     * would never publish its pages; and so must a manual realloc of a
     * large block: the child would keep it detached, out of the heap's
     * list and set -- its free there handed to the system allocator as a
     * foreign pointer, its bytes counted for good.  (Those need nothing
     * fork holds but this heap's lock, which the wait lets go of.) */
    while (h->in_cycle || h->large_moving) hl__wait(h, &h->cycle_done);
  }
  pthread_mutex_lock(&h->req_lock);
  pthread_mutex_lock(&h->errlock);
  return true;
}

/* Release what fork_take took of the first n heaps, the last first. */
static void fork_release(uint32_t n) {
  for (uint32_t i = n; i-- > 0;) {
    hl_heap *h = registry[i].heap;
    pthread_mutex_unlock(&h->errlock);
    pthread_mutex_unlock(&h->req_lock);
    if (hl__held != h) hl__unlock_raw(h);
  }
}

/* Every heap's locks, in the registry's order.  A thread may hold one heap
 * (hl_enter) and lock another per call, or make or free a heap (the
 * registry's write lock), or make its first thread cache (tc_global) --
 * heaplab.h allows it.  Taking them all with plain waits, fork waited for
 * the heap that thread holds while holding the lock that thread waited for:
 * both hung for ever (the embedding hunt, session 28).  So a heap lock is
 * waited for FORK_LOCK_WAIT_NS at most: then everything taken goes back --
 * that thread goes on and lets go of its heap in time -- and after a short
 * backoff the fork starts over.  Ordinary contention (a call of a few
 * microseconds, a cycle shorter than the wait) still resolves by waiting; a
 * heap held longer (hl_enter, a long cycle) is retried for, every 10 ms at
 * most, until it is let go. */
static void fork_prepare(void) {
  for (uint64_t backoff = FORK_BACKOFF_US;; ) {
    hl__manual_fork_prepare();
    pthread_rwlock_rdlock(&registry_lock);
    uint32_t i = 0;
    while (i < registry_n && fork_take(registry[i].heap)) i++;
    if (i == registry_n) {
      hl__sampler_fork_prepare(); /* (after the heaps: sampler.c) */
      return;
    }
    fork_release(i);
    pthread_rwlock_unlock(&registry_lock);
    hl__manual_fork_done();
    hl__prim_sleep_us((int64_t)backoff);
    backoff = backoff * 2 < FORK_BACKOFF_MAX_US ? backoff * 2 : FORK_BACKOFF_MAX_US;
  }
}

static void fork_parent(void) {
  hl__sampler_fork_parent();
  fork_release(registry_n);
  pthread_rwlock_unlock(&registry_lock);
  hl__manual_fork_done();
}

static void fork_child(void) {
  hl__sampler_fork_child();
  for (uint32_t i = registry_n; i-- > 0;) {
    hl_heap *h = registry[i].heap;
    pthread_mutex_unlock(&h->errlock);
    pthread_mutex_unlock(&h->req_lock);
    pthread_cond_init(&h->cycle_done, NULL);
    pthread_cond_init(&h->collector_cv, NULL);
    /* the collector thread stayed in the parent: it is started again when
     * a cycle is next requested */
    h->collector_running = false;
    h->collector_stop = false;
    atomic_store(&h->collector_waiting, false);
    atomic_store(&h->cycle_requested, false);
    atomic_store(&h->cycle_reasons, 0u);
    /* a fill's prefault helper (thp_prefault) stayed in the parent too, and
     * its mutex may have been held there: the child's allocations fault
     * their chunks in themselves */
    h->prefault = NULL;
    /* and so did the calls other threads were making: fork_prepare took the
     * lock where such a call had dropped it (a fill, or any allocation,
     * while the kernel faults in or restores the page it took): its hold on
     * moving objects, its bulk flag and that empty page, in flight, would
     * stay for the child's life -- compaction blocked, every later page
     * faulted in ahead, the page never used nor released.  (This thread
     * makes no heaplab call: it is in fork().) */
    h->nomove = 0;
    h->bulk = false;
    h->limit_pending = 0; /* (their bytes held under heap_limit_bytes too) */
#ifdef HL_PRELOAD
    /* a child inherits no memory lock, mlockall(MCL_FUTURE)'s neither */
    h->lock_carved = 0;
#endif
    if (h->state_count[PS_IN_FLIGHT]) hl__pages_orphaned(h);
    if (hl__held != h) hl__unlock_raw(h);
  }
  /* made anew, not unlocked: a thread that was waiting to write it (making
   * or freeing a heap) at the fork is glibc's primary writer, and the last
   * read unlock hands the lock to it -- a thread the child does not have:
   * its next hl_heap_new waited for ever.  The registry itself is whole:
   * fork_prepare held the lock. */
  pthread_rwlock_init(&registry_lock, NULL);
  hl__manual_fork_done();
}

/* Set, in the registering thread only, before pthread_atfork is called:
 * were it to malloc (past glibc's inline list of handlers), the preloaded
 * library's heap set up there would call hl__registry_add inside this
 * pthread_once -- in the same thread, a deadlock.  Every other thread waits
 * in pthread_once until the handlers exist.  (The flag was the process's: a
 * second thread making its first heap meanwhile skipped the wait and took
 * the registry's lock before any handler existed, and a fork() then left
 * the child that lock held for good -- its first hl_heap_new waited for
 * ever: fork_while_heaps_come_and_go, 1 of ~35 runs, session 26.) */
/* (volatile: with hidden visibility the compiler takes it that
 * pthread_atfork cannot call back into this library and drops the store of
 * true as dead -- objdump showed fork_init storing only the false) */
static _Thread_local volatile bool fork_registering;
static void fork_init(void) {
  fork_registering = true;
  pthread_atfork(fork_prepare, fork_parent, fork_child);
  fork_registering = false;
}

void hl__registry_fork_handlers(void) {
  if (!fork_registering) pthread_once(&fork_once, fork_init);
}

int hl__registry_add(hl_heap *h) {
  hl__registry_fork_handlers();
  int rc = HL_OK;
  pthread_rwlock_wrlock(&registry_lock);
  if (registry_n == registry_cap) {
    uint32_t cap = registry_cap ? registry_cap * 2 : 8;
    heap_range *n = hl__sys_realloc(registry, cap * sizeof *n);
    if (!n) rc = HL_ENOMEM;
    else registry = n, registry_cap = cap;
  }
  if (!rc) {
    /* A tag (the top 16 bits of a handle) no live heap has: the serial's
     * low 16 bits repeated every 65,536 heaps, and a new heap took a live
     * one's handles for its own (reading one gave the new heap's object).
     * The next free one from there; 65,535 live heaps is the most there can
     * be.  (A handle of a heap freed long ago may still match a new heap's
     * tag: its index and generation decide, as for a released handle.) */
    uint16_t tag = h->tag;
    for (uint32_t tries = 0;; tries++) {
      if (!tag_used(tag)) break;
      if (tries == 0xffff) {
        rc = HL_ENOMEM;
        break;
      }
      tag = (uint16_t)(tag + 1) ? (uint16_t)(tag + 1) : 1;
    }
    h->tag = tag;
  }
  if (!rc) {
    tags_used[h->tag / 64] |= (uint64_t)1 << (h->tag % 64);
    /* in address order: the barrier's lookup (hl__registry_find_locked) is
     * a binary search */
    uint32_t at = first_at_or_below(h->base);
    memmove(&registry[at + 1], &registry[at], (registry_n - at) * sizeof *registry);
    registry[at] = (heap_range){h->base, h->base + h->reserved, h};
    registry_n++;
    if (hl__barrier_on(h)) atomic_fetch_add(&barrier_heaps, 1);
    if (h->opt.generational) atomic_fetch_add(&generational_heaps, 1);
    if (h->opt.verify) atomic_fetch_add(&hl__verify_heaps, 1);
  }
  pthread_rwlock_unlock(&registry_lock);
  return rc;
}

void hl__registry_remove(hl_heap *h) {
  pthread_rwlock_wrlock(&registry_lock);
  uint32_t i = first_at_or_below(h->base);
  if (i < registry_n && registry[i].heap == h) { /* (not there: its hl_heap_new failed) */
    memmove(&registry[i], &registry[i + 1], (registry_n - i - 1) * sizeof *registry);
    registry_n--;
    tags_used[h->tag / 64] &= ~((uint64_t)1 << (h->tag % 64));
    if (hl__barrier_on(h)) atomic_fetch_sub(&barrier_heaps, 1);
    if (h->opt.generational) atomic_fetch_sub(&generational_heaps, 1);
    if (h->opt.verify) atomic_fetch_sub(&hl__verify_heaps, 1);
  }
  if (!registry_n) { /* nothing outlives the last heap (a module may be unloaded) */
    hl__sys_free(registry);
    registry = NULL;
    registry_cap = 0;
    hl__mark_arena_release(); /* (under the lock: no heap is made meanwhile) */
  }
  pthread_rwlock_unlock(&registry_lock);
}

uint32_t hl__registry_barriers(void) {
  return atomic_load_explicit(&barrier_heaps, memory_order_relaxed);
}

uint32_t hl__registry_generational(void) {
  return atomic_load_explicit(&generational_heaps, memory_order_relaxed);
}


hl_heap *hl__registry_find_locked(const void *addr) {
  const uint8_t *a = addr;
  pthread_rwlock_rdlock(&registry_lock);
  /* (a binary search: it was a walk of every heap's range, in the order
   * they were made -- each store into an old object of a heap made after
   * 10,000 others cost 3.0 us instead of 19 ns) */
  uint32_t i = first_at_or_below(a);
  return i < registry_n && a < registry[i].hi ? registry[i].heap : NULL;
}

void hl__registry_unlock(void) { pthread_rwlock_unlock(&registry_lock); }

/* Every thread heaplab starts -- parallel marking's helpers, a sampler's, a
 * background collector's, the huge-page prefault helper -- runs heaplab's code
 * and may outlive what loaded it: lua_close dlcloses the Lua module, and a
 * heap or sampler made by a finalizer that runs during lua_close is never
 * finalized (Lua 5.4 does not finalize objects made while a state closes), so
 * its thread would go on in unmapped code (SIGSEGV at exit, or at once in a
 * program that embeds Lua and goes on).  The first such thread pins the
 * object this file is linked into (dlopen RTLD_NODELETE); an executable or
 * the preloaded library is never unloaded anyway.  So does whatever else
 * leaves this code in process-wide hands: the thread caches' key destructor
 * (manual.c), an interrupt's signal handler (hl_interrupt_attach).  (Not in the preloaded library, linked -z nodelete: a thread's
 * first cache pins from inside malloc, and dlopen there could call malloc
 * again.) */
#ifndef HL_PRELOAD
static pthread_once_t pin_once = PTHREAD_ONCE_INIT;

static void pin(void) {
  Dl_info di;
  if (dladdr((void *)hl__pin_code, &di) && di.dli_fname)
    (void)dlopen(di.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

void hl__pin_code(void) { pthread_once(&pin_once, pin); }
#else
void hl__pin_code(void) {}
#endif
