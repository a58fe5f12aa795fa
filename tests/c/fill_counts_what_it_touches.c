/* fill refuses, up front, what it could not hold: it counts the bytes it
 * will really touch -- slots of their size class (header and slots
 * included), large blocks with their records, the index -- against the
 * memory available now and, for small objects, the reservation.  On a8ce51d
 * it counted payload bytes only: fill(2^24, 0) touched 426 MiB, fill(2^30,
 * 0) would have needed ~27 GiB, and a fill past the reservation ran until it
 * failed half-way. */
#include "check.h"

int main(void) {
  hl_heap *h = HEAP("reserve_bytes=64m");
  hl_ref r;
  /* 16 M empty objects: 16-byte slots and an index, ~420 MiB: not in 64 MiB */
  FAILS(h, HL_ENOMEM, "reservation", hl_fill(h, 1u << 24, 0, 0, &r));
  CHECK(resident_of(h) < (1u << 20), "refused after touching %" PRIu64 " bytes", resident_of(h));
  /* 2^30 empty objects: ~27 GiB, more than this machine has available */
  hl_heap *big = HEAP("reserve_bytes=64g");
  FAILS(big, HL_EINVAL, "machine's memory", hl_fill(big, 1u << 30, 0, 0, &r));
  /* 64 objects of 2^20 slots: 512 MiB of large blocks, counted as such */
  hl_heap *tiny = HEAP("reserve_bytes=64m");
  int rc = hl_fill(tiny, 64, 0, 1u << 20, &r);
  hl_stats s = stats_of(tiny);
  CHECK(rc == HL_OK && s.large_live_bytes >= 64ull * (8u << 20), "%s, %" PRIu64 " large bytes",
        hl_error_name(rc), s.large_live_bytes);
  OK(tiny, hl_ref_release(tiny, r));
  /* what fits is not refused */
  OK(h, hl_fill(h, 16u << 20, 256, 0, &r));
  check_invariants(h);
  hl_heap_free(h);
  hl_heap_free(big);
  hl_heap_free(tiny);
  return 0;
}
