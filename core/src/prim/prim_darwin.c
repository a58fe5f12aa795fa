/*
 * prim_darwin.c -- the OS layer on Darwin, written against prim.h.
 * NOT built or tested here (Linux is); kept so the contract has two
 * implementations and stays OS-neutral.  Meson builds it only on darwin.
 */
#include <errno.h>
#include <mach-o/dyld.h>
#include <mach/mach.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sysctl.h>
#include <time.h>
#include <unistd.h>

#include "prim.h"

int hl__prim_os_reserve(size_t bytes, size_t align, void **out) {
  size_t extra = align > hl__prim_os_page_size() ? align : 0;
  uint8_t *p = mmap(NULL, bytes + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANON, -1, 0);
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

/* Darwin has no transparent huge pages for anonymous memory. */
int hl__prim_os_thp_available(void) { return 0; }

int hl__prim_os_map(size_t bytes, void **out) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANON, -1, 0);
  if (p == MAP_FAILED) return errno ? errno : ENOMEM;
  *out = p;
  return 0;
}

int hl__prim_os_unreserve(void *base, size_t bytes) {
  return munmap(base, bytes) == 0 ? 0 : errno;
}

int hl__prim_os_op_is_syscall(prim_op op) {
  return op != PRIM_DONTDUMP && op != PRIM_DODUMP && op != PRIM_NOHUGEPAGE &&
         op != PRIM_HUGEPAGE && op != PRIM_POPULATE;
}

int hl__prim_os_advise(void *addr, size_t len, prim_op op) {
  int adv;
  switch (op) {
  /* Only MADV_FREE_REUSABLE decrements phys_footprint, the figure jetsam
   * meters an app against; plain MADV_FREE leaves it charged (seed 000). */
  case PRIM_DONTNEED: adv = MADV_FREE_REUSABLE; break;
  case PRIM_FREE: adv = MADV_FREE; break;
  /* Takes a MADV_FREE_REUSABLE range back out of the reusable state; its
   * failure is real here and must not be ignored (seed 000). */
  case PRIM_RESTORE: adv = MADV_FREE_REUSE; break;
  default: return 0; /* no dump flags or THP on Darwin */
  }
  return madvise(addr, len, adv) == 0 ? 0 : errno;
}

int hl__prim_os_resident(const void *addr, size_t len, uint64_t *bytes) {
  size_t ps = (size_t)getpagesize();
  char vec[4096];
  uint64_t total = 0;
  const char *p = addr;
  while (len > 0) {
    size_t chunk = len > sizeof vec * ps ? sizeof vec * ps : len;
    if (mincore((void *)p, chunk, vec) != 0) return errno;
    for (size_t i = 0; i < (chunk + ps - 1) / ps; i++) total += (vec[i] & 1);
    p += chunk;
    len -= chunk;
  }
  *bytes = total * ps;
  return 0;
}

int hl__prim_os_mapped(const void *addr, size_t len) {
  uint64_t unused;
  return hl__prim_os_resident(addr, len, &unused);
}

int hl__prim_os_vma_count(uintptr_t lo, uintptr_t hi, uint64_t *count) {
  uint64_t n = 0;
  mach_vm_address_t addr = lo;
  while (addr < hi) {
    mach_vm_size_t size = 0;
    vm_region_basic_info_data_64_t info;
    mach_msg_type_number_t cnt = VM_REGION_BASIC_INFO_COUNT_64;
    mach_port_t obj;
    if (mach_vm_region(mach_task_self(), &addr, &size, VM_REGION_BASIC_INFO_64,
                       (vm_region_info_t)&info, &cnt, &obj) != KERN_SUCCESS)
      break;
    if (addr >= hi) break;
    n++;
    addr += size;
  }
  *count = n;
  return 0;
}

int hl__prim_os_proc_self_open(const char *name) {
  (void)name;
  errno = ENOSYS; /* no /proc */
  return -1;
}

uint64_t hl__prim_os_peak_rss(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return (uint64_t)ru.ru_maxrss; /* bytes on Darwin */
}

void hl__prim_os_self_exe(char *buf, size_t len) {
  uint32_t n = (uint32_t)len;
  if (_NSGetExecutablePath(buf, &n) != 0) buf[0] = 0;
}

const char hl__prim_os_footprint_source[] = "task_info(TASK_VM_INFO)";

int hl__prim_os_footprint(hl_footprint *out) {
  memset(out, 0, sizeof *out);
  task_vm_info_data_t info;
  mach_msg_type_number_t cnt = TASK_VM_INFO_COUNT;
  if (task_info(mach_task_self(), TASK_VM_INFO, (task_info_t)&info, &cnt) != KERN_SUCCESS)
    return EIO;
  out->rss = info.resident_size;
  out->anonymous = info.internal;
  out->swap = info.compressed;
  out->phys_footprint = info.phys_footprint;
  return 0;
}

size_t hl__prim_os_page_size(void) { return (size_t)getpagesize(); }

uint64_t hl__prim_os_memory_bytes(void) {
  uint64_t mem = 0;
  size_t len = sizeof mem;
  if (sysctlbyname("hw.memsize", &mem, &len, NULL, 0) != 0) return UINT64_MAX;
  return mem;
}

uint64_t hl__prim_os_available_bytes(void) { return hl__prim_os_memory_bytes(); }

uint64_t hl__prim_os_address_room(const char **which, uint64_t *limit) {
  *which = NULL; /* (macOS does not enforce RLIMIT_AS or RLIMIT_DATA on mmap) */
  *limit = 0;
  return UINT64_MAX;
}

uint64_t hl__prim_os_cpus(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (uint64_t)n : 1;
}

uint64_t hl__prim_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void hl__prim_sleep_us(int64_t us) {
  if (us <= 0) return;
  struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}
