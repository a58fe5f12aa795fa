/*
 * map_limit.h -- bring a test process to vm.max_map_count from inside it
 * (never the sysctl): the scenarios that run at the map limit.  Nothing here
 * calls malloc, which could itself need a mapping at the limit.
 */
#ifndef HL_TEST_MAP_LIMIT_H
#define HL_TEST_MAP_LIMIT_H

#include <fcntl.h>

#include "check.h"

/* Lines of /proc/self/maps, less the [vsyscall] gate line (the kernel prints
 * it but does not count it).  Read with read(2) into a static buffer. */
static long map_count(void) {
  static char buf[1 << 16];
  static const char gate[] = "[vsyscall]";
  int fd = open("/proc/self/maps", O_RDONLY);
  CHECK(fd >= 0, "open /proc/self/maps: %s", strerror(errno));
  long lines = 0;
  size_t match = 0; /* chars of `gate` matched so far on this line */
  bool gate_line = false;
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) {
    for (ssize_t i = 0; i < n; i++) {
      char c = buf[i];
      if (c == '\n') {
        lines += !gate_line;
        gate_line = false;
        match = 0;
        continue;
      }
      match = c == gate[match] ? match + 1 : (c == gate[0] ? 1 : 0);
      if (match == sizeof gate - 1) gate_line = true;
    }
  }
  close(fd);
  return lines;
}

/* vm.max_map_count (read, never written). */
static long max_map_count(void) {
  char buf[32] = {0};
  int fd = open("/proc/sys/vm/max_map_count", O_RDONLY);
  CHECK(fd >= 0, "open max_map_count: %s", strerror(errno));
  CHECK(read(fd, buf, sizeof buf - 1) > 0, "read max_map_count");
  close(fd);
  return strtol(buf, NULL, 10);
}

/* The mapping whose pages fill_to_limit split: munmap(base, bytes) gives
 * the maps back. */
typedef struct filler {
  uint8_t *base;
  size_t bytes;
} filler;

/* mprotect one filler page; false when the kernel refuses the split. */
static bool filler_split(filler *f, size_t page, int prot) {
  size_t ps = (size_t)sysconf(_SC_PAGESIZE);
  if (mprotect(f->base + page * ps, ps, prot) == 0) return true;
  CHECK(errno == ENOMEM, "mprotect of filler page %zu: %s", page, strerror(errno));
  return false;
}

/* Bring this process's map count to the limit (to exactly it, unless
 * something else maps meanwhile). */
static filler fill_to_limit(long limit) {
  long need = limit - map_count();
  CHECK(need > 16, "already at %ld maps of %ld", limit - need, limit);
  size_t pages = (size_t)need + 256;
  filler f = {NULL, pages * (size_t)sysconf(_SC_PAGESIZE)};
  void *p = mmap(NULL, f.bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  CHECK(p != MAP_FAILED, "filler mmap: %s", strerror(errno));
  f.base = p;
  /* every other page read-only: +2 VMAs a split, until the kernel refuses */
  size_t page = 1;
  while (page < pages - 8 && filler_split(&f, page, PROT_READ)) page += 2;
  /* then +1 splits from the far end, alternating so that nothing merges */
  size_t end = pages - 1;
  int prot = PROT_READ;
  while (end > page + 1 && filler_split(&f, end, prot)) {
    end--;
    prot = prot == PROT_READ ? PROT_NONE : PROT_READ;
  }
  return f;
}

#endif
