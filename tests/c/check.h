/*
 * check.h -- the C scenario tests' few helpers.  One scenario per file, named
 * after what it proves; a failed CHECK prints where and why and exits 1.
 */
#ifndef HL_TEST_CHECK_H
#define HL_TEST_CHECK_H

#include <errno.h>
#include <inttypes.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "heaplab.h"

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, "\n");                                                   \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

#define OK(h, expr)                                                            \
  do {                                                                         \
    int rc_ = (expr);                                                          \
    CHECK(rc_ == HL_OK, "%s returned %s: %s", #expr, hl_error_name(rc_),       \
          hl_heap_error(h));                                                   \
  } while (0)

/* Expect an error code and a message containing `needle`. */
#define FAILS(h, code, needle, expr)                                           \
  do {                                                                         \
    int rc_ = (expr);                                                          \
    CHECK(rc_ == (code), "%s returned %s, expected %s (%s)", #expr,            \
          hl_error_name(rc_), hl_error_name(code), hl_heap_error(h));          \
    CHECK(strstr(hl_heap_error(h), (needle)) != NULL,                          \
          "message of %s is '%s', expected it to mention '%s'", #expr,         \
          hl_heap_error(h), (needle));                                         \
  } while (0)

#define MiB (1024.0 * 1024.0)

/* GCC 12's AddressSanitizer does not take its allocator's locks around
 * fork() (upstream LLVM's runtime does now: asan_posix.cpp's BeforeFork): a child of a parent whose
 * other thread was inside malloc can wait for ever in ASan's own malloc
 * (gdb: SizeClassAllocator64::GetFromAllocator's mutex) or free (the
 * quarantine's spin lock in Quarantine::Drain, ReturnToAllocator's mutex:
 * manual_mode_threads, session 42).  A scenario that forks beside threads
 * calling into the library starts with SKIP_WHERE_FORK_IS_UNSAFE(): it runs
 * in the plain build and under ThreadSanitizer, is skipped (77) under ASan
 * -- or keeps its threads out of the system allocator at its forks there,
 * as manual_mode_threads does (docs/design.md, *fork()*). */
#if defined(__SANITIZE_ADDRESS__)
#define SKIP_WHERE_FORK_IS_UNSAFE()                                            \
  do {                                                                         \
    puts("SKIP: AddressSanitizer's allocator is not fork-safe in a threaded "  \
         "parent");                                                            \
    return 77;                                                                 \
  } while (0)
#else
#define SKIP_WHERE_FORK_IS_UNSAFE() \
  do {                              \
  } while (0)
#endif

/* Under ThreadSanitizer (make test-tsan) the instrumented code runs 5-15
 * times slower, and a race shows in the first rounds of a threaded scenario
 * or not at all; TSAN_FEWER(n) is n, or a third of n (at least 1) there. */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif
#define TSAN_FEWER(n) (UNDER_TSAN ? ((n) / 3 > 0 ? (n) / 3 : 1) : (n))

/* ... and under AddressSanitizer too (make test-asan, 2-3 times slower):
 * SAN_FEWER(n) is a third of n (at least 1) under either sanitizer, for a
 * count that repeats the same code paths, which the sanitizer checks on
 * each access -- the first rounds show what the rest would. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif
#define SAN_FEWER(n) (UNDER_TSAN || UNDER_ASAN ? ((n) / 3 > 0 ? (n) / 3 : 1) : (n))

/* sem_wait for at most `seconds`: false when it timed out (the tests that
 * hold a system call in one thread until another has done something). */
static inline bool sem_wait_for(sem_t *s, int seconds) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  t.tv_sec += seconds;
  while (sem_timedwait(s, &t) != 0)
    if (errno != EINTR) return false;
  return true;
}

/* A heap from "name=value" pairs on top of the defaults (no environment). */
static inline hl_heap *heap_with(const char *first, ...) {
  hl_options o;
  hl_options_defaults(&o);
  char err[256];
  va_list ap;
  va_start(ap, first);
  for (const char *kv = first; kv; kv = va_arg(ap, const char *)) {
    char name[64];
    const char *eq = strchr(kv, '=');
    CHECK(eq && (size_t)(eq - kv) < sizeof name, "bad option pair '%s'", kv);
    memcpy(name, kv, (size_t)(eq - kv));
    name[eq - kv] = 0;
    int rc = hl_options_set(&o, name, eq + 1, err, sizeof err);
    CHECK(rc == HL_OK, "option %s: %s", kv, err);
  }
  va_end(ap);
  hl_heap *h = NULL;
  int rc = hl_heap_new(&o, &h, err, sizeof err);
  CHECK(rc == HL_OK, "hl_heap_new: %s", err);
  return h;
}
#define HEAP(...) heap_with(__VA_ARGS__, (const char *)NULL)

/* _exit(rc) for a fork() child of a scenario -- after, in make coverage's
 * build (tests/meson.build defines HL_TEST_GCOV there), the child's counts
 * written: gcov writes them at exit(), which _exit skips, and what only
 * children run -- the fork handlers, a child's orphaned pages, a thread that
 * cannot start -- read as never executed.  (A weak reference to __gcov_dump
 * was NULL there too: it pulls no member out of libgcov.a.) */
#ifdef HL_TEST_GCOV
void __gcov_dump(void);
#endif
static inline __attribute__((noreturn)) void child_exit(int rc) {
#ifdef HL_TEST_GCOV
  __gcov_dump();
#endif
  _exit(rc);
}

/* fn(out) run in a child under RLIMIT_AS = limit; the n words it fills come
 * back (zeros where it filled none).  A heap made there cannot touch the
 * test's own address space. */
static inline void under_as_limit(uint64_t limit, void (*fn)(uint64_t *out), uint64_t *out,
                                  size_t n) {
  int fds[2];
  CHECK(pipe(fds) == 0, "pipe");
  pid_t pid = fork();
  CHECK(pid >= 0, "fork: %s", strerror(errno));
  if (pid == 0) {
    struct rlimit rl = {limit, limit};
    setrlimit(RLIMIT_AS, &rl);
    uint64_t got[8] = {0};
    if (n > 8) child_exit(4);
    fn(got);
    if (write(fds[1], got, n * sizeof *got) != (ssize_t)(n * sizeof *got)) child_exit(3);
    child_exit(0);
  }
  close(fds[1]);
  CHECK(read(fds[0], out, n * sizeof *out) == (ssize_t)(n * sizeof *out), "the child said nothing");
  close(fds[0]);
  waitpid(pid, NULL, 0);
}

/* CLOCK_MONOTONIC in seconds (the tests that time a wait) */
static inline double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Add the cycle events read (and consumed) so far to counts[reason]: the
 * reason field of "major,duration_ns,...,trigger_bytes,reason,minor"
 * (heaplab.h: 0 a caller, 1 the small trigger, 2 the large one, 3 pacing,
 * 4 memory). */
static inline void cycle_reasons_read(hl_heap *h, uint64_t counts[8]) {
  hl_event ev[64];
  size_t n;
  do {
    OK(h, hl_events_read(h, ev, 64, &n, 1));
    for (size_t i = 0; i < n; i++) {
      if (ev[i].kind != HL_EV_cycle) continue;
      int64_t r = ev[i].fields[8];
      CHECK(r >= 0 && r < 8, "a cycle of reason %" PRId64, r);
      counts[r]++;
    }
  } while (n == 64);
}

/* The first 8 bytes of r's payload (the word a scenario wrote to tell its
 * object later). */
static inline uint64_t first_word(hl_heap *h, hl_ref r) {
  uint64_t v = 0;
  OK(h, hl_ref_read(h, r, 0, &v, sizeof v));
  return v;
}

static inline hl_stats stats_of(hl_heap *h) {
  hl_stats s;
  OK(h, hl_stats_get(h, &s));
  return s;
}

static inline uint64_t resident_of(hl_heap *h) {
  uint64_t r;
  OK(h, hl_resident_bytes(h, &r));
  return r;
}

static inline uint64_t vmas_of(hl_heap *h) {
  uint64_t v;
  OK(h, hl_vma_count(h, &v));
  return v;
}

static inline void check_invariants(hl_heap *h) { OK(h, hl_heap_check(h)); }

/* hl_obj_new, or the test fails saying why. */
static inline void *obj_made(hl_heap *h, uint64_t size, uint64_t refs) {
  void *o = hl_obj_new(h, size, refs);
  CHECK(o, "alloc: %s", hl_heap_error(h));
  return o;
}

/* Allocate garbage of a class of its own (200-byte objects) until one more
 * cycle has run. */
static inline void cycle_by_garbage(hl_heap *h) {
  hl_stats s;
  OK(h, hl_stats_get(h, &s));
  uint64_t c = s.cycles;
  while (s.cycles == c) {
    obj_made(h, 200, 0);
    OK(h, hl_stats_get(h, &s));
  }
}

/* The next number of a xorshift64 sequence whose state is *x (not 0). */
static inline uint64_t xorshift64(uint64_t *x) {
  *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
  return *x;
}

/* Shuffle b[0..n) (Fisher-Yates) with the sequence *x: blocks freed in this
 * order come from scattered pages, as a program's frees do. */
static inline void shuffle(void **b, size_t n, uint64_t *x) {
  for (size_t i = n ? n - 1 : 0; i > 0; i--) {
    size_t j = xorshift64(x) % (i + 1);
    void *t = b[i];
    b[i] = b[j];
    b[j] = t;
  }
}

/* Collect until a cycle releases nothing more (bounded). */
static inline void collect_settled(hl_heap *h) {
  for (int i = 0; i < 64; i++) {
    uint64_t before = stats_of(h).released_pages;
    OK(h, hl_collect(h, 1, -1));
    hl_stats s = stats_of(h);
    if (i > 0 && s.released_pages == before) break;
  }
}

/* Resident bytes of the OS pages covering [lo, hi) (mincore). */
static inline uint64_t mincore_resident(uintptr_t lo, uintptr_t hi) {
  size_t os = (size_t)sysconf(_SC_PAGESIZE);
  lo = lo / os * os;
  size_t n = (hi - lo + os - 1) / os;
  unsigned char *vec = malloc(n);
  CHECK(vec, "malloc");
  CHECK(mincore((void *)lo, n * os, vec) == 0, "mincore");
  uint64_t r = 0;
  for (size_t i = 0; i < n; i++) r += (vec[i] & 1) ? os : 0;
  free(vec);
  return r;
}


/* The sum of the large_unmap_pending events read now (and taken off the
 * ring): mappings refused, unmapped, the first refusal's errno, and the last
 * event's pending count (-1: no event). */
typedef struct pending_events {
  int64_t refused, unmapped, pending, err;
} pending_events;
static inline pending_events large_unmap_pending_events(hl_heap *h) {
  static hl_event ev[4096];
  size_t n = 0;
  OK(h, hl_events_read(h, ev, 4096, &n, 1));
  pending_events p = {0, 0, -1, 0};
  for (size_t i = 0; i < n; i++) {
    if (ev[i].kind != HL_EV_large_unmap_pending) continue;
    p.refused += ev[i].fields[0];
    if (!p.err) p.err = ev[i].fields[2];
    p.unmapped += ev[i].fields[3];
    p.pending = ev[i].fields[5];
  }
  return p;
}

#endif
