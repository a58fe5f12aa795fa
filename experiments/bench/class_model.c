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
 */
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

int main(void) {
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
