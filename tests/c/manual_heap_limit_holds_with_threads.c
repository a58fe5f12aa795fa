/* heap_limit_bytes holds with threads in the manual mode: 8 threads malloc
 * small (16..512 bytes), medium (1..16 KiB, small_max=16k: the small path's
 * big classes) and large (64 KiB..2 MiB) blocks until the limit refuses one,
 * free them all and go again; a sampler thread reads the charged bytes (the
 * stats' live bytes, under the heap lock) all along.  They never pass the
 * limit, not by a byte: a refill takes no more blocks than the room the
 * limit leaves, and a large block is tested and charged in one visit, so
 * nothing a thread does alone goes past it -- any byte over is another
 * thread's test passed on bytes not charged yet (the collected mode's
 * overshoot, session 30: tests/c/heap_limit_holds_with_threads.c).
 *
 * The manual small refill drops the heap lock inside its loop when the page
 * it takes needs a system call: a released page's restore under
 * dump_toggle (MADV_DODUMP), a fresh 2 MiB chunk's populate under
 * thp=populate.  Each variant runs; in the default one nothing drops the
 * lock (a guard). */
#include <pthread.h>
#include <stdatomic.h>

#include "check.h"

#define NT 8
#define LIMIT (64u << 20)
#define MAXB 200000

static hl_heap *heap;
static pthread_barrier_t round_start;
static _Atomic int running;
static int rounds;
static uint64_t at_rest_most, at_rest_least; /* (thread 0's, between two barriers) */

/* the sizes: small, medium and large in turn, varied */
static size_t size_at(uint64_t *x, unsigned i) {
  uint64_t r = xorshift64(x);
  switch (i % 8) {
  case 0: case 1: case 2: case 3: return 16 + r % 497;                /* small */
  case 4: case 5: case 6: return 1024 + r % (15 * 1024 + 1);          /* medium */
  default: return (64u << 10) + r % ((2u << 20) - (64u << 10));      /* large */
  }
}

static void *thread_main(void *arg) {
  uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)((uintptr_t)arg + 1);
  void **blocks = malloc(MAXB * sizeof *blocks);
  CHECK(blocks, "no memory for the test");
  for (int round = 0; round < rounds; round++) {
    pthread_barrier_wait(&round_start);
    unsigned n = 0;
    for (unsigned i = 0; n < MAXB; i++) {
      void *p = hl_malloc(heap, size_at(&x, i));
      if (!p) break;
      blocks[n++] = p;
    }
    CHECK(n < MAXB, "%u blocks and no refusal under a %u-byte limit", n, LIMIT);
    CHECK(strstr(hl_heap_error(heap), "heap_limit_bytes"), "refused for another reason: %s",
          hl_heap_error(heap));
    /* every thread refused: the charged bytes then (the sampler may not
     * have run at the peak on a loaded machine); no frees before the next
     * round, whose refills restore the pages these frees release */
    pthread_barrier_wait(&round_start);
    if (arg == 0) {
      hl_stats st = stats_of(heap);
      uint64_t live = st.small_live_bytes + st.large_live_bytes;
      if (live > at_rest_most) at_rest_most = live;
      if (live < at_rest_least) at_rest_least = live;
    }
    pthread_barrier_wait(&round_start);
    for (unsigned i = 0; i < n; i++) hl_free(heap, blocks[i]);
    hl_thread_flush(heap);
  }
  free(blocks);
  return NULL;
}

/* the charged bytes as the stats read them (under the heap lock), the most seen */
static void *sampler(void *arg) {
  uint64_t *most = arg;
  while (atomic_load(&running)) {
    hl_stats s = stats_of(heap);
    uint64_t live = s.small_live_bytes + s.large_live_bytes;
    if (live > *most) *most = live;
  }
  return NULL;
}

static void race(const char *variant, int n_rounds) {
  uint64_t sampled = 0;
  rounds = n_rounds;
  at_rest_most = 0;
  at_rest_least = UINT64_MAX;
  heap = HEAP("mode=manual", "heap_limit_bytes=64m", "reserve_bytes=1g", "small_max=16k",
              "warm_pages=0", variant);
  pthread_barrier_init(&round_start, NULL, NT);
  atomic_store(&running, 1);
  pthread_t t[NT], s;
  pthread_create(&s, NULL, sampler, &sampled);
  for (int i = 0; i < NT; i++) pthread_create(&t[i], NULL, thread_main, (void *)(uintptr_t)i);
  for (int i = 0; i < NT; i++) pthread_join(t[i], NULL);
  atomic_store(&running, 0);
  pthread_join(s, NULL);
  hl_stats st = stats_of(heap);
  check_invariants(heap);
  printf("%-14s most charged %" PRIu64 " bytes sampled (%+.3f MiB of the limit), %" PRIu64
         "..%" PRIu64 " with every thread refused; restores %" PRIu64
         ", thp chunks populated %" PRIu64 "\n", variant, sampled,
         ((double)sampled - LIMIT) / MiB, at_rest_least, at_rest_most, st.restore_calls,
         st.thp_populated_chunks);
  CHECK(sampled <= LIMIT, "%s: %" PRIu64 " bytes charged while the threads ran, %" PRIu64
        " over a %u-byte limit", variant, sampled, sampled - LIMIT, LIMIT);
  CHECK(at_rest_most <= LIMIT, "%s: %" PRIu64 " bytes charged with every thread refused, %"
        PRIu64 " over a %u-byte limit", variant, at_rest_most, at_rest_most - LIMIT, LIMIT);
  /* and the limit is reached, not kept far off: each thread was refused a
   * block of at most 2 MiB */
  CHECK(at_rest_least + (2u << 20) + (64u << 10) > LIMIT,
        "%s: refused at %" PRIu64 " bytes charged", variant, at_rest_least);
  hl_heap_free(heap);
  pthread_barrier_destroy(&round_start);
}

int main(void) {
  race("dump_toggle=0", TSAN_FEWER(10));
  race("dump_toggle=1", TSAN_FEWER(100));
  race("thp=populate", TSAN_FEWER(10));
  printf("manual_heap_limit_holds_with_threads: ok\n");
  return 0;
}
