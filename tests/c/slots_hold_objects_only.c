/*
 * A slot holds an object or nothing.  hl_obj_set takes raw pointers, and a
 * payload address (hl_obj_payload, Python's Ref.address) is an easy mistake:
 * it was stored silently, the check and the cycles passed (the marker skips
 * such a word), and hl_ref_get made a handle to it -- hl_ref_read then read
 * its bytes as a header and faulted.  Now hl_ref_get refuses it (HL_ECHECK,
 * naming the slot, the object and the word); with verify=true hl_obj_set
 * refuses to store it (the heap's error says why), and a cycle reports a
 * live object's slot holding one written past hl_obj_set.
 */
#include "check.h"

/* (check.h's HEAP: the defaults, no environment) */
static hl_heap *make(int verify) {
  return HEAP(verify ? "verify=1" : "verify=0", "reserve_bytes=64m");
}

static void *object_of(hl_heap *h, hl_ref r) {
  hl_object_info in;
  OK(h, hl_ref_info(h, r, &in));
  return (void *)(uintptr_t)in.object;
}

int main(void) {
  static char not_heap[64];
  void *from_malloc = malloc(64);
  memset(from_malloc, 0x41, 64);
  for (int verify = 0; verify <= 1; verify++) {
    hl_heap *h = make(verify);
    hl_ref pr, g = 1;
    OK(h, hl_alloc(h, 40, 2, &pr));
    void *parent = object_of(h, pr);
    OK(h, hl_enter(h));
    void *child = hl_obj_new_in(h, parent, 1, 64, 0); /* (kept by slot 1) */
    CHECK(child, "child");
    void *bad[] = {hl_obj_payload(child), from_malloc, not_heap};
    for (unsigned i = 0; i < 3; i++) {
      hl_obj_set(parent, 0, bad[i]);
      if (verify) {
        CHECK(hl_obj_get(parent, 0) == NULL, "verify: word %u not stored", i);
        CHECK(strstr(hl_heap_error(h), "is not an object of this heap"),
              "verify: hl_obj_set's refusal said: '%s'", hl_heap_error(h));
      } else {
        CHECK(hl_obj_get(parent, 0) == bad[i], "stored as given without verify");
      }
      if (!verify) {
        hl_leave(h);
        FAILS(h, HL_ECHECK, "not an object", hl_ref_get(h, pr, 0, &g));
        CHECK(g == 0, "no handle made");
        OK(h, hl_heap_check(h));
        OK(h, hl_collect(h, 1, 1));
        OK(h, hl_enter(h));
      }
    }
    /* an object is stored, with verify too */
    hl_obj_set(parent, 1, NULL);
    hl_obj_set(parent, 1, child);
    CHECK(hl_obj_get(parent, 1) == child, "an object is stored");
    hl_leave(h);
    OK(h, hl_ref_get(h, pr, 1, &g));
    CHECK(g != 0, "a handle to the child");
    OK(h, hl_ref_release(h, g));
    if (verify) {
      /* a word written past hl_obj_set: the cycle reports it */
      ((void **)hl_obj_slots(parent))[0] = hl_obj_payload(child);
      FAILS(h, HL_ECHECK, "slot 0 holds", hl_collect(h, 1, 1));
      hl_stats st;
      OK(h, hl_stats_get(h, &st));
      CHECK(st.verify_failures == 1, "verify_failures %" PRIu64, st.verify_failures);
      FAILS(h, HL_ECHECK, "not an object", hl_ref_get(h, pr, 0, &g));
    }
    hl_heap_free(h);
  }
  free(from_malloc);
  puts("ok");
  return 0;
}
