/* A collected heap gives its dead large objects' memory back with the heap
 * lock dropped: while a cycle is inside munmap (a block of large_map_bytes
 * or more, a mapping of its own) or inside the system allocator's free (a
 * smaller one, or large_map_bytes=0), another thread's call that takes the
 * heap lock goes on -- and already sees the block's bytes discharged.
 * Before the fix the sweep freed each dead block under the lock
 * (gc/cycle.c, sweep_large): one munmap per dead object of 128 KiB or more,
 * every other thread of the heap waiting for it.
 *
 * The test is the system: it defines munmap and free (the core's calls
 * resolve to them) and holds the call for the dead block until the other
 * thread's hl_stats_get and allocation have come back, or 5 seconds have
 * passed -- which the test reports as the lock being held.  (Not under the
 * sanitizers: their runtimes intercept both, as manual_large_syscalls_
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

extern void __libc_free(void *);

enum { BIG = 4 << 20 };
static void *_Atomic held; /* the dead block's mapping or system block: its call waits */
static sem_t inside, done;
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
#endif

static hl_heap *h;

static void *collect(void *arg) {
  (void)arg;
  OK(h, hl_collect(h, 1, 1));
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
        "during the free: %" PRIu64 " large bytes, %" PRIu64 " objects still charged",
        st.large_live_bytes, st.large_objects);
  hl_ref r = 0;
  OK(h, hl_alloc(h, 64, 0, &r));
  OK(h, hl_ref_release(h, r));
  sem_post(&done);
  return NULL;
}

static void scenario(const char *map, const char *what) {
  h = HEAP("mode=collected", map);
  hl_ref r = 0;
  OK(h, hl_alloc(h, BIG, 0, &r));
  hl_object_info info;
  OK(h, hl_ref_info(h, r, &info));
  CHECK(info.large, "%s: a %d-byte object is not on the large path", what, BIG);
  OK(h, hl_ref_release(h, r));
  /* the system's block starts at the record before the object (a plain
   * block: no lead), the mapping too */
  atomic_store(&held, (void *)(uintptr_t)(info.object - sizeof(hl_large)));
  atomic_store(&timed_out, 0);
  atomic_store(&calls_held, 0);
  pthread_t a, b;
  CHECK(pthread_create(&a, NULL, collect, NULL) == 0, "thread");
  CHECK(sem_wait_for(&inside, 10), "%s: the dead block was never freed by the cycle", what);
  CHECK(pthread_create(&b, NULL, other, NULL) == 0, "thread");
  pthread_join(a, NULL);
  CHECK(!atomic_load(&timed_out),
        "%s: another thread's call waited 5 s for the system's call that freed a dead large "
        "object: the cycle holds the heap lock around it",
        what);
  pthread_join(b, NULL);
  CHECK(atomic_load(&calls_held) == 1, "%s: %d calls held", what, atomic_load(&calls_held));
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
  scenario("large_map_bytes=131072", "munmap (a mapping of its own)");
  scenario("large_map_bytes=0", "free (a block of the system allocator)");
  puts("ok");
  return 0;
}
