/* A collected heap makes the system calls of its large objects with the
 * heap lock dropped: while a thread's allocation is inside mmap (an object
 * of large_map_bytes or more, a mapping of its own) or the system
 * allocator's malloc (a smaller one, or large_map_bytes=0), and while a
 * cycle gives a dead object's memory back (munmap, or free), another
 * thread's call that takes the heap lock goes on -- and sees no such block
 * charged (not yet adopted; discharged already).  Before the fixes the
 * allocation (b36192a made each such object an mmap) and the sweep
 * (gc/cycle.c, sweep_large) made these calls under the lock, every other
 * thread of the heap waiting for them.
 *
 * The test is the system: it defines mmap, malloc, munmap and free (the
 * core's calls resolve to them) and holds the call for the block until the
 * other thread's hl_stats_get and allocation have come back, or 5 seconds
 * have passed -- which the test reports as the lock being held.  (Not under
 * the sanitizers: their runtimes intercept these, as manual_large_syscalls_
 * outside_the_lock says.) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>

#include "check.h"
#include "internal.h" /* (hl_large: the record before a large object) */

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);

enum { BIG = 4 << 20 };
static void *_Atomic held; /* the dead block's mapping or system block: its call waits */
static atomic_int alloc_gate; /* 1: hold the next mmap or malloc of BIG bytes or more */
static sem_t inside, done;
static char hold_alloc_token;
#define HOLD_ALLOC ((void *)&hold_alloc_token) /* (held: an allocation's call) */
static atomic_int timed_out, calls_held;

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
static void hold(void *p) {
  if (!p || !atomic_compare_exchange_strong(&held, &p, NULL)) return;
  atomic_fetch_add(&calls_held, 1);
  sem_post(&inside);
  if (!sem_wait_for(&done, 5)) atomic_store(&timed_out, 1);
}

int munmap(void *p, size_t n) {
  hold(p);
  return (int)syscall(SYS_munmap, p, n);
}

void free(void *p) {
  hold(p);
  __libc_free(p);
}

static void hold_alloc(size_t n) {
  if (n >= BIG && atomic_exchange(&alloc_gate, 0)) hold(HOLD_ALLOC);
}

void *mmap(void *addr, size_t n, int prot, int flags, int fd, off_t off) {
  hold_alloc(n);
  return (void *)syscall(SYS_mmap, addr, n, prot, flags, fd, off);
}

void *malloc(size_t n) {
  hold_alloc(n);
  return __libc_malloc(n);
}
#endif

static hl_heap *h;

static void *collect(void *arg) {
  (void)arg;
  OK(h, hl_collect(h, 1, 1));
  return NULL;
}

static void *allocate(void *arg) {
  hl_ref *r = arg;
  OK(h, hl_alloc(h, BIG, 0, r));
  return NULL;
}

/* Calls of another thread that take the heap lock while the cycle is held
 * in the system's call: the stats (the block discharged already) and an
 * allocation. */
static void *other(void *arg) {
  (void)arg;
  hl_stats st;
  OK(h, hl_stats_get(h, &st));
  CHECK(st.large_live_bytes == 0 && st.large_objects == 0,
        "during the system's call: %" PRIu64 " large bytes, %" PRIu64 " objects still charged",
        st.large_live_bytes, st.large_objects);
  hl_ref r = 0;
  OK(h, hl_alloc(h, 64, 0, &r));
  OK(h, hl_ref_release(h, r));
  sem_post(&done);
  return NULL;
}

/* fn(arg) in a thread until it is inside the held system call, then
 * another thread's calls (other), which must come back while it is held:
 * `who` (the allocation, the cycle) does not hold the heap lock around the
 * call that `did` (made, freed) a large object. */
static void held_while_another_calls(void *(*fn)(void *), void *arg, const char *what,
                                     const char *who, const char *did) {
  pthread_t a, b;
  CHECK(pthread_create(&a, NULL, fn, arg) == 0, "thread");
  CHECK(sem_wait_for(&inside, 10), "%s: %s made no system call", what, who);
  CHECK(pthread_create(&b, NULL, other, NULL) == 0, "thread");
  pthread_join(a, NULL);
  CHECK(!atomic_load(&timed_out),
        "%s: another thread's call waited 5 s for the system's call that %s a large object: "
        "%s holds the heap lock around it",
        what, did, who);
  pthread_join(b, NULL);
}

/* The allocation of a BIG object, its system call held. */
static hl_ref allocation(const char *what) {
  hl_ref r = 0;
  atomic_store(&held, HOLD_ALLOC);
  atomic_store(&alloc_gate, 1);
  held_while_another_calls(allocate, &r, what, "the allocation", "made");
  return r;
}

static void scenario(const char *map, const char *what) {
  h = HEAP("mode=collected", map);
  atomic_store(&timed_out, 0);
  atomic_store(&calls_held, 0);
  hl_ref r = allocation(what);
  hl_object_info info;
  OK(h, hl_ref_info(h, r, &info));
  CHECK(info.large, "%s: a %d-byte object is not on the large path", what, BIG);
  OK(h, hl_ref_release(h, r));
  /* the system's block starts at the record before the object (a plain
   * block: no lead), the mapping too */
  atomic_store(&held, (void *)(uintptr_t)(info.object - sizeof(hl_large)));
  held_while_another_calls(collect, NULL, what, "the cycle (the dead object's free)", "freed");
  CHECK(atomic_load(&calls_held) == 2, "%s: %d calls held", what, atomic_load(&calls_held));
  hl_stats st = stats_of(h);
  CHECK(st.large_objects == 0 && st.large_live_bytes == 0,
        "%s: after the cycle %" PRIu64 " objects, %" PRIu64 " bytes", what, st.large_objects,
        st.large_live_bytes);
  check_invariants(h);
  hl_heap_free(h);
}

int main(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return 77; /* skipped */
#endif
  sem_init(&inside, 0, 0);
  sem_init(&done, 0, 0);
  scenario("large_map_bytes=131072", "mmap, munmap (a mapping of its own)");
  scenario("large_map_bytes=0", "malloc, free (a block of the system allocator)");
  puts("ok");
  return 0;
}
