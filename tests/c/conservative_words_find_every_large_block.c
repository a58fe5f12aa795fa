/* Conservative interior words find the large block they point into among
 * thousands, through the mark's index of large blocks and without it.
 *
 * A mark with a conservative region (conservative_interior=true) and large
 * objects sorts the blocks by address into an index, borrowed from the top
 * of the marking thread's stack reservation (gc/mark.c: a mark allocates
 * nothing), and binary-searches it per word; when the stack has no room for
 * the index it walks the list of blocks instead.  BLOCKS large objects of
 * varied sizes (so their addresses do not follow their order), a region
 * word for each: into the payload (at a varied offset) for every odd one,
 * one byte past the end for every even one.  After a full collection
 * exactly the odd ones are left, with their payloads, whichever way the
 * words were resolved (the second round shrinks the stack through the
 * heap's internals so that the index cannot be made). */
#include "check.h"
#include "internal.h"

enum { BLOCKS = 3000 };

static uintptr_t region[BLOCKS];

static void run(bool indexed) {
  hl_heap *h = HEAP("conservative_interior=true", "mark_threads=1");
  OK(h, hl_roots_add(h, (void *)region, BLOCKS, 1));
  uint64_t sizes[BLOCKS];
  hl_enter(h);
  for (uint64_t i = 0; i < BLOCKS; i++) {
    sizes[i] = 600 + (i * 7919) % 6000; /* above small_max: large */
    uint8_t *obj = hl_obj_new(h, sizes[i], 0);
    CHECK(obj, "large %" PRIu64 ": %s", i, hl_heap_error(h));
    uint8_t *payload = hl_obj_payload(obj);
    memset(payload, (int)(i & 0xff), sizes[i]);
    /* odd: a word into the payload; even: one byte past the end */
    __atomic_store_n(&region[i], (uintptr_t)(payload + (i & 1 ? (i * 31) % sizes[i] : sizes[i])),
                     __ATOMIC_RELAXED);
  }
  hl_leave(h);
  CHECK(stats_of(h).large_objects == BLOCKS, "allocated %" PRIu64 " large objects",
        stats_of(h).large_objects);
  uint64_t cap = h->mark_cap;
  if (!indexed) h->mark_cap = 64; /* no room for an index of BLOCKS blocks */
  OK(h, hl_collect(h, 1, 1));
  h->mark_cap = cap;
  hl_stats s = stats_of(h);
  CHECK(s.large_objects == BLOCKS / 2, "%s: %" PRIu64 " large objects left, expected %d",
        indexed ? "indexed" : "list", s.large_objects, BLOCKS / 2);
  CHECK(s.marked_objects == BLOCKS / 2, "%s: %" PRIu64 " objects marked, expected %d",
        indexed ? "indexed" : "list", s.marked_objects, BLOCKS / 2);
  for (uint64_t i = 1; i < BLOCKS; i += 2) {
    const uint8_t *payload = (const uint8_t *)(region[i] - (i * 31) % sizes[i]);
    for (uint64_t k = 0; k < sizes[i]; k += 97)
      CHECK(payload[k] == (uint8_t)(i & 0xff), "%s: block %" PRIu64 " changed at %" PRIu64,
            indexed ? "indexed" : "list", i, k);
  }
  printf("%s: %d large blocks, the %d that interior words point into kept\n",
         indexed ? "indexed" : "list", BLOCKS, BLOCKS / 2);
  OK(h, hl_roots_remove(h, (void *)region));
  hl_heap_free(h);
}

int main(void) {
  run(true);
  run(false);
  return 0;
}
