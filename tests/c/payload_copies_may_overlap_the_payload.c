/* hl_ref_write and hl_ref_read copy as memmove does: the caller's buffer may
 * be the payload itself (its address from hl_ref_info or hl_obj_payload, a
 * Python Ref.address) -- bytes moved within an object, up or down.  They
 * were memcpy calls: undefined for overlapping ranges, and the ASan build
 * reported memcpy-param-overlap at the first such write (heap.c, the C API
 * hunt of session 36).  Small and large objects, each direction. */
#include "check.h"

static void shifts(hl_heap *h, uint64_t size) {
  hl_ref r;
  OK(h, hl_alloc(h, size, 1, &r));
  hl_object_info oi;
  OK(h, hl_ref_info(h, r, &oi));
  unsigned char *pl = (unsigned char *)(uintptr_t)oi.address, *want = malloc(size);
  CHECK(want, "malloc");
  uint64_t len = size / 2 + size / 4, by = size / 8 + 1;
  for (int op = 0; op < 4; op++) {
    for (uint64_t i = 0; i < size; i++) pl[i] = (unsigned char)(i * 7 + op);
    memcpy(want, pl, size);
    /* write: up (payload[by..] = payload[0..]) or down; read: the same */
    uint64_t from = op % 2 ? by : 0, to = op % 2 ? 0 : by;
    memmove(want + to, want + from, len);
    if (op < 2) OK(h, hl_ref_write(h, r, to, pl + from, len));
    else OK(h, hl_ref_read(h, r, from, pl + to, len));
    CHECK(memcmp(pl, want, size) == 0, "%s of %" PRIu64 " bytes %s by %" PRIu64 " in a %" PRIu64
          "-byte payload: the bytes differ from memmove's", op < 2 ? "write" : "read", len,
          op % 2 ? "down" : "up", by, size);
  }
  free(want);
  OK(h, hl_ref_release(h, r));
}

int main(void) {
  hl_heap *h = HEAP("reserve_bytes=64m");
  shifts(h, 256);     /* a small object */
  shifts(h, 100000);  /* a large one */
  OK(h, hl_collect(h, 1, 1));
  check_invariants(h);
  hl_heap_free(h);
  puts("ok");
  return 0;
}
