/* The sub-page release keeps an OS page whose live slots are all in the
 * middle of it: with 16-byte slots an OS page holds 256 slots, four words of
 * the allocation bitmap, and the words between its first and last must be
 * read too (release/subpage.c slots_free).  Here one OS page of a page keeps
 * live objects in its second bitmap word alone; the trim releases the page's
 * other 15 OS pages, not that one, and every live object keeps its payload.
 *
 * Why: slots_free's middle words were read by no test (make coverage at
 * ee5b4a1, subpage.c 98): the sub-page tests' slots are 512 bytes (8 to an
 * OS page, one word).  Without that read the OS page was released under
 * the live objects: they read zeros. */
#include "check.h"

enum { OS = 4096, SLOT = 16, PER_OS = OS / SLOT, OS_PAGES = 16, N = OS_PAGES * PER_OS };
enum { KEEP_LO = PER_OS + 64, KEEP_HI = PER_OS + 128 }; /* OS page 1's second word */

static hl_ref objs[N];

int main(void) {
  hl_heap *h = HEAP("subpage_release=true", "warm_pages=0", "warm_demand_trims=0",
                    "page_size=65536", "fallback_advice=none", "gc_trigger_bytes=1073741824");
  for (uint64_t i = 0; i < N; i++) {
    OK(h, hl_alloc(h, SLOT - 8, 0, &objs[i]));
    OK(h, hl_ref_write(h, objs[i], 0, &i, sizeof i));
  }
  hl_object_info first, last;
  OK(h, hl_ref_info(h, objs[0], &first));
  OK(h, hl_ref_info(h, objs[N - 1], &last));
  CHECK(last.object - first.object == (uint64_t)(N - 1) * SLOT && first.object % 65536 == 0,
        "the %d objects are not one page of %d-byte slots from its start (%#" PRIx64 " .. %#"
        PRIx64 ")", N, SLOT, first.object, last.object);
  for (uint64_t i = 0; i < N; i++)
    if (i < KEEP_LO || i >= KEEP_HI) OK(h, hl_ref_release(h, objs[i]));
  OK(h, hl_collect(h, 1, 1));
  OK(h, hl_trim(h));
  hl_stats s = stats_of(h);
  CHECK(s.subpage_released_bytes == (OS_PAGES - 1) * OS,
        "%" PRIu64 " bytes released, expected the %d OS pages without a live slot",
        s.subpage_released_bytes, OS_PAGES - 1);
  CHECK(mincore_resident(first.object + OS, first.object + 2 * OS) == OS,
        "the OS page of the live objects is not resident");
  for (uint64_t i = KEEP_LO; i < KEEP_HI; i++) {
    uint64_t v = ~i;
    OK(h, hl_ref_read(h, objs[i], 0, &v, sizeof v));
    CHECK(v == i, "object %" PRIu64 " (OS page 1, slot %" PRIu64 ") reads %" PRIu64, i,
          i - PER_OS, v);
  }
  check_invariants(h);
  hl_heap_free(h);
  puts("ok");
  return 0;
}
