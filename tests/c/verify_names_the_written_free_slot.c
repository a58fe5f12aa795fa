/*
 * verify=true: a free slot found written is named by its address and class
 * size, and the object before it -- whose overflow may have written it --
 * too.  It said "page 0: free slot 1 was written after it was freed": no
 * address, no class, and an overflow of the block before was reported as a
 * use after free only.
 */
#include "check.h"

int main(void) {
  hl_heap *h = HEAP("verify=true", "reserve_bytes=64m");
  hl_ref a, b, c;
  OK(h, hl_alloc(h, 40, 0, &a));
  OK(h, hl_alloc(h, 40, 0, &b));
  OK(h, hl_alloc(h, 40, 0, &c)); /* (the page stays partly live) */
  hl_object_info ia, ib;
  OK(h, hl_ref_info(h, a, &ia));
  OK(h, hl_ref_info(h, b, &ib));
  OK(h, hl_ref_release(h, b));
  OK(h, hl_collect(h, 1, 1));
  OK(h, hl_heap_check(h));
  /* a's payload overflowed into b's freed slot */
  memset((void *)(uintptr_t)ia.address, 'A', (size_t)(ib.object - ia.address) + 4);
  char want[160];
  snprintf(want, sizeof want, "free slot 1 at %p (class 48 bytes) was written after it was "
           "freed, or by an overflow of the object at %p", (void *)(uintptr_t)ib.object,
           (void *)(uintptr_t)ia.object);
  FAILS(h, HL_ECHECK, want, hl_heap_check(h));
  hl_heap_free(h);
  puts("ok");
  return 0;
}
