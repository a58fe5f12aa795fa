/*
 * An object's header overwritten -- a one-word overflow of the object
 * before it, here -- is reported, never read past: with verify=true
 * hl_heap_check and every cycle's verification say which object, what its
 * header says, its slot size and the block before it (the cycle before its
 * mark, which read 1,094,795,585 slots of a 40-byte object and crashed), the
 * cycle keeps what the object refers to, and the handle calls -- with verify
 * or without -- refuse it with HL_ECHECK instead of reading past it (a read
 * of it crashed), hl_ref_same (equality), hl_ref_dup and hl_ref_identity
 * (a Python Ref's copy and hash) included, and hl_ref_checksum and hl_thin,
 * which walk from it.  A large object's header too, and the refs word of an
 * object on a page of objects without slots.
 */
#include "check.h"

/* (check.h's HEAP: the defaults, no environment) */
static hl_heap *make(int verify) {
  return HEAP(verify ? "verify=1" : "verify=0", "reserve_bytes=64m");
}

static hl_object_info info(hl_heap *h, hl_ref r) {
  hl_object_info in;
  OK(h, hl_ref_info(h, r, &in));
  return in;
}

/* dup and identity (a Python Ref's copy and hash) refuse b as info does:
 * they read its object without the header check, and made a second root to
 * it, or remembered its address as its identity. */
static void refuses_dup_and_identity(hl_heap *h, hl_ref b) {
  hl_ref d = 1;
  FAILS(h, HL_ECHECK, "does not fit", hl_ref_dup(h, b, &d));
  CHECK(d == 0, "dup's output zeroed");
  uint64_t id = 1;
  FAILS(h, HL_ECHECK, "does not fit", hl_ref_identity(h, b, &id));
  CHECK(id == 0, "identity's output zeroed");
}

/* checksum and thin (the walks from a root) refuse b as info does: they
 * read their root with hl__handle_get alone, and walked the refs its
 * overwritten header said (0x41414141 slots of a 40-byte object: a crash). */
static void refuses_checksum_and_thin(hl_heap *h, hl_ref b) {
  uint64_t sum = 1, objects = 1;
  FAILS(h, HL_ECHECK, "does not fit", hl_ref_checksum(h, b, &sum, &objects));
  CHECK(sum == 0 && objects == 0, "checksum's outputs zeroed");
  hl_ref t = 1;
  FAILS(h, HL_ECHECK, "does not fit", hl_thin(h, b, 1, &t));
  CHECK(t == 0, "thin's output zeroed");
}

/* Every handle call that reads the header refuses b. */
static void handle_calls_refuse(hl_heap *h, hl_ref b, hl_ref other) {
  hl_object_info in;
  char buf[8] = {0};
  hl_ref g;
  FAILS(h, HL_ECHECK, "does not fit", hl_ref_info(h, b, &in));
  CHECK(in.size == 0 && in.refs == 0, "info's output zeroed");
  FAILS(h, HL_ECHECK, "does not fit", hl_ref_read(h, b, 0, buf, 8));
  FAILS(h, HL_ECHECK, "does not fit", hl_ref_write(h, b, 0, buf, 8));
  FAILS(h, HL_ECHECK, "does not fit", hl_ref_get(h, b, 0, &g));
  CHECK(g == 0, "get's output zeroed");
  FAILS(h, HL_ECHECK, "does not fit", hl_ref_set(h, b, 0, other));
  /* equality too, whichever side b is (it went through hl_ref_info, which
   * refused it; hl_ref_same read the handles without the header check) */
  int same = -1;
  FAILS(h, HL_ECHECK, "does not fit", hl_ref_same(h, b, other, &same));
  CHECK(same == 0, "same's output zeroed");
  same = -1;
  FAILS(h, HL_ECHECK, "does not fit", hl_ref_same(h, other, b, &same));
  CHECK(same == 0, "same's output zeroed");
  same = -1;
  FAILS(h, HL_ECHECK, "does not fit", hl_ref_same(h, b, b, &same));
  CHECK(same == 0, "same's output zeroed");
  refuses_dup_and_identity(h, b);
  refuses_checksum_and_thin(h, b);
}

static void small_overflow(int verify) {
  hl_heap *h = make(verify);
  hl_ref a, b, c;
  OK(h, hl_alloc(h, 40, 1, &a));
  OK(h, hl_alloc(h, 40, 1, &b));
  OK(h, hl_alloc(h, 24, 0, &c));
  OK(h, hl_ref_set(h, b, 0, c));
  hl_object_info ia = info(h, a), ib = info(h, b), ic = info(h, c);
  CHECK(ib.object > ia.address, "b after a");
  uint8_t *child = (uint8_t *)(uintptr_t)ic.object;
  uint8_t child_hdr[8];
  memcpy(child_hdr, child, 8);
  OK(h, hl_ref_release(h, c)); /* (c is b's alone now) */
  /* a's payload overflowed by one word: b's header */
  memset((void *)(uintptr_t)ia.address, 'A', (size_t)(ib.object - ia.address) + 8);
  char want[64];
  snprintf(want, sizeof want, "an overflow of the object at %p", (void *)(uintptr_t)ia.object);
  if (verify) {
    FAILS(h, HL_ECHECK, want, hl_heap_check(h));
    FAILS(h, HL_ECHECK, "refs 1094795585 size 1094795585 does not fit its 64-byte slot",
          hl_heap_check(h));
    char obj[32];
    snprintf(obj, sizeof obj, "object %p", (void *)(uintptr_t)ib.object);
    FAILS(h, HL_ECHECK, obj, hl_heap_check(h));
  }
  handle_calls_refuse(h, b, a);
  if (verify) {
    /* the cycle reports it (before its mark), and loses nothing */
    FAILS(h, HL_ECHECK, want, hl_collect(h, 1, 1));
    hl_stats st;
    OK(h, hl_stats_get(h, &st));
    CHECK(st.verify_failures == 1, "verify_failures %" PRIu64, st.verify_failures);
    CHECK(!memcmp(child, child_hdr, 8), "b's child kept (its header was freed and poisoned)");
    FAILS(h, HL_ECHECK, want, hl_collect(h, 1, 1)); /* (and again: no crash either) */
  }
  /* a is untouched by the overflow's report: its calls work */
  char buf[8];
  OK(h, hl_ref_read(h, a, 0, buf, 8));
  hl_heap_free(h);
}

/* An object on a page of objects without slots whose header says it has
 * one -- its refs word overwritten, its size left as it was -- is reported
 * as such, not as a header that does not fit its slot (it fits): check.c's
 * message for it was executed by no test (make coverage at ee5b4a1, check.c
 * 207-209), and no check of it was pinned.  The marker would have read the
 * payload's first word as a reference. */
static void slot_on_a_slotless_page(void) {
  hl_heap *h = make(1);
  hl_ref a, b;
  OK(h, hl_alloc(h, 32, 0, &a)); /* (a 48-byte slot: a slot would fit) */
  OK(h, hl_alloc(h, 32, 0, &b));
  hl_object_info ia = info(h, a), ib = info(h, b);
  CHECK(ib.object - ia.object >= 48 && ib.object - ia.object < 4096,
        "b %" PRIu64 " bytes after a: a 48-byte slot or more wanted", ib.object - ia.object);
  uint32_t refs = 1, was;
  memcpy(&was, (void *)(uintptr_t)ib.object, 4);
  memcpy((void *)(uintptr_t)ib.object, &refs, 4); /* b's refs word */
  char want[192];
  snprintf(want, sizeof want, "object %p (page ", (void *)(uintptr_t)ib.object);
  FAILS(h, HL_ECHECK, want, hl_heap_check(h));
  snprintf(want, sizeof want, "header refs 1 on a page of objects without slots (overwritten? an "
           "overflow of the object at %p?)", (void *)(uintptr_t)ia.object);
  FAILS(h, HL_ECHECK, want, hl_heap_check(h));
  FAILS(h, HL_ECHECK, want, hl_collect(h, 1, 1)); /* (before the cycle's mark) */
  memcpy((void *)(uintptr_t)ib.object, &was, 4);
  OK(h, hl_heap_check(h));
  hl_heap_free(h);
}

static void large_header(void) {
  hl_heap *h = make(1);
  hl_ref big;
  OK(h, hl_alloc(h, 1 << 20, 2, &big));
  hl_object_info in = info(h, big);
  CHECK(in.large, "a large object");
  memset((void *)(uintptr_t)in.object, 'B', 8);
  FAILS(h, HL_ECHECK, "large object", hl_heap_check(h));
  FAILS(h, HL_ECHECK, "does not fit", hl_ref_info(h, big, &in));
  int same = -1;
  FAILS(h, HL_ECHECK, "does not fit", hl_ref_same(h, big, big, &same));
  CHECK(same == 0, "same's output zeroed");
  refuses_dup_and_identity(h, big);
  refuses_checksum_and_thin(h, big);
  FAILS(h, HL_ECHECK, "large object", hl_collect(h, 1, 1));
  hl_heap_free(h);
}

/* A header overwritten deeper in the graph: checksum and thin checked their
 * root's header only (hl__handle_obj) and walked the refs the child's said
 * -- 0x41414141 slots of a 24-byte object read and followed (a crash, the
 * session-33 list).  Each object a walk reaches is checked as the root is. */
static void child_header(int verify) {
  hl_heap *h = make(verify);
  hl_ref root, mid, leaf;
  OK(h, hl_alloc(h, 16, 2, &root));
  OK(h, hl_alloc(h, 24, 1, &mid));
  OK(h, hl_alloc(h, 24, 0, &leaf));
  OK(h, hl_ref_set(h, root, 0, mid));
  OK(h, hl_ref_set(h, mid, 0, leaf));
  uint64_t sum, objects;
  OK(h, hl_ref_checksum(h, root, &sum, &objects));
  CHECK(objects == 3, "checksum before the damage: %" PRIu64 " objects", objects);
  hl_object_info im = info(h, mid);
  OK(h, hl_ref_release(h, mid));
  OK(h, hl_ref_release(h, leaf));
  memset((void *)(uintptr_t)im.object, 'A', 8); /* mid's header */
  char obj[64];
  snprintf(obj, sizeof obj, "object %p", (void *)(uintptr_t)im.object);
  sum = objects = 1;
  FAILS(h, HL_ECHECK, "does not fit", hl_ref_checksum(h, root, &sum, &objects));
  FAILS(h, HL_ECHECK, obj, hl_ref_checksum(h, root, &sum, &objects));
  CHECK(sum == 0 && objects == 0, "checksum's outputs zeroed");
  hl_ref t = 1;
  FAILS(h, HL_ECHECK, "does not fit", hl_thin(h, root, 1, &t));
  CHECK(t == 0, "thin's output zeroed");
  FAILS(h, HL_ECHECK, obj, hl_thin(h, root, 1, &t));
  /* the root itself is fine: its own calls work */
  hl_object_info ir = info(h, root);
  CHECK(ir.refs == 2, "root's refs %" PRIu64, (uint64_t)ir.refs);
  hl_heap_free(h);
}

int main(void) {
  child_header(1);
  child_header(0);
  small_overflow(1);
  small_overflow(0);
  large_header();
  slot_on_a_slotless_page();
  puts("ok");
  return 0;
}
