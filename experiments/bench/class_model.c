/*
 * class_model.c -- the floor a size-segregated allocator cannot go under on
 * bench-preload's `classes` and `server` workloads (preload_workloads.c, the
 * same sizes and random sequences): for a table of size classes, the sum
 * over the classes of the most bytes each class ever held, against the most
 * bytes held at once.  A class's pages are touched up to its own high-water mark,
 * and a block of one class cannot use another class's hole; glibc's heap,
 * one arena for every size, has no such floor (docs/performance.md, the
 * preload section).  No allocator runs here: it counts.
 *
 *   cc -O2 experiments/bench/class_model.c -o /tmp/class_model && /tmp/class_model
 *
 * `/tmp/class_model headerless [BYTES]` (BYTES 8 by default; 0: the requests
 * as asked) measures instead what a heap of glibc's own
 * kind -- every size carved from one arena -- would gain without glibc's
 * 8-byte block headers: `classes`' sequence run on glibc's malloc with each
 * request 8 bytes smaller (the chunk glibc then makes is the request rounded
 * to 16, as a headerless heap's block would be, but for glibc's 32-byte
 * minimum): the arena's largest size (mallinfo2), against `headerless 0`
 * (docs/performance.md, item 35).
 *
 * `/tmp/class_model borrow` replays the two sequences on the preload's classes
 * with a class allowed to take a hole of one of the next `reach` larger
 * classes (up to `ratio` times its size) before it touches a fresh slot of
 * its own -- blocks of nearby sizes sharing pages, the cheapest form -- and
 * prints the bytes of slots ever touched (item 35: it does not get under
 * glibc).
 */
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { WINDOW = 50000, MAXC = 128 };
static unsigned cls[MAXC];
static int ncls;

static uint64_t rng(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static int class_of(size_t n) {
  for (int i = 0; i < ncls; i++)
    if (cls[i] >= n) return i;
  return -1;
}

/* 16-byte steps up to `fine`, then `per` classes per doubling up to 16 KiB */
static void table(unsigned fine, unsigned per) {
  ncls = 0;
  for (unsigned s = 16; s <= fine; s += 16) cls[ncls++] = s;
  for (unsigned b = fine; b < 16384 && ncls < MAXC; b *= 2)
    for (unsigned k = 1; k <= per && ncls < MAXC; k++) cls[ncls++] = (b + b / per * k + 15) / 16 * 16;
}

/* libheaplab-malloc.so's: 16-byte steps to 512, eight classes to 1 KiB, then
 * four per doubling */
static void table_preload(void) {
  table(512, 4);
  ncls = 32;
  for (unsigned k = 1; k <= 8; k++) cls[ncls++] = 512 + 64 * k;
  for (unsigned b = 1024; b < 16384; b *= 2)
    for (unsigned k = 1; k <= 4; k++) cls[ncls++] = b + b / 4 * k;
}

static long count[MAXC], most[MAXC];
static double held, most_held;

static void take(int c, long k) {
  count[c] += k;
  held += (double)k * cls[c];
  if (count[c] > most[c]) most[c] = count[c];
  if (held > most_held) most_held = held;
}

static void report(const char *what, const char *name) {
  double sum = 0;
  for (int c = 0; c < ncls; c++) sum += (double)most[c] * cls[c];
  printf("%-8s %-36s %3d classes: sum of the classes' maxima %6.0f KiB, most held at once %6.0f KiB\n",
         what, name, ncls, sum / 1024, most_held / 1024);
}

/* server: the small blocks only (the 1 in 64 response buffers of 64 KiB and
 * more are large blocks, glibc's in the preload) */
static void server(const char *name) {
  enum { CACHE = 100000 };
  static int val[CACHE], has[CACHE];
  memset(count, 0, sizeof count);
  memset(most, 0, sizeof most);
  memset(has, 0, sizeof has);
  held = most_held = 0;
  int c_entry = class_of(32), c_key = class_of(24);
  uint64_t s = 11;
  for (uint64_t q = 0; q < 1500000; q++) {
    uint64_t r = rng(&s);
    int tmp[12];
    for (int i = 0; i < 12; i++) take(tmp[i] = class_of(16 + (r >> (i * 4)) % 200), 1);
    size_t rb = (r % 64 == 0) ? 65536 + r % 200000 : 512 + r % 4096;
    int c_resp = rb <= 16384 ? class_of(rb) : -1;
    if (c_resp >= 0) take(c_resp, 1);
    size_t k = (r >> 17) % CACHE;
    if (has[k]) {
      take(c_key, -1);
      take(val[k], -1);
      take(c_entry, -1);
    }
    take(c_entry, 1);
    take(c_key, 1);
    take(val[k] = class_of(32 + (r >> 33) % 900), 1);
    has[k] = 1;
    for (int i = 0; i < 12; i++) take(tmp[i], -1);
    if (c_resp >= 0) take(c_resp, -1);
  }
  report("server", name);
}

static void run(const char *name) {
  static int in[WINDOW];
  memset(count, 0, sizeof count);
  memset(most, 0, sizeof most);
  held = most_held = 0;
  for (int i = 0; i < WINDOW; i++) in[i] = -1;
  uint64_t s = 88172645463325252ull; /* bench-preload classes' seed */
  for (uint64_t i = 0; i < 8000000; i++) {
    uint64_t r = rng(&s);
    size_t k = r % WINDOW;
    if (in[k] >= 0) take(in[k], -1);
    size_t n = 8 + (r >> 20) % ((r >> 40) % 8 == 0 ? 1024 : 128);
    take(in[k] = class_of(n), 1);
  }
  report("classes", name);
  server(name);
}

/* classes' sequence on glibc's malloc, each request `less` bytes smaller */
static void headerless(size_t less) {
  static void *in[WINDOW];
  size_t most = 0;
  uint64_t s = 88172645463325252ull;
  for (uint64_t i = 0; i < 8000000; i++) {
    uint64_t r = rng(&s);
    size_t k = r % WINDOW;
    free(in[k]);
    size_t n = 8 + (r >> 20) % ((r >> 40) % 8 == 0 ? 1024 : 128);
    in[k] = malloc(n > less ? n - less : 1);
    if ((i & 4095) == 0) {
      struct mallinfo2 m = mallinfo2();
      if (m.arena > most) most = m.arena;
    }
  }
  for (size_t k = 0; k < WINDOW; k++) free(in[k]);
  printf("classes  on glibc, requests %zu bytes smaller: the arena at most %6zu KiB\n", less,
         most / 1024);
}

/* borrow: slots touched per class (made) and in use in them (used) */
static long made[MAXC], used[MAXC];
static double ratio;
static int reach;

static int b_alloc(int c) {
  if (used[c] < made[c]) return used[c]++, c;
  for (int d = c + 1; d < ncls && d <= c + reach && cls[d] <= cls[c] * ratio; d++)
    if (used[d] < made[d]) return used[d]++, d;
  made[c]++;
  used[c]++;
  return c;
}

static double b_touched(void) {
  double t = 0;
  for (int c = 0; c < ncls; c++) t += (double)made[c] * cls[c];
  memset(made, 0, sizeof made);
  memset(used, 0, sizeof used);
  return t / 1024;
}

static void borrow(void) {
  static int home[WINDOW];
  enum { CACHE = 100000 };
  static int hk[CACHE], hv[CACHE], he[CACHE], has[CACHE];
  const double ratios[] = {1.25, 1.5, 2.0};
  const int reaches[] = {0, 1, 2, 4, 8};
  table_preload();
  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 5; b++) {
      if (!reaches[b] && a) continue;
      ratio = ratios[a];
      reach = reaches[b];
      uint64_t s = 88172645463325252ull;
      for (int i = 0; i < WINDOW; i++) home[i] = -1;
      for (uint64_t i = 0; i < 8000000; i++) {
        uint64_t r = rng(&s);
        size_t k = r % WINDOW;
        if (home[k] >= 0) used[home[k]]--;
        home[k] = b_alloc(class_of(8 + (r >> 20) % ((r >> 40) % 8 == 0 ? 1024 : 128)));
      }
      double tc = b_touched();
      int c_entry = class_of(32), c_key = class_of(24);
      memset(has, 0, sizeof has);
      s = 11;
      for (uint64_t q = 0; q < 1500000; q++) {
        uint64_t r = rng(&s);
        int tmp[12], resp = -1;
        for (int i = 0; i < 12; i++) tmp[i] = b_alloc(class_of(16 + (r >> (i * 4)) % 200));
        size_t rb = (r % 64 == 0) ? 65536 + r % 200000 : 512 + r % 4096;
        if (rb <= 16384) resp = b_alloc(class_of(rb));
        size_t k = (r >> 17) % CACHE;
        if (has[k]) used[hk[k]]--, used[hv[k]]--, used[he[k]]--;
        he[k] = b_alloc(c_entry);
        hk[k] = b_alloc(c_key);
        hv[k] = b_alloc(class_of(32 + (r >> 33) % 900));
        has[k] = 1;
        for (int i = 0; i < 12; i++) used[tmp[i]]--;
        if (resp >= 0) used[resp]--;
      }
      printf("borrow up to %d classes up, at most %.2fx the size: classes touched %6.0f KiB, server %6.0f KiB\n",
             reach, reach ? ratio : 1.0, tc, b_touched());
    }
}

static int usage(const char *what) {
  fprintf(stderr, "class_model: %s\nusage: class_model [headerless [BYTES 0..1024] | borrow]\n",
          what);
  return 2;
}

int main(int argc, char **argv) {
  /* (atoi took "-8" as 2^64 - 8 and "abc" as 0; an unknown mode ran the default) */
  char msg[160];
  if (argc > 1 && !strcmp(argv[1], "borrow")) {
    if (argc > 2) return usage("borrow takes no argument");
    borrow();
    return 0;
  }
  if (argc > 1 && !strcmp(argv[1], "headerless")) {
    unsigned long less = 8;
    if (argc > 3) return usage("headerless takes one argument, BYTES");
    if (argc == 3) {
      char *end;
      errno = 0;
      less = strtoul(argv[2], &end, 10);
      if (errno || end == argv[2] || *end || argv[2][0] == '-' || less > 1024) {
        snprintf(msg, sizeof msg, "headerless %.40s: BYTES is a whole number 0..1024", argv[2]);
        return usage(msg);
      }
    }
    headerless((size_t)less);
    return 0;
  }
  if (argc > 1) {
    snprintf(msg, sizeof msg, "unknown mode '%.40s'", argv[1]);
    return usage(msg);
  }
  table(512, 4);
  run("heaplab's: 16-byte to 512, 4/doubling");
  table_preload();
  run("preload's: 512, 8 to 1K, then 4");
  table(512, 8);
  run("16-byte to 512, 8/doubling");
  table(128, 4);
  run("16-byte to 128, 4/doubling");
  table(256, 4);
  run("16-byte to 256, 4/doubling");
  table(128, 8);
  run("16-byte to 128, 8/doubling");
  table(64, 2);
  run("16-byte to 64, 2/doubling");
  return 0;
}
