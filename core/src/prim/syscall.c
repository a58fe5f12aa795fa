/*
 * syscall.c -- the one bounded-retry helper and the one fault-injection point.
 *
 * Every system call the heap makes goes through hl__prim_call()/hl__prim_reserve()
 * -- but, in libheaplab-malloc.so, the locks its mlockall makes for the
 * program (hl__prim_os_lock) and the core-dump advice over the reservation and
 * side tables (pages.c), which are not the heap's mechanisms: no site, no
 * count, no retry.
 * An injected failure is decided per attempt, before the real call, and then
 * flows through exactly the code a real failure takes: an injected EAGAIN is
 * retried like a real one, an injected refusal is returned like a real one.
 *
 * Why the retry is bounded (seed 001): madvise reports a failed VMA split as
 * EAGAIN, so a process at vm.max_map_count gets EAGAIN on every call that
 * needs a split, permanently.  An unbounded loop then spins forever holding
 * whatever it holds.  retry_max = -1 keeps that loop as a control arm.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "prim.h"

/* (prim.h) */
/* A line is made in one buffer and written whole: 8 KiB, room for a path of
 * PATH_MAX and its reason -- a 1 KiB buffer on the stack cut a long
 * HEAPLAB_STATS path's "cannot write" line before its reason (the review,
 * session 32).  Static (a thread's stack may be 16 KiB), taken with a flag:
 * a line made meanwhile (another thread, a signal handler) uses 1 KiB of
 * stack, and a longer one of those is cut, its newline kept. */
static char say_line[8192];
static atomic_flag say_busy = ATOMIC_FLAG_INIT;
void hl__say(const char *fmt, ...) {
  int saved = errno;
  char small[1024];
  bool own = !atomic_flag_test_and_set_explicit(&say_busy, memory_order_acquire);
  char *buf = own ? say_line : small;
  size_t cap = own ? sizeof say_line : sizeof small;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, cap, fmt, ap);
  va_end(ap);
  if (n <= 0) {
    if (own) atomic_flag_clear_explicit(&say_busy, memory_order_release);
    errno = saved;
    return;
  }
  size_t len = (size_t)n < cap ? (size_t)n : cap - 1;
  if ((size_t)n >= cap) buf[len - 1] = '\n';
  sigset_t pipe_set, old, pending;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  bool masked = pthread_sigmask(SIG_BLOCK, &pipe_set, &old) == 0;
  bool was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
  bool broken = false;
  for (size_t off = 0; off < len;) {
    ssize_t w = write(STDERR_FILENO, buf + off, len - off);
    if (w > 0) {
      off += (size_t)w;
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else {
      broken = w < 0 && errno == EPIPE;
      break;
    }
  }
  if (masked && broken && !was_pending) { /* the SIGPIPE this write raised */
#ifdef __linux__
    const struct timespec zero = {0, 0};
    (void)sigtimedwait(&pipe_set, NULL, &zero);
#else
    int sig;
    if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE)) (void)sigwait(&pipe_set, &sig);
#endif
  }
  if (masked) pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (own) atomic_flag_clear_explicit(&say_busy, memory_order_release);
  errno = saved;
}

/* (prim.h) */
const char *hl__prim_env(const char *name) {
  extern char **environ;
  for (char **e = environ; e && *e; e++) {
    const char *v = *e, *p = name;
    while (*p && *v == *p) v++, p++;
    if (!*p && *v == '=') return v + 1;
  }
  return NULL;
}

static _Atomic uint64_t *shared_counters;
static pthread_once_t shared_once = PTHREAD_ONCE_INIT;

/* HEAPLAB_COUNTERS_FILE=path: a file (created by the observer) mapped shared,
 * so a parent can watch a child's syscall, retry and give-up counts while the
 * child is stuck inside a call (experiment E6).  Only the observer's file:
 * a regular file of 4096 bytes (E6 writes 4096 zero bytes) or an empty one
 * (made 4096 here).  Any other file is left as it is, with one warning line:
 * the variable pointed at someone's file truncated it to 4096 bytes and
 * wrote counters over its start (the environment hunt, session 27). */
static void shared_open(void) {
  const char *path = hl__prim_env("HEAPLAB_COUNTERS_FILE");
  if (!path || !*path) return;
  int fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK); /* (a FIFO: no wait) */
  if (fd < 0) {
    hl__say(HL_SAY_NAME ": warning: HEAPLAB_COUNTERS_FILE=%s: cannot open it: %s (no "
                    "counters)\n", path, hl__strerror(errno));
    return;
  }
  struct stat st = {0};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (st.st_size != 0 && st.st_size != 4096)) {
    hl__say(HL_SAY_NAME ": warning: HEAPLAB_COUNTERS_FILE=%s: %s%lld bytes, not an observer's "
                    "counters file (4096 bytes, or empty): not used, left as it is\n", path,
            S_ISREG(st.st_mode) ? "" : "not a regular file, ", (long long)st.st_size);
    close(fd);
    return;
  }
  if (st.st_size == 4096 || ftruncate(fd, 4096) == 0) {
    void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m != MAP_FAILED) shared_counters = m;
  }
  close(fd);
}

void hl__prim_ctx_init(prim_ctx *ctx, int64_t retry_max, int64_t backoff_us) {
  memset(ctx, 0, sizeof *ctx);
  ctx->retry_max = retry_max;
  ctx->backoff_us = backoff_us;
  pthread_once(&shared_once, shared_open);
  ctx->shared = shared_counters;
}

void hl__prim_ctx_destroy(prim_ctx *ctx) { (void)ctx; }

static void bump_shared(prim_ctx *ctx, int idx) {
  if (ctx->shared) atomic_fetch_add_explicit(&ctx->shared[idx], 1, memory_order_relaxed);
}

int hl__prim_arm(prim_ctx *ctx, int site, int mode, int64_t arg, int err) {
  if (site < 0 || site >= HL_SITE_COUNT) return EINVAL;
  if (mode < 0 || mode >= HL_FAULT_MODE_COUNT) return EINVAL;
  prim_fault *f = &ctx->faults[site];
  atomic_store(&f->mode, HL_FAULT_off); /* off while the rest changes */
  atomic_store(&f->arg, arg);
  atomic_store(&f->err, err);
  atomic_store(&f->calls, 0);
  atomic_store(&f->fired, 0);
  atomic_store(&f->mode, mode);
  int armed = 0;
  for (int i = 0; i < HL_SITE_COUNT; i++)
    if (atomic_load(&ctx->faults[i].mode) != HL_FAULT_off) armed = 1;
  atomic_store(&ctx->any_armed, armed);
  return 0;
}

/* Does the schedule at `f` fail this call?  Counts the call. */
static int fault_fires(prim_ctx *ctx, prim_fault *f, uintptr_t addr, size_t len) {
  int mode = atomic_load(&f->mode);
  if (mode == HL_FAULT_off) return 0;
  int64_t arg = atomic_load(&f->arg);
  uint64_t n = atomic_fetch_add(&f->calls, 1) + 1;
  int fire = 0;
  switch (mode) {
  case HL_FAULT_first: fire = (int64_t)n <= arg; break;
  case HL_FAULT_always: fire = 1; break;
  case HL_FAULT_every: fire = arg > 0 && n % (uint64_t)arg == 0; break;
  case HL_FAULT_sticky: {
    if (!ctx->page_shift || len == 0) break;
    uintptr_t lo = (addr - ctx->base) >> ctx->page_shift;
    uintptr_t hi = (addr + len - 1 - ctx->base) >> ctx->page_shift;
    fire = addr >= ctx->base && (int64_t)lo <= arg && arg <= (int64_t)hi;
    break;
  }
  default: break;
  }
  if (fire) atomic_fetch_add(&f->fired, 1);
  return fire;
}

/* 0 = no injected failure, else the errno to inject. */
static int injected(prim_ctx *ctx, int site, uintptr_t addr, size_t len) {
  if (!atomic_load_explicit(&ctx->any_armed, memory_order_relaxed)) return 0;
  int err = 0;
  if (site >= 0 && site < HL_SITE_COUNT && fault_fires(ctx, &ctx->faults[site], addr, len))
    err = atomic_load(&ctx->faults[site].err);
  /* "any" sees every call, the ones the site's own schedule failed too (it
   * counted only the others, so that its first/every counted another
   * sequence than the calls the program made); the site's errno wins */
  if (site != HL_SITE_any && fault_fires(ctx, &ctx->faults[HL_SITE_any], addr, len) && !err)
    err = atomic_load(&ctx->faults[HL_SITE_any].err);
  if (err) atomic_fetch_add(&ctx->fired, 1); /* one failed call, whichever schedules fired */
  return err;
}

typedef int (*raw_fn)(void *arg);

struct advise_args { void *addr; size_t len; prim_op op; };
static int do_advise(void *a) {
  struct advise_args *x = a;
  return hl__prim_os_advise(x->addr, x->len, x->op);
}
struct reserve_args { size_t bytes, align; void **out; };
static int do_reserve(void *a) {
  struct reserve_args *x = a;
  return hl__prim_os_reserve(x->bytes, x->align, x->out);
}

static prim_result run(prim_ctx *ctx, int site, uintptr_t addr, size_t len,
                       int real_call, raw_fn fn, void *arg) {
  prim_result r = {0, 0, 0, 0};
  for (;;) {
    int err = injected(ctx, site, addr, len);
    r.injected = err != 0;
    if (!err && real_call) {
      atomic_fetch_add_explicit(&ctx->syscalls, 1, memory_order_relaxed);
      bump_shared(ctx, 0);
      err = fn(arg);
    } else if (!err) {
      err = fn(arg); /* no syscall on this OS; still the same path */
    }
    r.err = err;
    if (err != EAGAIN) return r;
    if (ctx->retry_max >= 0 && (int64_t)r.retries >= ctx->retry_max) {
      r.gave_up = 1;
      atomic_fetch_add_explicit(&ctx->gave_up, 1, memory_order_relaxed);
      bump_shared(ctx, 2);
      return r;
    }
    r.retries++;
    atomic_fetch_add_explicit(&ctx->retries, 1, memory_order_relaxed);
    bump_shared(ctx, 1);
    /* retry_max = -1 is the seed's loop: no backoff at all, a pure spin. */
    if (ctx->retry_max >= 0 && ctx->backoff_us > 0) {
      uint64_t t0 = hl__prim_now_ns();
      hl__prim_sleep_us(ctx->backoff_us); /* (no cancellation point: hl__prim_sleep_us) */
      atomic_fetch_add_explicit(&ctx->stall_ns, hl__prim_now_ns() - t0, memory_order_relaxed);
    }
  }
}

prim_result hl__prim_call(prim_ctx *ctx, int site, void *addr, size_t len, prim_op op) {
  struct advise_args a = {addr, len, op};
  return run(ctx, site, (uintptr_t)addr, len, hl__prim_os_op_is_syscall(op), do_advise, &a);
}

prim_result hl__prim_reserve(prim_ctx *ctx, size_t bytes, void **out) {
  return hl__prim_reserve_aligned(ctx, bytes, 0, out);
}

prim_result hl__prim_reserve_aligned(prim_ctx *ctx, size_t bytes, size_t align, void **out) {
  struct reserve_args a = {bytes, align, out};
  return run(ctx, HL_SITE_reserve, 0, 0, 1, do_reserve, &a);
}
