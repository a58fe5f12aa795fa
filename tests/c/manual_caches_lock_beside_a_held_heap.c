/* The thread caches' global lock (manual.c, tc_global) comes before a heap's
 * lock, but a thread that holds a heap (hl_enter) takes it too: making its
 * first cache of another manual heap, freeing a manual heap, or exiting
 * with caches.  A thread holding tc_global waited for a heap's lock, so
 *   first_cache  A holds h2 and makes its first cache of h1 while B makes
 *                its first cache of h2: B took tc_global and waited for h2,
 *                A waited for tc_global;
 *   free         A holds h2 and frees manual heap h1 meanwhile;
 *   exit         thread E, with a cache of h2, exits while A holds h2: its
 *                key destructor took tc_global and waited for h2 to flush,
 *                and A, making its first cache of h1, waited for tc_global
 * -- each hung for ever.  Now a thread holding tc_global only tries a heap's
 * lock: when another thread has it, tc_global goes back while it waits.
 * Each scenario must end (alarm: 60 s). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>

#include "check.h"

static hl_heap *h1, *h2;
static pthread_barrier_t entered;
static const char *scenario, *only;

static hl_heap *make(void) {
  hl_options o;
  hl_options_defaults(&o);
  o.mode = HL_MODE_MANUAL;
  o.reserve_bytes = 64 << 20;
  hl_heap *h;
  char err[256];
  CHECK(hl_heap_new(&o, &h, err, sizeof err) == HL_OK, "hl_heap_new: %s", err);
  return h;
}

static void use(hl_heap *h) {
  void *p = hl_malloc(h, 64);
  CHECK(p, "hl_malloc: %s", hl_heap_error(h));
  hl_free(h, p);
}

/* A: holds h2, then (after the other thread is waiting) takes tc_global */
static void *holder(void *arg) {
  (void)arg;
  OK(h2, hl_enter(h2));
  pthread_barrier_wait(&entered);
  usleep(100 * 1000); /* (the other thread waits for h2 by now) */
  if (!strcmp(scenario, "free")) {
    hl_heap_free(h1);
    h1 = NULL;
  } else {
    use(h1);
  }
  use(h2);
  hl_leave(h2);
  return NULL;
}

/* B: its first cache of h2 (first_cache, free); E: exits with one (exit) */
static void *other(void *arg) {
  (void)arg;
  if (!strcmp(scenario, "exit")) use(h2); /* (before A holds it) */
  pthread_barrier_wait(&entered);
  if (strcmp(scenario, "exit")) use(h2);
  return NULL; /* E's caches are flushed now, while A holds h2 */
}

static void run(const char *name) {
  if (only && strcmp(only, name)) return;
  scenario = name;
  h1 = make();
  h2 = make();
  pthread_barrier_init(&entered, NULL, 2);
  pthread_t a, b;
  CHECK(pthread_create(&b, NULL, other, NULL) == 0, "pthread_create");
  if (!strcmp(name, "exit")) usleep(20 * 1000); /* (E made its cache before A holds h2) */
  CHECK(pthread_create(&a, NULL, holder, NULL) == 0, "pthread_create");
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  pthread_barrier_destroy(&entered);
  use(h2);
  hl_heap_free(h2);
  if (h1) {
    use(h1);
    hl_heap_free(h1);
  }
  printf("%s: ok\n", name);
}

int main(int argc, char **argv) {
  only = argc > 1 ? argv[1] : NULL;
  alarm(60); /* a deadlock fails the test (SIGALRM) */
  run("first_cache");
  run("free");
  run("exit");
  return 0;
}
