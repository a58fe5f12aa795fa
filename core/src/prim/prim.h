/*
 * prim.h -- the OS layer's contract.  The only code that calls mmap, madvise,
 * mincore, ioctl(PAGEMAP_SCAN) or reads /proc.  One implementation file per
 * OS (prim_linux.c is built and tested; prim_darwin.c is written against the
 * same contract).
 *
 * Raw calls (prim_os_*) return 0 or an errno and never retry.  Everything the
 * heap does goes through hl__prim_call() (syscall.c), the single bounded-retry
 * helper and fault-injection point.
 */
#ifndef HL_PRIM_H
#define HL_PRIM_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "heaplab.h"

/* One line of heaplab's on stderr (fmt ends with its newline), written with
 * one write(2) and SIGPIPE blocked for it: a stderr that is a pipe with no
 * reader (`prog 2>&1 | head -1` once head has gone) must not kill the
 * program for a warning -- the preloaded library's bad-option line killed
 * the program at its first malloc (status 141), its "cannot write" line at
 * exit changed the exit status.  A SIGPIPE the write raised is consumed
 * (one that was pending before is left); EPIPE is ignored; errno is kept.
 * Allocates nothing.  Every stderr line of the core and of the preloaded
 * library goes through it. */
void hl__say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* An errno's text, untranslated -- what every message of the core and of
 * this layer says (HEAPLAB_COUNTERS_FILE's warning comes from the heap's
 * set-up, which may run inside setlocale too).
 * strerror translates through gettext, which read-locks glibc's locale lock;
 * the preloaded library's first malloc may come from inside setlocale, which
 * holds that lock for writing: the read-lock failed (EDEADLK), its unlock
 * released setlocale's write lock, and the program's next setlocale hung
 * (bash, whenever the heap could not be set up).  strerrordesc_np takes no
 * lock and allocates nothing. */
static inline const char *hl__strerror(int e) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
  const char *s = strerrordesc_np(e);
  return s ? s : "unknown error";
#else
  return strerror(e);
#endif
}

/* The name a warning line starts with: the preloaded library's lines all
 * start "libheaplab-malloc:" (the core's said "heaplab:" there -- the
 * unknown-variable warning, the preload hunt, session 32; the counters
 * file's, the last read of that change). */
#ifdef HL_PRELOAD
#define HL_SAY_NAME "libheaplab-malloc"
#else
#define HL_SAY_NAME "heaplab"
#endif

/* ---- waits: no call of heaplab is a cancellation point ----
 * As no call of glibc's malloc is.  pthread_cond_wait, pthread_join, open,
 * read, fopen and nanosleep are cancellation points: a thread cancelled
 * (pthread_cancel, deferred) in one unwinds out of heaplab holding what it
 * held there -- the heap lock, a mark job's or a prefault helper's mutex, in
 * fork's prepare handler every lock of the registry -- and every later call
 * hangs (tests preload_cancelled_threads, cancelled_calls_leave_the_heap_unlocked).
 * Every wait, join, sleep and read of /proc in the core goes through these:
 * cancellation off for the call, back as it was after. */
static inline int prim_cancel_off(void) {
  int cs;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
  return cs;
}
static inline void prim_cancel_restore(int cs) { pthread_setcancelstate(cs, NULL); }
static inline void prim_cond_wait(pthread_cond_t *cv, pthread_mutex_t *mu) {
  int cs = prim_cancel_off();
  pthread_cond_wait(cv, mu);
  prim_cancel_restore(cs);
}
/* The clock every timed wait measures: the monotonic one where the C library
 * can wait on it (glibc 2.30: pthread_cond_clockwait, pthread_mutex_clocklock).
 * Deadlines on CLOCK_REALTIME moved with the wall clock: set back by an hour
 * (NTP, an administrator, a VM resumed) it made every wait then in progress --
 * the sampler's interval, the collector's min_cycle_interval_ms, a paced
 * allocation's poll, fork's bounded wait for a heap lock -- last an hour more
 * (test waits_follow_the_monotonic_clock).  Waits take a duration; the
 * deadline is made here, on the clock the wait uses. */
#if defined(__GLIBC__) && defined(__USE_GNU) && \
    (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 30))
#define PRIM_WAITS_MONOTONIC 1
#define PRIM_WAIT_CLOCK CLOCK_MONOTONIC
#else
#define PRIM_WAITS_MONOTONIC 0
#define PRIM_WAIT_CLOCK CLOCK_REALTIME
#endif
#if defined(__SANITIZE_THREAD__)
#define PRIM_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PRIM_UNDER_TSAN 1
#endif
#endif
#ifndef PRIM_UNDER_TSAN
#define PRIM_UNDER_TSAN 0
#endif
static inline struct timespec prim_deadline_on(clockid_t clock, uint64_t ns_from_now) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  uint64_t ns = (uint64_t)ts.tv_nsec + ns_from_now;
  ts.tv_sec += (time_t)(ns / 1000000000u);
  ts.tv_nsec = (long)(ns % 1000000000u);
  return ts;
}
static inline struct timespec prim_deadline(uint64_t ns_from_now) {
  return prim_deadline_on(PRIM_WAIT_CLOCK, ns_from_now);
}
/* Wait on cv at most ns nanoseconds: 0, or ETIMEDOUT (or a spurious 0). */
static inline int prim_cond_wait_ns(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t ns) {
  struct timespec ts = prim_deadline(ns);
  int cs = prim_cancel_off();
#if PRIM_WAITS_MONOTONIC
  int rc = pthread_cond_clockwait(cv, mu, CLOCK_MONOTONIC, &ts);
#else
  int rc = pthread_cond_timedwait(cv, mu, &ts);
#endif
  prim_cancel_restore(cs);
  return rc;
}
/* Take mu, waiting at most ns nanoseconds: 0, or ETIMEDOUT (not a
 * cancellation point). */
static inline int prim_mutex_lock_within(pthread_mutex_t *mu, uint64_t ns) {
  if (pthread_mutex_trylock(mu) == 0) return 0;
#if defined(__APPLE__) /* (no pthread_mutex_timedlock) */
  int cs = prim_cancel_off(), rc = ETIMEDOUT;
  for (uint64_t waited = 0; waited < ns && rc; waited += 50000) {
    struct timespec d = {0, 50000};
    nanosleep(&d, NULL);
    if (pthread_mutex_trylock(mu) == 0) rc = 0;
  }
  prim_cancel_restore(cs);
  return rc;
#elif PRIM_WAITS_MONOTONIC && !PRIM_UNDER_TSAN
  struct timespec ts = prim_deadline(ns);
  return pthread_mutex_clocklock(mu, CLOCK_MONOTONIC, &ts) == 0 ? 0 : ETIMEDOUT;
#else
  /* (ThreadSanitizer -- gcc 12's -- has no interceptor for
   * pthread_mutex_clocklock: a lock taken with it it reported unlocked by a
   * wrong thread; its build keeps the wall clock here) */
  struct timespec ts = prim_deadline_on(CLOCK_REALTIME, ns);
  return pthread_mutex_timedlock(mu, &ts) == 0 ? 0 : ETIMEDOUT;
#endif
}
static inline int prim_join(pthread_t t) {
  int cs = prim_cancel_off();
  int rc = pthread_join(t, NULL);
  prim_cancel_restore(cs);
  return rc;
}

/* Advice a caller can ask for.  Which OS call implements each is the OS file's
 * business (Linux: MADV_DONTNEED, MADV_FREE, MADV_DONTDUMP, MADV_DODUMP). */
typedef enum prim_op {
  PRIM_DONTNEED = 0,  /* drop the pages now; they read back as zero */
  PRIM_FREE = 1,      /* lazy free: stays charged until the kernel reclaims */
  PRIM_DONTDUMP = 2,  /* exclude from core dumps (changes VMA flags) */
  PRIM_DODUMP = 3,    /* include again */
  PRIM_RESTORE = 4,   /* make a released range safe to reuse (Darwin:
                         MADV_FREE_REUSE; Linux: nothing to do) */
  PRIM_NOHUGEPAGE = 5, /* whole reservation: no transparent huge pages */
  PRIM_POPULATE = 6,   /* fault the range in now, in one call: a bulk phase
                          is about to write all of it */
  PRIM_HUGEPAGE = 7    /* whole reservation: transparent huge pages (thp) */
} prim_op;

/* The size of a transparent huge page the heap arranges its reservation
 * for (thp): 2 MiB on x86-64 and arm64 with 4 KiB pages. */
#define PRIM_HUGE_BYTES ((size_t)2 << 20)

/* ---- raw OS calls (one file per OS) ---- */
/* Reserve `bytes` of address space, readable and writable, not committed;
 * align (a power of two, or 0): the start is a multiple of it. */
int hl__prim_os_reserve(size_t bytes, size_t align, void **out);
int hl__prim_os_unreserve(void *base, size_t bytes);
/* A mapping of its own for one block (the large path's large_map_bytes):
 * readable, writable, zero, committed as the kernel's overcommit policy
 * says (no MAP_NORESERVE); freed with hl__prim_os_unreserve. */
int hl__prim_os_map(size_t bytes, void **out);
/* The kernel's transparent huge page mode for a range advised MADV_HUGEPAGE:
 * 1 when such a range can get huge pages (Linux: .../transparent_hugepage/
 * enabled is always or madvise), 0 when it cannot (never, or no THP). */
int hl__prim_os_thp_available(void);
int hl__prim_os_advise(void *addr, size_t len, prim_op op);
/* Unmap [base, base+bytes), a mapping of its own (hl__prim_os_map); when the
 * kernel refuses -- at vm.max_map_count, where a munmap that splits a merged
 * VMA is refused -- its pages go back all the same (PRIM_DONTNEED).  The
 * unmap's error, or 0.  (The preloaded library's large-set table and trim
 * scratch: util/ptrset.c, release/release.c.) */
static inline int hl__prim_os_unmap_or_drop(void *base, size_t bytes) {
  int err = hl__prim_os_unreserve(base, bytes);
  if (err) (void)hl__prim_os_advise(base, bytes, PRIM_DONTNEED);
  return err;
}
/* 1 when `op` needs a system call on this OS (PRIM_RESTORE does not on Linux). */
int hl__prim_os_op_is_syscall(prim_op op);
/* Bytes of [addr, addr+len) the kernel charges now: pages present and not
 * the shared zero page (a read of an untouched page maps that; Rss and
 * Anonymous do not count it), a huge page's 2 MiB whole.  Linux: ioctl
 * PAGEMAP_SCAN on /proc/self/pagemap (6.7+; an open and a close of ~2 us
 * each call; 0.15-0.35 ms for 128 MiB of 4 KiB pages, 5-12x mincore's, but
 * empty page tables are skipped: us where mincore takes ms for a sparse
 * 32 GiB; docs/design.md, Measuring); mincore where that is not there
 * (ENOTTY/EINVAL, no /proc) or refuses this call (a seccomp filter's EPERM),
 * which counts zero pages too, as Darwin's does.
 * Holes are not counted. */
int hl__prim_os_resident(const void *addr, size_t len, uint64_t *bytes);
/* 0 when every page of [addr, addr+len) is mapped, ENOMEM when one is not
 * (mincore). */
int hl__prim_os_mapped(const void *addr, size_t len);
int hl__prim_os_vma_count(uintptr_t lo, uintptr_t hi, uint64_t *count);
/* Open a file of this process's /proc directory through the calling
 * thread's (valid after the main thread's pthread_exit); -1 and errno. */
int hl__prim_os_proc_self_open(const char *name);
/* The process's own peak resident set (VmHWM, not ru_maxrss: Linux carries
 * that over exec), bytes; 0 when it cannot be read. */
uint64_t hl__prim_os_peak_rss(void);
#ifdef __linux__
/* /proc/self/status into buf, NUL-terminated (0 or an errno), and the number
 * after "key:" in it (base 10; 16 for the Cap* masks; 0 when absent). */
int hl__prim_os_status(char *buf, size_t len);
uint64_t hl__prim_os_status_value(const char *status, const char *key, int base);
/* Each mapping [lo, hi) of /proc/self/maps to fn until it returns nonzero;
 * nothing allocated.  0 or an errno. */
int hl__prim_os_maps_each(int (*fn)(void *arg, uintptr_t lo, uintptr_t hi), void *arg);
/* At vm.max_map_count?  The mappings and the limit in *maps, *limit. */
bool hl__prim_os_at_map_limit(uint64_t *maps, uint64_t *limit);
/* mlock2 (onfault: MLOCK_ONFAULT); 0 or an errno.  Not through hl__prim_call:
 * only libheaplab-malloc.so's mlockall emulation locks (the program asked). */
int hl__prim_os_lock(void *addr, size_t len, bool onfault);
#endif
/* The running executable's path into buf ("" when unreadable). */
void hl__prim_os_self_exe(char *buf, size_t len);
int hl__prim_os_footprint(hl_footprint *out);
/* What hl__prim_os_footprint reads, as its failures name it. */
extern const char hl__prim_os_footprint_source[];
size_t hl__prim_os_page_size(void);
/* getenv without libc's: a plain walk of environ, calling nothing.  The
 * preloaded library's set-up reads its variables this way: a program that
 * never calls getenv does not fault getenv's code in (a 64 KiB window of
 * libc's text: docs/performance.md, the preloaded library). */
const char *hl__prim_env(const char *name);
/* The address space this process may still map under its limits: the
 * smaller of RLIMIT_AS - VmSize and RLIMIT_DATA - VmData (a private writable
 * mapping, the reservation included, counts against both); UINT64_MAX when
 * neither is set.  *which says whose ("RLIMIT_AS", "RLIMIT_DATA", or NULL),
 * *limit that limit, bytes. */
uint64_t hl__prim_os_address_room(const char **which, uint64_t *limit);
/* RAM plus swap: what a process could ever touch. */
uint64_t hl__prim_os_memory_bytes(void);
/* What could be touched now without swapping others out or the OOM killer:
 * Linux MemAvailable + SwapFree; where unknown, hl__prim_os_memory_bytes. */
uint64_t hl__prim_os_available_bytes(void);
/* CPUs this process may run on (its affinity mask, within the online
 * CPUs); at least 1. */
uint64_t hl__prim_os_cpus(void);
uint64_t hl__prim_now_ns(void);
void hl__prim_sleep_us(int64_t us);

/* ---- the bounded-retry helper and fault-injection point (syscall.c) ---- */
/* A site's schedule: armed by one thread (hl_inject) while others' syscalls
 * read it, so every field is atomic -- a call sees the schedule before or
 * after a re-arm, field by field, never a torn value. */
typedef struct prim_fault {
  _Atomic int mode;    /* hl_fault_mode */
  _Atomic int err;
  _Atomic int64_t arg;
  _Atomic uint64_t calls;
  _Atomic uint64_t fired;
  _Atomic uint64_t stall_ns;  /* time slept between EAGAIN retries */
} prim_fault;

typedef struct prim_ctx {
  int64_t retry_max;        /* -1 = unbounded */
  int64_t backoff_us;
  uintptr_t base;           /* reservation, for sticky-page matching */
  unsigned page_shift;
  prim_fault faults[HL_SITE_COUNT];
  _Atomic int any_armed;    /* fast path: skip the fault table */
  _Atomic uint64_t syscalls;
  _Atomic uint64_t retries;
  _Atomic uint64_t gave_up;
  _Atomic uint64_t fired;
  _Atomic uint64_t stall_ns;  /* time slept between EAGAIN retries */
  /* Optional shared counters (HEAPLAB_COUNTERS_FILE) a parent process can
   * read while this one spins: [0] syscalls [1] retries [2] gave_up. */
  _Atomic uint64_t *shared;
} prim_ctx;

typedef struct prim_result {
  int err;        /* 0 = ok, else errno of the final attempt */
  int gave_up;    /* EAGAIN retries exhausted */
  int injected;   /* the final failure was injected */
  uint64_t retries;
} prim_result;

void hl__prim_ctx_init(prim_ctx *ctx, int64_t retry_max, int64_t backoff_us);
void hl__prim_ctx_destroy(prim_ctx *ctx);
/* Advise [addr, addr+len) at `site`, retrying EAGAIN as configured.  An
 * injected failure is decided per attempt, before the real call, and is
 * handled exactly like a real one. */
prim_result hl__prim_call(prim_ctx *ctx, int site, void *addr, size_t len, prim_op op);
/* Reserve through the same injection point (site reserve). */
prim_result hl__prim_reserve(prim_ctx *ctx, size_t bytes, void **out);
prim_result hl__prim_reserve_aligned(prim_ctx *ctx, size_t bytes, size_t align, void **out);
int hl__prim_arm(prim_ctx *ctx, int site, int mode, int64_t arg, int err);

#endif
