/* dump_toggle=true pairs release with MADV_DONTDUMP (bmalloc): over a 32 MiB
 * stretch with scattered released pages the heap splits into at least 200
 * VMAs.  The default never changes per-VMA flags on sub-ranges: 1 VMA. */
#include "check.h"

static uint64_t scenario(const char *toggle) {
  hl_heap *h = HEAP(toggle, "warm_pages=0", "release_per_sweep=1048576");
  hl_ref r;
  OK(h, hl_fill(h, 32u << 20, 256, 0, &r));
  /* drop the objects of every other page: scattered empty pages */
  hl_object_info info;
  OK(h, hl_ref_info(h, r, &info));
  for (uint64_t i = 0; i < info.refs; i += 2) OK(h, hl_ref_set(h, r, i, 0));
  OK(h, hl_collect(h, 2, -1));
  uint64_t v = vmas_of(h);
  hl_stats s = stats_of(h);
  CHECK(s.released_pages >= 200, "released only %" PRIu64, s.released_pages);
  uint64_t sum, n;
  OK(h, hl_ref_checksum(h, r, &sum, &n));
  check_invariants(h);
  hl_heap_free(h);
  return v;
}

int main(void) {
  uint64_t on = scenario("dump_toggle=true");
  uint64_t off = scenario("dump_toggle=false");
  printf("VMAs over the heap: dump_toggle on %" PRIu64 ", off %" PRIu64 "\n", on, off);
  CHECK(on >= 200, "dump_toggle on: %" PRIu64 " VMAs", on);
  CHECK(off == 1, "dump_toggle off: %" PRIu64 " VMAs", off);
  return 0;
}
