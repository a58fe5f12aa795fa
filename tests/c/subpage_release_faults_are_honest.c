/* Sub-page release goes through the trim's fault sites and keeps honest
 * accounting, as whole pages do:
 *   - a refused release leaves the OS pages in and counted in (rejected
 *     runs), and a later trim releases them;
 *   - a release that takes the fallback advice (MADV_FREE: still charged) is
 *     counted as such and upgraded to the primary advice by a later trim;
 *   - a restore that fails takes no slot from the page: it is held off the
 *     avail lists, allocation goes on elsewhere with nothing lost, and the
 *     next trim puts it back, after which the restore succeeds;
 *   - the invariant check holds at every step. */
#include <errno.h>

#include "check.h"

/* A heap whose pages each keep 1 object in 50 of 256 bytes. */
static hl_heap *sparse_heap(const char *fallback, hl_ref *kept, uint64_t *sum) {
  hl_heap *h = HEAP("subpage_release=true", "warm_pages=0", "warm_demand_trims=0", fallback);
  hl_ref r;
  OK(h, hl_fill(h, 8u << 20, 248, 0, &r));
  OK(h, hl_thin(h, r, 50, kept));
  OK(h, hl_ref_checksum(h, *kept, sum, NULL));
  OK(h, hl_ref_release(h, r));
  return h;
}

static void same(hl_heap *h, hl_ref kept, uint64_t sum) {
  uint64_t now;
  OK(h, hl_ref_checksum(h, kept, &now, NULL));
  CHECK(now == sum, "the survivors changed");
  check_invariants(h);
}

int main(void) {
  hl_ref kept;
  uint64_t sum;

  /* refused: nothing recorded as released; the next trim does it */
  hl_heap *h = sparse_heap("fallback_advice=none", &kept, &sum);
  OK(h, hl_inject_named(h, "release", "always", 0, "ENOMEM"));
  OK(h, hl_collect(h, 2, 1));
  hl_stats s = stats_of(h);
  CHECK(s.subpage_rejected_runs > 0, "no refused run counted");
  CHECK(s.subpage_released_bytes == 0 && s.subpage_runs == 0 && s.subpage_pages == 0,
        "a refused run was recorded: %" PRIu64 " bytes", s.subpage_released_bytes);
  same(h, kept, sum);
  uint64_t res = resident_of(h);
  OK(h, hl_inject_named(h, "release", "off", 0, NULL));
  OK(h, hl_trim(h));
  s = stats_of(h);
  CHECK(s.subpage_runs > 0 && s.subpage_released_bytes > (4u << 20),
        "after the refusal cleared: %" PRIu64 " runs, %" PRIu64 " bytes", s.subpage_runs,
        s.subpage_released_bytes);
  CHECK(resident_of(h) + s.subpage_released_bytes / 2 < res, "residency did not drop");
  same(h, kept, sum);
  hl_heap_free(h);

  /* fallback: counted (still charged), then upgraded */
  h = sparse_heap("fallback_advice=free", &kept, &sum);
  OK(h, hl_inject_named(h, "release", "always", 0, "EINVAL"));
  OK(h, hl_inject_named(h, "upgrade", "always", 0, "EINVAL")); /* no upgrade yet */
  OK(h, hl_collect(h, 2, 1));
  s = stats_of(h);
  CHECK(s.subpage_fallback_bytes > 0 && s.subpage_fallback_bytes == s.subpage_released_bytes,
        "fallback %" PRIu64 " of %" PRIu64 " bytes", s.subpage_fallback_bytes,
        s.subpage_released_bytes);
  same(h, kept, sum);
  OK(h, hl_inject_named(h, "release", "off", 0, NULL));
  OK(h, hl_inject_named(h, "upgrade", "first", 1, "EINVAL")); /* one more failure first */
  OK(h, hl_trim(h));
  OK(h, hl_trim(h));
  s = stats_of(h);
  CHECK(s.subpage_upgraded_runs > 0 && s.subpage_fallback_bytes == 0,
        "upgraded %" PRIu64 " runs, %" PRIu64 " fallback bytes left", s.subpage_upgraded_runs,
        s.subpage_fallback_bytes);
  CHECK(s.subpage_released_bytes > (4u << 20), "released bytes lost in the upgrade");
  same(h, kept, sum);
  hl_heap_free(h);

  /* restore fails: the page takes no slot, allocation goes on elsewhere */
  h = sparse_heap("fallback_advice=none", &kept, &sum);
  OK(h, hl_collect(h, 2, 1));
  s = stats_of(h);
  CHECK(s.subpage_pages > 0, "nothing released to restore");
  OK(h, hl_inject_named(h, "restore", "always", 0, "EIO"));
  hl_ref holder;
  OK(h, hl_alloc(h, 0, 2000, &holder));
  for (uint64_t i = 0; i < 2000; i++) {
    hl_ref o;
    OK(h, hl_alloc(h, 248, 0, &o));
    OK(h, hl_ref_write(h, o, 0, &i, 8));
    OK(h, hl_ref_set(h, holder, i, o));
    OK(h, hl_ref_release(h, o));
  }
  hl_stats f = stats_of(h);
  CHECK(f.subpage_restore_failed > 0 && f.subpage_restores == 0,
        "restores: %" PRIu64 " failed, %" PRIu64 " done", f.subpage_restore_failed,
        f.subpage_restores);
  CHECK(f.subpage_released_bytes == s.subpage_released_bytes,
        "a failed restore changed the released bytes");
  same(h, kept, sum);
  OK(h, hl_inject_named(h, "restore", "off", 0, NULL));
  OK(h, hl_trim(h)); /* the held pages go back on their lists */
  for (uint64_t i = 0; i < 2000; i++) {
    hl_ref o;
    OK(h, hl_alloc(h, 248, 0, &o));
    OK(h, hl_ref_release(h, o));
  }
  s = stats_of(h);
  CHECK(s.subpage_restores > 0, "no restore after the failures cleared");
  for (uint64_t i = 0; i < 2000; i++) {
    hl_ref o;
    uint64_t v;
    OK(h, hl_ref_get(h, holder, i, &o));
    OK(h, hl_ref_read(h, o, 0, &v, 8));
    CHECK(v == i, "object %" PRIu64 " lost its payload", i);
    OK(h, hl_ref_release(h, o));
  }
  same(h, kept, sum);
  hl_heap_free(h);

  /* EAGAIN that does not clear: the trim gives up after its bounded retries
   * and nothing is recorded */
  h = HEAP("subpage_release=true", "warm_pages=0", "warm_demand_trims=0", "syscall_retry_max=3",
           "syscall_retry_backoff_us=0", "fallback_advice=none");
  hl_ref r;
  OK(h, hl_fill(h, 4u << 20, 248, 0, &r));
  OK(h, hl_thin(h, r, 50, &kept));
  OK(h, hl_ref_release(h, r));
  OK(h, hl_inject_named(h, "release", "always", 0, "EAGAIN"));
  OK(h, hl_collect(h, 1, 1));
  s = stats_of(h);
  CHECK(s.syscall_gave_up >= 1 && s.subpage_released_bytes == 0, "gave up %" PRIu64
        ", released %" PRIu64, s.syscall_gave_up, s.subpage_released_bytes);
  CHECK(s.trim_backoff_ns > 0, "the trims do not back off after giving up");
  check_invariants(h);
  hl_heap_free(h);
  return 0;
}
