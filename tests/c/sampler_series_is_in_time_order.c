/* The footprint sampler's time series is in time order, also when samples
 * are taken from two threads at once: its own thread every interval, and the
 * caller's hl_sampler_mark / _reset / _summary_get, which take a sample too.
 * A sample is measured (a read of /proc/self/smaps_rollup) before it is
 * stored, so the two threads' samples could be stored in the other order
 * than they were measured -- the harness's series then went back in time
 * (tests/python/test_analysis.py::test_real_e1_arms_load, now and then). */
#include "check.h"

int main(void) {
  hl_sampler *s;
  CHECK(hl_sampler_start(&s, 100, 1 << 16) == HL_OK, "start");
  hl_sampler_summary sum;
  /* (a third of them under ThreadSanitizer or AddressSanitizer: check.h;
   * each is a read of /proc/self/smaps_rollup beside the sampler's thread,
   * the same code every time -- the out-of-order stores are the release
   * build's to catch, with all 20,000) */
  for (int i = 0; i < SAN_FEWER(20000); i++) {
    if (i % 3 == 0) CHECK(hl_sampler_mark(s) == HL_OK, "mark");
    else if (i % 3 == 1) CHECK(hl_sampler_summary_get(s, &sum) == HL_OK, "summary");
    else CHECK(hl_sampler_reset(s) == HL_OK, "reset");
  }
  CHECK(hl_sampler_summary_get(s, &sum) == HL_OK, "summary");
  static hl_sample buf[1 << 16];
  size_t n;
  CHECK(hl_sampler_read(s, 0, buf, sizeof buf / sizeof buf[0], &n) == HL_OK, "read");
  CHECK(n > (size_t)SAN_FEWER(20000), "only %zu samples", n);
  for (size_t i = 1; i < n; i++)
    CHECK(buf[i].t_ns >= buf[i - 1].t_ns, "sample %zu (t %" PRIu64 ") is before sample %zu (t %"
          PRIu64 ") of %zu", i, buf[i].t_ns, i - 1, buf[i - 1].t_ns, n);
  hl_sampler_stop(s);
  return 0;
}
