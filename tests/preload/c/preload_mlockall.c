/*
 * preload_mlockall.c -- a program that locks its memory (mlockall, as
 * `memcached -k` does) on libheaplab-malloc.so: the kernel's mlockall locked
 * the heap's whole reservation too -- it faulted all of it in (32 GiB by
 * default: a python3 calling it as root was killed by the OOM killer), and
 * without CAP_IPC_LOCK measured the reservation against RLIMIT_MEMLOCK and
 * refused the call -- and a heap set up after mlockall(MCL_FUTURE) had its
 * reservation locked when it was made.  The library's mlockall passes over
 * the heap's unused address space and locks what the program uses, as on
 * glibc.
 *
 *   preload_mlockall MODE [--heaplab]
 *     current       MCL_CURRENT | MCL_FUTURE: the blocks made before and
 *                   after are locked, the reservation is not, a fork
 *                   child's are not; munlockall ends it
 *     current-only  MCL_CURRENT: blocks made after are not locked
 *     future-first  MCL_FUTURE before the first malloc
 *     onfault       MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT
 *     limit         without CAP_IPC_LOCK, under RLIMIT_MEMLOCK: the call
 *                   passes or fails as the process's size says (ENOMEM),
 *                   and under MCL_FUTURE a malloc past the limit fails
 *                   with ENOMEM, until munlockall
 *     race          a thread carving fresh pages while mlockall(MCL_CURRENT
 *                   | MCL_FUTURE) runs (40 forked runs): every block ends in
 *                   a locked mapping (pages carved during the call were
 *                   locked by neither the walk nor the carve: 13 runs of 20)
 *     refused       a seccomp filter refusing mlock and mlock2 (EPERM), made
 *                   after the first malloc: mlockall locks the program all
 *                   the same (it returned 0 and locked nothing) and small
 *                   blocks stay heaplab's (each carve failed: every small
 *                   malloc a glibc block)
 *     no-proc       /proc unmounted (a mount namespace of its own): mlockall
 *                   locks all the same (it returned 0 and locked 64 kB)
 *     refused-limit refused as above, without CAP_IPC_LOCK under an 8 MiB
 *                   RLIMIT_MEMLOCK: glibc's call passes; heaplab's falls back
 *                   to the kernel's, which counts the reservation: ENOMEM,
 *                   and then nothing may have changed (it left MCL_FUTURE on:
 *                   a new mapping locked)
 *   --heaplab: the small blocks must be heaplab's (in 512 MiB or more of
 *   mappings without a gap: the test runs with HEAPLAB_RESERVE_BYTES=1g, so that the
 *   defect shows as a locked gigabyte, not as the OOM killer).
 * The same modes run on glibc alone (meson.build): the control.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <linux/capability.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rss.h"

static void *(*volatile M)(size_t) = malloc;
static const char *mode = "";

/* (no stdio after a malloc may have failed: write a stack buffer) */
static void fail(const char *what, long a, long b) {
  char buf[256];
  int n = snprintf(buf, sizeof buf, "FAIL %s: %s (%ld, %ld)\n", mode, what, a, b);
  if (write(2, buf, (size_t)n) < 0) _exit(2);
  _exit(1);
}

/* n bytes of 64-byte blocks, each written (leaked: the test's memory) */
static void *blocks(size_t bytes) {
  void *first = NULL;
  for (size_t i = 0; i < bytes / 64; i++) {
    char *p = M(64);
    if (!p) fail("malloc(64) returned NULL", (long)i, errno);
    memset(p, 1, 64);
    if (!first) first = p;
  }
  return first;
}

/* The bytes of the mapping holding p and of those that follow it without a
 * gap (0 when none holds it): the heap's reservation is two mappings, the
 * part core dumps hold and the rest (a preloaded heap's core dump rule). */
static size_t mapping_of(const void *p) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[512];
  size_t size = 0;
  unsigned long end = 0;
  while (f && fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx", &lo, &hi) != 2) continue;
    if ((uintptr_t)p >= lo && (uintptr_t)p < hi) {
      size = hi - lo;
      end = hi;
    } else if (size && lo == end) {
      size += hi - lo;
      end = hi;
    } else if (size) {
      break;
    }
  }
  if (f) fclose(f);
  return size;
}

/* The locks must cover the program's memory and not the reservation
 * (1 GiB): at least `least` KiB, under 256 MiB. */
static void locked_between(long least, const char *when) {
  long lck = status_kib("VmLck");
  if (lck < least || lck > 256 * 1024) fail(when, lck, least);
}

static void drop_ipc_lock(void) {
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2];
  if (syscall(SYS_capget, &hdr, data) != 0) fail("capget", errno, 0);
  data[0].effective &= ~(1u << CAP_IPC_LOCK);
  if (syscall(SYS_capset, &hdr, data) != 0) fail("capset", errno, 0);
}

/* VmLck through a descriptor opened before /proc went away (no-proc) */
static int status_fd = -1;
static long lck_kib(void) {
  if (status_fd < 0) return status_kib("VmLck");
  char buf[4096];
  ssize_t n = pread(status_fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return -1;
  buf[n] = 0;
  char *l = strstr(buf, "VmLck:");
  return l ? atol(l + 6) : -1;
}

/* race: one thread makes blocks on fresh pages while main locks */
enum { RACE_MAX = 100000 };
static void *race_block[RACE_MAX];
static atomic_int race_n, race_stop, race_started;
static void *race_filler(void *arg) {
  (void)arg;
  atomic_store(&race_started, 1);
  while (!atomic_load(&race_stop) && atomic_load(&race_n) < RACE_MAX) {
    char *p = M(16000);
    if (!p) fail("malloc(16000) returned NULL", atomic_load(&race_n), errno);
    memset(p, 1, 16000);
    race_block[atomic_fetch_add(&race_n, 1)] = p;
  }
  return NULL;
}

/* 1 when a block made during the call lies in a mapping not locked */
static int race_once(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, race_filler, NULL) != 0) fail("pthread_create", errno, 0);
  while (!atomic_load(&race_started)) sched_yield();
  usleep(2000);
  if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0) fail("mlockall", errno, 0);
  usleep(2000);
  atomic_store(&race_stop, 1);
  pthread_join(t, NULL);
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) fail("open /proc/self/smaps", errno, 0);
  static struct { uintptr_t lo, hi; int locked; } v[8192];
  int nv = 0;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (strchr(line, '-') < strchr(line, ' ') && sscanf(line, "%lx-%lx ", &lo, &hi) == 2 &&
        nv < 8192)
      v[nv].lo = lo, v[nv].hi = hi, v[nv++].locked = 0;
    else if (!strncmp(line, "VmFlags:", 8) && nv && strstr(line, " lo"))
      v[nv - 1].locked = 1;
  }
  fclose(f);
  int n = atomic_load(&race_n);
  for (int i = 0; i < n; i++)
    for (int k = 0; k < nv; k++)
      if ((uintptr_t)race_block[i] >= v[k].lo && (uintptr_t)race_block[i] < v[k].hi) {
        if (!v[k].locked) return 1;
        break;
      }
  return 0;
}

/* refused: mlock and mlock2 answer EPERM, everything else runs */
static void refuse_mlock(void) {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mlock, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mlock2, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
  };
  struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
    fail("seccomp", errno, 0);
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  mode = argv[1];
  int heaplab = argc > 2 && !strcmp(argv[2], "--heaplab");
  /* locking megabytes needs CAP_IPC_LOCK (or a high RLIMIT_MEMLOCK): skip
   * without (77), as the limit mode does when it cannot raise the limit */
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct caps[2];
  if (strcmp(mode, "limit") != 0 && strcmp(mode, "refused-limit") != 0 &&
      (syscall(SYS_capget, &hdr, caps) != 0 || !(caps[0].effective & (1u << CAP_IPC_LOCK)))) {
    puts("skip: no CAP_IPC_LOCK");
    return 77;
  }
  if (!strcmp(mode, "future-first")) {
    /* before any malloc: the heap is set up after this call */
    if (mlockall(MCL_FUTURE) != 0) fail("mlockall(MCL_FUTURE)", errno, 0);
    blocks(4 << 20);
    locked_between(4 << 10, "4 MiB of blocks made after MCL_FUTURE");
  } else if (!strcmp(mode, "current") || !strcmp(mode, "current-only")) {
    void *b = blocks(4 << 20);
    char *big = M(2 << 20);
    if (!big) fail("malloc(2 MiB)", errno, 0);
    memset(big, 1, 2 << 20);
    if (heaplab && mapping_of(b) < ((size_t)512 << 20))
      fail("the blocks are not heaplab's (mapping bytes)", (long)mapping_of(b), 0);
    int future = !strcmp(mode, "current");
    if (mlockall(MCL_CURRENT | (future ? MCL_FUTURE : 0)) != 0) fail("mlockall", errno, 0);
    locked_between(6 << 10, "after mlockall, 6 MiB of blocks");
    long before = status_kib("VmLck");
    blocks(8 << 20); /* new pages */
    long grew = status_kib("VmLck") - before;
    if (future ? grew < (7 << 10) : grew > (1 << 10))
      fail(future ? "8 MiB of blocks made under MCL_FUTURE are not locked"
                  : "blocks made after mlockall(MCL_CURRENT) are locked",
           grew, 0);
    if (future) {
      /* a fork child inherits no lock, MCL_FUTURE's neither: its new
       * blocks are not locked */
      fflush(stdout);
      pid_t pid = fork();
      if (pid == 0) {
        blocks(8 << 20);
        _exit(status_kib("VmLck") < (1 << 10) ? 0 : 3);
      }
      int st = 0;
      if (pid < 0 || waitpid(pid, &st, 0) != pid) fail("fork", errno, 0);
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail("a fork child's blocks are locked (its exit status)", st, 0);
    }
    if (munlockall() != 0) fail("munlockall", errno, 0);
    blocks(8 << 20);
    if (status_kib("VmLck") != 0) fail("locked after munlockall", status_kib("VmLck"), 0);
  } else if (!strcmp(mode, "onfault")) {
    blocks(4 << 20);
    long rss = rss_kib();
    if (mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) != 0) fail("mlockall", errno, 0);
    /* (VmLck counts the locked mappings whole: the reservation would be
     * the whole gigabyte) */
    locked_between(4 << 10, "after mlockall(MCL_ONFAULT)");
    if (rss_kib() - rss > (64 << 10)) fail("MCL_ONFAULT faulted memory in", rss_kib() - rss, rss);
  } else if (!strcmp(mode, "limit")) {
    void *b = blocks(1 << 20);
    if (heaplab && mapping_of(b) < ((size_t)512 << 20))
      fail("the blocks are not heaplab's (mapping bytes)", (long)mapping_of(b), 0);
    drop_ipc_lock();
    /* the process is a few MiB (VmSize: the heap's reservation left out):
     * 8 MiB, the usual default, lets it lock itself, 256 KiB not */
    struct rlimit rl;
    if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0) fail("getrlimit", errno, 0);
    if (rl.rlim_max < (8 << 20)) {
      puts("skip: RLIMIT_MEMLOCK's hard limit is under 8 MiB");
      return 77;
    }
    rl.rlim_cur = 8 << 20;
    if (setrlimit(RLIMIT_MEMLOCK, &rl) != 0) fail("setrlimit", errno, 0);
    if (mlockall(MCL_CURRENT) != 0) fail("mlockall(MCL_CURRENT) under an 8 MiB limit", errno, 0);
    locked_between(1 << 10, "after mlockall under the limit");
    if (munlockall() != 0) fail("munlockall", errno, 0);
    rl.rlim_cur = 256 << 10;
    if (setrlimit(RLIMIT_MEMLOCK, &rl) != 0) fail("setrlimit", errno, 0);
    errno = 0;
    if (mlockall(MCL_CURRENT) != -1 || errno != ENOMEM)
      fail("mlockall(MCL_CURRENT) over a 256 KiB limit: expected ENOMEM", errno, 0);
    /* MCL_FUTURE: what is made from now on counts against the limit */
    if (mlockall(MCL_FUTURE) != 0) fail("mlockall(MCL_FUTURE)", errno, 0);
    size_t made = 0;
    errno = 0;
    while (made < ((size_t)64 << 20)) {
      char *p = M(64);
      if (!p) break;
      memset(p, 1, 64);
      made += 64;
    }
    if (made >= ((size_t)64 << 20) || errno != ENOMEM)
      fail("malloc past RLIMIT_MEMLOCK under MCL_FUTURE: expected NULL and ENOMEM", (long)made,
           errno);
    if (munlockall() != 0) fail("munlockall", errno, 0);
    blocks(1 << 20);
  } else if (!strcmp(mode, "race")) {
    free(M(1));
    int bad = 0;
    /* (the window is a system call long: 1-2 runs of 10 met it when the
     * ranges were read just before the call, 13 of 20 when read before the
     * status too) */
    for (int run = 0; run < 40; run++) {
      fflush(stdout);
      pid_t pid = fork();
      if (pid == 0) _exit(race_once());
      int st = 0;
      if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) > 1)
        fail("a race run did not end normally", st, run);
      bad += WEXITSTATUS(st);
    }
    if (bad) fail("runs that left a block made during mlockall in a mapping not locked", bad, 40);
  } else if (!strcmp(mode, "refused")) {
    void *b = blocks(1 << 20);
    refuse_mlock();
    if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0) fail("mlockall with mlock refused", errno, 0);
    locked_between(1 << 10, "mlockall with mlock refused: VmLck");
    /* pages carved from now on: heaplab's still, not glibc's blocks */
    char *p = NULL;
    for (int i = 0; i < (8 << 20) / 64; i++) {
      p = M(64);
      if (!p) fail("malloc(64) returned NULL", i, errno);
      memset(p, 1, 64);
    }
    if (heaplab && (mapping_of(p) < ((size_t)512 << 20) || mapping_of(b) < ((size_t)512 << 20)))
      fail("a block made after mlockall is not heaplab's (mapping bytes)", (long)mapping_of(p), 0);
  } else if (!strcmp(mode, "refused-limit")) {
    blocks(1 << 20);
    struct rlimit rl;
    if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0) fail("getrlimit", errno, 0);
    if (rl.rlim_max < (8 << 20)) {
      puts("skip: RLIMIT_MEMLOCK's hard limit is under 8 MiB");
      return 77;
    }
    drop_ipc_lock();
    rl.rlim_cur = 8 << 20;
    if (setrlimit(RLIMIT_MEMLOCK, &rl) != 0) fail("setrlimit", errno, 0);
    refuse_mlock();
    errno = 0;
    if (mlockall(MCL_CURRENT | MCL_FUTURE) == 0) {
      locked_between(1 << 10, "mlockall with mlock refused, under a limit");
    } else {
      if (!heaplab || errno != ENOMEM) fail("mlockall with mlock refused, under a limit", errno, 0);
      char *m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (m == MAP_FAILED) fail("mmap after the refused mlockall", errno, 0);
      memset(m, 1, 1 << 20);
      if (status_kib("VmLck") != 0)
        fail("a refused mlockall left locks on (VmLck KiB after a new mapping)",
             status_kib("VmLck"), 0);
    }
  } else if (!strcmp(mode, "no-proc")) {
    blocks(1 << 20);
    status_fd = open("/proc/self/status", O_RDONLY);
    if (status_fd < 0) fail("open /proc/self/status", errno, 0);
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        umount2("/proc", MNT_DETACH) != 0) {
      puts("skip: /proc cannot be unmounted in a namespace of its own");
      return 77;
    }
    if (open("/proc/self/maps", O_RDONLY) >= 0) fail("/proc is still there", 0, 0);
    if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0) fail("mlockall without /proc", errno, 0);
    long lck = lck_kib();
    if (lck < (1 << 10) || lck > 256 * 1024) fail("mlockall without /proc: VmLck", lck, 0);
  } else {
    return 2;
  }
  printf("ok %s\n", mode);
  return 0;
}
