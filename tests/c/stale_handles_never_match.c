/* A released handle is detected however often its table slot is reused.
 * The generation in a handle is 16 bits; on a8ce51d it wrapped after 65,535
 * reuses, and a stale copy then read, wrote and released an unrelated
 * object.  Now a slot whose generation would wrap is retired. */
#include "check.h"

int main(void) {
  hl_heap *h = HEAP("reserve_bytes=64m");
  hl_ref stale, r;
  OK(h, hl_alloc(h, 16, 0, &stale));
  OK(h, hl_ref_release(h, stale));
  for (int i = 0; i < 70000; i++) {
    OK(h, hl_alloc(h, 16, 0, &r)); /* the same slot, every time */
    hl_object_info info;
    int rc = hl_ref_info(h, stale, &info);
    CHECK(rc == HL_ESTALE, "after %d reuses the stale handle resolves (%s)", i + 1,
          hl_error_name(rc));
    OK(h, hl_ref_release(h, r));
  }
  FAILS(h, HL_ESTALE, "released", hl_ref_release(h, stale));
  check_invariants(h);
  hl_heap_free(h);
  return 0;
}
