/*
 * A thread cancelled (pthread_cancel, deferred) inside a heaplab call leaves
 * the heap unlocked.  hl_fill reads /proc/meminfo under the heap lock (its
 * size check: would the fill fit in the memory available?) with fopen and
 * fgets -- cancellation points: a thread cancelled there unwound holding the
 * lock, and the next call from any thread hung.  The reads of /proc
 * (meminfo, smaps_rollup, maps) are no cancellation points now, as none of
 * heaplab's waits are (hl__wait).
 *
 * Each round: a thread fills in a loop with a cancellation point of its own
 * between the calls (pthread_testcancel, no lock held there), is cancelled
 * at a random moment and joined; then this thread takes the heap's lock
 * (hl_heap_check, a collection).  Before the fix most rounds cancelled the
 * thread inside the fill and the first check hung: the alarm says so.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <time.h>

#include "check.h"

static hl_heap *heap;
static _Atomic unsigned long fills;

static void *filler(void *arg) {
  (void)arg;
  for (;;) {
    hl_ref r = 0;
    int rc = hl_fill(heap, 4096, 64, 0, &r);
    if (rc == HL_OK) {
      hl_ref_release(heap, r);
      fills++;
    }
    pthread_testcancel();
  }
  return NULL;
}

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] =
      "cancelled_calls_leave_the_heap_unlocked: a call hung after a thread was cancelled in "
      "hl_fill (the heap lock left held)\n";
  (void)!write(2, msg, sizeof msg - 1);
  _exit(1);
}

int main(void) {
  signal(SIGALRM, on_alarm);
  heap = HEAP("mode=collected");
  int rounds = TSAN_FEWER(60);
  for (int i = 0; i < rounds; i++) {
    unsigned long before = fills;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, filler, NULL) == 0, "pthread_create");
    /* let it get going, then cancel it anywhere in its loop */
    while (fills < before + 2) sched_yield();
    struct timespec ts = {0, (long)(i % 7) * 37000};
    nanosleep(&ts, NULL);
    CHECK(pthread_cancel(t) == 0, "pthread_cancel");
    void *res;
    CHECK(pthread_join(t, &res) == 0, "pthread_join");
    CHECK(res == PTHREAD_CANCELED, "the filler was not cancelled");
    alarm(20);
    OK(heap, hl_heap_check(heap));
    OK(heap, hl_collect(heap, 1, 1));
    alarm(0);
  }
  uint64_t vmas = 0;
  OK(heap, hl_vma_count(heap, &vmas));
  hl_heap_free(heap);
  printf("cancelled_calls_leave_the_heap_unlocked: %d threads cancelled in their fills, "
         "%lu fills, the heap usable after each\n", rounds, (unsigned long)fills);
  return 0;
}
