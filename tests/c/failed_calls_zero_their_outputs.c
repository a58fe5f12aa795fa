/* One rule for what a failed call leaves (heaplab.h's conventions): every
 * out-parameter given is zeroed, whatever the error.  hl_alloc, hl_ref_get
 * and hl_thin zeroed *out, hl_ref_dup, hl_ref_info and hl_ref_identity left
 * it as it was, and a NULL heap or a bad stride left every one alone (the
 * embedding hunt, session 28).  Each output starts as a planted pattern. */
#include <sys/resource.h>

#include "check.h"

#define PLANT(x) memset(&(x), 0xa5, sizeof(x))
static bool zeros(const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    if (b[i]) return false;
  return true;
}
/* expr fails and leaves out all zeros */
#define ZEROED(out, expr)                                                      \
  do {                                                                         \
    PLANT(out);                                                                \
    int rc_ = (expr);                                                          \
    CHECK(rc_ != HL_OK, "%s succeeded", #expr);                                \
    CHECK(zeros(&(out), sizeof(out)), "%s failed (%s) and left %s not zeroed", #expr, \
          hl_error_name(rc_), #out);                                           \
  } while (0)

int main(void) {
  hl_options o, bad;
  hl_options_defaults(&o);
  hl_heap *h = HEAP(NULL), *m = HEAP("mode=manual"), *nh = NULL;
  hl_ref r, live, stale, ref;
  OK(h, hl_alloc(h, 64, 2, &live));
  OK(h, hl_alloc(h, 64, 2, &stale));
  OK(h, hl_ref_release(h, stale));
  uint64_t u, u2;
  size_t n;
  hl_option_info oi;
  hl_stats st;
  hl_event ev[2];
  hl_fault_state fs[2];
  hl_object_info info;
  hl_churn_result cr;
  hl_sampler *s;
  hl_sampler_summary sum;
  hl_sample samples[2];
  hl_footprint fp;
  int64_t v;

  /* the option calls */
  ZEROED(oi, hl_option_info_get(-1, &oi));
  ZEROED(oi, hl_option_info_get(1 << 20, &oi));
  ZEROED(v, hl_options_get(&o, "no_such_option", &v));
  ZEROED(v, hl_options_get(NULL, "mode", &v));
  bad = o;
  bad.page_size = 3;
  ZEROED(nh, hl_heap_new(&bad, &nh, NULL, 0));
  /* an options struct updated in place is left as it was: a bad variable
   * after a good one applied the good one */
  setenv("HEAPLAB_PAGE_SIZE", "128k", 1);
  setenv("HEAPLAB_WARM_PAGES", "junk", 1);
  hl_options before = o;
  CHECK(hl_options_from_env(&o, NULL, 0) == HL_EVALUE, "a bad variable");
  CHECK(memcmp(&o, &before, sizeof o) == 0, "a failed hl_options_from_env changed opts "
        "(page_size %" PRId64 ")", o.page_size);
  unsetenv("HEAPLAB_PAGE_SIZE");
  unsetenv("HEAPLAB_WARM_PAGES");

  /* a heap's probes, given a NULL heap or a NULL buffer */
  ZEROED(o, hl_heap_options(NULL, &o));
  hl_options_defaults(&o);
  ZEROED(st, hl_stats_get(NULL, &st));
  ZEROED(n, hl_events_read(NULL, ev, 2, &n, 0));
  ZEROED(n, hl_events_read(h, NULL, 2, &n, 0));
  ZEROED(n, hl_events_peek(NULL, ev, 2, &n, &u));
  ZEROED(u, hl_events_peek(h, NULL, 2, &n, &u));
  ZEROED(u, hl_events_consume(NULL, 1, &u));
  ZEROED(u, hl_resident_bytes(NULL, &u));
  ZEROED(u, hl_vma_count(NULL, &u));
  PLANT(u2);
  ZEROED(u, hl_heap_range(NULL, &u, &u2));
  CHECK(u2 == 0, "hl_heap_range left bytes");
  ZEROED(n, hl_faults_get(NULL, fs, 2, &n));
  ZEROED(n, hl_faults_get(h, NULL, 2, &n));

  /* handles */
  ZEROED(r, hl_alloc(NULL, 8, 0, &r));
  ZEROED(r, hl_alloc(m, 8, 0, &r));
  ZEROED(r, hl_alloc(h, HL_MAX_SIZE + 1, 0, &r));
  ZEROED(r, hl_ref_dup(h, stale, &r));
  ZEROED(r, hl_ref_dup(NULL, live, &r));
  ZEROED(info, hl_ref_info(h, stale, &info));
  ZEROED(info, hl_ref_info(NULL, live, &info));
  ZEROED(u, hl_ref_identity(h, stale, &u));
  ZEROED(u, hl_ref_identity(NULL, live, &u));
  int same;
  ZEROED(same, hl_ref_same(h, live, stale, &same));
  ZEROED(same, hl_ref_same(h, stale, live, &same));
  ZEROED(same, hl_ref_same(NULL, live, live, &same));
  ZEROED(r, hl_ref_get(h, live, 99, &r));
  ZEROED(r, hl_ref_get(h, stale, 0, &r));
  ZEROED(r, hl_ref_get(NULL, live, 0, &r));
  ZEROED(r, hl_fill(NULL, 1024, 16, 0, &r));
  ZEROED(r, hl_fill_stride(h, 1024, 16, 0, 0, &r));
  ZEROED(r, hl_fill(h, HL_MAX_SIZE + 1, 16, 0, &r));
  ZEROED(r, hl_thin(h, stale, 1, &r));
  ZEROED(r, hl_thin(m, live, 1, &r));
  ZEROED(r, hl_thin(NULL, live, 1, &r));
  PLANT(u2);
  ZEROED(u, hl_ref_checksum(h, stale, &u, &u2));
  CHECK(u2 == 0, "checksum left objects");
  PLANT(u2);
  ZEROED(u, hl_ref_checksum(NULL, live, &u, &u2));
  CHECK(u2 == 0, "checksum left objects");
  ZEROED(cr, hl_churn(NULL, 0.01, 16, 1024, 0, &cr));
  ZEROED(cr, hl_churn(h, 0.0 / 0.0, 16, 1024, 0, &cr));
  /* hl_roots_store: *bad names the ref that failed, values is as it was */
  void *words[2] = {NULL, NULL};
  uint64_t values[2] = {7, 8};
  hl_ref refs[2] = {live, stale};
  uint64_t at = 0;
  CHECK(hl_roots_store(h, words, values, refs, 2, &at) == HL_ESTALE, "a stale ref stored");
  CHECK(at == 1 && values[0] == 7 && values[1] == 8 && !words[0] && !words[1],
        "bad %" PRIu64 ", values %" PRIu64 " %" PRIu64, at, values[0], values[1]);
  at = 0;
  CHECK(hl_roots_store(NULL, words, values, refs, 2, &at) == HL_EINVAL && at == UINT64_MAX,
        "a NULL heap: bad %" PRIu64, at);

  /* the process-wide calls */
  ZEROED(s, hl_sampler_open(&s, 0, 64));
  ZEROED(s, hl_sampler_start(&s, 10000, 1));
  ZEROED(sum, hl_sampler_summary_get(NULL, &sum));
  ZEROED(n, hl_sampler_read(NULL, 0, samples, 2, &n));
  struct rlimit fds;
  CHECK(getrlimit(RLIMIT_NOFILE, &fds) == 0, "getrlimit");
  struct rlimit none = {3, fds.rlim_max};
  CHECK(setrlimit(RLIMIT_NOFILE, &none) == 0, "setrlimit");
  PLANT(fp);
  int rc = hl_footprint_get(&fp);
  setrlimit(RLIMIT_NOFILE, &fds);
  CHECK(rc == HL_ESYS && zeros(&fp, sizeof fp), "footprint with no fd left: %s",
        hl_error_name(rc));

  (void)ref;
  hl_ref_release(h, live);
  hl_heap_free(m);
  hl_heap_free(h);
  puts("ok");
  return 0;
}
