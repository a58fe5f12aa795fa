/* Every timed wait of the library measures a duration on the monotonic
 * clock (prim.h: prim_cond_wait_ns, prim_mutex_lock_within).  Until session
 * 32 they made absolute deadlines on CLOCK_REALTIME: a wall clock set back
 * by an hour (NTP, an administrator, a VM resumed) right after a deadline
 * was read made that wait last an hour more -- the sampler stopped sampling,
 * the background collector slept through its min_cycle_interval_ms, a paced
 * allocation's poll stalled, fork() waited for a heap another thread holds
 * (its bounded wait, registry.c) an hour instead of 5 ms.  A test may not set the system's clock: it
 * interposes clock_gettime, whose CLOCK_REALTIME reads an hour ahead once
 * `ahead` is set -- to a wait on that clock, the same as the wall clock set
 * back an hour after the read.  Each scenario runs in a child that SIGALRM
 * ends after 20 s: the old waits did not return for an hour. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static volatile int ahead;

int clock_gettime(clockid_t id, struct timespec *ts) {
  long rc = syscall(SYS_clock_gettime, id, ts);
  if (rc == 0 && ahead && id == CLOCK_REALTIME) ts->tv_sec += 3600;
  return rc == 0 ? 0 : -1;
}

/* the sampler's thread goes on taking a sample each millisecond (each
 * summary takes one too: those are not counted) */
static void sampler_goes_on(void) {
  hl_sampler *s;
  CHECK(hl_sampler_open(&s, 0.001, 4096) == HL_OK, "open: %s", hl_heap_error(NULL));
  hl_sampler_summary a, b;
  CHECK(hl_sampler_summary_get(s, &a) == HL_OK, "summary: %s", hl_heap_error(NULL));
  ahead = 1;
  uint64_t calls = 0;
  do {
    struct timespec d = {0, 5000000};
    nanosleep(&d, NULL);
    CHECK(hl_sampler_summary_get(s, &b) == HL_OK, "summary: %s", hl_heap_error(NULL));
    calls++;
  } while (b.samples - a.samples - calls < 50);
  printf("sampler: %" PRIu64 " samples of its thread after the clock moved\n",
         b.samples - a.samples - calls);
  hl_sampler_stop(s);
}

/* the background collector keeps its min_cycle_interval_ms, not an hour, and
 * paced allocations (each 1 MiB of large objects asks for a cycle) go on */
static void collector_goes_on(void) {
  hl_heap *h = HEAP("collector=background", "min_cycle_interval_ms=20", "large_trigger_bytes=1m",
                    "pacing_max_wait_ms=60000", "mark_threads=1");
  for (int i = 0; i < 32; i++) {
    hl_ref r;
    OK(h, hl_alloc(h, 64 << 10, 0, &r));
    OK(h, hl_ref_release(h, r));
  }
  hl_stats a = stats_of(h);
  ahead = 1;
  for (int i = 0; i < 128; i++) {
    hl_ref r;
    OK(h, hl_alloc(h, 64 << 10, 0, &r));
    OK(h, hl_ref_release(h, r));
  }
  hl_stats b = stats_of(h);
  printf("collector: %" PRIu64 " cycles, %" PRIu64 " paced waits after the clock moved\n",
         b.cycles - a.cycles, b.pacing_waits - a.pacing_waits);
  CHECK(b.cycles - a.cycles >= 4, "%" PRIu64 " cycles for 8 MiB of large garbage",
        b.cycles - a.cycles);
  check_invariants(h);
  hl_heap_free(h);
}

/* fork() while a thread holds h2 (hl_enter) and then allocates in h1 per
 * call: fork's prepare handler takes h1 and waits for h2 at most 5 ms
 * (prim_mutex_lock_within), lets go and starts again -- on the wall clock
 * an hour ahead, its first wait did not end, and the holder waited for h1
 * (fork_while_a_holder_locks_another_heap's per_call scenario) */
static hl_heap *h1, *h2;
static pthread_barrier_t entered;

static void *holder(void *arg) {
  (void)arg;
  OK(h2, hl_enter(h2));
  pthread_barrier_wait(&entered);
  struct timespec d = {0, 100000000}; /* (the fork waits for h2 by now) */
  nanosleep(&d, NULL);
  hl_ref r;
  OK(h1, hl_alloc(h1, 64, 0, &r));
  OK(h1, hl_ref_release(h1, r));
  hl_leave(h2);
  return NULL;
}

static void fork_goes_on(void) {
  h1 = HEAP("reserve_bytes=64m"); /* (the registry's order: h1 first) */
  h2 = HEAP("reserve_bytes=64m");
  pthread_barrier_init(&entered, NULL, 2);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, holder, NULL) == 0, "pthread_create");
  pthread_barrier_wait(&entered);
  ahead = 1;
  pid_t pid = fork();
  CHECK(pid >= 0, "fork: %s", strerror(errno));
  if (pid == 0) _exit(0);
  pthread_join(t, NULL);
  int st;
  CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
        "the fork's child: status %d", st);
  printf("fork: done after the clock moved\n");
}

static void in_a_child(const char *what, void (*fn)(void)) {
  fflush(stdout);
  pid_t pid = fork();
  CHECK(pid >= 0, "fork: %s", strerror(errno));
  if (pid == 0) {
    alarm(20);
    fn();
    fflush(stdout);
    _exit(0);
  }
  int st;
  CHECK(waitpid(pid, &st, 0) == pid, "waitpid: %s", strerror(errno));
  CHECK(!(WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM),
        "%s: a wait still running 20 s after the wall clock was set back an hour", what);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: the child failed (status %d)", what, st);
}

int main(void) {
  SKIP_WHERE_FORK_IS_UNSAFE();
  hl_footprint f;
  if (hl_footprint_get(&f) == HL_OK)
    in_a_child("the sampler", sampler_goes_on);
  else
    printf("no footprint here (%s): the sampler's half not run\n", hl_heap_error(NULL));
  in_a_child("the background collector", collector_goes_on);
  in_a_child("fork beside a held heap", fork_goes_on);
  printf("ok\n");
  return 0;
}
