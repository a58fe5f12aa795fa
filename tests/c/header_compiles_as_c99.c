/* heaplab.h needs C99, no more (docs/clients.md, "Embedding libheaplab in a
 * C program"): this file is compiled with -std=c99 -pedantic-errors
 * (tests/meson.build), includes the header and uses its inline accessors. */
#include "heaplab.h"

#include <stdio.h>

int main(void) {
  hl_heap *h = NULL;
  char err[256];
  if (hl_heap_new(NULL, &h, err, sizeof err) != HL_OK) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  hl_enter(h);
  void *o = hl_obj_new(h, 16, 1);
  int ok = o && hl_obj_slots(o)[0] == NULL && hl_obj_data(o) != NULL &&
           hl_abi_version() == HL_ABI_VERSION;
  hl_leave(h);
  hl_heap_free(h);
  puts(ok ? "ok" : "wrong");
  return ok ? 0 : 1;
}
