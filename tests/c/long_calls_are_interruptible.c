/* A long call stops at its next safe point after hl_interrupt() -- from
 * another thread here, or from a signal handler that hl_interrupt_attach
 * installed in front of the previous one (CPython's, for SIGINT) -- with
 * HL_EINTR, and leaves nothing behind: no handle, the fill's objects garbage.
 * On a8ce51d a SIGINT during a long fill was seen only when the fill
 * returned, and under Python its root then leaked (a GiB pinned). */
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static pthread_t main_thread;
static _Atomic int previous_handler_ran;

static void *interrupt_soon(void *arg) {
  usleep(50000);
  if (arg) pthread_kill(main_thread, SIGUSR1);
  else hl_interrupt();
  return NULL;
}

static void previous(int sig) {
  (void)sig;
  previous_handler_ran = 1;
}

static void interrupted_fill(hl_heap *h, int by_signal) {
  pthread_t t;
  CHECK(pthread_create(&t, NULL, interrupt_soon, by_signal ? (void *)1 : NULL) == 0, "thread");
  hl_ref r = 0;
  double t0 = now_s();
  int rc = hl_fill(h, 4ull << 30, 256, 0, &r); /* 4 GiB: seconds of work */
  double dt = now_s() - t0;
  pthread_join(t, NULL);
  CHECK(rc == HL_EINTR && r == 0 && strstr(hl_heap_error(h), "interrupted"),
        "fill: %s after %.2f s (%s)", hl_error_name(rc), dt, hl_heap_error(h));
  CHECK(dt < 2.0, "the fill stopped %.2f s after it started", dt);
  hl_stats s = stats_of(h);
  CHECK(s.handles == 0, "%" PRIu64 " handles left by the interrupted fill", s.handles);
  OK(h, hl_collect(h, 1, 1));
  s = stats_of(h);
  CHECK(s.small_live_bytes == 0, "%" PRIu64 " bytes still live", s.small_live_bytes);
  check_invariants(h);
}

int main(void) {
  main_thread = pthread_self();
  hl_heap *h = HEAP("reserve_bytes=64g");
  interrupted_fill(h, 0);
  /* through a signal: the handler in front, the previous one still called */
  signal(SIGUSR1, previous);
  OK(h, hl_interrupt_attach(SIGUSR1));
  OK(h, hl_interrupt_attach(SIGUSR1)); /* once */
  interrupted_fill(h, 1);
  CHECK(previous_handler_ran, "the previous handler was not called");
  /* an interrupt before a call does not stop it */
  hl_interrupt();
  hl_ref r;
  OK(h, hl_fill(h, 16u << 20, 256, 0, &r));
  OK(h, hl_ref_release(h, r));
  /* collect of many cycles stops between cycles */
  OK(h, hl_fill(h, 64u << 20, 256, 0, &r));
  pthread_t t;
  CHECK(pthread_create(&t, NULL, interrupt_soon, NULL) == 0, "thread");
  int rc = hl_collect(h, 1000000, 1);
  pthread_join(t, NULL);
  CHECK(rc == HL_EINTR, "collect of a million cycles: %s", hl_error_name(rc));
  uint64_t sum, n;
  OK(h, hl_ref_checksum(h, r, &sum, &n)); /* and nothing live was harmed */
  CHECK(n > 200000, "objects %" PRIu64, n);
  hl_heap_free(h);
  puts("ok");
  return 0;
}
