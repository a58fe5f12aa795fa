/* A sampler whose series fills keeps every other sample and from then on
 * stores one in twice as many of its thread's samples, up to one an hour
 * (heaplab.h): a long phase still spans the whole buffer, at most `capacity`
 * samples, in time order, from near its start to its end.  No test filled a
 * series before (make coverage: sampler.c 49-51 never ran).  The caller's
 * samples fill it too (hl_sampler_mark takes one now, always stored), as
 * often as it calls: the interval (the stride since session 31) doubled at
 * every halving without a bound and wrapped to 0 after some 60 of them --
 * 1000 marks on a series of 16 at 1 ms -- and the sampler's thread then
 * sampled (now: stored) without a pause; and each halving kept the odd
 * samples, so the first was dropped every time and a caller sampling faster
 * than the thread left a series of its last few hundred samples (13 samples
 * over 0.95 ms of a 35 ms phase).  The marks make the count exact whatever
 * the machine's load. */
#include <time.h>

#include "check.h"

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(void) {
  enum { CAP = 16, MARKS = 1000 };
  hl_sampler *s;
  CHECK(hl_sampler_open(&s, 0.001, CAP) == HL_OK, "open: %s", hl_heap_error(NULL));
  uint64_t t0 = now_ns();
  for (int i = 0; i < MARKS; i++) CHECK(hl_sampler_mark(s) == HL_OK, "mark %d", i);
  uint64_t t1 = now_ns();
  hl_sampler_summary sum;
  CHECK(hl_sampler_summary_get(s, &sum) == HL_OK, "summary");
  CHECK(sum.samples >= MARKS + 1, "%" PRIu64 " samples taken for %d marks", sum.samples, MARKS);
  CHECK(sum.stored <= CAP && sum.stored >= CAP / 2, "%" PRIu64 " stored of capacity %d",
        sum.stored, CAP);
  /* 1000 samples into 16 slots: more than 100 halvings; the thread still
   * samples every 1 ms (sampler_keeps_its_rate_when_the_series_fills) */
  CHECK(sum.interval_us == 1000, "interval %" PRIu64 " us after %" PRIu64
        " samples: not the 1 ms it was opened with", sum.interval_us, sum.samples);
  hl_sample buf[CAP + 8];
  size_t n;
  CHECK(hl_sampler_read(s, 0, buf, CAP + 8, &n) == HL_OK && n == sum.stored, "read %zu", n);
  for (size_t i = 1; i < n; i++)
    CHECK(buf[i].t_ns >= buf[i - 1].t_ns, "sample %zu is before sample %zu", i, i - 1);
  /* the kept samples are spread over the phase, not its last sixteen */
  uint64_t span = buf[n - 1].t_ns - buf[0].t_ns, run = t1 - t0;
  CHECK(span * 4 >= run * 3, "the %zu samples span %.3f ms of a %.3f ms phase", n, span / 1e6,
        run / 1e6);
  CHECK(buf[0].t_ns <= t0, "the first kept sample is %.3f ms into a %.3f ms phase, not the one "
        "the sampler took when it opened", (buf[0].t_ns - (double)t0) / 1e6, run / 1e6);
  /* the stride doubled at each halving, from 1, and stopped at 2^21 (1 ms
   * x 2^21 = 35 min, the last doubling under an hour): none of the thread's
   * next 50 samples is stored, only the two summaries' own.  (Doubled without a
   * bound it wrapped to 0 after 64 halvings, and every sample of the thread
   * was stored again: the series was its last few milliseconds.) */
  struct timespec ms50 = {0, 50000000L};
  nanosleep(&ms50, NULL);
  uint64_t t2 = now_ns();
  CHECK(hl_sampler_summary_get(s, &sum) == HL_OK, "summary");
  hl_sample late[CAP + 8];
  size_t m, after = 0;
  CHECK(hl_sampler_read(s, 0, late, CAP + 8, &m) == HL_OK && m == sum.stored, "read %zu", m);
  for (size_t i = 0; i < m; i++) after += late[i].t_ns > t1;
  CHECK(after <= 2, "%zu samples stored of the %.0f ms after the marks (only the two "
        "summaries' are due): the stride wrapped", after, (t2 - t1) / 1e6);
  /* a reset starts a new phase: one sample counted (its own), no mark, the
   * series kept (heaplab.h; the harness resets at each phase's start).  The
   * count then holds the reset's and the summary's samples and the thread's
   * in between: at most one per 1 ms interval of the time the two calls took,
   * and one more.  (It was bounded by 3: a caller stalled 2 ms between
   * them -- a loaded machine; a close() made 3 ms slower, 8 samples -- failed
   * it.)  The phase before counted more than MARKS. */
  uint64_t r0 = now_ns();
  CHECK(hl_sampler_reset(s) == HL_OK, "reset");
  CHECK(hl_sampler_summary_get(s, &sum) == HL_OK, "summary");
  uint64_t thread_max = (now_ns() - r0) / 1000000u + 1;
  CHECK(sum.samples >= 2 && sum.samples <= 2 + thread_max && sum.mark_ns == 0 &&
            sum.min_phys_after_mark == 0,
        "after a reset: %" PRIu64 " samples (the reset's, the summary's and at most %" PRIu64
        " of the thread's), mark_ns %" PRIu64, sum.samples, thread_max, sum.mark_ns);
  /* (the reset's sample may halve a full series: the first sample stays) */
  hl_sample first;
  CHECK(hl_sampler_read(s, 0, &first, 1, &n) == HL_OK && n == 1 && first.t_ns == buf[0].t_ns,
        "the series lost its first sample at the reset");
  hl_sampler_stop(s);
  puts("ok");
  return 0;
}
