/* hl_churn, hl_ref_checksum and hl_thin stop with HL_EINTR at their next
 * safe point after hl_interrupt() -- Ctrl-C in Python and Lua -- and leave
 * nothing behind: no handle, no half-made root, the graph they walked
 * whole.  long_calls_are_interruptible covers the fill and the collection;
 * no test interrupted these three (make coverage: their EINTR branches,
 * churn.c 38-40, checksum.c 54-56, thin.c 90-92, never ran), so a loop that
 * stopped looking would have passed.  Another thread interrupts every 0.2 ms
 * for as long as the call runs: each call here takes far longer than that
 * (a churn asked for a minute, a walk of 2 M objects), so the outcome does
 * not depend on the machine's speed.  (hl_thin is as interruptible as the
 * others; heaplab.h now says so.) */
#include <pthread.h>
#include <unistd.h>

#include "check.h"

static _Atomic int stop;

static void *interrupter(void *arg) {
  (void)arg;
  while (!stop) {
    hl_interrupt();
    usleep(200);
  }
  return NULL;
}

static pthread_t t;
static void interrupts_on(void) {
  stop = 0;
  CHECK(pthread_create(&t, NULL, interrupter, NULL) == 0, "thread");
}
static void interrupts_off(void) {
  stop = 1;
  pthread_join(t, NULL);
}

static void interrupted(hl_heap *h, int rc, const char *what, uint64_t handles) {
  CHECK(rc == HL_EINTR, "%s returned %s (%s)", what, hl_error_name(rc), hl_heap_error(h));
  char needle[64];
  snprintf(needle, sizeof needle, "%s: interrupted", what);
  CHECK(strstr(hl_heap_error(h), needle), "%s said '%s'", what, hl_heap_error(h));
  hl_stats s = stats_of(h);
  CHECK(s.handles == handles, "%s left %" PRIu64 " handles where there were %" PRIu64, what,
        s.handles, handles);
  check_invariants(h);
}

int main(void) {
  hl_heap *h = HEAP("reserve_bytes=8g");
  hl_ref root = 0;
  OK(h, hl_fill(h, 128ull << 20, 64, 0, &root)); /* 2 M objects */
  uint64_t sum0, n0;
  OK(h, hl_ref_checksum(h, root, &sum0, &n0));
  CHECK(n0 > 2000000, "%" PRIu64 " objects", n0);
  uint64_t handles = stats_of(h).handles;

  interrupts_on();
  hl_churn_result cr;
  memset(&cr, 0, sizeof cr);
  int rc = hl_churn(h, 60.0, 64, 1u << 20, 0, &cr);
  interrupts_off();
  interrupted(h, rc, "churn", handles);

  interrupts_on();
  uint64_t sum = 0, n = 0;
  rc = hl_ref_checksum(h, root, &sum, &n);
  interrupts_off();
  interrupted(h, rc, "checksum", handles);

  interrupts_on();
  hl_ref kept = 0;
  rc = hl_thin(h, root, 16, &kept);
  interrupts_off();
  interrupted(h, rc, "thin", handles);
  CHECK(kept == 0, "an interrupted thin handed out a root");

  /* the graph is whole, and each call runs to its end without interrupts */
  OK(h, hl_collect(h, 1, 1));
  OK(h, hl_ref_checksum(h, root, &sum, &n));
  CHECK(sum == sum0 && n == n0, "after the interrupted calls: %" PRIu64 " objects, checksum %s",
        n, sum == sum0 ? "the same" : "changed");
  OK(h, hl_thin(h, root, 16, &kept));
  CHECK(kept != 0, "thin made no root");
  OK(h, hl_churn(h, 0.01, 64, 1u << 20, 0, &cr));
  OK(h, hl_ref_release(h, kept));
  OK(h, hl_ref_release(h, root));
  hl_heap_free(h);
  puts("ok");
  return 0;
}
