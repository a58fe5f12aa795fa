/* Pacing near heap_limit_bytes counts the bytes of the allocations other
 * threads have in flight (limit_pending), as the limit test itself does
 * (hl__limit_held): a large allocation that, with them, would pass the
 * limit asks for a cycle and waits for it.  Before the fix hl__pace tested
 * the live bytes alone: with 60 MiB in flight under a 64 MiB limit, 4 MiB
 * live and 1 MiB asked, it neither asked nor waited (the review of session
 * 30's pacing changes).  White-box: the bytes in flight are set by hand,
 * as another thread's allocation inside mmap would leave them. */
#include "check.h"
#include "internal.h"

int main(void) {
  hl_heap *h = HEAP("collector=background", "heap_limit_bytes=64m",
                    "large_trigger_bytes=1g", "pacing_max_wait_ms=2000", "mark_threads=1");
  hl_ref keep;
  OK(h, hl_alloc(h, 4 << 20, 0, &keep));
  bool locked = hl__lock(h);
  uint64_t waits0 = h->tally.pacing_waits, requests0 = h->tally.cycle_requests;
  h->limit_pending = 60 << 20; /* another thread's allocation, in flight */
  hl__pace(h, 1 << 20);
  h->limit_pending = 0;
  uint64_t waits = h->tally.pacing_waits - waits0, requests = h->tally.cycle_requests - requests0;
  hl__unlock(h, locked);
  printf("%" PRIu64 " cycle requests, %" PRIu64 " paced waits\n", requests, waits);
  CHECK(waits == 1, "a paced allocation past the limit with the bytes in flight did not wait "
        "(%" PRIu64 " waits, %" PRIu64 " requests)", waits, requests);
  OK(h, hl_ref_release(h, keep));
  check_invariants(h);
  hl_heap_free(h);
  puts("ok");
  return 0;
}
