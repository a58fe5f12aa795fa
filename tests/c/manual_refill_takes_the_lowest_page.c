/* A manual heap's refill takes its class's lowest-addressed page with free
 * slots (address-ordered first fit), not the page it owns when a lower page
 * has holes.  The owned page went on serving -- its holes, then its untouched
 * tail -- while the holes frees had left in the class's other pages waited:
 * each class's touched pages grew past the most blocks it ever held
 * (bench-preload classes: 610 KiB of holes at its peak).
 *
 * Here (no thread cache, 256-byte blocks, 256 to a 64 KiB page): three
 * pages are filled, 100 blocks of the first and one of the third (the owned
 * page) are freed; the next blocks must come from the first page's holes,
 * the owned page's hole last. */
#include <stdint.h>

#include "check.h"

#define SZ 256
enum { PER_PAGE = 65536 / SZ, N = 3 * PER_PAGE, FREED = 100 };

int main(void) {
  hl_heap *h = HEAP("mode=manual", "page_size=65536", "tcache_blocks=0");
  static void *b[N];
  uintptr_t lo = UINTPTR_MAX;
  for (int i = 0; i < N; i++) {
    b[i] = hl_malloc(h, SZ);
    CHECK(b[i], "malloc: %s", hl_heap_error(h));
    memset(b[i], 1, SZ);
    if ((uintptr_t)b[i] < lo) lo = (uintptr_t)b[i];
  }
  /* the pages of the three: 64 KiB-aligned (page_size) */
  uintptr_t first = lo & ~(uintptr_t)65535, last = first;
  for (int i = 0; i < N; i++)
    if (((uintptr_t)b[i] & ~(uintptr_t)65535) > last) last = (uintptr_t)b[i] & ~(uintptr_t)65535;
  CHECK(last == first + 2 * 65536, "the %d blocks are not on three adjacent pages", N);
  int freed = 0, owned_hole = -1;
  for (int i = 0; i < N; i++) {
    uintptr_t pg = (uintptr_t)b[i] & ~(uintptr_t)65535;
    if (pg == first && freed < FREED) {
      hl_free(h, b[i]);
      b[i] = NULL;
      freed++;
    } else if (pg == last && owned_hole < 0) {
      hl_free(h, b[i]);
      b[i] = NULL;
      owned_hole = i;
    }
  }
  int in_first = 0, in_last = 0;
  static void *again[FREED + 1];
  for (int i = 0; i < FREED + 1; i++) {
    again[i] = hl_malloc(h, SZ);
    CHECK(again[i], "malloc: %s", hl_heap_error(h));
    uintptr_t pg = (uintptr_t)again[i] & ~(uintptr_t)65535;
    if (pg == first && in_last == 0) in_first++;
    if (pg == last) in_last++;
  }
  printf("the first %d new blocks on the lowest page, %d on the owned page\n", in_first, in_last);
  CHECK(in_first == FREED, "%d of the first %d new blocks took the lowest page's holes",
        in_first, FREED);
  CHECK(in_last == 1, "the owned page's hole taken %d times", in_last);
  for (int i = 0; i < FREED + 1; i++) hl_free(h, again[i]);
  for (int i = 0; i < N; i++)
    if (b[i]) hl_free(h, b[i]);
  check_invariants(h);
  hl_heap_free(h);
  return 0;
}
