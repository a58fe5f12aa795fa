/* A sampler whose series fills thins out what it STORES, never how often its
 * thread samples (heaplab.h): the figures -- max_phys, the lowest and
 * highest after a mark -- keep the interval the sampler was opened with, at
 * any time of a long run and after a reset.  Until session 31 each halving
 * of a full series doubled the thread's interval: with the defaults (65536
 * samples, 2 ms) it sampled every 4 ms after 131 s, then every 8 ms..., a
 * reset kept the slowed rate, and a peak shorter than the interval of the
 * moment was not in max_phys.  Here a series of 16 samples at 1 ms fills
 * and halves some five times in the first few hundred samples; the thread's
 * count over a later window must stay near its count over the first (a
 * ratio with a 4x margin: a loaded machine slows both windows alike -- the
 * doubling gave a ratio near 0), and a 64 MiB peak held until the thread
 * has sampled it must be in max_phys and max_phys_after_mark. */
#include <dirent.h>
#include <time.h>

#include "check.h"

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* the samples the caller took: the opening one, then one per summary */
static uint64_t calls = 1;

/* the thread's samples so far (in the phase: those before a reset count
 * while no reset is made) */
static uint64_t by_thread(hl_sampler *s) {
  hl_sampler_summary sum;
  CHECK(hl_sampler_summary_get(s, &sum) == HL_OK, "summary: %s", hl_heap_error(NULL));
  calls++;
  CHECK(sum.samples >= calls, "%" PRIu64 " samples, %" PRIu64 " of them the caller's",
        sum.samples, calls);
  return sum.samples - calls;
}

/* The thread's samples stamped at or after t_ns, as the stored series
 * shows them without taking one (hl_sampler_read; a summary would sample
 * from this thread): a lower bound -- one in `stride` of them is stored, and
 * a halving drops every other. */
static uint64_t stored_since(hl_sampler *s, uint64_t t_ns) {
  hl_sample buf[64];
  size_t n = 0;
  CHECK(hl_sampler_read(s, 0, buf, 64, &n) == HL_OK, "read: %s", hl_heap_error(NULL));
  uint64_t k = 0;
  for (size_t i = 0; i < n; i++) k += buf[i].t_ns >= t_ns;
  return k;
}

/* The bytes the sampler's thread has read (its rchar, /proc/self/task/TID/io:
 * the threads but this one -- the sampler's is the only other here), or -1
 * where there is no such file.  A sample reads /proc/self/smaps_rollup, at
 * most SAMPLE_READ_MAX bytes of it (prim_linux.c footprint()): bytes / that
 * is a lower bound on the samples the thread read, and it takes none. */
enum { SAMPLE_READ_MAX = 4095 };
static int64_t thread_read_bytes(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  int64_t total = -1;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.' || atol(e->d_name) == (long)getpid()) continue;
    char path[300], line[128];
    snprintf(path, sizeof path, "/proc/self/task/%s/io", e->d_name);
    FILE *f = fopen(path, "re");
    if (!f) continue;
    long long v;
    while (fgets(line, sizeof line, f))
      if (sscanf(line, "rchar: %lld", &v) == 1) total = (total < 0 ? 0 : total) + v;
    fclose(f);
  }
  closedir(d);
  return total;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts); /* (the samples' t_ns) */
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* the thread's samples over `ms` */
static uint64_t samples_over(hl_sampler *s, int ms) {
  uint64_t a = by_thread(s);
  sleep_ms(ms);
  return by_thread(s) - a;
}

int main(void) {
  enum { CAP = 16, WINDOW_MS = 200, HOLD_SAMPLES = 4 };
  hl_footprint f;
  if (hl_footprint_get(&f) != HL_OK) {
    printf("SKIP: no footprint here: %s\n", hl_heap_error(NULL));
    return 77;
  }
  hl_sampler *s;
  CHECK(hl_sampler_open(&s, 0.001, CAP) == HL_OK, "open: %s", hl_heap_error(NULL));
  hl_sampler_summary sum;
  CHECK(hl_sampler_summary_get(s, &sum) == HL_OK && sum.interval_us == 1000,
        "interval_us %" PRIu64 " as opened, not 1000", sum.interval_us);

  /* the first window: the series fills (16) and halves once or twice in it */
  uint64_t first = samples_over(s, WINDOW_MS);
  CHECK(first >= 4, "%" PRIu64 " samples of the thread in %d ms at 1 ms", first, WINDOW_MS);

  /* 400 of the thread's samples: 16 stored, then halvings at 8 more stored
   * samples each, one in 1, 2, 4, 8... of the thread's: some five halvings
   * (the doubled interval never got there: 8 samples at 1, 2, 4, 8, 16...
   * ms reach an hour after some 100) */
  double t0 = now_s();
  uint64_t n;
  while ((n = by_thread(s)) < 400 && now_s() - t0 < 10) sleep_ms(50);
  CHECK(n >= 400, "%" PRIu64 " samples of the thread in %.1f s at 1 ms: it slowed down as "
        "its series of %d filled", n, now_s() - t0, CAP);

  /* a new phase keeps the interval too (its count starts from the reset's
   * own sample) */
  CHECK(hl_sampler_reset(s) == HL_OK, "reset");
  calls = 1;
  /* 100 more of the thread's: at 1 ms a tenth of a second, seconds on a
   * loaded machine; at the slowed rate (32 ms after five halvings, doubling
   * every 8 more) never within 10 s.  (Not two 200 ms windows compared: one
   * stall of a loaded CI in the second failed that -- the review, session 31.) */
  double t1 = now_s();
  uint64_t later;
  while ((later = by_thread(s)) < 100 && now_s() - t1 < 10) sleep_ms(20);
  double t2 = now_s();
  CHECK(later >= 100, "%" PRIu64 " samples of the thread in %.1f s after the series filled "
        "and halved (%" PRIu64 " in the first %d ms): the thread slowed down", later,
        t2 - t1, first, WINDOW_MS);
  CHECK(hl_sampler_summary_get(s, &sum) == HL_OK && sum.interval_us == 1000 && sum.stored <= CAP,
        "after the halvings: interval_us %" PRIu64 " (opened with 1000), %" PRIu64
        " stored of %d", sum.interval_us, sum.stored, CAP);

  /* a short peak: 64 MiB touched, held until the thread has taken
   * HOLD_SAMPLES samples with it in place, unmapped -- between the caller's
   * samples (the mark's before it, the summary's after it), so only the
   * thread's can see it, and counted without taking one.  (It was held a
   * fixed 100 ms, some 100 samples at 1 ms: a stall of a loaded machine
   * longer than that, and the peak was gone before the thread's next
   * sample.)  Counted by the bytes the thread read after the peak was in
   * place: one read may have begun before, so HOLD_SAMPLES + 1 reads' worth
   * at most SAMPLE_READ_MAX bytes each.  Without /proc/self/task/TID/io, by
   * the stored series: one of the thread's samples stored after it (the
   * series stores one in `stride` of them, a stride the halvings and the
   * caller's polls above grew to some hundreds: a second or more). */
  uint64_t base = sum.max_phys;
  CHECK(hl_sampler_mark(s) == HL_OK, "mark");
  size_t len = (size_t)64 << 20;
  char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(p != MAP_FAILED, "mmap 64 MiB: %s", strerror(errno));
  memset(p, 1, len);
  uint64_t in_place = now_ns();
  int64_t read0 = thread_read_bytes();
  double h0 = now_s();
  int64_t held, want = read0 >= 0 ? HOLD_SAMPLES + 1 : 1;
  for (;;) {
    held = read0 >= 0 ? (thread_read_bytes() - read0) / SAMPLE_READ_MAX
                      : (int64_t)stored_since(s, in_place);
    if (held >= want || now_s() - h0 >= 10) break;
    sleep_ms(1);
  }
  double hold_s = now_s() - h0;
  CHECK(held >= want, "the peak held %.1f s: the thread took %" PRId64 " samples (%s) after "
        "it was in place, not %" PRId64 " -- it stopped sampling", hold_s, held,
        read0 >= 0 ? "its reads' bytes / 4095, a lower bound" : "stored ones", want);
  CHECK(munmap(p, len) == 0, "munmap");
  CHECK(hl_sampler_summary_get(s, &sum) == HL_OK, "summary");
  CHECK(sum.max_phys >= base + (48 << 20) && sum.max_phys_after_mark >= base + (48 << 20),
        "a 64 MiB peak held for %d of the thread's samples (%.3f s) at 1 ms sampling: max_phys "
        "%.1f MiB, after the mark %.1f MiB, %.1f MiB before it -- missed", HOLD_SAMPLES, hold_s,
        sum.max_phys / MiB, sum.max_phys_after_mark / MiB, base / MiB);
  hl_sampler_stop(s);
  printf("ok: %" PRIu64 " samples of the thread in the first %d ms, %" PRIu64 " in %.2f s after "
         "the halvings; peak %.1f MiB over %.1f MiB, held %.3f s\n", first, WINDOW_MS, later,
         t2 - t1, sum.max_phys_after_mark / MiB, base / MiB, hold_s);
  return 0;
}
