/* fork() while another thread holds a heap (hl_enter) and then waits for a
 * lock fork's prepare handler (registry.c) takes first -- which heaplab.h
 * allows: "calls on that heap lock per call, as without it":
 *   per_call     the thread holds h2 and allocates in h1 per call;
 *   heap_new     the thread holds h2 and makes and frees a heap (the
 *                registry's write lock);
 *   first_cache  the thread holds manual h2 and makes its first thread
 *                cache of manual h1 (the caches' global lock, tc_global);
 *   sampler      the thread holds h2 and marks a sampler made after the
 *                heaps: the sampler's fork handler, registered later, ran
 *                first and held the samplers' locks while the registry's
 *                waited for h2 -- it let go of the heaps, not of those.
 * fork_prepare took tc_global, the registry's read lock and h1, then waited
 * for h2, which the thread holds while it waits for one of those: both hung
 * for ever (3 runs of 3, the embedding hunt, session 28).  Now fork_prepare
 * waits for a heap lock a few milliseconds at most, then lets go of all it
 * took and starts again.  Each scenario must end (alarm: 60 s), and the
 * child allocate in both heaps.  Not under AddressSanitizer
 * (SKIP_WHERE_FORK_IS_UNSAFE). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#include "check.h"

static hl_heap *h1, *h2;
static hl_sampler *sampler;
static pthread_barrier_t entered;
static sem_t forked; /* the holder ends after the fork (ThreadSanitizer's
                        child reports a thread that finished at the fork
                        unjoined as a leak) */
static const char *scenario;

static void use(hl_heap *h) {
  hl_options o;
  OK(h, hl_heap_options(h, &o));
  if (o.mode == HL_MODE_MANUAL) {
    void *p = hl_malloc(h, 64);
    CHECK(p, "hl_malloc: %s", hl_heap_error(h));
    hl_free(h, p);
  } else {
    hl_ref r;
    OK(h, hl_alloc(h, 64, 0, &r));
  }
}

static void *holder(void *arg) {
  (void)arg;
  OK(h2, hl_enter(h2));
  pthread_barrier_wait(&entered);
  usleep(100 * 1000); /* (the fork waits for h2 by now, holding the rest) */
  if (!strcmp(scenario, "heap_new")) {
    hl_options o;
    hl_options_defaults(&o);
    o.reserve_bytes = 64 << 20;
    hl_heap *h3;
    char err[256];
    CHECK(hl_heap_new(&o, &h3, err, sizeof err) == HL_OK, "hl_heap_new: %s", err);
    hl_heap_free(h3);
  } else if (!strcmp(scenario, "sampler")) {
    CHECK(hl_sampler_mark(sampler) == HL_OK, "hl_sampler_mark: %s", hl_heap_error(NULL));
  } else {
    use(h1);
  }
  use(h2);
  hl_leave(h2);
  while (sem_wait(&forked) != 0) {
  }
  return NULL;
}

static hl_heap *make(int mode) {
  hl_options o;
  hl_options_defaults(&o);
  o.mode = mode;
  o.reserve_bytes = 64 << 20;
  hl_heap *h;
  char err[256];
  CHECK(hl_heap_new(&o, &h, err, sizeof err) == HL_OK, "hl_heap_new: %s", err);
  return h;
}

static const char *only; /* argv[1]: that scenario only */

static void run(const char *name, int mode) {
  if (only && strcmp(only, name)) return;
  scenario = name;
  h1 = make(mode); /* (the registry's order: h1 first) */
  h2 = make(mode);
  pthread_barrier_init(&entered, NULL, 2);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, holder, NULL) == 0, "pthread_create");
  pthread_barrier_wait(&entered);
  pid_t pid = fork();
  CHECK(pid >= 0, "fork");
  if (pid == 0) {
    alarm(20);
    use(h1);
    use(h2);
    child_exit(0);
  }
  sem_post(&forked);
  pthread_join(t, NULL);
  int st;
  CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: the child's status %d", name, st);
  pthread_barrier_destroy(&entered);
  hl_heap_free(h2);
  hl_heap_free(h1);
  printf("%s: ok\n", name);
}

int main(int argc, char **argv) {
  SKIP_WHERE_FORK_IS_UNSAFE();
  only = argc > 1 ? argv[1] : NULL;
  sem_init(&forked, 0, 0);
  alarm(60); /* a deadlock fails the test (SIGALRM) */
  run("per_call", HL_MODE_COLLECTED);
  run("heap_new", HL_MODE_COLLECTED);
  run("first_cache", HL_MODE_MANUAL);
  /* (made after a heap: its fork handler was registered after the heaps',
   * and glibc runs the last registered first) */
  hl_heap_free(make(HL_MODE_COLLECTED));
  CHECK(hl_sampler_open(&sampler, 0.01, 1024) == HL_OK, "hl_sampler_open: %s",
        hl_heap_error(NULL));
  run("sampler", HL_MODE_COLLECTED);
  hl_sampler_stop(sampler);
  return 0;
}
