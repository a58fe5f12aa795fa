/* A thread's cache costs what it holds, not what its limits could hold.
 *
 * History: each class's bin was tcache_blocks (1024) pointers long, 416 KiB
 * per thread with 52 classes, and every class in use touched an OS page of
 * its own bin; then the bins were packed, each as long as its class's limit
 * (100 KiB), and still a class in use wrote half its limit's pointers on its
 * first refill (4 KiB for the small classes) and took that many slots from
 * the pages.  Now a class's cache starts at 16 blocks and doubles with use
 * (each refill, each free into a full cache) up to its limit, and its bin is
 * handed out from the cache's room when the class is first used and moved to
 * a longer one as it grows.
 *
 * Checked: (1) the system allocator's bytes for the cache stay under three
 * times what the limits hold (the bins' sizes 16, 32, ... each handed out
 * once); (2) one block cached in each of two classes far apart in the table
 * (16 bytes and the last, 512) lies a bin of 16 slots apart, not a table of bins;
 * (3) a few blocks of every class take 16 slots of the room a class; (4) a
 * class in heavy use still caches up to its limit; (5) with every class in
 * heavy use, the bins the classes outgrew are reused. */
#include <inttypes.h>
#include <malloc.h>
#include <stdint.h>

#include "check.h"
#include "manual/manual.h"

int main(void) {
  hl_heap *h = HEAP("mode=manual");
  uint64_t want = 0;
  for (uint32_t c = 0; c < h->nclasses; c++) {
    uint64_t n = (uint64_t)h->opt.tcache_bytes / h->cls_size[c];
    uint64_t cap = (uint64_t)h->opt.tcache_blocks;
    want += (n > cap ? cap : n < 16 ? 16 : n) * sizeof(void *);
  }
  struct mallinfo2 m0 = mallinfo2(); /* (a big block is a mapping: hblkhd) */
  void *p = hl_malloc(h, 16); /* this thread's cache is made here */
  struct mallinfo2 m1 = mallinfo2();
  CHECK(p, "malloc: %s", hl_heap_error(h));
  hl_tcache *tc = hl__tls.cache;
  CHECK(tc, "no thread cache was made");
  double got = (double)(m1.uordblks + m1.hblkhd) - (double)(m0.uordblks + m0.hblkhd);
  printf("%u classes: the cache took %.0f KiB of the system allocator (its limits hold %.0f "
         "KiB)\n", h->nclasses, got / 1024, (double)want / 1024);
  CHECK(got <= 3.0 * (double)want + 16384, "the cache took %.0f KiB; its limits hold %.0f KiB",
        got / 1024, (double)want / 1024);
  uint32_t c16 = hl__class_of(h, 16);
  CHECK(tc->cap[c16] == 16 && tc->used == 16,
        "the first malloc of 16 bytes gave its class a bin of %u slots (%u used): 16 expected",
        tc->cap[c16], tc->used);

  /* (2) one block cached in the 16-byte class and one in the last class */
  size_t big = h->cls_size[h->nclasses - 1];
  void *a = hl_malloc(h, big);
  hl_free(h, p);
  hl_free(h, a);
  uint32_t ck = h->nclasses - 1;
  CHECK(tc->count[c16] && tc->count[ck], "the freed blocks were not cached (%u, %u; classes %u %u)", tc->count[c16], tc->count[ck], c16, ck);
  uintptr_t s16 = (uintptr_t)&hl__bin_of(tc, c16)[0], sk = (uintptr_t)&hl__bin_of(tc, ck)[0];
  CHECK(sk - s16 == 16 * sizeof(void *),
        "the %zu-byte class's bin is %zu bytes past the 16-byte class's: the bins are not handed "
        "out in the order the classes are used", big, (size_t)(sk - s16));

  /* (3) a block of every class, allocated and freed */
  for (uint32_t c = 0; c < h->nclasses; c++) hl_free(h, hl_malloc(h, h->cls_size[c]));
  printf("a block of each of %u classes: %u slots of bins (%zu bytes)\n", h->nclasses, tc->used,
         (size_t)tc->used * sizeof(void *));
  CHECK(tc->used <= 16 * h->nclasses, "%u slots of bins for a block of each of %u classes",
        tc->used, h->nclasses);

  /* (4) heavy use of one class: the cache grows to the class's limit */
  uint32_t lim = tc->limit_max[c16], n = 4 * lim;
  void **blocks = malloc(n * sizeof *blocks);
  CHECK(blocks, "malloc");
  for (uint32_t i = 0; i < n; i++) CHECK(blocks[i] = hl_malloc(h, 16), "malloc");
  /* every other block: no page empties (that would cut the cache: manual.c) */
  for (uint32_t i = 0; i < n; i += 2) hl_free(h, blocks[i]);
  printf("after %u frees of 16 bytes: want %u, bin %u, limit %u, %u cached\n", n / 2,
         tc->want[c16], tc->cap[c16], lim, tc->count[c16]);
  CHECK(tc->want[c16] == lim && tc->cap[c16] == lim && tc->count[c16] >= lim / 2,
        "the 16-byte class caches %u of its %u (want %u, bin %u)", tc->count[c16], lim,
        tc->want[c16], tc->cap[c16]);
  CHECK(tc->used <= tc->room, "the bins took %u slots of a room of %u", tc->used, tc->room);
  for (uint32_t i = 1; i < n; i += 2) hl_free(h, blocks[i]);

  /* (5) every class in heavy use: the bins a class outgrew serve the next
   * classes (212 KiB handed out for 95 KiB of final bins without that) */
  for (uint32_t c = 0; c < h->nclasses; c++) {
    uint32_t m = 4 * tc->limit_max[c] < n ? 4 * tc->limit_max[c] : n;
    for (uint32_t i = 0; i < m; i++) CHECK(blocks[i] = hl_malloc(h, h->cls_size[c]), "malloc");
    for (uint32_t i = 0; i < m; i += 2) hl_free(h, blocks[i]);
    for (uint32_t i = 1; i < m; i += 2) hl_free(h, blocks[i]);
  }
  uint64_t caps = 0;
  for (uint32_t c = 0; c < h->nclasses; c++) caps += tc->cap[c];
  printf("every class in use: %u slots of bins handed out for %" PRIu64 " in the final bins\n",
         tc->used, caps);
  CHECK(tc->used <= caps + caps / 4, "%u slots of bins handed out for %" PRIu64
        " in the final bins: the outgrown bins are not reused", tc->used, caps);
  free(blocks);
  check_invariants(h);
  hl_heap_free(h);
  return 0;
}
