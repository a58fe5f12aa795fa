/* pinned_objects while the heap is held (hl_enter): nothing moves, and every
 * live object of a page compaction would have evacuated is counted -- also
 * on a page where a conservative word pins one of them.  hl__evacuate tested
 * the conservative pins before the hold, and counted only the pinned
 * object(s) of such a page: 9 live objects counted as 1 (the moving
 * collector hunt, session 30). */
#include "check.h"

static void *words[4];

static uint64_t pinned_while_held(int with_word) {
  hl_heap *h = HEAP("compact=sparse", "compact_live_pct=50", "page_size=4096", "warm_pages=0",
                    "tenure_full_marks=0");
  OK(h, hl_roots_add(h, words, 4, 1));
  hl_ref r[100];
  for (int i = 0; i < 100; i++) OK(h, hl_alloc(h, 40, 0, &r[i])); /* 48-byte slots: 85 a page */
  for (int i = 0; i < 100; i++)
    if (i % 10) OK(h, hl_ref_release(h, r[i])); /* 9 live on the first page, 1 on the second */
  hl_object_info info;
  OK(h, hl_ref_info(h, r[0], &info));
  __atomic_store_n(&words[0], with_word ? (void *)(uintptr_t)info.object : NULL,
                   __ATOMIC_RELAXED);
  OK(h, hl_enter(h));
  OK(h, hl_collect(h, 1, 1));
  hl_leave(h);
  hl_stats st;
  OK(h, hl_stats_get(h, &st));
  CHECK(st.evacuated_objects == 0, "%" PRIu64 " objects moved while held", st.evacuated_objects);
  OK(h, hl_roots_remove(h, words));
  for (int i = 0; i < 100; i += 10) OK(h, hl_ref_release(h, r[i]));
  hl_heap_free(h);
  return st.pinned_objects;
}

int main(void) {
  uint64_t without = pinned_while_held(0), with = pinned_while_held(1);
  CHECK(without == 10, "held, no conservative word: pinned_objects %" PRIu64 ", want 10 (the "
        "live objects of both sparse pages)", without);
  CHECK(with == without, "held, a conservative word on one of the first page's 9 live objects: "
        "pinned_objects %" PRIu64 ", want %" PRIu64 " (every live object stays, not only the "
        "pinned one)", with, without);
  puts("ok");
  return 0;
}
