/* A manual heap's refill reserves no more slots of its page than it takes.
 * It used to reserve a run of up to 256 slots for a refill of half a cache
 * and keep the rest in the class's allocation word, so the next refill went
 * on through those fresh slots while the holes its frees had left in the
 * same page waited: the class touched memory it did not need.
 *
 * Here, 256-byte blocks (a refill takes 128: half of 64 KiB / 256): 128 are
 * allocated and written, 100 of them freed and sent home; the next 128 must
 * take those 100 holes first, and the page's resident bytes grow only by
 * the 28 blocks beyond them. */
#include <stdint.h>

#include "check.h"

#define SZ 256

int main(void) {
  hl_heap *h = HEAP("mode=manual", "page_size=65536");
  enum { FIRST = 128, FREED = 100, AGAIN = 128 };
  void *b[FIRST], *again[AGAIN];
  for (int i = 0; i < FIRST; i++) {
    b[i] = hl_malloc(h, SZ);
    CHECK(b[i], "malloc: %s", hl_heap_error(h));
    memset(b[i], 1, SZ);
  }
  uintptr_t lo = (uintptr_t)b[0], hi = lo;
  for (int i = 0; i < FIRST; i++) {
    if ((uintptr_t)b[i] < lo) lo = (uintptr_t)b[i];
    if ((uintptr_t)b[i] > hi) hi = (uintptr_t)b[i];
  }
  for (int i = 0; i < FREED; i++) hl_free(h, b[i]);
  hl_thread_flush(h); /* the cached ones go home */
  uint64_t before = resident_of(h);
  int in_holes = 0;
  for (int i = 0; i < AGAIN; i++) {
    again[i] = hl_malloc(h, SZ);
    CHECK(again[i], "malloc: %s", hl_heap_error(h));
    memset(again[i], 2, SZ);
    for (int k = 0; k < FREED; k++)
      if (again[i] == b[k]) in_holes++;
  }
  uint64_t after = resident_of(h);
  printf("%d of %d new blocks took the %d holes; resident %+.0f KiB\n", in_holes, AGAIN, FREED,
         ((double)after - (double)before) / 1024);
  CHECK(in_holes == FREED, "%d of the %d holes reused by %d new blocks", in_holes, FREED, AGAIN);
  /* 28 new blocks: 7 KiB, two OS pages at most; before the fix 32 KiB */
  CHECK(after <= before + 12288, "resident grew by %.0f KiB",
        ((double)after - (double)before) / 1024);
  for (int i = 0; i < AGAIN; i++) hl_free(h, again[i]);
  for (int i = FREED; i < FIRST; i++) hl_free(h, b[i]);
  check_invariants(h);
  hl_heap_free(h);
  return 0;
}
