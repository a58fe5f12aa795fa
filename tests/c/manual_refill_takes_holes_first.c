/* A manual heap's refill takes the holes its frees left in a class's pages
 * before the untouched tail of the page it is cutting from.  A freed block
 * goes home to the page it came from; before the fix the owned page was
 * bumped to its end while those holes waited, so each size class touched up
 * to a whole 64 KiB page more than its blocks needed (bench-preload
 * classes: 1.2 MiB of 8 with 37 classes in use).  And a refill reserves no
 * more slots than it takes: a 256-slot run reserved for a refill of 16
 * blocks marched the class across slots it did not need.
 *
 * Here: four full pages of 256-byte blocks and half a fifth; every other
 * block of the four freed; 400 new blocks must all land in those holes,
 * and the reservation's resident bytes must not grow. */
#include <stdint.h>

#include "check.h"

#define SZ 256
#define PER_PAGE (65536 / SZ)

int main(void) {
  hl_heap *h = HEAP("mode=manual", "page_size=65536", "warm_pages=16");
  /* EXTRA: the fifth page's first refill (half the class's cache limit of
   * 64 KiB / 256), all handed out, so no slot of it waits in the cache */
  enum { FULL = 4 * PER_PAGE, EXTRA = 128, AGAIN = 400 };
  void *b[FULL + EXTRA], *again[AGAIN];
  for (int i = 0; i < FULL + EXTRA; i++) {
    b[i] = hl_malloc(h, SZ);
    CHECK(b[i], "malloc: %s", hl_heap_error(h));
    memset(b[i], 1, SZ);
  }
  /* the first FULL blocks fill their pages: the pages of blocks 0 and FULL-1 */
  uintptr_t lo = (uintptr_t)b[0] & ~(uintptr_t)65535, hi = ((uintptr_t)b[FULL - 1] | 65535) + 1;
  CHECK(hi - lo == 4 * 65536, "the first %d blocks span %zu bytes, not 4 pages", FULL,
        (size_t)(hi - lo));
  uintptr_t owned = (uintptr_t)b[FULL] & ~(uintptr_t)65535;
  CHECK(owned >= hi || owned < lo, "block %d is not on a fifth page", FULL);
  for (int i = 0; i < FULL; i += 2) hl_free(h, b[i]);
  hl_thread_flush(h); /* the cached ones go home too */
  uint64_t before = resident_of(h);
  int in_holes = 0, in_tail = 0;
  for (int i = 0; i < AGAIN; i++) {
    again[i] = hl_malloc(h, SZ);
    CHECK(again[i], "malloc: %s", hl_heap_error(h));
    memset(again[i], 2, SZ);
    uintptr_t a = (uintptr_t)again[i];
    if (a >= lo && a < hi) in_holes++;
    else if ((a & ~(uintptr_t)65535) == owned) in_tail++;
  }
  uint64_t after = resident_of(h);
  printf("%d of %d new blocks in the holes, %d in the owned page's tail; resident %+.0f KiB\n",
         in_holes, AGAIN, in_tail, ((double)after - (double)before) / 1024);
  CHECK(in_holes == AGAIN, "%d of %d new blocks took the holes (%d the owned page's fresh tail)",
        in_holes, AGAIN, in_tail);
  CHECK(after <= before + 8192, "resident grew by %.0f KiB for blocks that fit in holes",
        ((double)after - (double)before) / 1024);
  for (int i = 0; i < AGAIN; i++) hl_free(h, again[i]);
  for (int i = 1; i < FULL; i += 2) hl_free(h, b[i]);
  for (int i = FULL; i < FULL + EXTRA; i++) hl_free(h, b[i]);
  check_invariants(h);
  hl_heap_free(h);
  return 0;
}
