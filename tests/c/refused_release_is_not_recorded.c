/* A refused release is never recorded as released: the page goes back to the
 * free pool and a later trim retries it.  record_refused_release=true is the
 * seed's defect: the pages are filed as released and stay resident. */
#include "check.h"

static void scenario(int defect) {
  hl_heap *h = HEAP(defect ? "record_refused_release=true" : "record_refused_release=false",
                    "fallback_advice=none", "warm_pages=0", "release_per_sweep=1048576");
  hl_ref r;
  OK(h, hl_fill(h, 32u << 20, 256, 0, &r));
  OK(h, hl_ref_release(h, r));
  OK(h, hl_inject(h, HL_SITE_release, HL_FAULT_always, 0, 22 /* EINVAL */));
  OK(h, hl_collect(h, 2, -1));
  hl_stats s = stats_of(h);
  uint64_t res = resident_of(h);
  if (!defect) {
    CHECK(s.released_pages == 0 && s.rejected_pages >= s.total_pages,
          "refused pages recorded: released %" PRIu64 " rejected %" PRIu64, s.released_pages,
          s.rejected_pages);
    CHECK(s.free_pool_pages == s.total_pages, "refused pages not back in the free pool");
    OK(h, hl_inject(h, HL_SITE_release, HL_FAULT_off, 0, 0));
    OK(h, hl_trim(h));
    s = stats_of(h);
    CHECK(s.released_pool_pages == s.total_pages, "the retry released only %" PRIu64,
          s.released_pool_pages);
    CHECK(resident_of(h) == 0, "released pages still resident: %.1f MiB", resident_of(h) / MiB);
  } else {
    CHECK(s.released_pool_pages == s.total_pages, "the defect did not file pages as released");
    CHECK(res >= (32ull << 20), "the defect's pages are not resident (%.1f MiB)", res / MiB);
    OK(h, hl_inject(h, HL_SITE_release, HL_FAULT_off, 0, 0));
    OK(h, hl_trim(h));
    CHECK(resident_of(h) >= (32ull << 20), "a later trim fixed the defect's pages");
  }
  check_invariants(h);
  hl_heap_free(h);
}

int main(void) {
  scenario(0);
  scenario(1);
  return 0;
}
