/* hl_thin(ref, every) keeps exactly the leaves 0, every, 2*every ... of the
 * graph under ref, ceil(leaves/every) of them, in depth-first order: here
 * the objects of a fill (10 and 1000 of them, every 1, 3, 7, 10), each
 * named by the first payload byte the fill wrote (k * 131 + 17).  A leaf
 * two inner objects share is counted once.  (A keep object of leaves/every
 * slots, rounded down, dropped the last kept leaf when every did not divide
 * the leaves: the mutation audit, session 37.) */
#include "check.h"

static uint8_t first_byte(hl_heap *h, hl_ref r) {
  uint8_t b;
  OK(h, hl_ref_read(h, r, 0, &b, 1));
  return b;
}

static void scenario(uint64_t count, uint64_t every) {
  hl_heap *h = HEAP("page_release=false");
  hl_ref r, k;
  OK(h, hl_fill(h, count * 32, 32, 0, &r));
  OK(h, hl_thin(h, r, every, &k));
  uint64_t want = (count + every - 1) / every;
  hl_object_info info;
  OK(h, hl_ref_info(h, k, &info));
  CHECK(info.refs == want, "%" PRIu64 " leaves, every %" PRIu64 ": %" PRIu64
        " kept, expected %" PRIu64, count, every, info.refs, want);
  for (uint64_t i = 0; i < want; i++) {
    hl_ref o;
    OK(h, hl_ref_get(h, k, i, &o));
    CHECK(o, "every %" PRIu64 ": slot %" PRIu64 " of %" PRIu64 " is empty", every, i, want);
    uint64_t leaf = i * every;
    CHECK(first_byte(h, o) == (uint8_t)(leaf * 131 + 17),
          "every %" PRIu64 ": slot %" PRIu64 " holds another leaf than %" PRIu64, every, i, leaf);
    OK(h, hl_ref_release(h, o));
  }
  OK(h, hl_ref_release(h, k));
  OK(h, hl_ref_release(h, r));
  hl_heap_free(h);
}

/* Two inner objects sharing their three leaves (large objects: the walk
 * keeps those in a pointer set): three leaves, not six. */
static void shared_leaves_count_once(void) {
  hl_heap *h = HEAP("page_release=false");
  hl_ref root, a, b, leaf[3], k;
  OK(h, hl_alloc(h, 0, 2, &root));
  OK(h, hl_alloc(h, 0, 3, &a));
  OK(h, hl_alloc(h, 0, 3, &b));
  for (int i = 0; i < 3; i++) {
    OK(h, hl_alloc(h, 100000, 0, &leaf[i]));
    OK(h, hl_ref_set(h, a, i, leaf[i]));
    OK(h, hl_ref_set(h, b, i, leaf[i]));
  }
  OK(h, hl_ref_set(h, root, 0, a));
  OK(h, hl_ref_set(h, root, 1, b));
  OK(h, hl_thin(h, root, 1, &k));
  hl_object_info info;
  OK(h, hl_ref_info(h, k, &info));
  CHECK(info.refs == 3, "three shared leaves kept as %" PRIu64, info.refs);
  hl_heap_free(h);
}

int main(void) {
  const uint64_t every[] = {1, 3, 7, 10};
  for (int i = 0; i < 4; i++) {
    scenario(10, every[i]);
    scenario(1000, every[i]);
  }
  shared_leaves_count_once();
  puts("ok");
  return 0;
}
