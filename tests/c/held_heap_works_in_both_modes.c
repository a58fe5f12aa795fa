/* hl_enter holds a heap for a stretch of calls in either mode.  On a manual
 * heap the calls used to take the raw mutex hl_enter already held, and
 * `hl_enter(h); hl_malloc(h, 64);` hung forever; now every path locks
 * through the one helper, which takes nothing when the thread holds the
 * heap.  A watchdog thread fails the test if any call here does not return
 * within a second.  Run under ThreadSanitizer too (suite threads): another
 * thread allocates from the same heaps meanwhile, held and not held. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static _Atomic int step;        /* progress, for the watchdog */
static bool done;               /* (under done_mu) */
static pthread_mutex_t done_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cv;  /* (CLOCK_MONOTONIC) */

/* Looks once a second; told at once when the work is done (it slept its
 * whole second after the last step: the test took 1 s, three times in make
 * test -- plain, ASan, TSan -- for some 0.1 s of work). */
static void *watchdog(void *arg) {
  (void)arg;
  int last = -1;
  struct timespec at;
  clock_gettime(CLOCK_MONOTONIC, &at);
  pthread_mutex_lock(&done_mu);
  for (;;) {
    at.tv_sec++;
    while (!done && pthread_cond_timedwait(&done_cv, &done_mu, &at) != ETIMEDOUT) {
    }
    if (done) break;
    int s = step;
    CHECK(s != last, "no progress for a second at step %d: a call on a held heap hangs", s);
    last = s;
  }
  pthread_mutex_unlock(&done_mu);
  return NULL;
}

static void *other_thread(void *arg) {
  hl_heap *h = arg;
  for (int i = 0; i < 2000; i++) {
    void *p = hl_malloc(h, 16 + (size_t)(i % 900));
    CHECK(p, "malloc from another thread: %s", hl_heap_error(h));
    hl_free(h, p);
  }
  return NULL;
}

static void manual_held(void) {
  hl_heap *h = HEAP("mode=manual", "reserve_bytes=64m", "warm_pages=0");
  pthread_t t;
  CHECK(pthread_create(&t, NULL, other_thread, h) == 0, "pthread_create");
  for (int round = 0; round < 50; round++) {
    hl_enter(h);
    hl_enter(h); /* nests */
    void *small = hl_malloc(h, 64);
    CHECK(small, "held malloc: %s", hl_heap_error(h));
    memset(small, 0x5a, 64);
    void *large = hl_malloc(h, 100000);
    CHECK(large, "held large malloc: %s", hl_heap_error(h));
    void *grown = hl_realloc(h, small, 64, 4000);
    CHECK(grown && ((unsigned char *)grown)[63] == 0x5a, "held realloc keeps the contents");
    void *zeros = hl_calloc(h, 10, 10);
    CHECK(zeros && ((unsigned char *)zeros)[99] == 0, "held calloc");
    CHECK(hl_usable_size(h, large) >= 100000, "held usable size");
    hl_free(h, zeros);
    hl_free_sized(h, grown, 4000);
    hl_free(h, large);
    hl_thread_flush(h);
    OK(h, hl_trim(h));
    hl_stats s;
    OK(h, hl_stats_get(h, &s));
    hl_leave(h);
    hl_leave(h);
    step++;
  }
  pthread_join(t, NULL);
  OK(h, hl_heap_check(h));
  hl_heap_free(h);
}

static void collected_held(void) {
  hl_heap *h = HEAP("reserve_bytes=64m", "gc_trigger_bytes=64k", "gc_trigger_min_bytes=64k");
  void *root[1] = {NULL};
  OK(h, hl_roots_add(h, root, 1, 0));
  for (int round = 0; round < 50; round++) {
    hl_enter(h);
    root[0] = hl_obj_new(h, 8, 2);
    CHECK(root[0], "held obj_new: %s", hl_heap_error(h));
    for (int i = 0; i < 2000; i++) /* enough for cycles to run inline */
      CHECK(hl_obj_new_in(h, root[0], (uint64_t)(i & 1), 48, 1), "held obj_new_in");
    hl_ref r;
    OK(h, hl_alloc(h, 100000, 0, &r));
    OK(h, hl_collect(h, 1, -1));
    OK(h, hl_ref_release(h, r));
    hl_leave(h);
    step++;
  }
  OK(h, hl_heap_check(h));
  hl_heap_free(h);
}

int main(void) {
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  CHECK(pthread_cond_init(&done_cv, &ca) == 0, "pthread_cond_init");
  pthread_t w;
  CHECK(pthread_create(&w, NULL, watchdog, NULL) == 0, "pthread_create");
  manual_held();
  collected_held();
  pthread_mutex_lock(&done_mu);
  done = true;
  pthread_cond_signal(&done_cv);
  pthread_mutex_unlock(&done_mu);
  pthread_join(w, NULL);
  return 0;
}
