/* hl_interrupt_attach from two threads at once never chains heaplab's
 * handler to itself.  The Lua binding attaches around each long call, from
 * whichever thread runs a state, and puts the host's handler back after;
 * attaching was a check, then a change, of the process's handler, and two
 * threads both found heaplab's missing: the second saved the first's --
 * heaplab's own -- as the handler to chain, and each SIGINT then called it
 * again until the stack ran out (SIGSEGV: 8 of 60 runs of two Lua states'
 * checksums, the review of session 28).  Here two threads attach and put the
 * host's handler back in a loop while the main thread raises SIGINT: every
 * signal must reach the host's handler, once (a recursion ends the process).
 *
 * Then the two threads put back two different host handlers: each attach
 * finds another handler than the last one and chains it while the main
 * thread's signals run heaplab's handler, which reads the handler to chain.
 * That was a struct sigaction rewritten in place under the reading handler
 * (ThreadSanitizer: a data race, heap.c's chained[]); the first part raised
 * it too under ThreadSanitizer, whose sigaction keeps its own table, copied
 * out unlocked: an attach read heaplab's function with the host's flags while
 * the other thread put the host's back -- a change, and a rewrite (2 to 5 of
 * 20 runs; session 29).  Under ThreadSanitizer both parts raise signals too. */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>

#include "check.h"

static _Atomic int stop;
static _Atomic long host_ran;
static struct sigaction host_sa[2];

static void host(int sig) {
  (void)sig;
  host_ran++;
}
static void other_host(int sig) {
  (void)sig;
  host_ran++;
}

static void *attacher(void *arg) {
  const struct sigaction *back = &host_sa[(intptr_t)arg];
  while (!stop) {
    CHECK(hl_interrupt_attach(SIGINT) == HL_OK, "attach: %s", hl_heap_error(NULL));
    sigaction(SIGINT, back, NULL); /* the host's back, as the Lua binding does */
  }
  return NULL;
}

/* two threads attach and put host_sa[a], host_sa[b] back while this one
 * raises n signals; then attached for good: one signal, a host's handler once */
static void race(int a, int b, int n) {
  CHECK(sigaction(SIGINT, &host_sa[a], NULL) == 0, "sigaction");
  long before_race = host_ran;
  stop = 0;
  pthread_t t[2];
  CHECK(pthread_create(&t[0], NULL, attacher, (void *)(intptr_t)a) == 0, "thread");
  CHECK(pthread_create(&t[1], NULL, attacher, (void *)(intptr_t)b) == 0, "thread");
  long raised = 0;
  for (int i = 0; i < n; i++) {
    raise(SIGINT);
    raised++;
    if (i % 64 == 0) usleep(50);
  }
  stop = 1;
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  long before = host_ran;
  CHECK(hl_interrupt_attach(SIGINT) == HL_OK, "attach");
  CHECK(hl_interrupt_attach(SIGINT) == HL_OK, "attach again");
  raise(SIGINT);
  CHECK(host_ran == before + 1, "the host's handler ran %ld times for one signal",
        host_ran - before);
  CHECK(host_ran - before_race == raised + 1,
        "%ld signals raised, the host's handlers ran %ld times", raised + 1,
        host_ran - before_race);
  printf("%ld signals, each to a host's handler once (hosts %d and %d)\n", raised + 1, a, b);
}

int main(void) {
  for (int i = 0; i < 2; i++) {
    memset(&host_sa[i], 0, sizeof host_sa[i]);
    host_sa[i].sa_handler = i ? other_host : host;
    sigemptyset(&host_sa[i].sa_mask);
  }
  race(0, 0, TSAN_FEWER(200000)); /* one host handler */
  race(0, 1, TSAN_FEWER(100000)); /* two, so the chained one changes */
  return 0;
}
