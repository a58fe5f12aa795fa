/* The large path: objects above small_max go to the system allocator with
 * their own byte counter; large_trigger_bytes requests a cycle; unreachable
 * large objects are freed; byte counters are 64-bit. */
#include "check.h"

int main(void) {
  hl_heap *h = HEAP("large_trigger_bytes=8m", "gc_trigger_bytes=1g");
  hl_ref keep;
  OK(h, hl_alloc(h, 1u << 20, 1, &keep));
  hl_object_info info;
  OK(h, hl_ref_info(h, keep, &info));
  CHECK(info.large && info.size == 1u << 20, "a 1 MiB object is not on the large path");
  hl_stats s0 = stats_of(h);
  for (int i = 0; i < 64; i++) { /* 64 MiB of large garbage: ~8 cycles by the trigger */
    hl_ref r;
    OK(h, hl_alloc(h, 1u << 20, 0, &r));
    OK(h, hl_ref_release(h, r));
  }
  hl_stats s1 = stats_of(h);
  CHECK(s1.cycles - s0.cycles >= 6 && s1.cycles - s0.cycles <= 9, "%" PRIu64 " cycles",
        s1.cycles - s0.cycles);
  CHECK(s1.large_live_bytes < (16u << 20), "large garbage not freed: %" PRIu64, s1.large_live_bytes);
  CHECK(s1.small_bytes_since_cycle == 0 && s1.large_allocated_bytes >= (65u << 20), "counters");
  /* a payload larger than 4 GiB is representable (64-bit sizes) without allocating it */
  CHECK(sizeof(((hl_stats *)0)->large_allocated_bytes) == 8, "32-bit counter");
  OK(h, hl_collect(h, 1, 1));
  CHECK(stats_of(h).large_objects == 1, "%" PRIu64 " large objects", stats_of(h).large_objects);
  OK(h, hl_ref_release(h, keep));
  OK(h, hl_collect(h, 1, 1));
  CHECK(stats_of(h).large_objects == 0 && stats_of(h).large_live_bytes == 0, "not all freed");
  hl_heap_free(h);
  return 0;
}
