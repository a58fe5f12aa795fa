/* sweep=retired, major_sweep=never: pages swept while partly live keep their
 * dead slots until a major sweep; with major_sweep=always or sweep=full they
 * do not. */
#include "check.h"

/* Fill, then drop every other object: each page is half dead. Collect once
 * (pages go partial), then drop the survivors and collect again. Returns
 * the small bytes still held by dead objects. */
static uint64_t scenario(const char *sweep, const char *major) {
  char a[64], b[64];
  snprintf(a, sizeof a, "sweep=%s", sweep);
  snprintf(b, sizeof b, "major_sweep=%s", major);
  hl_heap *h = HEAP(a, b, "page_release=false", "gc_trigger_bytes=1g");
  enum { N = 20000 };
  hl_ref root;
  OK(h, hl_alloc(h, 0, N, &root));
  for (uint64_t i = 0; i < N; i++) {
    hl_ref o;
    OK(h, hl_alloc(h, 100, 0, &o));
    OK(h, hl_ref_set(h, root, i, o));
    OK(h, hl_ref_release(h, o));
  }
  for (uint64_t i = 0; i < N; i += 2) OK(h, hl_ref_set(h, root, i, 0));
  OK(h, hl_collect(h, 1, -1));
  hl_stats s = stats_of(h);
  CHECK(s.partial_pool_pages > 0, "no partial pages after the first sweep");
  OK(h, hl_ref_release(h, root));
  /* allocation-free cycles: quiet, but major_sweep decides */
  OK(h, hl_collect(h, 3, -1));
  s = stats_of(h);
  uint64_t held = s.small_live_bytes;
  check_invariants(h);
  hl_heap_free(h);
  return held;
}

int main(void) {
  uint64_t never = scenario("retired", "never");
  uint64_t always = scenario("retired", "always");
  uint64_t full = scenario("full", "never");
  CHECK(never >= 10000ull * 112, "retired/never released dead slots: %" PRIu64 " bytes held", never);
  CHECK(always == 0, "retired/always still holds %" PRIu64 " bytes", always);
  CHECK(full == 0, "full/never still holds %" PRIu64 " bytes", full);
  printf("dead bytes held: retired+never %" PRIu64 ", retired+always %" PRIu64 ", full %" PRIu64 "\n",
         never, always, full);
  return 0;
}
