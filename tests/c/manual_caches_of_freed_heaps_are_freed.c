/* A manual heap's thread caches go when the heap does: the closing
 * thread's at once, another thread's at its next slow path (a refill, a
 * flush, a switch of heap) or its exit; a thread finds its cache of any of
 * many heaps without walking them all.
 *
 * Why: each thread kept its caches (about 292 KiB each) on a list that
 * closing a heap only detached them from; they stayed until the thread
 * exited -- 10,000 heaps made and freed by one thread kept 2.99 GB of
 * glibc's mapped blocks and 10,029 VMAs -- and the list was searched on every
 * switch of heap: a malloc and free round robin over 3,000 heaps took 99 us
 * (14 ns over 10).  The scale hunt, session 28.
 *
 * The count of thread caches alive in the process (hl__tcaches_alive,
 * manual.c; declared here, this test links the static library) after:
 * HEAPS heaps made, used round robin ROUNDS times from this thread (one
 * cache each; every block comes back intact), and freed -- at most one is
 * left (a thread keeps one detached cache for its next heap); a second
 * thread that made caches on HEAPS heaps this thread then frees, after its
 * next malloc on a heap of its own -- its detached caches are freed there
 * (one kept); after it exits -- none of its caches.  Suite threads: under
 * ThreadSanitizer too, with a third of the heaps.  Checked: before the fix
 * (the old manual.c, with the same count kept) this test failed -- HEAPS
 * caches were still alive after every heap was freed. */
#include <pthread.h>

#include "check.h"

uint64_t hl__tcaches_alive(void);

enum { ROUNDS = 3 };
static int heaps_n;
static hl_heap **hs;
static sem_t made, freed;

static hl_heap *manual_heap(void) {
  return HEAP("mode=manual", "reserve_bytes=16777216", "warm_pages=0");
}

/* malloc and free on every heap, ROUNDS times round robin; the blocks of a
 * round stay until its end, each stamped with its heap's index */
static void use_all(void) {
  void **b = malloc((size_t)heaps_n * sizeof *b);
  CHECK(b, "malloc");
  for (int r = 0; r < ROUNDS; r++) {
    for (int i = 0; i < heaps_n; i++) {
      b[i] = hl_malloc(hs[i], 48);
      CHECK(b[i], "malloc on heap %d: %s", i, hl_heap_error(hs[i]));
      memset(b[i], (unsigned char)i, 48);
    }
    for (int i = 0; i < heaps_n; i++) {
      for (int k = 0; k < 48; k++)
        CHECK(((unsigned char *)b[i])[k] == (unsigned char)i, "block of heap %d damaged", i);
      hl_free(hs[i], b[i]);
    }
  }
  free(b);
}

static void *other_thread(void *arg) {
  (void)arg;
  use_all();
  sem_post(&made);
  CHECK(sem_wait_for(&freed, 120), "the heaps were not freed");
  uint64_t before = hl__tcaches_alive();
  hl_heap *own = manual_heap();
  void *p = hl_malloc(own, 32); /* a slow path: the detached caches go */
  CHECK(p, "malloc: %s", hl_heap_error(own));
  uint64_t after = hl__tcaches_alive();
  printf("the other thread: %" PRIu64 " caches alive before its next malloc, %" PRIu64
         " after\n", before, after);
  CHECK(before >= (uint64_t)heaps_n, "only %" PRIu64 " caches alive before: the test made none",
        before);
  /* this thread's spare (reused for `own`), the main thread's spare */
  CHECK(after <= 2, "%" PRIu64 " caches alive after the other thread's next malloc", after);
  hl_free(own, p);
  hl_heap_free(own);
  return NULL;
}

static void make_heaps(void) {
  for (int i = 0; i < heaps_n; i++) hs[i] = manual_heap();
}

static void free_heaps(void) {
  for (int i = 0; i < heaps_n; i++) hl_heap_free(hs[i]);
}

int main(void) {
  heaps_n = TSAN_FEWER(600);
  hs = calloc((size_t)heaps_n, sizeof *hs);
  CHECK(hs, "calloc");
  CHECK(hl__tcaches_alive() == 0, "caches alive before any heap");
  make_heaps();
  use_all();
  uint64_t used = hl__tcaches_alive();
  free_heaps();
  uint64_t left = hl__tcaches_alive();
  printf("this thread: %" PRIu64 " caches alive on %d heaps, %" PRIu64 " after freeing them\n",
         used, heaps_n, left);
  CHECK(used == (uint64_t)heaps_n, "%" PRIu64 " caches for %d heaps", used, heaps_n);
  CHECK(left <= 1, "%" PRIu64 " caches alive after every heap was freed", left);

  sem_init(&made, 0, 0);
  sem_init(&freed, 0, 0);
  make_heaps();
  pthread_t t;
  CHECK(pthread_create(&t, NULL, other_thread, NULL) == 0, "pthread_create");
  CHECK(sem_wait_for(&made, 120), "the other thread made no caches");
  free_heaps();
  sem_post(&freed);
  pthread_join(t, NULL);
  left = hl__tcaches_alive();
  printf("after the other thread exited: %" PRIu64 " caches alive\n", left);
  CHECK(left <= 1, "%" PRIu64 " caches alive after the other thread exited", left);
  free(hs);
  return 0;
}
