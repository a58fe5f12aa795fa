/* compact: after a full mark, the live objects of sparse pages move to other
 * pages of their class and every reference the heap knows of follows them:
 *   - handles (hl_ref), slots of small and large objects, a precise root
 *     region: after the move each still reaches an object with the same
 *     contents, and with verify on the cycle checks that no handle, slot or
 *     precise root word still holds an evacuated object;
 *   - objects do move (addresses change, stats count them) and the emptied
 *     pages go back to the OS;
 *   - an object a conservative root region points into (an interior word)
 *     stays where it is, and so does its page;
 *   - while the heap is held (hl_enter) nothing moves: a C client's raw
 *     pointers stay valid through the cycles it runs;
 *   - compact=never moves nothing, compact=always packs pages at 50% too;
 *   - a word pointing into a moved object (not at its start) is left as it
 *     is; pinned_objects counts the pinned object once, however many
 *     conservative words point into it, not its page's other objects;
 *   - objects with references moved onto pages of leaves (no references
 *     before) keep theirs: the destination's slots are updated too;
 *   - checksums are the same after any number of compactions. */
#include "check.h"

#define N 20000
static void *region[64];     /* precise */
static uintptr_t cons[4];    /* conservative */
static uintptr_t inner[2];   /* precise, words into objects */

static uint64_t payload_of(hl_heap *h, hl_ref r) {
  uint64_t v;
  OK(h, hl_ref_read(h, r, 0, &v, 8));
  return v;
}
static uint64_t address_of(hl_heap *h, hl_ref r) {
  hl_object_info info;
  OK(h, hl_ref_info(h, r, &info));
  return info.object;
}

/* A list of n objects (slot 0: next, payload: i) spread over many pages by
 * garbage allocated between them; with big, every 16th object also in
 * big's slots, every 1000th in a handle, and the first 64 of every 300th in
 * the precise root region. */
static void sparse_list(hl_heap *h, uint64_t n, hl_ref *head, hl_ref *big, hl_ref *handles) {
  hl_ref prev = 0;
  *head = 0;
  int nr = 0;
  for (uint64_t i = 0; i < n; i++) {
    hl_ref o, junk;
    OK(h, hl_alloc(h, 48, 1, &o));
    OK(h, hl_ref_write(h, o, 0, &i, 8));
    for (int g = 0; g < 9; g++) { /* 9 dead for 1 live: pages 10% live */
      OK(h, hl_alloc(h, 48, 1, &junk));
      OK(h, hl_ref_release(h, junk));
    }
    if (prev) {
      OK(h, hl_ref_set(h, prev, 0, o));
      OK(h, hl_ref_release(h, prev));
    } else {
      OK(h, hl_ref_dup(h, o, head));
    }
    if (big) {
      if (i % 16 == 0) OK(h, hl_ref_set(h, *big, i / 16, o));
      if (i % 1000 == 0) OK(h, hl_ref_dup(h, o, &handles[i / 1000]));
      if (i % 300 == 0 && nr < 64) region[nr++] = (void *)(uintptr_t)address_of(h, o);
    }
    prev = o;
  }
  OK(h, hl_ref_release(h, prev));
}

/* The list of N objects, big, the handles and the root region's words. */
static void build(hl_heap *h, hl_ref *head, hl_ref *big, hl_ref handles[N / 1000]) {
  OK(h, hl_alloc(h, 0, N / 16, big));
  sparse_list(h, N, head, big, handles);
}

static void check_all(hl_heap *h, hl_ref head, hl_ref big, hl_ref handles[N / 1000]) {
  hl_ref o;
  OK(h, hl_ref_dup(h, head, &o));
  for (uint64_t i = 0; i < N; i++) {
    CHECK(o, "the list ends at %" PRIu64, i);
    CHECK(payload_of(h, o) == i, "list object %" PRIu64 " holds %" PRIu64, i, payload_of(h, o));
    if (i % 16 == 0) {
      hl_ref b;
      OK(h, hl_ref_get(h, big, i / 16, &b));
      CHECK(address_of(h, b) == address_of(h, o), "large slot %" PRIu64 " is stale", i / 16);
      OK(h, hl_ref_release(h, b));
    }
    if (i % 1000 == 0)
      CHECK(address_of(h, handles[i / 1000]) == address_of(h, o), "handle %" PRIu64 " is stale",
            i / 1000);
    if (i % 300 == 0 && i / 300 < 64)
      CHECK((uint64_t)(uintptr_t)region[i / 300] == address_of(h, o),
            "root region word %" PRIu64 " is stale", i / 300);
    hl_ref next;
    OK(h, hl_ref_get(h, o, 0, &next));
    OK(h, hl_ref_release(h, o));
    o = next;
  }
  CHECK(!o, "the list is longer than %d", N);
}

/* Leaves (no references) on dense pages, then a list of objects of the
 * same slot size (48 bytes and one reference: 56 and none) on sparse
 * pages: compaction moves the list onto the leaves' pages, and the moved
 * objects' slots -- now on pages that held no references -- are updated. */
static void references_moved_onto_pages_of_leaves(void) {
  hl_heap *h = HEAP("compact=sparse", "verify=true", "warm_pages=0", "page_size=16k");
  hl_ref leaves, head;
  OK(h, hl_alloc(h, 0, 4000, &leaves));
  for (uint64_t i = 0; i < 4000; i++) {
    hl_ref o;
    OK(h, hl_alloc(h, 56, 0, &o));
    if (i % 10) OK(h, hl_ref_set(h, leaves, i, o)); /* 90% live */
    OK(h, hl_ref_release(h, o));
  }
  sparse_list(h, 300, &head, NULL, NULL);
  OK(h, hl_collect(h, 1, 1));
  hl_stats s = stats_of(h);
  CHECK(s.evacuated_objects >= 150, "leaves: %" PRIu64 " objects moved", s.evacuated_objects);
  for (int pass = 0; pass < 2; pass++) { /* after the move, and after a mark of it */
    hl_ref o;
    OK(h, hl_ref_dup(h, head, &o));
    for (uint64_t i = 0; i < 300; i++) {
      CHECK(o, "leaves: the list ends at %" PRIu64, i);
      CHECK(payload_of(h, o) == i, "leaves: list object %" PRIu64 " holds %" PRIu64, i,
            payload_of(h, o));
      hl_ref next;
      OK(h, hl_ref_get(h, o, 0, &next));
      OK(h, hl_ref_release(h, o));
      o = next;
    }
    CHECK(!o, "leaves: the list is longer than 300");
    OK(h, hl_collect(h, 1, 1));
  }
  check_invariants(h);
  hl_heap_free(h);
}

/* sweep=retired, major_sweep=never: a partial page keeps the slots that
 * died on it until a major sweep.  Such a page is no source, however
 * sparse, until a sweep frees its dead: moving its allocated slots moved
 * the dead ones too, as live (the mutation audit, session 37).  Its pages
 * first swept at 40% live with the heap held (nothing moves then), then
 * half the survivors dropped: 40% used, 20% live. */
static void pages_with_unswept_garbage_wait(void) {
  hl_heap *h = HEAP("compact=sparse", "compact_live_pct=50", "sweep=retired",
                    "major_sweep=never", "verify=true", "page_release=false",
                    "gc_trigger_bytes=1g", "page_size=16k");
  enum { M = 20000 };
  hl_ref root;
  OK(h, hl_alloc(h, 0, M, &root));
  for (uint64_t i = 0; i < M; i++) {
    hl_ref o;
    OK(h, hl_alloc(h, 100, 0, &o));
    OK(h, hl_ref_write(h, o, 0, &i, 8));
    OK(h, hl_ref_set(h, root, i, o));
    OK(h, hl_ref_release(h, o));
  }
  for (uint64_t i = 0; i < M; i++)
    if (i % 5 >= 2) OK(h, hl_ref_set(h, root, i, 0)); /* 40% live */
  hl_enter(h);
  OK(h, hl_collect(h, 1, 0));
  hl_leave(h);
  for (uint64_t i = 0; i < M; i += 5) OK(h, hl_ref_set(h, root, i, 0)); /* 20% live */
  uint64_t moved0 = stats_of(h).evacuated_objects;
  OK(h, hl_collect(h, 1, 0));
  hl_stats s = stats_of(h);
  CHECK(s.evacuated_objects == moved0, "%" PRIu64 " objects moved off pages with unswept garbage",
        s.evacuated_objects - moved0);
  for (uint64_t i = 1; i < M; i += 5) {
    hl_ref o;
    OK(h, hl_ref_get(h, root, i, &o));
    CHECK(payload_of(h, o) == i, "unswept: object %" PRIu64 " holds %" PRIu64, i, payload_of(h, o));
    OK(h, hl_ref_release(h, o));
  }
  check_invariants(h);
  hl_heap_free(h);
}

int main(void) {
  references_moved_onto_pages_of_leaves();
  pages_with_unswept_garbage_wait();
  hl_heap *h = HEAP("compact=sparse", "verify=true", "warm_pages=0", "warm_demand_trims=0",
                    "page_size=16k");
  OK(h, hl_roots_add(h, region, 64, 0));
  hl_ref head, big, handles[N / 1000];
  build(h, &head, &big, handles);
  check_all(h, head, big, handles);
  uint64_t sum0, n0;
  OK(h, hl_ref_checksum(h, head, &sum0, &n0));

  /* a conservative word into the middle of list object 5000 pins it */
  hl_ref pinned;
  OK(h, hl_ref_dup(h, head, &pinned));
  for (int i = 0; i < 5000; i++) {
    hl_ref n;
    OK(h, hl_ref_get(h, pinned, 0, &n));
    OK(h, hl_ref_release(h, pinned));
    pinned = n;
  }
  uint64_t pin_at = address_of(h, pinned);
  cons[1] = (uintptr_t)pin_at + 20;
  cons[2] = (uintptr_t)pin_at + 8; /* the same object again: one pin */
  OK(h, hl_ref_release(h, pinned));
  OK(h, hl_roots_add(h, cons, 4, 1));
  /* a precise word into handle 3's object (its payload, not its start) */
  inner[0] = (uintptr_t)address_of(h, handles[3]) + 16;
  OK(h, hl_roots_add(h, inner, 2, 0));

  /* held: the cycles it runs move nothing */
  hl_enter(h);
  void *raw = region[7];
  uint64_t before = address_of(h, handles[3]);
  OK(h, hl_collect(h, 2, 1));
  hl_stats s = stats_of(h);
  CHECK(s.evacuated_objects == 0 && s.pinned_objects > 0,
        "held: %" PRIu64 " objects moved, %" PRIu64 " pinned", s.evacuated_objects,
        s.pinned_objects);
  CHECK(region[7] == raw && address_of(h, handles[3]) == before, "an object moved while held");
  hl_leave(h);

  uint64_t r0 = resident_of(h), pinned0 = s.pinned_objects;
  uintptr_t inner0 = inner[0];
  OK(h, hl_collect(h, 1, 1));
  s = stats_of(h);
  CHECK(s.pinned_objects - pinned0 == 1, "one object pinned (two words into it), %" PRIu64
        " counted", s.pinned_objects - pinned0);
  CHECK(inner[0] == inner0, "a precise word into an object was changed from %#lx to %#lx",
        (unsigned long)inner0, (unsigned long)inner[0]);
  uint64_t r1 = resident_of(h);
  printf("moved %" PRIu64 " objects (%" PRIu64 " bytes) off %" PRIu64 " pages, %" PRIu64
         " pinned; resident %.1f -> %.1f MiB\n", s.evacuated_objects, s.evacuated_bytes,
         s.evacuated_pages, s.pinned_objects, r0 / MiB, r1 / MiB);
  CHECK(s.evacuated_objects >= N / 2 && s.compactions == 1 && s.evacuated_pages > 20,
        "moved %" PRIu64 " objects off %" PRIu64 " pages", s.evacuated_objects,
        s.evacuated_pages);
  CHECK(address_of(h, handles[3]) != before, "handle 3's object did not move");
  CHECK(r1 < r0 / 2, "the emptied pages stayed resident (%.1f -> %.1f MiB)", r0 / MiB, r1 / MiB);
  CHECK(s.verify_failures == 0, "verify failed: %s", hl_heap_error(h));
  check_all(h, head, big, handles);
  check_invariants(h);
  /* the pinned object has not moved */
  OK(h, hl_ref_dup(h, head, &pinned));
  for (int i = 0; i < 5000; i++) {
    hl_ref n;
    OK(h, hl_ref_get(h, pinned, 0, &n));
    OK(h, hl_ref_release(h, pinned));
    pinned = n;
  }
  CHECK(address_of(h, pinned) == pin_at, "the conservatively pinned object moved");
  OK(h, hl_ref_release(h, pinned));

  /* any number of compactions: the same checksum */
  for (int k = 0; k < 5; k++) {
    for (int i = 0; i < 3000; i++) { /* more garbage between survivors */
      hl_ref junk;
      OK(h, hl_alloc(h, 48, 1, &junk));
      OK(h, hl_ref_release(h, junk));
    }
    OK(h, hl_collect(h, 1, 1));
    uint64_t sum, n;
    OK(h, hl_ref_checksum(h, head, &sum, &n));
    CHECK(sum == sum0 && n == n0, "compaction %d changed the checksum", k);
  }
  check_all(h, head, big, handles);
  hl_heap_free(h);

  /* never: nothing moves; always: 50% pages are packed too */
  const char *modes[] = {"compact=never", "compact=always"};
  for (int m = 0; m < 2; m++) {
    h = HEAP(modes[m], "verify=true", "page_size=16k");
    hl_ref keep;
    OK(h, hl_alloc(h, 0, 4000, &keep));
    for (uint64_t i = 0; i < 8000; i++) {
      hl_ref o;
      OK(h, hl_alloc(h, 48, 0, &o));
      OK(h, hl_ref_write(h, o, 0, &i, 8));
      if (i % 2 == 0) OK(h, hl_ref_set(h, keep, i / 2, o));
      OK(h, hl_ref_release(h, o));
    }
    OK(h, hl_collect(h, 1, 1));
    s = stats_of(h);
    if (m == 0) CHECK(s.evacuated_objects == 0 && s.compactions == 0, "never moved objects");
    else CHECK(s.evacuated_pages > 10, "always: %" PRIu64 " pages", s.evacuated_pages);
    for (uint64_t i = 0; i < 4000; i++) {
      hl_ref o;
      OK(h, hl_ref_get(h, keep, i, &o));
      CHECK(payload_of(h, o) == 2 * i, "%s: object %" PRIu64, modes[m], i);
      OK(h, hl_ref_release(h, o));
    }
    check_invariants(h);
    hl_heap_free(h);
  }
  return 0;
}
