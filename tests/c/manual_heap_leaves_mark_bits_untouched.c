/* A manual heap never marks, so it never touches its pages' mark bits: the
 * side table keeps them apart from the allocation bits, and formatting a
 * page clears only the latter.  Before, the two bitmaps were interleaved
 * per page and both cleared: 1 KiB of side table resident per 64 KiB page
 * instead of 512 bytes (bench-preload server: 984 KiB instead of 508 KiB
 * at its peak).  Measured with mincore over each bitmap's range after 64
 * MiB of small blocks. */
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "internal.h"

int main(void) {
  hl_heap *h = HEAP("mode=manual", "page_size=65536");
  enum { N = 64 << 20 >> 6 };
  void **b = malloc(N * sizeof *b);
  CHECK(b, "malloc");
  for (int i = 0; i < N; i++) {
    b[i] = hl_malloc(h, 16 + (i % 4) * 16); /* four classes */
    CHECK(b[i], "malloc: %s", hl_heap_error(h));
  }
  uint32_t pages = h->high_water;
  uint64_t marks = mincore_resident((uintptr_t)hl__marks(h, 0), (uintptr_t)hl__marks(h, pages));
  uint64_t allocs = mincore_resident((uintptr_t)hl__allocs(h, 0), (uintptr_t)hl__allocs(h, pages));
  printf("%u pages: mark bits %.0f KiB resident, allocation bits %.0f KiB\n", pages,
         marks / 1024.0, allocs / 1024.0);
  CHECK(pages > 500, "only %u pages", pages);
  CHECK(allocs >= (uint64_t)pages * 256, "allocation bits of %u pages: %" PRIu64 " bytes resident",
        pages, allocs);
  CHECK(marks == 0, "a manual heap's mark bits: %" PRIu64 " bytes resident", marks);
  for (int i = 0; i < N; i++) hl_free(h, b[i]);
  check_invariants(h);
  free(b);
  hl_heap_free(h);
  return 0;
}
