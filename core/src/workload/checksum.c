/*
 * checksum.c -- a checksum of the payloads of everything reachable from a
 * handle (hl_ref_checksum): the sum of per-object hashes of (size, refs,
 * payload), so it depends on neither addresses nor traversal order -- the
 * same data on any allocator, before and after any number of cycles, gives
 * the same sum.
 */
#include <stdlib.h>
#include <string.h>

#include "../internal.h"

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}


/* Order-independent: the sum of per-object hashes of (size, refs, payload). */
static uint64_t object_hash(void *obj) {
  uint64_t size = hl__obj_size(obj);
  const uint8_t *p = hl__obj_payload(obj);
  uint64_t x = mix(size * 0x9E3779B97F4A7C15ULL ^ ((hl_objhdr *)obj)->refs);
  uint64_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    x = (x ^ w) * 0x100000001b3ULL;
  }
  for (; i < size; i++) x = (x ^ p[i]) * 0x100000001b3ULL;
  return mix(x);
}

int hl__checksum(hl_heap *h, hl_ref ref, uint64_t *sum, uint64_t *objects) {
  HL_ASSERT_LOCKED(h);
  void *root;
  int rc = hl__handle_obj(h, ref, &root);
  hl_ptrset seen = {0};
  void **stack = NULL;
  uint64_t top = 0, cap = 0, n = 0, total = 0;
  if (rc) goto out;
  if (hl__ptrset_add(&seen, root) < 0) goto oom;
  cap = 1024;
  stack = hl__sys_malloc(cap * sizeof(void *));
  if (!stack) goto oom;
  stack[top++] = root;
  uint64_t mark = hl__call_mark();
  while (top) {
    if ((n & 4095) == 4095 && hl__interrupted(mark)) {
      rc = hl__fail(h, HL_EINTR, "checksum: interrupted after %llu objects",
                    (unsigned long long)n);
      goto out;
    }
    void *obj = stack[--top];
    /* every object's header, not only the root's (hl__handle_obj): an
     * overwritten one deeper in the graph says slots past its object, and
     * the walk read and followed them (a crash) */
    if (hl_unlikely(!hl__hdr_fits(h, obj))) {
      char msg[200];
      hl__hdr_describe(h, obj, msg, sizeof msg);
      rc = hl__fail(h, HL_ECHECK, "checksum: handle 0x%llx reaches %s", (unsigned long long)ref,
                    msg);
      goto out;
    }
    total += object_hash(obj);
    n++;
    uint32_t refs = ((hl_objhdr *)obj)->refs;
    for (uint32_t i = 0; i < refs; i++) {
      void *v = hl__slots(obj)[i];
      if (!v) continue;
      int a = hl__ptrset_add(&seen, v);
      if (a < 0) goto oom;
      if (!a) continue;
      if (top == cap) {
        void **ns = hl__sys_realloc(stack, cap * 2 * sizeof(void *));
        if (!ns) goto oom;
        stack = ns;
        cap *= 2;
      }
      stack[top++] = v;
    }
  }
  *sum = total;
  if (objects) *objects = n;
  goto out;
oom:
  rc = hl__fail(h, HL_ENOMEM, "checksum: out of memory");
out:
  hl__sys_free(stack);
  hl__ptrset_free(&seen);
  return rc;
}
