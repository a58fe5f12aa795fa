/*
 * prim_linux.c -- the OS layer on Linux.  Raw calls only: no retry, no
 * injection (syscall.c does both, once, for every caller).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <stdatomic.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

#include "prim.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

int hl__prim_os_reserve(size_t bytes, size_t align, void **out) {
  /* Readable and writable from the start, MAP_NORESERVE so the kernel does
   * not charge commit for it: touching a page is what commits it.  This keeps
   * the reservation ONE VMA for its whole life -- no mprotect per page, which
   * would split it (seed 001).  Aligned: `align` more is mapped and the ends
   * beyond the aligned range unmapped again. */
  size_t extra = align > hl__prim_os_page_size() ? align : 0;
  uint8_t *p = mmap(NULL, bytes + extra, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return errno ? errno : ENOMEM;
  if (extra) {
    uint8_t *a = (uint8_t *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
    if (a > p) munmap(p, (size_t)(a - p));
    if (a + bytes < p + bytes + extra) munmap(a + bytes, (size_t)(p + bytes + extra - (a + bytes)));
    p = a;
  }
  *out = p;
  return 0;
}

/* The reads of /proc and /sys below are no cancellation points (prim.h's
 * waits say why): hl_fill reads /proc/meminfo under the heap lock -- a
 * thread cancelled there unwound holding it, every later call hung, and the
 * FILE leaked (test cancelled_calls_leave_the_heap_unlocked). */
#define NO_CANCEL(call)                                                        \
  do {                                                                         \
    int cs_ = prim_cancel_off();                                               \
    call;                                                                      \
    prim_cancel_restore(cs_);                                                  \
  } while (0)

static int thp_available(void) {
  /* "always [madvise] never": the bracketed word is the mode in force */
  int fd = open("/sys/kernel/mm/transparent_hugepage/enabled", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char line[128];
  ssize_t n = read(fd, line, sizeof line - 1);
  close(fd);
  if (n <= 0) return 0;
  line[n] = 0;
  return strstr(line, "[always]") || strstr(line, "[madvise]");
}

int hl__prim_os_thp_available(void) {
  int r;
  NO_CANCEL(r = thp_available());
  return r;
}

int hl__prim_os_map(size_t bytes, void **out) {
  /* Not MAP_NORESERVE: the kernel's overcommit check refuses what could
   * never be backed (a 1 TiB object), as it refuses glibc's own mmap of a
   * large block -- with it the mapping was made and the object "allocated". */
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return errno ? errno : ENOMEM;
  *out = p;
  return 0;
}

int hl__prim_os_unreserve(void *base, size_t bytes) {
  return munmap(base, bytes) == 0 ? 0 : errno;
}

static int advice_of(prim_op op) {
  switch (op) {
  /* MADV_DONTNEED as it drops RSS and the anonymous charge immediately;
   * the range reads back as zero-fill on the next touch. */
  case PRIM_DONTNEED: return MADV_DONTNEED;
  /* MADV_FREE is lazy: the pages stay in Anonymous (and so in
   * phys_footprint) as LazyFree until the kernel needs them. */
  case PRIM_FREE: return MADV_FREE;
  /* These two change VM_DONTDUMP on the range: on a sub-range that splits
   * the VMA (bmalloc's defect, reproduced by dump_toggle). */
  case PRIM_DONTDUMP: return MADV_DONTDUMP;
  case PRIM_DODUMP: return MADV_DODUMP;
  case PRIM_NOHUGEPAGE: return MADV_NOHUGEPAGE;
  case PRIM_HUGEPAGE: return MADV_HUGEPAGE;
  /* One kernel entry for the 16 faults of a 64 KiB page: 52 ms instead of
   * 81 ms for 192 MiB on this VM (Linux >= 5.14; EINVAL before, harmless). */
  case PRIM_POPULATE: return MADV_POPULATE_WRITE;
  default: return -1;
  }
}

int hl__prim_os_op_is_syscall(prim_op op) { return op != PRIM_RESTORE; }

int hl__prim_os_advise(void *addr, size_t len, prim_op op) {
  /* Linux needs no call to take back a page released with MADV_DONTNEED or
   * MADV_FREE: the next write faults in (or keeps) the page.  The restore
   * site still exists so that the same code path runs as on Darwin, where
   * MADV_FREE_REUSE can fail. */
  if (op == PRIM_RESTORE) return 0;
  int adv = advice_of(op);
  if (adv < 0) return EINVAL;
  return madvise(addr, len, adv) == 0 ? 0 : errno;
}

/* mincore's count: every page with a page table entry, the kernel's shared
 * zero page included (a read of an untouched page maps it; it is in no
 * Rss).  ENOMEM when part of the range is not mapped. */
static int mincore_resident(const void *addr, size_t len, uint64_t *bytes) {
  size_t ps = hl__prim_os_page_size();
  unsigned char vec[4096];
  uint64_t total = 0;
  const uint8_t *p = addr;
  size_t left = len;
  while (left > 0) {
    size_t chunk = left;
    if (chunk > sizeof vec * ps) chunk = sizeof vec * ps;
    if (mincore((void *)p, chunk, vec) != 0) return errno;
    size_t n = (chunk + ps - 1) / ps;
    for (size_t i = 0; i < n; i++) total += (vec[i] & 1);
    p += chunk;
    left -= chunk;
  }
  *bytes = total * ps;
  return 0;
}

int hl__prim_os_mapped(const void *addr, size_t len) {
  uint64_t unused;
  return mincore_resident(addr, len, &unused);
}

/* PAGEMAP_SCAN (Linux 6.7): the uapi of include/uapi/linux/fs.h, Linux 6.7
 * to 6.18, for C libraries whose <linux/fs.h> predates it (Debian 12's). */
#ifndef PAGEMAP_SCAN
struct page_region {
  uint64_t start;
  uint64_t end;
  uint64_t categories;
};
struct pm_scan_arg {
  uint64_t size;
  uint64_t flags;
  uint64_t start;
  uint64_t end;
  uint64_t walk_end;
  uint64_t vec;
  uint64_t vec_len;
  uint64_t max_pages;
  uint64_t category_inverted;
  uint64_t category_mask;
  uint64_t category_anyof_mask;
  uint64_t return_mask;
};
#define PAGE_IS_PRESENT (1 << 3)
#define PAGE_IS_PFNZERO (1 << 5)
#define PAGEMAP_SCAN _IOWR('f', 16, struct pm_scan_arg)
#endif

/* 1 once PAGEMAP_SCAN has said it is not there (ENOTTY before Linux 6.7,
 * EINVAL for categories it does not know): every later call is mincore's. */
static _Atomic int pagemap_scan_missing;

static int pagemap_resident(int fd, const void *addr, size_t len, uint64_t *bytes) {
  struct page_region regs[128];
  uint64_t ps = hl__prim_os_page_size(), total = 0;
  uint64_t start = (uintptr_t)addr / ps * ps, end = (uintptr_t)addr + len; /* (as mincore's) */
  while (start < end) {
    /* present and not the zero page; runs of such pages (a huge page is
     * one run of 2 MiB) come back as one region each */
    struct pm_scan_arg a = {
        .size = sizeof a, .start = start, .end = end,
        .vec = (uintptr_t)regs, .vec_len = sizeof regs / sizeof regs[0],
        .category_mask = PAGE_IS_PRESENT | PAGE_IS_PFNZERO,
        .category_inverted = PAGE_IS_PFNZERO,
        .return_mask = PAGE_IS_PRESENT};
    int n = ioctl(fd, PAGEMAP_SCAN, &a);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    for (int i = 0; i < n; i++) total += regs[i].end - regs[i].start;
    if (a.walk_end <= start) return EIO; /* (no progress: never seen) */
    start = a.walk_end;
  }
  *bytes = total;
  return 0;
}

/* One open of /proc/self/pagemap per call (the fd of another process's mm
 * after a fork, or one a program closed and reused, could not be cached
 * safely), the scan, the close: no cancellation point (open and close are). */
static int pagemap_call(const void *addr, size_t len, uint64_t *bytes) {
  int fd = hl__prim_os_proc_self_open("pagemap");
  if (fd < 0) return -1;
  int e = pagemap_resident(fd, addr, len, bytes);
  close(fd);
  return e;
}

int hl__prim_os_resident(const void *addr, size_t len, uint64_t *bytes) {
  *bytes = 0;
  if (!atomic_load_explicit(&pagemap_scan_missing, memory_order_relaxed)) {
    int e;
    NO_CANCEL(e = pagemap_call(addr, len, bytes));
    if (e == 0) return 0;
    /* Any failure falls back to mincore (a seccomp filter's EPERM, an
     * ENOMEM: mincore may work where the scan did not); only a kernel
     * without the ioctl (ENOTTY) or without its categories (EINVAL: the
     * range is page-aligned, so nothing else of ours is invalid) is
     * remembered.  (A pagemap that cannot be opened -- /proc unmounted --
     * is not: it may be there on the next call.) */
    if (e == ENOTTY || e == EINVAL)
      atomic_store_explicit(&pagemap_scan_missing, 1, memory_order_relaxed);
    *bytes = 0;
  }
  return mincore_resident(addr, len, bytes);
}

/* A file of this process's /proc directory, read through the calling
 * thread's (/proc/thread-self, Linux 3.17): once the main thread has called
 * pthread_exit, /proc/self's smaps_rollup could not be opened and its maps
 * read as empty -- the preloaded library's exit report said a footprint of
 * 0 and no VMA.  /proc/self when thread-self is not there. */
int hl__prim_os_proc_self_open(const char *name) {
  char path[96];
  snprintf(path, sizeof path, "/proc/thread-self/%s", name);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0 || errno != ENOENT) return fd;
  snprintf(path, sizeof path, "/proc/self/%s", name);
  return open(path, O_RDONLY | O_CLOEXEC);
}

/* This process's /proc status into buf (NUL-terminated); 0 or an errno. */
int hl__prim_os_status(char *buf, size_t len) {
  buf[0] = 0;
  int fd = hl__prim_os_proc_self_open("status");
  if (fd < 0) return errno;
  size_t got = 0;
  for (;;) {
    ssize_t r = read(fd, buf + got, len - 1 - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
    if (got == len - 1) break;
  }
  close(fd);
  buf[got] = 0;
  return 0;
}

/* The number after "key:" in a status text (base 10, or 16 for the
 * capability masks); 0 when the key is not there. */
uint64_t hl__prim_os_status_value(const char *status, const char *key, int base) {
  size_t n = strlen(key);
  for (const char *l = status; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
    if (!strncmp(l, key, n) && l[n] == ':') return (uint64_t)strtoull(l + n + 1, NULL, base);
  return 0;
}

/* The process's own peak resident set (VmHWM), bytes; 0 when unreadable.
 * Not getrusage's ru_maxrss, which Linux carries over exec. */
uint64_t hl__prim_os_peak_rss(void) {
  char buf[8192];
  if (hl__prim_os_status(buf, sizeof buf)) return 0;
  return hl__prim_os_status_value(buf, "VmHWM", 10) * 1024u;
}

uint64_t hl__prim_os_address_room(const char **which, uint64_t *limit) {
  static const struct { int res; const char *name, *key; } limits[] = {
      {RLIMIT_AS, "RLIMIT_AS", "VmSize"}, {RLIMIT_DATA, "RLIMIT_DATA", "VmData"}};
  uint64_t room = UINT64_MAX;
  char buf[8192];
  bool status = false;
  *which = NULL;
  *limit = 0;
  for (int i = 0; i < 2; i++) {
    struct rlimit rl;
    if (getrlimit(limits[i].res, &rl) || rl.rlim_cur == RLIM_INFINITY) continue;
    if (!status) status = (hl__prim_os_status(buf, sizeof buf), true); /* ("" unread: 0 used) */
    uint64_t used = hl__prim_os_status_value(buf, limits[i].key, 10) * 1024u;
    uint64_t left = used < rl.rlim_cur ? rl.rlim_cur - used : 0;
    if (left < room) room = left, *which = limits[i].name, *limit = rl.rlim_cur;
  }
  return room;
}

/* The path of the running executable into buf (NUL-terminated; "" when it
 * cannot be read), through the calling thread as hl__prim_os_proc_self_open. */
void hl__prim_os_self_exe(char *buf, size_t len) {
  ssize_t n = readlink("/proc/thread-self/exe", buf, len - 1);
  if (n <= 0) n = readlink("/proc/self/exe", buf, len - 1);
  buf[n > 0 ? n : 0] = 0;
}

/* Each mapping of /proc/self/maps, in address order, to fn(arg, lo, hi)
 * until it returns nonzero.  Read in blocks through a buffer on the stack --
 * nothing allocated: libheaplab-malloc.so's mlockall walks the maps with
 * it -- and a line longer than the buffer (a long path) costs only its tail.
 * fn may change the mappings it was given (lock them): the kernel goes on
 * from the end of the last mapping it listed. */
int hl__prim_os_maps_each(int (*fn)(void *arg, uintptr_t lo, uintptr_t hi), void *arg) {
  int fd = hl__prim_os_proc_self_open("maps");
  if (fd < 0) return errno;
  char buf[4096];
  size_t have = 0;
  bool skipping = false; /* in the tail of a line already handled */
  int stop = 0;
  while (!stop) {
    ssize_t r = read(fd, buf + have, sizeof buf - have);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      close(fd);
      return e;
    }
    if (r == 0) break;
    have += (size_t)r;
    size_t at = 0;
    while (!stop) {
      char *nl = memchr(buf + at, '\n', have - at);
      if (!nl && !(have - at == sizeof buf)) break; /* the rest of the line comes next */
      if (!skipping) {
        char *e;
        uintptr_t lo = (uintptr_t)strtoull(buf + at, &e, 16), hi = 0;
        if (*e == '-') hi = (uintptr_t)strtoull(e + 1, NULL, 16);
        if (hi > lo) stop = fn(arg, lo, hi);
      }
      if (!nl) { /* a full buffer of one line: drop it, skip to its end */
        skipping = true;
        at = have;
        break;
      }
      skipping = false;
      at = (size_t)(nl - buf) + 1;
    }
    memmove(buf, buf + at, have - at);
    have -= at;
  }
  close(fd);
  return 0;
}

struct vma_range {
  uintptr_t lo, hi;
  uint64_t n;
};

static int count_one(void *arg, uintptr_t a, uintptr_t b) {
  struct vma_range *v = arg;
  if (a < v->hi && b > v->lo) v->n++;
  return 0;
}

static int vma_count(uintptr_t lo, uintptr_t hi, uint64_t *count) {
  struct vma_range v = {lo, hi, 0};
  int e = hl__prim_os_maps_each(count_one, &v);
  if (!e) *count = v.n;
  return e;
}

/* The process's mappings and vm.max_map_count when it has reached that
 * limit, for an error message (a refused mmap says only ENOMEM); false
 * otherwise or when either cannot be read.  Nothing allocated. */
bool hl__prim_os_at_map_limit(uint64_t *maps, uint64_t *limit) {
  int fd = open("/proc/sys/vm/max_map_count", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[32];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = 0;
  *limit = strtoull(buf, NULL, 10);
  /* (a few below: the call that failed may have wanted more than one) */
  return *limit && !vma_count(0, UINTPTR_MAX, maps) && *maps + 4 >= *limit;
}

/* Lock [addr, addr + len) in memory as mlockall would (onfault: as each page
 * is first touched, MLOCK_ONFAULT); 0 or an errno. */
int hl__prim_os_lock(void *addr, size_t len, bool onfault) {
  return mlock2(addr, len, onfault ? MLOCK_ONFAULT : 0) == 0 ? 0 : errno;
}

int hl__prim_os_vma_count(uintptr_t lo, uintptr_t hi, uint64_t *count) {
  int e;
  NO_CANCEL(e = vma_count(lo, hi, count));
  return e;
}

static int footprint(hl_footprint *out) {
  memset(out, 0, sizeof *out);
  int fd = hl__prim_os_proc_self_open("smaps_rollup");
  if (fd < 0) return errno;
  char buf[4096];
  size_t got = 0;
  for (;;) {
    ssize_t r = read(fd, buf + got, sizeof buf - 1 - got);
    if (r < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      close(fd);
      return e;
    }
    if (r == 0) break;
    got += (size_t)r;
    if (got == sizeof buf - 1) break;
  }
  close(fd);
  buf[got] = 0;
  struct { const char *key; uint64_t *dst; } keys[] = {
      {"Rss:", &out->rss},
      {"Anonymous:", &out->anonymous},
      {"LazyFree:", &out->lazyfree},
      {"Swap:", &out->swap},
      {"AnonHugePages:", &out->anon_huge},
  };
  for (char *line = buf; line && *line;) {
    char *nl = strchr(line, '\n');
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
      size_t kl = strlen(keys[i].key);
      if (strncmp(line, keys[i].key, kl) == 0)
        *keys[i].dst = strtoull(line + kl, NULL, 10) * 1024;
    }
    line = nl ? nl + 1 : NULL;
  }
  /* DESIGN.md section 5: the figure the OS meters a process against.  Pages
   * given MADV_FREE stay in Anonymous until reclaimed, as on Darwin. */
  out->phys_footprint = out->anonymous + out->swap;
  return 0;
}

const char hl__prim_os_footprint_source[] = "/proc/self/smaps_rollup";

int hl__prim_os_footprint(hl_footprint *out) {
  int e;
  NO_CANCEL(e = footprint(out));
  return e;
}

size_t hl__prim_os_page_size(void) {
  /* (atomic: two threads making heaps at once both write it -- the same
   * value, but a data race all the same, which TSan reported) */
  static _Atomic size_t ps;
  size_t v = atomic_load_explicit(&ps, memory_order_relaxed);
  /* getpagesize, not sysconf: sysconf's switch reads a jump table in libc's
   * read-only data, a 64 KiB window the preloaded library's set-up alone
   * would fault in (docs/performance.md, the preloaded library) */
  if (!v) atomic_store_explicit(&ps, v = (size_t)getpagesize(), memory_order_relaxed);
  return v;
}

uint64_t hl__prim_os_memory_bytes(void) {
  struct sysinfo si;
  if (sysinfo(&si) != 0) return UINT64_MAX;
  return ((uint64_t)si.totalram + si.totalswap) * si.mem_unit;
}

static uint64_t available_bytes(void) {
  FILE *f = fopen("/proc/meminfo", "re");
  if (!f) return hl__prim_os_memory_bytes();
  char line[256];
  unsigned long long avail = 0, swap = 0, v;
  int found = 0;
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "MemAvailable: %llu kB", &v) == 1) avail = v, found = 1;
    else if (sscanf(line, "SwapFree: %llu kB", &v) == 1) swap = v;
  }
  fclose(f);
  return found ? (avail + swap) * 1024 : hl__prim_os_memory_bytes();
}

uint64_t hl__prim_os_available_bytes(void) {
  uint64_t n;
  NO_CANCEL(n = available_bytes());
  return n;
}

uint64_t hl__prim_os_cpus(void) {
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  cpu_set_t set;
  uint64_t n = online > 0 ? (uint64_t)online : 1;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    uint64_t mine = (uint64_t)CPU_COUNT(&set);
    if (mine && mine < n) n = mine;
  }
  return n;
}

uint64_t hl__prim_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void hl__prim_sleep_us(int64_t us) {
  if (us <= 0) return;
  struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};
  int cs = prim_cancel_off(); /* (the EAGAIN backoff sleeps under the heap lock) */
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
  prim_cancel_restore(cs);
}
