/* A thread's index of its caches (manual/manual.c: open addressing by heap
 * serial, linear probing, backward-shift deletion) finds every cache of the
 * heaps still open after others were freed: a block freed into the thread's
 * cache of a heap comes back from that cache at the next malloc of its size.
 * An entry whose probe run lost the one before it, and was not moved back
 * into the hole, is never found again: the thread makes a second cache for
 * that heap, and the blocks in the first are stranded.  No test removed an
 * entry with others after it in its run (make coverage, session 41): the
 * index hashes serials made one after another to different slots.  So the
 * heaps kept here are those whose serials share one home slot of the
 * thread's first index (16 slots: up to 7 caches); the others are freed
 * before they have a cache.  Then the heaps are freed from the front of the
 * run, and after each free every heap left must find its cache. */
#include "check.h"
#include "internal.h"

enum { RUN = 6, FIRST_SLOTS = 16 };

static uint32_t home(uint64_t serial) {
  return (uint32_t)((serial * 0x9E3779B97F4A7C15ull) >> 32) & (FIRST_SLOTS - 1);
}

int main(void) {
  hl_heap *h[RUN];
  void *cached[RUN];
  int n = 0, made = 0;
  uint32_t want = 0;
  while (n < RUN) {
    hl_heap *x = HEAP("mode=manual", "reserve_bytes=4m", "warm_pages=0");
    made++;
    CHECK(made < 100000, "no %d heaps of one home slot in %d", RUN, made);
    if (n == 0) want = home(x->serial);
    if (home(x->serial) != want) {
      hl_heap_free(x); /* (never had a cache of this thread's) */
      continue;
    }
    void *p = hl_malloc(x, 64);
    CHECK(p, "malloc: %s", hl_heap_error(x));
    hl_free(x, p); /* into this thread's cache of x */
    h[n] = x;
    cached[n++] = p;
  }
  for (int gone = 0; gone < RUN - 1; gone++) {
    hl_heap_free(h[gone]);
    for (int i = gone + 1; i < RUN; i++) {
      void *q = hl_malloc(h[i], 64);
      CHECK(q, "malloc in heap %d: %s", i, hl_heap_error(h[i]));
      CHECK(q == cached[i], "after %d heap(s) of its probe run freed, heap %d's malloc gave %p, "
            "not %p from this thread's cache: its cache was not found", gone + 1, i, q,
            cached[i]);
      hl_free(h[i], q);
    }
  }
  check_invariants(h[RUN - 1]);
  hl_heap_free(h[RUN - 1]);
  printf("ok: %d heaps of home slot %u (of %d made) found their caches as the run shrank\n", RUN,
         want, made);
  return 0;
}
