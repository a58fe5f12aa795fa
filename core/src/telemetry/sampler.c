/*
 * sampler.c -- a thread that samples the process footprint (prim's
 * smaps_rollup probe) for the experiment harnesses of Python and Lua: the
 * peak, the lowest value after a marked event, and a decimating time series.
 *
 * The thread samples at the interval it was opened with for as long as it
 * runs: the figures (peak, lowest, after the mark) see every sample.  Only
 * what is STORED thins out: a full series keeps every other sample, and from
 * then on one in twice as many of the thread's samples is stored (a stride
 * of 1, 2, 4...).  (Until session 31 the thread itself sampled half as often
 * at each halving: after 131 s at the defaults it sampled every 4 ms, then
 * 8 ms..., a reset kept the slowed rate, and a short peak was missed by
 * max_phys.)
 *
 * fork(): every live sampler's lock is taken around a fork (so that the
 * child does not inherit it held by the sampling thread), and in the child,
 * where that thread does not exist, it is started again by the sampler's
 * next call.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "../internal.h"

/* the stride doubles while the stored series keeps a sample of the thread's
 * at least this often (an hour; the interval is 10 s at most) */
#define SAMPLER_STORED_SPACING_MAX_US (3600ull * 1000000u)

struct hl_sampler {
  hl_sampler *next_live;    /* the samplers fork() knows */
  pid_t pid;                /* the process its thread runs in */
  bool running;             /* its thread runs (not in a child of fork) */
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cv;
  bool stop;
  uint64_t interval_us; /* the thread's, as opened: it never changes */
  hl_sample *series;
  size_t cap, n;
  uint64_t stride;   /* one in `stride` of the thread's samples is stored */
  uint64_t unstored; /* the thread's samples since the last it stored */
  uint64_t taken;
  uint64_t min_phys, max_phys, min_rss, max_rss;
  uint64_t min_after, max_after, mark_ns;
  uint64_t phase_ns; /* the last reset (or the start) */
  int read_err;      /* errno of the last read that failed, 0 once one succeeds */
};

/* by_thread: the sampling thread's sample, stored one in s->stride; the
 * caller's (open, mark, reset, summary) are always stored -- see below. */
static void take(hl_sampler *s, bool by_thread) {
  hl_footprint f;
  /* A read begun before a mark (or a reset) says what was there before it:
   * it goes in the series, not in the windows the mark or reset opened.
   * (One read of smaps_rollup takes 1-2 ms with 100 MiB mapped: the
   * thread's sample read mid-fill, stored after the caller's mark, was the
   * "lowest after the mark" -- 8 MiB below anything after it.) */
  uint64_t begun = hl__prim_now_ns();
  int e = hl__prim_os_footprint(&f);
  if (e) { /* said by hl_sampler_summary_get when no sample was taken */
    pthread_mutex_lock(&s->lock);
    s->read_err = e;
    pthread_mutex_unlock(&s->lock);
    return;
  }
  /* stamped when the read began: a sample stamped after a mark is in the
   * mark's window, one stamped before it is not */
  hl_sample x = {begun, f.phys_footprint, f.rss, f.lazyfree};
  pthread_mutex_lock(&s->lock);
  s->read_err = 0;
  if (begun >= s->phase_ns) {
    if (s->taken == 0 || x.phys_footprint < s->min_phys) s->min_phys = x.phys_footprint;
    if (x.phys_footprint > s->max_phys) s->max_phys = x.phys_footprint;
    if (s->taken == 0 || x.rss < s->min_rss) s->min_rss = x.rss;
    if (x.rss > s->max_rss) s->max_rss = x.rss;
    s->taken++;
  }
  if (s->mark_ns && begun >= s->mark_ns) {
    if (!s->min_after || x.phys_footprint < s->min_after) s->min_after = x.phys_footprint;
    if (x.phys_footprint > s->max_after) s->max_after = x.phys_footprint;
  }
  /* The caller's samples are always stored: they are the phase's events --
   * the sampler's first sample, a reset (a phase's start), a mark (the
   * event whose after-window is measured), a summary (the value at the
   * phase's end) -- which a plot of the series shows; a harness takes three
   * or so a phase.  A caller polling summary() in a loop fills the series
   * with them, as it always did: the halvings keep it spread over the whole
   * run. */
  if (by_thread) {
    if (++s->unstored < s->stride) {
      pthread_mutex_unlock(&s->lock);
      return;
    }
    s->unstored = 0;
  }
  if (s->n == s->cap) {
    /* decimate: keep every other sample -- the first one among them, the
     * start of the phase (the odd ones were kept: a caller taking samples
     * faster than the thread pushed the start out of the series, which then
     * spanned the last few hundred samples only) -- and store half as many
     * of the thread's samples from now on (it samples as often as before) */
    for (size_t i = 0; i < s->n / 2; i++) s->series[i] = s->series[2 * i];
    s->n /= 2;
    /* (the caller's samples fill it too, as often as it calls: doubled
     * without a bound, the stride would wrap to 0 after 64 halvings and every
     * sample of the thread be stored again, the series its last few
     * milliseconds -- as the interval, which doubled until session 31,
     * wrapped to 0 and the thread sampled without a pause) */
    if (s->interval_us * s->stride * 2 <= SAMPLER_STORED_SPACING_MAX_US) s->stride *= 2;
  }
  /* The caller's thread (mark, reset, summary) measures too: a sample
   * measured before one already stored goes in before it, so the series
   * stays in time order. */
  size_t i = s->n++;
  for (; i > 0 && s->series[i - 1].t_ns > x.t_ns; i--) s->series[i] = s->series[i - 1];
  s->series[i] = x;
  pthread_mutex_unlock(&s->lock);
}

/* ---- the live samplers, for fork() ---- */

/* Called by the registry's fork handlers (registry.c), once every heap's
 * locks are taken: these locks are held for a few instructions, never while
 * waiting for a heap's.  (Their own pthread_atfork handlers, registered
 * after the heaps', ran before the registry's prepare handler and held
 * these locks while it waited for a heap another thread held -- that thread
 * then waited in hl_sampler_mark for ever: the embedding hunt, session 28.) */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static hl_sampler *live;

void hl__sampler_fork_prepare(void) {
  pthread_mutex_lock(&live_lock);
  for (hl_sampler *s = live; s; s = s->next_live) pthread_mutex_lock(&s->lock);
}
void hl__sampler_fork_parent(void) {
  for (hl_sampler *s = live; s; s = s->next_live) pthread_mutex_unlock(&s->lock);
  pthread_mutex_unlock(&live_lock);
}
void hl__sampler_fork_child(void) {
  for (hl_sampler *s = live; s; s = s->next_live) {
    s->running = false; /* the thread stayed in the parent */
    pthread_cond_init(&s->cv, NULL);
    pthread_mutex_unlock(&s->lock);
  }
  pthread_mutex_unlock(&live_lock);
}

static void live_add(hl_sampler *s) {
  hl__registry_fork_handlers();
  pthread_mutex_lock(&live_lock);
  s->next_live = live;
  live = s;
  pthread_mutex_unlock(&live_lock);
}
static void live_remove(hl_sampler *s) {
  pthread_mutex_lock(&live_lock);
  for (hl_sampler **p = &live; *p; p = &(*p)->next_live)
    if (*p == s) {
      *p = s->next_live;
      break;
    }
  pthread_mutex_unlock(&live_lock);
}

static void *run(void *arg);

/* Start the sampling thread when it is not running here (a child of fork). */
static int ensure_thread(hl_sampler *s) {
  pthread_mutex_lock(&s->lock);
  int rc = 0;
  if (!s->running && !s->stop) {
    s->pid = getpid();
    hl__pin_code();
    rc = pthread_create(&s->thread, NULL, run, s);
    s->running = rc == 0;
  }
  pthread_mutex_unlock(&s->lock);
  return rc;
}

static void *run(void *arg) {
  hl_sampler *s = arg;
  pthread_mutex_lock(&s->lock);
  while (!s->stop) {
    uint64_t us = s->interval_us;
    pthread_mutex_unlock(&s->lock);
    take(s, true);
    pthread_mutex_lock(&s->lock);
    if (s->stop) break;
    prim_cond_wait_ns(&s->cv, &s->lock, us * 1000u);
  }
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

int hl_sampler_open(hl_sampler **out, double interval_s, int64_t capacity) {
  if (!out) return hl__fail(NULL, HL_EINVAL, "sampler: NULL output");
  *out = NULL;
  if (!(interval_s >= 0.0001 && interval_s <= 10))
    return hl__fail(NULL, HL_EINVAL, "sampler: interval_s %.15g out of range [0.0001, 10] seconds",
                    hl__g(interval_s));
  if (capacity < HL_SAMPLER_MIN_CAPACITY || capacity > HL_SAMPLER_MAX_CAPACITY)
    return hl__fail(NULL, HL_EINVAL, "sampler: capacity %lld out of range [%d, %d]",
                    (long long)capacity, HL_SAMPLER_MIN_CAPACITY, HL_SAMPLER_MAX_CAPACITY);
  uint32_t interval_us = (uint32_t)(interval_s * 1e6 + 0.5);
  hl_sampler *s = hl__sys_calloc(1, sizeof *s);
  if (!s) return hl__fail(NULL, HL_ENOMEM, "sampler: out of memory");
  s->series = hl__sys_malloc((size_t)capacity * sizeof(hl_sample));
  if (!s->series) {
    hl__sys_free(s);
    return hl__fail(NULL, HL_ENOMEM, "sampler: out of memory for %lld samples",
                    (long long)capacity);
  }
  s->cap = (size_t)capacity & ~(size_t)1;
  s->interval_us = interval_us;
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->cv, NULL);
  s->stride = 1;
  take(s, false);
  int rc = ensure_thread(s);
  if (rc) {
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cv);
    hl__sys_free(s->series);
    hl__sys_free(s);
    return hl__fail(NULL, HL_ESYS, "sampler: cannot start its thread: %s", hl__strerror(rc));
  }
  live_add(s);
  *out = s;
  return HL_OK;
}

int hl_sampler_start(hl_sampler **out, uint32_t interval_us, size_t capacity) {
  if (capacity > HL_SAMPLER_MAX_CAPACITY) { /* (said as it was given: above INT64_MAX it was
                                             * said clamped) */
    if (out) *out = NULL; /* as hl_sampler_open's refusals leave it */
    return hl__fail(NULL, HL_EINVAL, "sampler: capacity %zu out of range [%d, %d]", capacity,
                    HL_SAMPLER_MIN_CAPACITY, HL_SAMPLER_MAX_CAPACITY);
  }
  return hl_sampler_open(out, interval_us / 1e6,
                         capacity > (size_t)INT64_MAX ? INT64_MAX : (int64_t)capacity);
}

int hl_sampler_mark(hl_sampler *s) {
  if (!s) return hl__fail(NULL, HL_EINVAL, "hl_sampler_mark: the sampler is NULL");
  ensure_thread(s);
  pthread_mutex_lock(&s->lock);
  s->mark_ns = hl__prim_now_ns();
  s->min_after = s->max_after = 0;
  pthread_mutex_unlock(&s->lock);
  take(s, false);
  return HL_OK;
}

int hl_sampler_reset(hl_sampler *s) {
  if (!s) return hl__fail(NULL, HL_EINVAL, "hl_sampler_reset: the sampler is NULL");
  ensure_thread(s);
  pthread_mutex_lock(&s->lock);
  s->taken = 0;
  s->max_phys = s->max_rss = 0;
  s->phase_ns = hl__prim_now_ns();
  s->mark_ns = 0;
  s->min_after = s->max_after = 0;
  pthread_mutex_unlock(&s->lock);
  take(s, false);
  return HL_OK;
}

int hl_sampler_summary_get(hl_sampler *s, hl_sampler_summary *o) {
  if (o) memset(o, 0, sizeof *o);
  if (!s || !o)
    return hl__fail(NULL, HL_EINVAL, "hl_sampler_summary_get: the %s is NULL", s ? "output" : "sampler");
  ensure_thread(s);
  take(s, false); /* the value now counts too */
  pthread_mutex_lock(&s->lock);
  *o = (hl_sampler_summary){s->taken, s->min_phys, s->max_phys, s->min_after, s->max_after,
                            s->min_rss, s->max_rss, s->mark_ns, s->interval_us, s->n};
  int e = s->taken ? 0 : s->read_err;
  pthread_mutex_unlock(&s->lock);
  /* no sample at all because every read failed (no descriptor left, no
   * /proc): its zeros were a summary of nothing, said as figures (the
   * environment hunt, session 27) */
  if (e) memset(o, 0, sizeof *o); /* (all zeros already: no sample) */
  if (e)
    return hl__fail(NULL, HL_ESYS,
                    "sampler: no sample taken since the start (or reset): %s could not be "
                    "read: %s", hl__prim_os_footprint_source, hl__strerror(e));
  return HL_OK;
}

int hl_sampler_read(hl_sampler *s, size_t from, hl_sample *buf, size_t cap, size_t *count) {
  if (count) *count = 0;
  if (!s || !count || (!buf && cap))
    return hl__fail(NULL, HL_EINVAL, "hl_sampler_read: the %s is NULL",
                    !s ? "sampler" : !count ? "count" : "buffer");
  pthread_mutex_lock(&s->lock);
  size_t n = from < s->n ? s->n - from : 0;
  if (n > cap) n = cap;
  if (n) memcpy(buf, s->series + from, n * sizeof *buf); /* (none: buf may be NULL, from past
                                                           the end -- no pointer made) */
  *count = n;
  pthread_mutex_unlock(&s->lock);
  return HL_OK;
}

void hl_sampler_stop(hl_sampler *s) {
  if (!s) return;
  live_remove(s);
  pthread_mutex_lock(&s->lock);
  s->stop = true;
  bool running = s->running;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->lock);
  if (running) prim_join(s->thread);
  pthread_mutex_destroy(&s->lock);
  pthread_cond_destroy(&s->cv);
  hl__sys_free(s->series);
  hl__sys_free(s);
}
