/* fill(192 MiB, 256), drop, collect: heap residency (mincore) falls to at
 * most warm_pages x page_size plus 1% of the filled bytes; with
 * page_release=false it stays above 95% of them. */
#include "check.h"

static uint64_t after_drop(const char *release, uint64_t *filled) {
  hl_heap *h = HEAP(release);
  hl_ref r;
  OK(h, hl_fill(h, 192u << 20, 256, 0, &r));
  *filled = resident_of(h);
  OK(h, hl_ref_release(h, r));
  collect_settled(h);
  uint64_t res = resident_of(h);
  check_invariants(h);
  hl_heap_free(h);
  return res;
}

int main(void) {
  uint64_t filled_on, filled_off;
  uint64_t on = after_drop("page_release=true", &filled_on);
  uint64_t off = after_drop("page_release=false", &filled_off);
  printf("page_release on: %.1f -> %.1f MiB; off: %.1f -> %.1f MiB\n", filled_on / MiB, on / MiB,
         filled_off / MiB, off / MiB);
  CHECK(filled_on >= (192ull << 20), "the fill left only %.1f MiB resident", filled_on / MiB);
  CHECK(on <= 64 * 65536 + filled_on / 100, "page_release on kept %.1f MiB resident", on / MiB);
  CHECK(off > filled_off * 95 / 100, "page_release off kept only %.1f MiB resident", off / MiB);
  return 0;
}
