/* With verify on, a block freed in manual mode keeps its bytes past the
 * first 16: a client that fills what it frees with its own pattern reads it
 * back (CPython's debug hooks write 0xDD and _PyObject_IsFreed looks for
 * it; verify's poison used to overwrite it).  The first 16 bytes hold
 * verify's seal, and a write anywhere in a freed block is still reported
 * by hl_heap_check -- and no longer once the bytes are put back. */
#include "check.h"

#define DEAD 0xDD

static int all(const unsigned char *p, size_t from, size_t to, int byte) {
  for (size_t i = from; i < to; i++)
    if (p[i] != byte) return 0;
  return 1;
}

int main(void) {
  hl_heap *h = HEAP("mode=manual", "verify=true");
  static const size_t sizes[] = {16, 48, 64, 200, 496, 512} /* small_max is 512 */;
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    size_t n = sizes[k];
    unsigned char *keep = hl_malloc(h, n); /* so the page stays formatted */
    unsigned char *p = hl_malloc(h, n);
    CHECK(keep && p, "malloc(%zu)", n);
    size_t usable = hl_usable_size(h, p);
    memset(p, DEAD, usable);
    hl_free(h, p);
    CHECK(all(p, 16, usable, DEAD), "%zu-byte block: the freed pattern was overwritten", n);
    OK(h, hl_heap_check(h));
    if (usable > 16) {
      /* a write after free past the seal, found; put back, accepted */
      p[usable - 1] = 1;
      FAILS(h, HL_ECHECK, "written after it was freed", hl_heap_check(h));
      p[usable - 1] = DEAD;
      OK(h, hl_heap_check(h));
    }
    /* a write into the seal, found */
    unsigned char saved = p[3];
    p[3] ^= 0x40;
    FAILS(h, HL_ECHECK, "written after it was freed", hl_heap_check(h));
    p[3] = saved;
    OK(h, hl_heap_check(h));
    /* a sized free seals the same way */
    unsigned char *q = hl_malloc(h, n);
    memset(q, DEAD, n);
    hl_free_sized(h, q, n);
    CHECK(all(q, 16, n, DEAD), "%zu-byte block, sized free: the pattern was overwritten", n);
    OK(h, hl_heap_check(h));
    hl_free(h, keep);
  }
  OK(h, hl_heap_check(h));
  hl_heap_free(h);
  puts("manual mode with verify: freed blocks keep their bytes past the seal; writes are found");
  return 0;
}
