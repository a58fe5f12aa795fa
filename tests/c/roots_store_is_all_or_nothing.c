/* hl_roots_store, the bindings' region store: a word is a handle's object
 * address (read with the heap held) or a value; a released handle among
 * them stores nothing and names its index; NULL memory is an error naming
 * the argument; the words stored keep their objects through a cycle. */
#include "check.h"

int main(void) {
  hl_heap *h = HEAP("verify=1");
  hl_ref a, b;
  OK(h, hl_alloc(h, 32, 0, &a));
  OK(h, hl_alloc(h, 32, 0, &b));
  hl_object_info ia;
  OK(h, hl_ref_info(h, a, &ia));
  static void *words[4];
  OK(h, hl_roots_add(h, words, 4, 0));

  /* b released: nothing of the four is stored, index 2 named */
  OK(h, hl_ref_release(h, b));
  uint64_t values[4] = {7, 0, 0, 9};
  hl_ref refs[4] = {0, a, b, 0};
  uint64_t bad = 0;
  int rc = hl_roots_store(h, words, values, refs, 4, &bad);
  CHECK(rc != HL_OK, "a released handle was stored");
  CHECK(bad == 2, "the released handle is word %" PRIu64 ", not 2", bad);
  for (int i = 0; i < 4; i++) CHECK(words[i] == NULL, "word %d stored: %p", i, words[i]);

  /* all good: values as given, handles as their objects' addresses */
  refs[2] = 0;
  values[2] = 0;
  OK(h, hl_roots_store(h, words, values, refs, 4, &bad));
  CHECK(bad == UINT64_MAX, "bad set on success: %" PRIu64, bad);
  CHECK(words[0] == (void *)7 && words[3] == (void *)9 && words[2] == NULL,
        "values stored wrong: %p %p %p", words[0], words[2], words[3]);
  CHECK(words[1] == (void *)(uintptr_t)ia.object && values[1] == ia.object,
        "the handle's word is %p, its object %#" PRIx64, words[1], ia.object);
  OK(h, hl_ref_release(h, a)); /* the region's word alone keeps it */
  OK(h, hl_collect(h, 1, 1));
  CHECK(stats_of(h).marked_objects == 1, "the stored word kept %" PRIu64 " objects",
        stats_of(h).marked_objects);

  FAILS(h, HL_EINVAL, "NULL words", hl_roots_store(h, NULL, values, refs, 1, &bad));
  FAILS(h, HL_EINVAL, "NULL values", hl_roots_store(h, words, NULL, refs, 1, &bad));
  OK(h, hl_roots_store(h, NULL, NULL, NULL, 0, NULL)); /* nothing to store */
  OK(h, hl_roots_remove(h, words));
  hl_heap_free(h);
  return 0;
}
