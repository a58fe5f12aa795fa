/* hl_heap_free of a heap whose large objects' mappings munmap refuses for
 * good (vm.max_map_count: each inside a VMA merged with mappings not the
 * heap's) gives their pages back with MADV_DONTNEED and says so on stderr,
 * once: "heaplab: hl_heap_free: N large object mapping(s) (B bytes) could
 * not be unmapped (munmap: <errno> -- ...): they stay mapped, their pages
 * given back" (large.c, hl__large_destroy_all).  The mappings stay (the
 * program's address space keeps them), their memory does not.
 *
 * Why: that end of hl__large_destroy_all was executed by no test (make
 * coverage at ee5b4a1, large.c 347-354): the map-limit tests free their heaps
 * once munmap agrees again.  The test is the system here, as
 * unadopted_large_mappings_go_back: it defines mmap and munmap (the core's
 * calls resolve to them), records the mappings of its large objects and
 * refuses their munmap (ENOMEM) while the heap is freed.
 * Not under the sanitizers: their runtimes intercept these calls. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "check.h"

enum { BIG = 1 << 20, OBJS = 3, MAX_MAPS = 16 };

static atomic_int recording;     /* record the mappings of BIG bytes or more */
static atomic_int refuse_munmap; /* munmap of a range in a recorded one fails (ENOMEM) */
static void *maps[MAX_MAPS];
static size_t map_len[MAX_MAPS];
static atomic_int nmaps, munmap_refused;

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
void *mmap(void *addr, size_t n, int prot, int flags, int fd, off_t off) {
  void *p = (void *)syscall(SYS_mmap, addr, n, prot, flags, fd, off);
  if (p != MAP_FAILED && n >= BIG && atomic_load(&recording)) {
    int i = atomic_load(&nmaps);
    if (i < MAX_MAPS) {
      maps[i] = p;
      map_len[i] = n;
      atomic_store(&nmaps, i + 1);
    }
  }
  return p;
}

static bool recorded(const void *p, size_t n) {
  for (int i = 0; i < atomic_load(&nmaps); i++)
    if ((const char *)p < (const char *)maps[i] + map_len[i] &&
        (const char *)maps[i] < (const char *)p + n)
      return true;
  return false;
}

int munmap(void *p, size_t n) {
  if (atomic_load(&refuse_munmap) && recorded(p, n)) {
    atomic_fetch_add(&munmap_refused, 1);
    errno = ENOMEM;
    return -1;
  }
  return (int)syscall(SYS_munmap, p, n);
}
#endif

int main(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  puts("SKIP: the sanitizer's runtime intercepts mmap and munmap");
  return 77;
#endif
  hl_heap *h = HEAP("large_map_bytes=131072", "gc_trigger_bytes=1073741824",
                    "large_trigger_bytes=1073741824");
  atomic_store(&recording, 1);
  hl_ref r[OBJS];
  for (int i = 0; i < OBJS; i++) {
    OK(h, hl_alloc(h, BIG, 0, &r[i]));
    static char fill[BIG];
    memset(fill, 0x5a + i, sizeof fill);
    OK(h, hl_ref_write(h, r[i], 0, fill, BIG - 4096)); /* (its pages resident) */
  }
  atomic_store(&recording, 0);
  int n = atomic_load(&nmaps);
  CHECK(n >= OBJS, "%d mappings of a MiB or more recorded for %d large objects", n, OBJS);
  uint64_t resident = 0;
  for (int i = 0; i < n; i++)
    resident += mincore_resident((uintptr_t)maps[i], (uintptr_t)maps[i] + map_len[i]);
  CHECK(resident >= (uint64_t)OBJS * (BIG - 8192), "%.1f MiB of the objects resident",
        resident / MiB);

  /* freed with their munmap refused: stderr to a file meanwhile */
  char path[] = "/tmp/heaplab-free-unmap-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0, "mkstemp: %s", strerror(errno));
  unlink(path);
  fflush(stderr);
  int saved = dup(STDERR_FILENO);
  CHECK(saved >= 0 && dup2(fd, STDERR_FILENO) == STDERR_FILENO, "dup2");
  atomic_store(&refuse_munmap, 1);
  hl_heap_free(h);
  atomic_store(&refuse_munmap, 0);
  dup2(saved, STDERR_FILENO);
  close(saved);
  char said[2048] = "";
  ssize_t got = pread(fd, said, sizeof said - 1, 0);
  close(fd);
  said[got > 0 ? got : 0] = 0;
  fputs(said, stderr);

  CHECK(atomic_load(&munmap_refused) >= OBJS, "%d munmaps refused", atomic_load(&munmap_refused));
  char want[256];
  snprintf(want, sizeof want, "heaplab: hl_heap_free: %d large object mapping(s) (", OBJS);
  CHECK(strstr(said, want), "stderr does not say the %d mappings left: '%s'", OBJS, said);
  CHECK(strstr(said, "could not be unmapped (munmap: Cannot allocate memory -- vm.max_map_count"),
        "stderr does not say why: '%s'", said);
  CHECK(strstr(said, "they stay mapped, their pages given back"), "stderr: '%s'", said);
  const char *again = strstr(said, "hl_heap_free:");
  CHECK(again && !strstr(again + 1, "hl_heap_free:"), "said more than once: '%s'", said);
  /* their pages went back; the mappings are there still */
  resident = 0;
  for (int i = 0; i < n; i++) {
    unsigned char v;
    CHECK(mincore(maps[i], 1, &v) == 0, "mapping %d is gone: munmap was refused", i);
    resident += mincore_resident((uintptr_t)maps[i], (uintptr_t)maps[i] + map_len[i]);
  }
  CHECK(resident == 0, "%.2f MiB of the refused mappings still resident after hl_heap_free",
        resident / MiB);
  for (int i = 0; i < n; i++) munmap(maps[i], map_len[i]);
  puts("ok");
  return 0;
}
