/* Injected permanent EAGAIN on release with a bounded retry (10 x 100 us):
 * the trim returns, the pages stay unreleased in the free pool,
 * syscall_gave_up counts the call, no object is lost, and once the fault is
 * disarmed the next trim releases them. */
#include "check.h"
#include <time.h>

int main(void) {
  hl_heap *h = HEAP("syscall_retry_max=10", "syscall_retry_backoff_us=100", "warm_pages=0",
                    "release_per_sweep=1048576");
  hl_ref keep, r;
  OK(h, hl_fill(h, 4u << 20, 100, 1, &keep));
  uint64_t sum0, n0;
  OK(h, hl_ref_checksum(h, keep, &sum0, &n0));
  OK(h, hl_fill(h, 16u << 20, 256, 0, &r));
  OK(h, hl_ref_release(h, r));
  OK(h, hl_inject(h, HL_SITE_release, HL_FAULT_always, 0, 11 /* EAGAIN */));
  double t0 = now_s();
  OK(h, hl_collect(h, 2, -1));
  double dt = now_s() - t0;
  hl_stats s = stats_of(h);
  printf("2 cycles in %.3f s: gave_up %" PRIu64 ", retries %" PRIu64 ", free %" PRIu64
         ", released %" PRIu64 "\n",
         dt, s.syscall_gave_up, s.syscall_retries, s.free_pool_pages, s.released_pool_pages);
  /* bounded: each call that gave up retried exactly syscall_retry_max times,
   * and the trim stopped at the first give-up (no call per page) */
  CHECK(s.syscall_gave_up >= 1 && s.syscall_retries == 10 * s.syscall_gave_up,
        "gave_up %" PRIu64 ", retries %" PRIu64, s.syscall_gave_up, s.syscall_retries);
  CHECK(s.release_calls <= 2 * s.trims, "%" PRIu64 " release calls in %" PRIu64 " trims",
        s.release_calls, s.trims);
  CHECK(s.released_pool_pages == 0 && s.free_pool_pages >= 256, "pages not kept in the free pool");
  uint64_t sum1, n1;
  OK(h, hl_ref_checksum(h, keep, &sum1, &n1));
  CHECK(sum1 == sum0 && n1 == n0, "a live object changed");
  OK(h, hl_inject(h, HL_SITE_release, HL_FAULT_off, 0, 0));
  OK(h, hl_trim(h));
  s = stats_of(h);
  CHECK(s.free_pool_pages == 0 && s.released_pool_pages >= 256, "after disarm: free %" PRIu64,
        s.free_pool_pages);
  check_invariants(h);
  hl_heap_free(h);
  return 0;
}
