/* A fill faults each fresh page in with one MADV_POPULATE_WRITE (stat
 * populated_pages).  A kernel without it (before 5.14: EINVAL) or one that
 * forbids it (EPERM, ENOSYS) refuses every call: it is asked once, then the
 * pages fault in the ordinary way.  It was asked for every page of every
 * fill -- 128 failing calls for an 8 MiB fill -- where thp's chunk populate
 * and the prefault helper already stopped (helper hostthp's note).  A
 * refusal for want of memory (ENOMEM) is not for good: later pages are
 * asked again.  The fill is the same either way. */
#include <errno.h>

#include "check.h"

static void fill_with(int mode, int err, uint64_t *fired, uint64_t *populated, uint64_t *sum) {
  hl_heap *h = HEAP("thp=never", "warm_pages=0", "page_size=65536");
  if (err) OK(h, hl_inject(h, HL_SITE_populate, mode, mode == HL_FAULT_first ? 2 : 0, err));
  hl_ref r;
  uint64_t objs;
  OK(h, hl_fill(h, 8u << 20, 256, 0, &r));
  OK(h, hl_fill(h, 2u << 20, 256, 0, &r)); /* a second phase: not asked again either */
  OK(h, hl_ref_checksum(h, r, sum, &objs));
  hl_stats s = stats_of(h);
  *fired = s.faults_fired;
  *populated = s.populated_pages;
  OK(h, hl_heap_check(h));
  hl_heap_free(h);
}

int main(void) {
  uint64_t fired, populated, sum0, sum;
  fill_with(HL_FAULT_first, 0, &fired, &populated, &sum0); /* nothing injected */
  CHECK(populated >= 100, "a plain fill populated %" PRIu64 " pages", populated);
  int for_good[] = {EINVAL, ENOSYS, EPERM};
  for (int i = 0; i < 3; i++) {
    fill_with(HL_FAULT_always, for_good[i], &fired, &populated, &sum);
    CHECK(fired == 1, "errno %d: asked %" PRIu64 " times", for_good[i], fired);
    CHECK(populated == 0, "errno %d: %" PRIu64 " pages populated", for_good[i], populated);
    CHECK(sum == sum0, "errno %d: the fill differs", for_good[i]);
  }
  fill_with(HL_FAULT_first, ENOMEM, &fired, &populated, &sum);
  CHECK(fired == 2 && populated >= 98, "ENOMEM twice: asked again? %" PRIu64 " fired, %" PRIu64
        " populated", fired, populated);
  CHECK(sum == sum0, "ENOMEM: the fill differs");
  return 0;
}
