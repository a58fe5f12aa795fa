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

/* "any" matches every call (heaplab.h): also the ones a site's own schedule
 * failed -- it counted only the others, so that its first/every schedules
 * counted another sequence than the program's calls (the release hunt,
 * session 25).  One failed call is one fault fired, whichever fired. */
static void any_sees_every_call(void) {
  hl_heap *h = HEAP("fallback_advice=none", "warm_pages=0", "release_per_sweep=1048576");
  OK(h, hl_inject(h, HL_SITE_any, HL_FAULT_first, 0, 12 /* ENOMEM: counts, fails none */));
  OK(h, hl_inject(h, HL_SITE_release, HL_FAULT_always, 0, 22 /* EINVAL */));
  hl_stats a = stats_of(h);
  hl_ref r;
  OK(h, hl_fill(h, 8u << 20, 256, 0, &r));
  OK(h, hl_ref_release(h, r));
  OK(h, hl_collect(h, 2, -1));
  OK(h, hl_trim(h));
  hl_stats b = stats_of(h);
  hl_fault_state f[HL_SITE_COUNT];
  size_t n;
  OK(h, hl_faults_get(h, f, HL_SITE_COUNT, &n));
  uint64_t real = b.syscalls - a.syscalls, failed = b.faults_fired - a.faults_fired;
  CHECK(f[HL_SITE_release].fired > 0 && failed == f[HL_SITE_release].fired,
        "%" PRIu64 " faults fired for %" PRIu64 " injected release failures", failed,
        (uint64_t)f[HL_SITE_release].fired);
  CHECK(f[HL_SITE_any].calls == real + failed,
        "'any' counted %" PRIu64 " calls of %" PRIu64 " (%" PRIu64 " made, %" PRIu64
        " failed by the release site's schedule)", (uint64_t)f[HL_SITE_any].calls, real + failed,
        real, failed);
  hl_heap_free(h);
}

/* dump_toggle: a release whose advice took but whose MADV_DONTDUMP was
 * refused (EAGAIN at vm.max_map_count, seed 001) is not recorded as
 * released either (release.c, release_run: "not recorded as released
 * unless it took") -- no test refused that call before (make coverage,
 * session 41).  The page goes back to the free pool, its dump flag not set;
 * the retry after the fault is disarmed releases it and excludes it. */
static void refused_dump_toggle(void) {
  hl_heap *h = HEAP("dump_toggle=true", "fallback_advice=none", "warm_pages=0",
                    "release_per_sweep=1048576");
  hl_ref r;
  OK(h, hl_fill(h, 8u << 20, 256, 0, &r));
  OK(h, hl_ref_release(h, r));
  OK(h, hl_inject(h, HL_SITE_dump, HL_FAULT_always, 0, 22 /* EINVAL */));
  OK(h, hl_collect(h, 2, -1));
  hl_stats s = stats_of(h);
  CHECK(s.released_pages == 0 && s.released_pool_pages == 0,
        "pages whose MADV_DONTDUMP was refused recorded as released: released %" PRIu64
        ", in the released pool %" PRIu64, s.released_pages, s.released_pool_pages);
  CHECK(s.rejected_pages >= s.total_pages && s.free_pool_pages == s.total_pages,
        "refused pages not back in the free pool: rejected %" PRIu64 ", free pool %" PRIu64
        " of %" PRIu64, s.rejected_pages, s.free_pool_pages, s.total_pages);
  check_invariants(h);
  OK(h, hl_inject(h, HL_SITE_dump, HL_FAULT_off, 0, 0));
  OK(h, hl_trim(h));
  s = stats_of(h);
  CHECK(s.released_pool_pages == s.total_pages, "the retry released only %" PRIu64 " of %" PRIu64,
        s.released_pool_pages, s.total_pages);
  check_invariants(h);
  hl_heap_free(h);
}

int main(void) {
  scenario(0);
  scenario(1);
  refused_dump_toggle();
  any_sees_every_call();
  return 0;
}
