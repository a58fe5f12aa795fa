/* hl_resident_bytes counts with PAGEMAP_SCAN (prim_linux.c); where that
 * ioctl fails with anything but "not there" -- a seccomp filter's EPERM (a
 * container runtime's profile may not know the ioctl), ENOMEM -- it counts
 * with mincore instead, every call (EPERM is not remembered as missing).
 * Nothing tested that fallback.  Here a child of fork fills 8 MiB, counts,
 * installs a seccomp filter that answers EPERM to ioctl(PAGEMAP_SCAN) and
 * nothing else, makes sure the filter is in force (its own ioctl is EPERM),
 * and counts again: resident_bytes still answers, twice, within 256 KiB of
 * what it said before the filter and at least the 8 MiB written.  SKIP
 * where seccomp filters cannot be installed (no CONFIG_SECCOMP_FILTER, a
 * sandbox that refuses them) or on an architecture the filter does not
 * name. */
#include "check.h"

#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__))
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/fs.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#else
#define ARCH AUDIT_ARCH_AARCH64
#endif

/* PAGEMAP_SCAN's request where <linux/fs.h> predates Linux 6.7 (as
 * prim_linux.c: only its size matters to the request's number) */
#ifndef PAGEMAP_SCAN
struct pm_scan_arg {
  uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages, category_inverted,
      category_mask, category_anyof_mask, return_mask;
};
#define PAGEMAP_SCAN _IOWR('f', 16, struct pm_scan_arg)
#endif

#define FILL ((uint64_t)8 << 20)
#define SLACK ((uint64_t)256 << 10)

/* ioctl(_, PAGEMAP_SCAN, _) answers EPERM; every other call runs.  0, or
 * the errno of the refusal to install it. */
static int refuse_pagemap_scan(void) {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_ioctl, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      /* the request's low 32 bits (little-endian: the first word of args[1]) */
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)PAGEMAP_SCAN, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
  };
  struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) return errno;
  return 0;
}

static int child(void) {
  hl_heap *h = HEAP("reserve_bytes=64m");
  hl_ref r;
  OK(h, hl_fill(h, FILL, 256, 0, &r)); /* (the fill writes every payload) */
  uint64_t before = resident_of(h);
  CHECK(before >= FILL, "before the filter: resident_bytes %" PRIu64 " after a fill of %" PRIu64,
        before, FILL);
  int e = refuse_pagemap_scan();
  if (e) {
    printf("SKIP: no seccomp filter here (%s)\n", strerror(e));
    return 77;
  }
  /* the filter is in force: the ioctl itself is refused */
  int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  CHECK(fd >= 0, "/proc/self/pagemap: %s", strerror(errno));
  struct pm_scan_arg a;
  memset(&a, 0, sizeof a);
  errno = 0;
  CHECK(ioctl(fd, PAGEMAP_SCAN, &a) == -1 && errno == EPERM,
        "the filter does not refuse PAGEMAP_SCAN (errno %s)", strerror(errno));
  close(fd);
  for (int i = 0; i < 2; i++) { /* (EPERM is not remembered: both calls try the scan) */
    uint64_t after = 1;
    int rc = hl_resident_bytes(h, &after);
    CHECK(rc == HL_OK, "call %d under the filter: resident_bytes returned %s: %s", i + 1,
          hl_error_name(rc), hl_heap_error(h));
    CHECK(after >= FILL && after <= before + SLACK && after + SLACK >= before,
          "call %d under the filter: resident_bytes %" PRIu64 " (mincore), %" PRIu64
          " before it (PAGEMAP_SCAN), %" PRIu64 " written", i + 1, after, before, FILL);
    printf("call %d: %" PRIu64 " resident under the filter, %" PRIu64 " before it\n", i + 1,
           after, before);
  }
  OK(h, hl_ref_release(h, r));
  hl_heap_free(h);
  return 0;
}

int main(void) {
  fflush(stdout);
  pid_t pid = fork();
  CHECK(pid >= 0, "fork: %s", strerror(errno));
  if (pid == 0) {
    int rc = child();
    fflush(stdout);
    child_exit(rc);
  }
  int st;
  CHECK(waitpid(pid, &st, 0) == pid, "waitpid: %s", strerror(errno));
  CHECK(WIFEXITED(st), "the child died of signal %d", WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  if (WEXITSTATUS(st) == 77) return 77;
  CHECK(WEXITSTATUS(st) == 0, "the child failed (exit %d)", WEXITSTATUS(st));
  puts("ok");
  return 0;
}
#else
int main(void) {
  puts("SKIP: the seccomp filter here is for Linux on x86_64 and aarch64");
  return 77;
}
#endif
