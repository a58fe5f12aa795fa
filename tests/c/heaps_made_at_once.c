/* Threads that make their first heaps at the same moment, before anything
 * else in the process asked for the page size, then use and free them.
 * hl__prim_os_page_size cached the page size in a plain static that both wrote
 * (the same value): a data race ThreadSanitizer reported (the core
 * concurrency hunt, twenty-second session).  Suite threads: the TSan build
 * runs it, and a race report fails it there. */
#include <pthread.h>

#include "check.h"

enum { THREADS = 4 };
static pthread_barrier_t start;

static void *maker(void *arg) {
  (void)arg;
  pthread_barrier_wait(&start);
  hl_options o;
  hl_options_defaults(&o);
  char err[256];
  hl_heap *h = NULL;
  CHECK(hl_heap_new(&o, &h, err, sizeof err) == HL_OK, "hl_heap_new: %s", err);
  hl_ref r;
  OK(h, hl_fill(h, 1u << 20, 64, 0, &r));
  uint64_t sum, n;
  OK(h, hl_ref_checksum(h, r, &sum, &n));
  CHECK(n > 0, "the fill made no object");
  OK(h, hl_ref_release(h, r));
  OK(h, hl_collect(h, 1, 1));
  check_invariants(h);
  hl_heap_free(h);
  return NULL;
}

int main(void) {
  pthread_barrier_init(&start, NULL, THREADS);
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&t[i], NULL, maker, NULL) == 0, "thread");
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  puts("ok");
  return 0;
}
