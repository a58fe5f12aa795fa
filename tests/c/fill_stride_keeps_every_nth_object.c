/* hl_fill_stride(total, size, refs, N) allocates ceil(total/size) objects
 * and keeps exactly every N-th of them -- the objects k = 0, N, 2N, ... of
 * the fill, ceil(count/N) in all -- so after a major sweep the small path
 * holds about 1/N of the fill (E2 builds its partially live pages this
 * way).  Checked three ways: a walk of the fill's index finds exactly the
 * kept objects (each by the payload byte the fill wrote into object k), the
 * checksum reaches exactly those objects plus the index, and the live small
 * bytes after a major sweep are the kept objects' and the index's. */
#include "check.h"

/* Every object reachable from obj: leaves (no slots, the fill's objects)
 * counted into hist by their first payload byte, index nodes counted. */
static void walk(void *obj, uint64_t size, uint64_t hist[256], uint64_t *leaves, uint64_t *nodes) {
  if (hl_obj_refs(obj) == 0) {
    CHECK(hl_obj_size(obj) == size, "a leaf of %" PRIu64 " bytes, expected %" PRIu64,
          hl_obj_size(obj), size);
    hist[((unsigned char *)hl_obj_payload(obj))[0]]++;
    (*leaves)++;
    return;
  }
  (*nodes)++;
  for (uint64_t i = 0; i < hl_obj_refs(obj); i++) {
    void *c = hl_obj_get(obj, i);
    if (c) walk(c, size, hist, leaves, nodes);
  }
}

static void scenario(uint64_t total, uint64_t size, uint64_t stride) {
  hl_heap *h = HEAP("page_release=false");
  hl_ref r;
  OK(h, hl_fill_stride(h, total, size, 0, stride, &r));
  OK(h, hl_collect(h, 1, 1)); /* a major sweep: the pages hold what is kept */
  uint64_t count = (total + size - 1) / size;
  uint64_t kept = (count + stride - 1) / stride;

  uint64_t want[256] = {0}, hist[256] = {0}, leaves = 0, nodes = 0;
  for (uint64_t k = 0; k < count; k += stride) want[(k * 131 + 17) & 0xff]++;
  hl_object_info info;
  OK(h, hl_ref_info(h, r, &info));
  hl_enter(h); /* raw pointers: no cycle while they are read */
  walk((void *)(uintptr_t)info.object, size, hist, &leaves, &nodes);
  hl_leave(h);
  CHECK(leaves == kept, "stride %" PRIu64 ": %" PRIu64 " objects kept of %" PRIu64
        ", expected %" PRIu64, stride, leaves, count, kept);
  for (int b = 0; b < 256; b++)
    CHECK(hist[b] == want[b], "stride %" PRIu64 ": %" PRIu64 " kept objects with byte %d, expected "
          "%" PRIu64 " (the wrong objects were kept)", stride, hist[b], b, want[b]);

  uint64_t sum = 0, reached = 0;
  OK(h, hl_ref_checksum(h, r, &sum, &reached));
  CHECK(reached == leaves + nodes, "checksum reached %" PRIu64 " objects, the walk %" PRIu64,
        reached, leaves + nodes);

  /* the kept objects' bytes, plus an index of one 8-byte slot per object
   * (and its nodes' headers): within 1/16 of the objects' own */
  hl_stats s = stats_of(h);
  uint64_t own = kept * (size + 8);
  CHECK(s.small_live_bytes >= own && s.small_live_bytes <= own + own / 16 + (64u << 10),
        "stride %" PRIu64 ": %" PRIu64 " small bytes live, the kept objects take %" PRIu64, stride,
        s.small_live_bytes, own);
  printf("stride %" PRIu64 ": %" PRIu64 " of %" PRIu64 " objects kept, %.1f MiB live of %.1f MiB "
         "filled\n", stride, leaves, count, s.small_live_bytes / MiB, total / MiB);
  check_invariants(h);
  hl_heap_free(h);
}

/* compact=always and a trigger of 64 KiB: the fill's own allocations run
 * cycles, and a page the fill is writing is a compaction source.  Nothing
 * moves while the fill keeps raw pointers (its index nodes, the object
 * being appended): every kept object is still found through the index,
 * and the cycles inside the fill count what they would have moved as
 * pinned.  (A fill that let compaction move them stored into freed slots:
 * the mutation audit, session 37.) */
static void cycles_inside_the_fill_move_nothing(void) {
  hl_heap *h = HEAP("compact=always", "verify=true", "gc_trigger_bytes=64k",
                    "gc_trigger_min_bytes=64k", "gc_trigger_max_bytes=64k", "page_size=16k");
  const uint64_t total = 4u << 20, size = 248, stride = 2;
  hl_ref r;
  OK(h, hl_fill_stride(h, total, size, 0, stride, &r));
  hl_stats s = stats_of(h);
  CHECK(s.cycles > 4 && s.evacuated_objects == 0 && s.pinned_objects > 0,
        "inside the fill: %" PRIu64 " cycles, %" PRIu64 " objects moved, %" PRIu64 " pinned",
        s.cycles, s.evacuated_objects, s.pinned_objects);
  uint64_t count = total / size + (total % size != 0), kept = (count + stride - 1) / stride;
  uint64_t want[256] = {0}, hist[256] = {0}, leaves = 0, nodes = 0;
  for (uint64_t k = 0; k < count; k += stride) want[(k * 131 + 17) & 0xff]++;
  hl_object_info info;
  OK(h, hl_ref_info(h, r, &info));
  hl_enter(h);
  walk((void *)(uintptr_t)info.object, size, hist, &leaves, &nodes);
  hl_leave(h);
  CHECK(leaves == kept, "compacting: %" PRIu64 " objects found, %" PRIu64 " kept", leaves, kept);
  for (int b = 0; b < 256; b++)
    CHECK(hist[b] == want[b], "compacting: %" PRIu64 " objects with byte %d, expected %" PRIu64,
          hist[b], b, want[b]);
  check_invariants(h);
  hl_heap_free(h);
}

int main(void) {
  cycles_inside_the_fill_move_nothing();
  /* 248 + 8 header = a 256-byte size class exactly */
  scenario(16u << 20, 248, 1);
  scenario(16u << 20, 248, 2);
  scenario(16u << 20, 248, 3);
  scenario((16u << 20) + 1000, 248, 7); /* count not a multiple of the stride */
  return 0;
}
