/* manual_mallocs is a cumulative count, derived when the stats are read
 * from each thread cache's counts (the blocks refills took + frees - the
 * blocks flushed - the blocks cached now), which the cache's thread changes
 * without the heap lock.  Read while two threads malloc and free, it never
 * goes down and is never below manual_frees (manual_mallocs - manual_frees
 * would wrap); once the threads are gone, manual_mallocs - manual_frees is
 * exactly the blocks left live: no read raised it for good.  (A free pushed
 * the block -- the bin's count -- before it counted the free -- the
 * cache's clock --, and the stats read the counts before the clock: a read
 * between the two under-counted by one, the next one was right again, and
 * manual_mallocs went 10452 -> 10450.) */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "check.h"

#define WORKERS 2
#define KEEP 64 /* the most blocks a worker leaves live */

static hl_heap *H;
static atomic_int running, stop, live;

/* the poller's time: a read lands between a free's two writes a few times
 * a second (1 run in 5 of 0.1 s caught one) */
#define SECONDS 2.0

static void *churn(void *arg) {
  unsigned seed = 77u + (unsigned)(uintptr_t)arg;
  static const size_t sizes[] = {16, 32, 48, 96, 256};
  void *held[256] = {0};
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    seed = seed * 1103515245u + 12345u;
    unsigned r = seed >> 16;
    size_t n = sizes[r % 5];
    if (r & 0x100) {
      /* a malloc and its free at once: a pop and a push of one class */
      void *p = hl_malloc(H, n);
      CHECK(p, "hl_malloc(%zu): %s", n, hl_heap_error(H));
      hl_free_sized(H, p, n);
    } else {
      /* one of a few held blocks replaced: the bins go up and down */
      unsigned k = (r >> 9) % 256;
      if (held[k]) hl_free(H, held[k]);
      held[k] = hl_malloc(H, n);
      CHECK(held[k], "hl_malloc(%zu): %s", n, hl_heap_error(H));
    }
  }
  /* at most KEEP blocks stay live (the final count says how many), the
   * rest go */
  int kept = 0;
  for (int k = 0; k < 256; k++) {
    if (!held[k]) continue;
    if (kept < KEEP) kept++;
    else hl_free(H, held[k]);
  }
  atomic_fetch_add(&live, kept);
  atomic_fetch_sub(&running, 1);
  return NULL;
}

int main(void) {
  H = HEAP("mode=manual");
  pthread_t t[WORKERS];
  atomic_store(&running, WORKERS);
  for (long i = 0; i < WORKERS; i++) CHECK(pthread_create(&t[i], NULL, churn, (void *)i) == 0, "pthread_create");
  hl_stats prev = {0};
  long polls = 0;
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((double)(now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) * 1e-9 > SECONDS) break;
    hl_stats s = stats_of(H);
    polls++;
    CHECK(s.manual_mallocs >= prev.manual_mallocs, "poll %ld: manual_mallocs went down: %" PRIu64 " -> %" PRIu64,
          polls, prev.manual_mallocs, s.manual_mallocs);
    CHECK(s.manual_frees >= prev.manual_frees, "poll %ld: manual_frees went down: %" PRIu64 " -> %" PRIu64,
          polls, prev.manual_frees, s.manual_frees);
    CHECK(s.manual_mallocs >= s.manual_frees, "poll %ld: manual_mallocs %" PRIu64 " < manual_frees %" PRIu64,
          polls, s.manual_mallocs, s.manual_frees);
    prev = s;
  }
  atomic_store(&stop, 1);
  while (atomic_load(&running) > 0) {
    hl_stats s = stats_of(H);
    CHECK(s.manual_mallocs >= prev.manual_mallocs && s.manual_mallocs >= s.manual_frees,
          "as the threads stop: manual_mallocs %" PRIu64 " (before %" PRIu64 "), manual_frees %" PRIu64,
          s.manual_mallocs, prev.manual_mallocs, s.manual_frees);
    prev = s;
  }
  for (int i = 0; i < WORKERS; i++) pthread_join(t[i], NULL);
  /* the threads are gone, their caches' counts kept by the heap: exact */
  hl_stats s = stats_of(H);
  CHECK(s.manual_mallocs >= prev.manual_mallocs, "after the joins: manual_mallocs went down: %" PRIu64 " -> %" PRIu64,
        prev.manual_mallocs, s.manual_mallocs);
  CHECK(s.manual_mallocs - s.manual_frees == (uint64_t)atomic_load(&live),
        "after the joins: manual_mallocs %" PRIu64 " - manual_frees %" PRIu64 " = %" PRId64 ", %d blocks are live",
        s.manual_mallocs, s.manual_frees, (int64_t)(s.manual_mallocs - s.manual_frees), atomic_load(&live));
  printf("%ld polls, manual_mallocs %" PRIu64 ", manual_frees %" PRIu64 "\n", polls, s.manual_mallocs, s.manual_frees);
  hl_heap_free(H);
  return 0;
}
