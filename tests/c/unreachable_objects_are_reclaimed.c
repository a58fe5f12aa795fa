/* Objects unreachable from roots are reclaimed by one synchronous full
 * collection; reachable ones survive 100 cycles of churn with their payload
 * (checksums) and their slots intact. */
#include "check.h"

int main(void) {
  hl_heap *h = HEAP("page_release=false");
  /* a reachable structure: a root with 64 children, each holding a grandchild */
  hl_ref root;
  OK(h, hl_alloc(h, 100, 64, &root));
  for (uint64_t i = 0; i < 64; i++) {
    hl_ref c, g;
    OK(h, hl_alloc(h, 40 + i, 1, &c));
    OK(h, hl_alloc(h, 200, 0, &g));
    char buf[200];
    memset(buf, (int)i, sizeof buf);
    OK(h, hl_ref_write(h, g, 0, buf, sizeof buf));
    OK(h, hl_ref_set(h, c, 0, g));
    OK(h, hl_ref_set(h, root, i, c));
    OK(h, hl_ref_release(h, c));
    OK(h, hl_ref_release(h, g));
  }
  uint64_t sum0, n0;
  OK(h, hl_ref_checksum(h, root, &sum0, &n0));
  CHECK(n0 == 1 + 64 * 2, "reachable objects %" PRIu64, n0);

  /* garbage: 10000 objects whose handles are dropped */
  hl_stats before = stats_of(h);
  for (int i = 0; i < 10000; i++) {
    hl_ref r;
    OK(h, hl_alloc(h, 48, 0, &r));
    OK(h, hl_ref_release(h, r));
  }
  OK(h, hl_collect(h, 1, 1));
  hl_stats after = stats_of(h);
  CHECK(after.objects_freed - before.objects_freed >= 10000,
        "one full collection freed %" PRIu64 " of 10000 unreachable objects",
        after.objects_freed - before.objects_freed);
  CHECK(after.handles == 1, "handles %" PRIu64, after.handles);

  /* 100 cycles of churn: the structure survives intact */
  for (int c = 0; c < 100; c++) {
    for (int i = 0; i < 2000; i++) {
      hl_ref r;
      OK(h, hl_alloc(h, (uint64_t)(i % 300), (uint64_t)(i % 3), &r));
      OK(h, hl_ref_release(h, r));
    }
    OK(h, hl_collect(h, 1, -1));
  }
  uint64_t sum1, n1;
  OK(h, hl_ref_checksum(h, root, &sum1, &n1));
  CHECK(sum1 == sum0 && n1 == n0, "checksum changed: %" PRIx64 "/%" PRIu64 " -> %" PRIx64 "/%" PRIu64,
        sum0, n0, sum1, n1);
  for (uint64_t i = 0; i < 64; i++) {
    hl_ref c, g;
    OK(h, hl_ref_get(h, root, i, &c));
    CHECK(c != 0, "slot %" PRIu64 " lost its child", i);
    hl_object_info ci;
    OK(h, hl_ref_info(h, c, &ci));
    CHECK(ci.size == 40 + i && ci.refs == 1, "child %" PRIu64 " header changed", i);
    OK(h, hl_ref_get(h, c, 0, &g));
    unsigned char buf[200];
    OK(h, hl_ref_read(h, g, 0, buf, sizeof buf));
    for (int k = 0; k < 200; k++) CHECK(buf[k] == i, "grandchild %" PRIu64 " byte %d", i, k);
    hl_ref_release(h, c);
    hl_ref_release(h, g);
  }
  check_invariants(h);

  /* and once the root goes, everything goes */
  OK(h, hl_ref_release(h, root));
  OK(h, hl_collect(h, 1, 1));
  hl_stats end = stats_of(h);
  CHECK(end.small_live_bytes == 0 && end.large_live_bytes == 0,
        "live after dropping the root: small %" PRIu64 " large %" PRIu64, end.small_live_bytes,
        end.large_live_bytes);
  check_invariants(h);
  hl_heap_free(h);
  return 0;
}
