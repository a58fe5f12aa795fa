/* An allocation that finds no memory collects before it reports ENOMEM, and
 * the trigger respects the reservation.  On a8ce51d a 4 MiB heap with
 * nothing live failed after ~52k small allocations (its 24 MiB trigger never
 * came due before the reservation ran out), and after a fill that ran out of
 * room every later small allocation failed until a collection was asked
 * for by hand. */
#include "check.h"

int main(void) {
  hl_heap *h = HEAP("reserve_bytes=4m", "page_size=64k");
  hl_stats s = stats_of(h);
  CHECK(s.gc_trigger_bytes <= 2u << 20, "trigger %" PRIu64 " beyond half the 4 MiB reservation",
        s.gc_trigger_bytes);
  /* garbage only: never out of memory */
  for (int i = 0; i < 300000; i++) {
    hl_ref r;
    OK(h, hl_alloc(h, 64, 0, &r));
    OK(h, hl_ref_release(h, r));
  }
  s = stats_of(h);
  CHECK(s.cycles >= 1, "no cycle ran");
  /* a fill that runs out of room half-way, with another fill live */
  hl_ref a, b;
  OK(h, hl_fill(h, 2u << 20, 64, 0, &a));
  int rc = hl_fill(h, 2u << 20, 64, 0, &b);
  CHECK(rc == HL_ENOMEM, "the second fill should run out of room, got %s", hl_error_name(rc));
  /* the failed fill's objects are garbage: small allocations go on at once */
  for (int i = 0; i < 10000; i++) {
    hl_ref r;
    OK(h, hl_alloc(h, 64, 0, &r));
    OK(h, hl_ref_release(h, r));
  }
  OK(h, hl_ref_release(h, a));
  OK(h, hl_fill(h, 5u << 19, 64, 0, &b)); /* 2.5 MiB fits now: the first is garbage */
  s = stats_of(h);
  CHECK(s.memory_cycles >= 1, "memory_cycles %" PRIu64, s.memory_cycles);
  check_invariants(h);
  hl_heap_free(h);
  puts("ok");
  return 0;
}
