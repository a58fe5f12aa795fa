/* A fork() child whose background collector thread cannot be started again
 * (pthread_create refuses, as under a cgroup's pids.max) runs each requested
 * cycle in the allocating thread -- and a paced allocation then has no cycle
 * to wait for.  Before the fix hl__pace went on to wait for one more cycle
 * that no thread would run: every paced allocation stalled its whole
 * pacing_max_wait_ms (64 x 64 KiB took 4.01 s, 4 timeouts; the pacing hunt,
 * session 30).  pthread_create is interposed here, refusing in the child. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <sys/wait.h>

#include "check.h"

static int refuse;

int pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*f)(void *), void *arg) {
  static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
  if (refuse) return EAGAIN;
  if (!real) real = (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))
                 dlsym(RTLD_NEXT, "pthread_create");
  return real(t, a, f, arg);
}

static void churn(hl_heap *h, int n) {
  for (int i = 0; i < n; i++) {
    hl_ref r;
    OK(h, hl_alloc(h, 64 << 10, 0, &r));
    OK(h, hl_ref_release(h, r));
  }
}

int main(void) {
  SKIP_WHERE_FORK_IS_UNSAFE();
  hl_heap *h = HEAP("collector=background", "large_trigger_bytes=1m", "pacing_max_wait_ms=1000",
                    "mark_threads=1");
  churn(h, 64); /* the collector thread runs */
  pid_t pid = fork();
  CHECK(pid >= 0, "fork: %s", strerror(errno));
  if (pid == 0) {
    refuse = 1;
    hl_stats a = stats_of(h);
    double t0 = now_s();
    churn(h, 64); /* 4 MiB: 4 cycles asked for, run here */
    double dt = now_s() - t0;
    hl_stats b = stats_of(h);
    printf("child: 64 x 64 KiB in %.2f s; %" PRIu64 " cycles, %" PRIu64 " waits, %" PRIu64
           " timeouts\n", dt, b.cycles - a.cycles, b.pacing_waits - a.pacing_waits,
           b.pacing_timeouts - a.pacing_timeouts);
    fflush(stdout);
    CHECK(b.cycles - a.cycles >= 3, "%" PRIu64 " cycles ran in the child", b.cycles - a.cycles);
    /* no wait at all (counted, not timed: before the fix 4 waits, 4 timeouts, 4 s) */
    CHECK(b.pacing_waits == a.pacing_waits && b.pacing_timeouts == a.pacing_timeouts,
          "%" PRIu64 " paced waits (%" PRIu64 " timed out) with no collector thread",
          b.pacing_waits - a.pacing_waits, b.pacing_timeouts - a.pacing_timeouts);
    check_invariants(h);
    child_exit(0);
  }
  int st;
  CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child failed (status %d)", st);
  churn(h, 64); /* the parent's collector still runs */
  hl_heap_free(h);
  puts("ok");
  return 0;
}
