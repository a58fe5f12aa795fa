/* verify=true (poison freed slots, check invariants every cycle) works WITH
 * page release: in the seed, released pages faulted back as zeroes and hid
 * the verifier's poison, so release was disabled under the verifier.  Here a
 * reused page is re-poisoned when formatted, the checks pass through many
 * release/reuse rounds, and a write into a freed slot is still caught. */
#include "check.h"

int main(void) {
  hl_heap *h = HEAP("verify=true", "warm_pages=2", "warm_demand_trims=0", "release_per_sweep=64");
  hl_ref keep;
  OK(h, hl_alloc(h, 0, 16, &keep));
  for (int round = 0; round < 40; round++) {
    hl_ref r;
    OK(h, hl_fill(h, (2u << 20) + (uint64_t)round * 65536, 64 + (uint64_t)(round % 5) * 48, 0, &r));
    OK(h, hl_ref_set(h, keep, (uint64_t)round % 16, (round % 3) ? r : 0));
    OK(h, hl_ref_release(h, r));
    OK(h, hl_collect(h, 1, -1)); /* verify runs the invariant check inside every cycle */
  }
  hl_stats s = stats_of(h);
  CHECK(s.released_pages > 100 && s.reused_pages > 50, "released %" PRIu64 " reused %" PRIu64,
        s.released_pages, s.reused_pages);
  check_invariants(h);

  /* a use-after-free: write into a slot after its object was swept */
  hl_ref victim, anchor;
  OK(h, hl_alloc(h, 200, 0, &anchor)); /* keeps the victim's page partly live */
  OK(h, hl_alloc(h, 200, 0, &victim));
  hl_object_info info;
  OK(h, hl_ref_info(h, victim, &info));
  OK(h, hl_ref_release(h, victim));
  OK(h, hl_collect(h, 1, 1));
  check_invariants(h);
  ((unsigned char *)(uintptr_t)info.object)[100] = 0x42; /* the defect */
  FAILS(h, HL_ECHECK, "written after it was freed", hl_heap_check(h));
  ((unsigned char *)(uintptr_t)info.object)[100] = 0xDB; /* put the poison back */
  check_invariants(h);
  hl_heap_free(h);
  return 0;
}
