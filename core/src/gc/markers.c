/*
 * markers.c -- the helper threads of parallel marking (gc/mark.c): one
 * process-wide set of threads, started when the first parallel mark needs
 * them, asleep between marks.  A mark hands them a function to run
 * (hl__markers_run) and waits for every one it asked for to return
 * (hl__markers_wait), so nothing of the mark outlives it.
 *
 * Process-wide rather than per heap: a process may hold thousands of heaps
 * (the tests make 5,000), and their cycles rarely overlap.  A mark that
 * finds the helpers serving another heap's mark runs on its own thread
 * (mark_threads_used says so).  After fork() the child has no helpers: they
 * are started again by its first parallel mark.
 *
 * The helpers outlive every heap, so the code they sleep in must too: the
 * first one started pins the shared object holding this file (the Lua
 * module, which lua_close would dlclose; the Python extension) in memory
 * (hl__pin_code, registry.c).
 * Unloaded, a helper woken spuriously would return into unmapped code, and
 * their stacks (gc/mark.c) would be lost -- LeakSanitizer reported 512 KiB
 * per helper from every Lua test of a parallel mark.
 */
#include <stdlib.h>

#include "../internal.h"

#define MAX_HELPERS (HL_MARK_THREADS_MAX - 1)

static struct {
  pthread_mutex_t mu;
  pthread_cond_t wake;       /* helpers wait here for a new epoch */
  pthread_cond_t done;       /* the mark waits here for running == 0 */
  unsigned started;          /* helper threads alive */
  uint64_t epoch;            /* bumped by every hl__markers_run */
  unsigned want;             /* helpers asked to run in this epoch */
  unsigned running;          /* of those, not finished yet */
  bool busy;                 /* a mark holds the helpers */
  void (*fn)(void *, unsigned);
  void *arg;
  uint64_t born[MAX_HELPERS + 1]; /* the epoch a helper was started in */
  bool ever;                 /* a helper was started (and pinned the code),
                                in this process or its parent */
} M = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
       0, 0, 0, 0, false, NULL, NULL, {0}, false};

static void *helper_main(void *p) {
  unsigned index = (unsigned)(uintptr_t)p; /* 1.. (0 is the marking thread) */
  pthread_mutex_lock(&M.mu);
  /* started by a run that bumps the epoch after creating it: that run is
   * this helper's first */
  uint64_t seen = M.born[index];
  for (;;) {
    while (M.epoch == seen) prim_cond_wait(&M.wake, &M.mu);
    seen = M.epoch;
    if (index > M.want) continue;
    void (*fn)(void *, unsigned) = M.fn;
    void *arg = M.arg;
    pthread_mutex_unlock(&M.mu);
    fn(arg, index);
    pthread_mutex_lock(&M.mu);
    if (--M.running == 0) pthread_cond_broadcast(&M.done);
  }
  return NULL;
}

/* The child of fork() has none of the helpers (they stayed in the parent)
 * and may have copied the lock in any state: it starts over. */
static void after_fork_child(void) {
  pthread_mutex_init(&M.mu, NULL);
  pthread_cond_init(&M.wake, NULL);
  pthread_cond_init(&M.done, NULL);
  M.started = 0;
  M.want = M.running = 0;
  M.busy = false;
}
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static void register_fork(void) { pthread_atfork(NULL, NULL, after_fork_child); }

/* Called when a heap is made, before any mark could start a helper: a
 * handler registered by the first parallel mark itself can miss a fork()
 * already under way in another thread (glibc runs the child handlers that
 * were registered when the fork's prepare handlers ran), and that child
 * would wait for helpers it does not have. */
void hl__markers_init(void) { pthread_once(&fork_once, register_fork); }

unsigned hl__markers_run(unsigned n, void (*fn)(void *, unsigned), void *arg) {
  if (n > MAX_HELPERS) n = MAX_HELPERS;
  if (n == 0) return 0;
  hl__markers_init();
  pthread_mutex_lock(&M.mu);
  if (M.busy) { /* another heap's mark has them */
    pthread_mutex_unlock(&M.mu);
    return 0;
  }
  if (M.started == 0 && n > 0) hl__pin_code();
  while (M.started < n) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    M.born[M.started + 1] = M.epoch;
    int rc = pthread_create(&t, &attr, helper_main, (void *)(uintptr_t)(M.started + 1));
    pthread_attr_destroy(&attr);
    if (rc) break; /* fewer helpers: the mark still completes */
    M.started++;
    M.ever = true;
  }
  if (n > M.started) n = M.started;
  if (n == 0) {
    pthread_mutex_unlock(&M.mu);
    return 0;
  }
  M.busy = true;
  M.fn = fn;
  M.arg = arg;
  M.want = n;
  M.running = n;
  M.epoch++;
  pthread_cond_broadcast(&M.wake);
  pthread_mutex_unlock(&M.mu);
  return n;
}

bool hl__markers_ever_started(void) {
  pthread_mutex_lock(&M.mu);
  bool ever = M.ever;
  pthread_mutex_unlock(&M.mu);
  return ever;
}

void hl__markers_wait(void) {
  pthread_mutex_lock(&M.mu);
  while (M.running) prim_cond_wait(&M.done, &M.mu);
  M.busy = false;
  M.fn = NULL;
  M.arg = NULL;
  pthread_mutex_unlock(&M.mu);
}
