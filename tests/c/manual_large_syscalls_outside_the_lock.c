/* A manual heap calls the system allocator for its large blocks outside
 * the heap lock: while one thread is inside malloc (or realloc) for a large
 * block -- an mmap, page faults, glibc's own arena lock -- another thread's
 * refill, which takes the heap lock, goes on.  Before the fix the large path
 * ran the system allocator under the heap lock, and every other thread of a
 * preloaded program waited for it (8 threads, 4 churning small blocks and 2
 * churning 1-3 MiB blocks: the small ones took 2-3x as long).
 *
 * The test is the system allocator: it defines malloc, realloc and free
 * (the core's calls resolve to them) and holds a large block's call until
 * the other thread's small allocation has come back, or 5 seconds have
 * passed -- which the test reports as the lock being held.  (Not under
 * the sanitizers: their allocators replace glibc's, and a malloc defined
 * here would hand them blocks they never made.) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <time.h>

#include "check.h"
#include "internal.h" /* (hl__large_of: the system block free is called with) */

extern void *__libc_malloc(size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

enum { BIG = 4 << 20 };
static atomic_int gate; /* 1: hold the next large malloc or realloc, or the free of held_free */
static void *_Atomic held_free;
static sem_t inside, done;
static atomic_int timed_out;

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
static void hold(bool big) {
  if (!big || !atomic_exchange(&gate, 0)) return;
  sem_post(&inside);
  if (!sem_wait_for(&done, 5)) atomic_store(&timed_out, 1);
}

void *malloc(size_t n) {
  hold(n >= BIG);
  return __libc_malloc(n);
}

void *realloc(void *p, size_t n) {
  hold(n >= BIG);
  return __libc_realloc(p, n);
}

void free(void *p) {
  hold(p && p == atomic_load(&held_free));
  __libc_free(p);
}
#endif

static hl_heap *h;
static void *big;

static void *large_malloc(void *arg) {
  (void)arg;
  big = hl_malloc(h, BIG);
  return NULL;
}

static void *large_realloc(void *arg) {
  (void)arg;
  big = hl_realloc(h, big, 0, 2 * BIG);
  return NULL;
}

static void *large_free(void *arg) {
  (void)arg;
  hl_free(h, big);
  big = NULL;
  return NULL;
}

/* Another thread's small block of a class nobody used yet (a refill, under
 * the heap lock), while the first is held inside the system allocator. */
static void *small(void *arg) {
  size_t n = (size_t)(uintptr_t)arg;
  void *p = hl_malloc(h, n);
  CHECK(p, "small malloc: %s", hl_heap_error(h));
  hl_free(h, p);
  sem_post(&done);
  return NULL;
}

static void scenario(void *(*large)(void *), size_t small_size, const char *what) {
  pthread_t a, b;
  atomic_store(&timed_out, 0);
  atomic_store(&gate, 1);
  CHECK(pthread_create(&a, NULL, large, NULL) == 0, "thread");
  sem_wait(&inside);
  CHECK(pthread_create(&b, NULL, small, (void *)(uintptr_t)small_size) == 0, "thread");
  pthread_join(a, NULL);
  CHECK(!atomic_load(&timed_out),
        "%s: a small malloc in another thread waited 5 s for the system allocator: the "
        "heap lock is held around it",
        what);
  pthread_join(b, NULL);
}

int main(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return 77; /* skipped */
#endif
  sem_init(&inside, 0, 0);
  sem_init(&done, 0, 0);
  h = HEAP("mode=manual");
  scenario(large_malloc, 48, "malloc");
  CHECK(big, "malloc: %s", hl_heap_error(h));
  memset(big, 5, BIG);
  scenario(large_realloc, 80, "realloc");
  CHECK(big, "realloc: %s", hl_heap_error(h));
  CHECK(hl_usable_size(h, big) >= 2 * BIG, "realloc: usable %zu", hl_usable_size(h, big));
  for (size_t i = 0; i < BIG; i += 4096) CHECK(((char *)big)[i] == 5, "byte %zu lost", i);
  /* the accounting: one large block, charged at its usable size */
  hl_stats st;
  OK(h, hl_stats_get(h, &st));
  CHECK(st.large_objects == 1 && st.large_live_bytes == hl_usable_size(h, big),
        "large_objects %" PRIu64 ", large_live_bytes %" PRIu64 " for one block of %zu",
        st.large_objects, st.large_live_bytes, hl_usable_size(h, big));
  atomic_store(&held_free, (void *)hl__large_of(big)); /* (a plain block: no lead) */
  scenario(large_free, 112, "free");
  OK(h, hl_stats_get(h, &st));
  CHECK(st.large_objects == 0 && st.large_live_bytes == 0, "after free: %" PRIu64 " objects, %" PRIu64
        " bytes", st.large_objects, st.large_live_bytes);
  OK(h, hl_heap_check(h));
  hl_heap_free(h);
  puts("ok");
  return 0;
}
