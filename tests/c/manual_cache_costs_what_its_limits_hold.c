/* A thread's cache costs the system allocator what its bins can hold, not
 * tcache_blocks slots for every class.  Each class's bin used to be
 * tcache_blocks (1024) pointers long, whatever the class's limit: 416 KiB
 * per thread with 52 classes, and every class in use touched an OS page of
 * its own bin (bench-preload realloc, one string through every class: 52
 * pages).  The bins are packed now, each as long as its class's limit
 * (tcache_bytes' worth, 16..tcache_blocks): 100 KiB with the defaults.
 *
 * Measured as the system allocator's bytes in use (mallinfo2) across the
 * first allocation of a thread, which makes its cache; and the bins of two
 * neighbouring classes, one block cached in each, share an OS page. */
#include <malloc.h>
#include <stdint.h>

#include "check.h"
#include "manual/manual.h"

int main(void) {
  hl_heap *h = HEAP("mode=manual");
  uint64_t want = sizeof(hl_tcache);
  for (uint32_t c = 0; c < h->nclasses; c++) {
    uint64_t n = (uint64_t)h->opt.tcache_bytes / h->cls_size[c];
    uint64_t cap = (uint64_t)h->opt.tcache_blocks;
    want += (n > cap ? cap : n < 16 ? 16 : n) * sizeof(void *);
  }
  struct mallinfo2 m0 = mallinfo2(); /* (a big block is a mapping: hblkhd) */
  void *p = hl_malloc(h, 16); /* this thread's cache is made here */
  struct mallinfo2 m1 = mallinfo2();
  CHECK(p, "malloc: %s", hl_heap_error(h));
  CHECK(hl__tls_cache, "no thread cache was made");
  double got = (double)(m1.uordblks + m1.hblkhd) - (double)(m0.uordblks + m0.hblkhd);
  printf("%u classes: the cache took %.0f KiB of the system allocator (its bins hold %.0f KiB)\n",
         h->nclasses, got / 1024, (double)want / 1024);
  /* before the fix: 52 * 1024 * 8 = 416 KiB */
  CHECK(got <= (double)want + 16384, "the cache took %.0f KiB; its bins hold %.0f KiB",
        got / 1024, (double)want / 1024);
  /* one block cached in each of two neighbouring classes of 400 and 416
   * bytes (163 and 157 blocks' worth): their bin slots lie 1.3 KiB apart,
   * on one OS page or two neighbours (8 KiB apart before) */
  void *a = hl_malloc(h, 400), *b = hl_malloc(h, 416);
  hl_free(h, a);
  hl_free(h, b);
  hl_tcache *tc = hl__tls_cache;
  uint32_t ca = hl__class_of(h, 400), cb = hl__class_of(h, 416);
  uintptr_t sa = (uintptr_t)&hl__bin_of(tc, ca)[tc->count[ca] - 1];
  uintptr_t sb = (uintptr_t)&hl__bin_of(tc, cb)[tc->count[cb] - 1];
  CHECK(tc->count[ca] && tc->count[cb], "the freed blocks were not cached");
  CHECK(cb == ca + 1 && sb - sa < 4096,
        "class %u's cached block is %zu bytes past class %u's", cb, (size_t)(sb - sa), ca);
  hl_free(h, p);
  check_invariants(h);
  hl_heap_free(h);
  return 0;
}
