/*
 * A thread cancelled (pthread_cancel, deferred) inside a heaplab call leaves
 * the heap unlocked: no heaplab call is a cancellation point (prim.h).
 * - hl_fill reads /proc/meminfo under the heap lock (its size check: would
 *   the fill fit in the memory available?) with fopen and fgets --
 *   cancellation points: a thread cancelled there unwound holding the lock,
 *   and the next call from any thread hung.
 * - hl_collect with mark_threads=2: the cycle's thread waits for the helpers
 *   (pthread_cond_wait on the markers' mutex, the heap lock held) -- a
 *   thread cancelled there left both held.
 *
 * Each round: a thread calls in a loop with a cancellation point of its own
 * between the calls (pthread_testcancel, no lock held there), is cancelled
 * at a random moment and joined; then this thread takes the heap's lock
 * (hl_heap_check, a collection).  Before the fix most rounds cancelled the
 * thread inside the call and the first check hung: the alarm says so.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <time.h>

#include "check.h"

static hl_heap *heap;
static _Atomic unsigned long fills;

static void *collector(void *arg) {
  (void)arg;
  for (;;) {
    if (hl_collect(heap, 1, 1) == HL_OK) fills++;
    pthread_testcancel();
  }
  return NULL;
}

/* (no addressable local in a thread that is cancelled: the unwinding skips
 * ASan's unpoisoning of its frame, and ASan then reports the thread's own
 * exit as a stack-buffer-underflow) */
static _Thread_local hl_ref r;

static void *filler(void *arg) {
  (void)arg;
  for (;;) {
    r = 0;
    int rc = hl_fill(heap, 4096, 64, 0, &r);
    if (rc == HL_OK) {
      hl_ref_release(heap, r);
      fills++;
    }
    pthread_testcancel();
  }
  return NULL;
}

static void on_alarm(int sig);

/* rounds of: start fn's thread, cancel it anywhere in its loop, join it,
 * then use the heap from this thread */
static void rounds_of(void *(*fn)(void *), const char *what, int rounds) {
  for (int i = 0; i < rounds; i++) {
    unsigned long before = fills;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, fn, NULL) == 0, "pthread_create");
    while (fills < before + 2) sched_yield();
    struct timespec ts = {0, (long)(i % 7) * 37000};
    nanosleep(&ts, NULL);
    CHECK(pthread_cancel(t) == 0, "pthread_cancel");
    void *res;
    CHECK(pthread_join(t, &res) == 0, "pthread_join");
    CHECK(res == PTHREAD_CANCELED, "the %s thread was not cancelled", what);
    alarm(20);
    OK(heap, hl_heap_check(heap));
    OK(heap, hl_collect(heap, 1, 1));
    alarm(0);
  }
  printf("cancelled_calls_leave_the_heap_unlocked: %d threads cancelled in %s, "
         "the heap usable after each\n", rounds, what);
}

static const char *doing = "";

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "cancelled_calls_leave_the_heap_unlocked: a call hung after a "
                            "thread was cancelled in ";
  (void)!write(2, msg, sizeof msg - 1);
  (void)!write(2, doing, strlen(doing));
  (void)!write(2, " (a lock left held)\n", 20);
  _exit(1);
}

int main(void) {
  signal(SIGALRM, on_alarm);
  heap = HEAP("mode=collected");
  doing = "hl_fill";
  rounds_of(filler, "hl_fill", TSAN_FEWER(60));
  uint64_t vmas = 0;
  OK(heap, hl_vma_count(heap, &vmas));
  hl_heap_free(heap);

  /* a live set for the markers to share: 32 MiB of 4-reference objects.
   * Under a sanitizer 8 MiB: each round runs three or more whole marks of
   * it (two in the thread before it is cancelled, one here after), which
   * made most of the test's time there (16 of 18 s under ThreadSanitizer).
   * A cancel pending in the cycle acts at the markers' wait whatever the
   * live set, as long as the helpers are woken and still running when this
   * thread's share ends: with the wait a pthread_cond_wait (mutant
   * markers-wait-is-a-cancellation-point) the first or second round hung
   * with 32, 8 and 2 MiB alike, in the plain, ASan and TSan builds. */
#if defined(__SANITIZE_ADDRESS__) || UNDER_TSAN
  const uint64_t live_bytes = 8u << 20;
#else
  const uint64_t live_bytes = 32u << 20;
#endif
  heap = HEAP("mode=collected", "mark_threads=2");
  hl_ref live = 0;
  OK(heap, hl_fill(heap, live_bytes, 64, 4, &live));
  doing = "hl_collect (mark_threads=2)";
  rounds_of(collector, "hl_collect (mark_threads=2)", TSAN_FEWER(60));
  OK(heap, hl_ref_release(heap, live));
  hl_heap_free(heap);
  return 0;
}
