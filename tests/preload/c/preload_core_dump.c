/*
 * preload_core_dump.c -- what a core dump of a program on libheaplab-malloc.so
 * holds.  The kernel dumps every anonymous mapping the process wrote to,
 * whole (untouched pages as zeros down a pipe -- systemd-coredump, apport --
 * and in gdb's gcore): the gcore of a preloaded program that had malloc'ed
 * 1 MiB was a 34.9 GB file, all of it on disk, the heap's 32 GiB reservation
 * and its side tables.  Read from /proc/self/smaps as the kernel's dumper
 * reads the mappings (written to: Anonymous > 0; not advised MADV_DONTDUMP:
 * no "dd" in VmFlags):
 *   - what would be dumped stays under 512 MiB with 96 MiB of blocks made in
 *     steps (the heap's dumped part grows as it does);
 *   - every block made -- the first, the last, one in the middle of each
 *     step -- lies in a mapping that is dumped;
 *   - no mapping left out of dumps (MADV_DONTDUMP) holds a written page:
 *     after 4 MiB of blocks of each of twelve classes made and freed in
 *     turn (the same pages formatted again and again, the allocation-bit
 *     pool growing with no page carved), the pool's new part had been
 *     written outside what was advised MADV_DODUMP (the session's review).
 * Runs on the default (32 GiB) reservation, and on glibc alone (the
 * control).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *(*volatile M)(size_t) = malloc;

enum { STEPS = 6, MAX_CHECKED = 3 * STEPS };
static uintptr_t checked[MAX_CHECKED];
static int nchecked;

static void fail(const char *what, unsigned long long a, unsigned long long b) {
  fprintf(stderr, "FAIL: %s (%llu, %llu)\n", what, a, b);
  exit(1);
}

static void (*volatile F)(void *) = free;
static void *churned[1 << 17];

/* /proc/self/smaps as the dumper reads it: the bytes a dump would hold, the
 * KiB written in mappings left out of dumps, and for each checked block
 * whether it lies in a dumped mapping (1), an excluded one (-1) or none. */
static unsigned long long scan(unsigned long long *hidden, int *found) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) fail("cannot open /proc/self/smaps", 0, 0);
  char line[1024];
  unsigned long long lo = 0, hi = 0, anon = 0, dumped = 0;
  *hidden = 0;
  for (int k = 0; k < nchecked; k++) found[k] = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long long a, b;
    if (sscanf(line, "%llx-%llx ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' ')) {
      lo = a, hi = b, anon = 0;
    } else if (!strncmp(line, "Anonymous:", 10)) {
      anon = strtoull(line + 10, NULL, 10);
    } else if (!strncmp(line, "VmFlags:", 8)) {
      int dd = strstr(line, " dd") != NULL;
      if (!dd && anon > 0) dumped += hi - lo;
      if (dd) *hidden += anon;
      for (int k = 0; k < nchecked; k++)
        if (checked[k] >= lo && checked[k] < hi) found[k] = dd ? -1 : 1;
    }
  }
  fclose(f);
  return dumped;
}

int main(void) {
  int found[MAX_CHECKED];
  unsigned long long hidden;
  /* the same pages formatted for class after class: no page carved after
   * the first class, the allocation-bit pool growing all the same */
  static const size_t sizes[] = {16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    size_t n = ((size_t)4 << 20) / sizes[s];
    if (n > sizeof churned / sizeof churned[0]) n = sizeof churned / sizeof churned[0];
    for (size_t i = 0; i < n; i++) {
      churned[i] = M(sizes[s]);
      if (!churned[i]) fail("malloc returned NULL", sizes[s], i);
      memset(churned[i], 0x5a, sizes[s]);
    }
    for (size_t i = 0; i < n; i++) F(churned[i]);
  }
  scan(&hidden, found);
  if (hidden) fail("KiB written in mappings left out of core dumps, after the classes", hidden, 0);
  /* 1, 2, 4 ... 32 MiB of 48-byte blocks: the heap grows past its dumped
   * part five times */
  size_t bytes = 1 << 20;
  for (int s = 0; s < STEPS; s++, bytes *= 2) {
    size_t n = bytes / 48;
    for (size_t i = 0; i < n; i++) {
      char *p = M(48);
      if (!p) fail("malloc(48) returned NULL", s, i);
      memcpy(p, "HEAPLAB-CORE-DUMP-BLOCK", 24);
      if (i == 0 || i == n / 2 || i == n - 1) checked[nchecked++] = (uintptr_t)p;
    }
  }
  unsigned long long dumped = scan(&hidden, found);
  if (dumped > (512ull << 20)) fail("a core dump would hold more than 512 MiB (bytes)", dumped, 0);
  if (hidden) fail("KiB written in mappings left out of core dumps", hidden, 0);
  for (int k = 0; k < nchecked; k++)
    if (found[k] != 1)
      fail(found[k] ? "a block lies in a mapping left out of core dumps (block k)"
                    : "a block lies in no mapping (block k)",
           (unsigned long long)k, checked[k]);
  printf("ok: %llu MiB would be dumped, every block in it\n", dumped >> 20);
  return 0;
}
