/* heap_limit_bytes holds in every mode: an allocation that would take the
 * live bytes past it collects first, then fails with ENOMEM (collected
 * mode, sync and background collector); a manual heap's malloc fails.
 * Garbage below the limit never fails.  On a8ce51d the option did nothing
 * with the sync collector, and with the background one 96 MiB stayed live
 * under a 32 MiB limit without an error. */
#include "check.h"

#define LIMIT (32u << 20)

static void collected(const char *collector) {
  hl_heap *h = HEAP("heap_limit_bytes=32m", collector, "reserve_bytes=256m");
  /* churn of garbage: 256 MiB through a 32 MiB limit */
  for (int i = 0; i < 4096; i++) {
    hl_ref r;
    OK(h, hl_alloc(h, 65536, 0, &r));
    OK(h, hl_ref_release(h, r));
  }
  for (int i = 0; i < 200000; i++) {
    hl_ref r;
    OK(h, hl_alloc(h, 200, 0, &r));
    OK(h, hl_ref_release(h, r));
  }
  /* keep 1 MiB objects and small ones until refused */
  hl_ref keep[200];
  int n = 0, rc = HL_OK;
  while (n < 200 && (rc = hl_alloc(h, 1u << 20, 0, &keep[n])) == HL_OK) n++;
  CHECK(rc == HL_ENOMEM && strstr(hl_heap_error(h), "heap_limit_bytes"),
        "%s: %d MiB live and no refusal (%s)", collector, n, hl_heap_error(h));
  hl_stats s = stats_of(h);
  CHECK(s.small_live_bytes + s.large_live_bytes <= LIMIT,
        "%s: %" PRIu64 " bytes live under a %u-byte limit", collector,
        s.small_live_bytes + s.large_live_bytes, LIMIT);
  CHECK(n >= 28, "%s: only %d MiB before the refusal", collector, n);
  hl_ref small;
  rc = HL_OK;
  for (int i = 0; i < 100000 && rc == HL_OK; i++) rc = hl_alloc(h, 64, 0, &small);
  CHECK(rc == HL_ENOMEM, "%s: small objects past the limit", collector);
  for (int i = 0; i < n; i++) OK(h, hl_ref_release(h, keep[i]));
  OK(h, hl_alloc(h, 1u << 20, 0, &keep[0])); /* room again after the drop */
  check_invariants(h);
  hl_heap_free(h);
}

static void manual(void) {
  hl_heap *h = HEAP("mode=manual", "heap_limit_bytes=32m");
  void *b[100];
  int n = 0;
  while (n < 100 && (b[n] = hl_malloc(h, 1u << 20))) n++;
  CHECK(n >= 28 && n < 33 && strstr(hl_heap_error(h), "heap_limit_bytes"),
        "manual: %d MiB before the refusal (%s)", n, hl_heap_error(h));
  void *s = NULL;
  for (int i = 0; i < 200000 && (s = hl_malloc(h, 64)); i++) {
  }
  CHECK(!s, "manual: small blocks past the limit");
  for (int i = 0; i < n; i++) hl_free(h, b[i]);
  CHECK((b[0] = hl_malloc(h, 1u << 20)) != NULL, "manual: room again after the frees");
  hl_free(h, b[0]);
  hl_heap_free(h);
}

int main(void) {
  collected("collector=sync");
  collected("collector=background");
  manual();
  puts("ok");
  return 0;
}
