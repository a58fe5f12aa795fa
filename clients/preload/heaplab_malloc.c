/*
 * heaplab_malloc.c -- libheaplab-malloc.so: heaplab's manual mode as the
 * malloc of any dynamically linked program (LD_PRELOAD).  docs/clients.md
 * ("The preloaded library") is the user's page; this is how it works.
 *
 * One process-wide manual heap, created lazily by the first allocation that
 * finds the environment readable.  Until then -- the dynamic loader and
 * libc may allocate before any constructor runs -- and while the heap is being
 * set up (hl_heap_new opens /proc files, registers fork handlers: each may
 * allocate), allocations go to glibc by its exported __libc_* names.  The
 * core built for this library (HL_PRELOAD) takes every byte of its own
 * metadata and its large blocks from the same __libc_* calls (internal.h:
 * hl__sys_malloc & co.), so nothing here recurses.
 *
 * Ownership: a pointer inside the heap's reservation is a small block; one
 * in the heap's large set (looked up under the lock) is a large block;
 * anything else -- allocated before the heap existed, during its set-up,
 * or by glibc for a program that calls __libc_malloc -- is foreign and
 * handed to glibc (free, realloc, malloc_usable_size).
 *
 * Options: HEAPLAB_<NAME> as everywhere; the library's own defaults are
 * mode=manual, small_max=16384 (a malloc's mid-sized blocks on heaplab's
 * pages, not on glibc's), dump_unused=0 (core dumps hold the heap's pages,
 * not its 32 GiB reservation) and warm_pages=16 (1 MiB kept warm -- 1 MiB's worth
 * of pages whatever HEAPLAB_PAGE_SIZE is, unless set; the demand
 * window -- warm_demand_trims -- keeps what a busy program needs).  HEAPLAB_ALLOCATOR=libc passes everything to
 * glibc.  A bad value prints one line on stderr and the process runs on the
 * system allocator: a malloc cannot refuse to start a program.
 *
 * Reports: HEAPLAB_STATS=path writes the launchers' JSON report at exit
 * (the process started with it writes `path`; a fork child, or a program
 * exec'd by a preloaded parent whose environment has the same path,
 * `path.<pid>`; a `%p` in the path is
 * replaced by the pid in every process).
 * HEAPLAB_TRACE_EVENTS=path writes the heap's event ring the same way, one
 * JSON object a line.
 */
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <inttypes.h>
#include <link.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <string.h>
#include <unistd.h>

#include "../client.h"
#include "manual/manual.h"

#define EXPORT __attribute__((visibility("default")))
/* HL_PRELOAD_PREFIX: the same functions as hlp_malloc & co., linked into a
 * test that runs under ThreadSanitizer (whose own malloc stays the
 * process's): tests/preload/meson.build. */
#ifdef HL_PRELOAD_PREFIX
#define NAME(n) hlp_##n
#else
#define NAME(n) n
#endif

extern void *__libc_memalign(size_t align, size_t n);
extern int __libc_mallopt(int param, int value); /* (glibc's mallopt, by its other name) */
extern char **environ;

/* This thread's depth in glibc's allocator: the core's hl__sys_* calls and
 * the library's own __libc_* calls count themselves through IN_LIBC
 * (internal.h) -- not the malloc family's on the system allocator
 * (ON_SYSTEM, below).  Read by write_reports_once, for the two things at
 * exit that call glibc's allocator: the heap's set-up for a program that
 * never allocated, and the exiting thread's flush, whose trim takes its
 * lists from glibc. */
HL_TLS int hl__in_libc_malloc;

enum { ST_NONE, ST_STARTING, ST_HEAPLAB, ST_SYSTEM };

/* set once, before state becomes ST_HEAPLAB; read by every call (acquire:
 * a plain load on x86 and arm64's ldar) */
static hl_heap *_Atomic heap_ptr;
#define HEAP atomic_load_explicit(&heap_ptr, memory_order_acquire)
static _Atomic int state;

/* On the system allocator for good (ST_SYSTEM: HEAPLAB_ALLOCATOR=libc, a
 * set-up refused, a child forked during one; no state follows it) the
 * malloc family goes straight to glibc, a tail call: no set-up to look at,
 * no errno kept, no count (nothing reads it there: the report made at exit
 * calls nothing of glibc's allocator -- client_out, the /proc reads, open,
 * write, rename -- so an exit inside glibc writes it).  The way through
 * malloc_slow and the set-up's check cost 47% more instructions than glibc
 * alone on bench-preload classes (docs/clients.md, the busy check). */
#define ON_SYSTEM() hl_unlikely(atomic_load_explicit(&state, memory_order_relaxed) == ST_SYSTEM)
static HL_TLS int in_setup;  /* this thread is setting the heap up */
static int setup_pid;
static char stats_path[4096], events_path[4096];

/* ---- set-up ---- */

/* getenv without libc (prim.h): the set-up's look-ups walk environ
 * themselves, so a program that never calls getenv does not fault getenv's
 * code in */
static const char *env(const char *name) { return hl__prim_env(name); }

static bool env_is(const char *name, const char *value) {
  const char *v = env(name);
  return v && strcmp(v, value) == 0;
}

static void write_reports(void);

/* an exec'd program whose preloaded parent writes the same report (its
 * environment has the same HEAPLAB_STATS= value) or the same event trace: it
 * writes path.<pid>.  A preloaded parent without the variable, or with
 * another path, writes no report there: the child is the path's owner (it
 * wrote path.<pid>, which nobody looked for: a preloaded Python harness's
 * command arm got report None, the harness hunt, session 29) */
static bool descendant_stats, descendant_events;
/* the report's path a stream (client_stream_path) when the heap was set up:
 * /dev/stderr leads to the process's descriptor 2, which coreutils' ls,
 * echo, ... close before exit -- read then, it was no stream, and ls wrote
 * /dev/stderr.<pid> */
static bool stats_stream, events_stream;

/* path as out, made absolute against the working directory now: the report
 * is written at exit, after a program may have changed directory (a server
 * that moves to / or to its data directory wrote a relative HEAPLAB_STATS
 * there, or failed to).  getcwd into a caller's buffer allocates nothing.
 * Too long for out once made absolute: the path as given.  Too long for out
 * as given: false, out empty, and one line said (var: the variable) -- it was
 * cut to its first 4,095 bytes without a word, and the report written to
 * that shorter name when its directories existed. */
static char start_dir[4096]; /* the directory the process started in (at_start) */
static bool path_from_start(const char *var, const char *path, char *out, size_t len) {
  size_t plen = strlen(path);
  if (plen >= len) {
    out[0] = 0;
    hl__say("libheaplab-malloc: %s: a path of %zu bytes, longer than the %zu a report's name may "
            "have: no report written\n", var, plen, len - 1);
    return false;
  }
  if (path[0] != '/' && start_dir[0]) snprintf(out, len, "%s", start_dir);
  if (path[0] != '/' && (start_dir[0] || getcwd(out, len))) { /* (into out: no 4 KiB on the stack) */
    size_t n = strcmp(out, "/") ? strlen(out) : 0;
    int m = snprintf(out + n, len - n, "/%s", path);
    if (m > 0 && (size_t)m < len - n) return true;
  }
  memcpy(out, path, plen + 1);
  return true;
}

/* Set by the library's constructor: libc has initialised (it is a
 * dependency: its constructors ran first).  The heaps' fork handlers are
 * registered there too, before the program's constructors run, and not at
 * the first malloc: a program that registers pthread_atfork handlers before
 * its first malloc and allocates in them hung in fork() (its prepare
 * handler ran after heaplab's had taken the heap lock, its child and parent
 * handlers before heaplab's released it). */
static _Atomic bool libc_ready;
/* ... and the process that loaded the library, and its parent: the heap
 * may be set up first in a child of it (a vfork child's malloc, whose
 * writes are the parent's: the parent then wrote path.<pid> as if it were
 * a fork child, the preload hunt). */
static int start_pid, start_ppid;
/* The process this copy of the library's memory is: the start's, then each
 * fork child's (a pthread_atfork child handler).  A vfork child -- or a
 * clone() made without the fork handlers -- shares or copies it without
 * being that process: its _exit writes nothing (a vfork child's writes are
 * the parent's memory: dash's child whose exec failed). */
static _Atomic int own_pid;
static void exit_waits_for_the_reports(void);
static void reports_at_quick_exit(void);
static void forked_child(void);
static void fork_in_libc(void);
static void fork_out_of_libc(void);
static bool own_process(void);
static bool malloc_defined_elsewhere(const char **who);
#ifndef HL_PRELOAD_PREFIX
static bool calls_redirected(void);
#endif
/* Looked up once, by the constructor: at exit a
 * dlsym may allocate (a missing symbol's error string) -- through this
 * library's malloc, which waits for the heap lock that the very thread may
 * hold when a signal handler calls _exit (1 of 300 runs hung, the review of
 * f384a21).  Is this a launcher's process (CLIENT_LAUNCHER_MARK)?  Is the
 * process's malloc another object's (malloc_defined_elsewhere), and whose? */
static bool launcher_process, malloc_elsewhere;
static const char *malloc_elsewhere_who;
/* Do the program's calls of the malloc family reach this library's code at
 * all (calls_redirected)?  valgrind's tools that replace malloc (memcheck,
 * massif, helgrind, drd, dhat) redirect this library's malloc, free, ...
 * to their own at the code's address, which dlsym does not see: the
 * library wrote a blank report (0 mallocs; the real-programs hunt, session
 * 38).  Set by malloc_usable_size(NULL), the probe. */
static bool malloc_redirected;
static _Atomic bool usable_size_probed;
/* the _exit this library's _exit ends the process with (glibc's, or an
 * interposer's after this library): looked up at the start */
static void (*next_exit)(int);
/* and the exit this library's exit goes on to (exit_after_the_first), the
 * kill, killpg and raise its own go on to */
static void (*next_exit_handlers)(int);
static int (*next_kill)(pid_t, int), (*next_killpg)(pid_t, int);
static int (*next_raise)(int);
static int exit_wait_pid; /* the process that registered it */
/* Two copies of the library in one process (LD_PRELOAD naming the build's
 * and the Python package's): the program's calls go to the first, and the
 * other -- whose malloc is not the process's malloc -- stays inert: no heap,
 * no fork handlers, no report (it set up a heap of its own at exit and
 * wrote its blank report over the real one: the preload hunt, session 32). */
static bool inert;
#ifndef HL_PRELOAD_PREFIX
/* the dlopen after this library's (the end of this file) */
__attribute__((visibility("hidden"))) extern void *(*_Atomic hl__next_dlopen)(const char *, int);
#endif
/* The launchers' mark (client.h): a weak reference, bound by the dynamic
 * loader to the executable's definition, NULL in any other program.  It was
 * dlsym(RTLD_DEFAULT, ...), whose miss in every other program left an error
 * that the dlerror() clearing it formatted -- asprintf and gettext's look-up,
 * their windows of libc's text and data faulted in for nothing (with the
 * core's getenv, prim/syscall.c: a one-block program's peak RSS 1,888 ->
 * 1,708 KiB, median of 9; docs/performance.md, the preloaded library,
 * session 43).  Default visibility: a hidden weak reference is resolved to
 * 0 by the static linker. */
__attribute__((weak, visibility("default"))) extern const char CLIENT_LAUNCHER_MARK_SYMBOL[];
/* The mark by which a copy knows another (heaplab-malloc.map exports it). */
__attribute__((visibility("default"))) void heaplab_malloc_library(void) {}
/* Is malloc defined by another copy of this library before this one in the
 * global scope (the first copy preloaded)?  Each object between the program
 * and this library is asked for its own malloc and mark (dlsym on its
 * dlopen handle finds the object's own symbol before its dependencies').
 * Not dlsym(RTLD_DEFAULT): in a program that takes malloc's address
 * (python3) it answers the program's PLT stub.  Another allocator or a
 * malloc wrapper preloaded first is no copy: a wrapper (glibc's
 * libmemusage.so, heaptrack) forwards its calls here (RTLD_NEXT) -- made
 * inert by it, this copy handed them to glibc and bash aborted in realloc
 * (the review, session 32).  The lookups' own allocations go through the
 * process's malloc: with this copy first, here (in_setup: to glibc). */
static bool another_copy_is_malloc(void) {
#ifdef HL_PRELOAD_PREFIX
  return false; /* (hlp_malloc is never the process's malloc) */
#else
  Dl_info info;
  struct link_map *self = NULL;
  if (!dladdr1((void *)another_copy_is_malloc, &info, (void **)&self, RTLD_DL_LINKMAP) || !self)
    return false;
  bool other = false;
  in_setup = 1;
  for (struct link_map *m = self->l_prev; m && m->l_prev && !other; m = m->l_prev) {
    if (!m->l_name || !strchr(m->l_name, '/')) continue; /* (the vDSO) */
    void *handle = dlopen(m->l_name, RTLD_LAZY | RTLD_NOLOAD);
    if (!handle) continue;
    void *f = dlsym(handle, "malloc"), *mark = dlsym(handle, "heaplab_malloc_library");
    struct link_map *def = NULL, *mark_def = NULL;
    other = f && mark && dladdr1(f, &info, (void **)&def, RTLD_DL_LINKMAP) && def == m &&
            dladdr1(mark, &info, (void **)&mark_def, RTLD_DL_LINKMAP) && mark_def == m;
    dlclose(handle);
  }
  (void)dlerror();
  in_setup = 0;
  return other;
#endif
}
__attribute__((constructor)) static void at_start(void) {
  /* (looked up by an inert copy too: the first copy's exit and _exit end
   * the process through the next object's -- this one's) */
  in_setup = 1; /* (dlsym's allocations, if any: to glibc) */
  next_exit = (void (*)(int))dlsym(RTLD_NEXT, "_exit");
  next_exit_handlers = (void (*)(int))dlsym(RTLD_NEXT, "exit");
  next_kill = (int (*)(pid_t, int))dlsym(RTLD_NEXT, "kill");
  next_killpg = (int (*)(pid_t, int))dlsym(RTLD_NEXT, "killpg");
  next_raise = (int (*)(int))dlsym(RTLD_NEXT, "raise");
#ifndef HL_PRELOAD_PREFIX
  hl__next_dlopen = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
#endif
  (void)dlerror();
  in_setup = 0;
  if (another_copy_is_malloc()) {
    inert = true;
    return;
  }
  hl__registry_fork_handlers();
  pthread_atfork(fork_in_libc, fork_out_of_libc, forked_child);
  start_pid = (int)getpid();
  atomic_store(&own_pid, start_pid);
  start_ppid = (int)getppid();
  /* the report's elapsed_s counts from here, the process's start (it
   * counted from the heap's set-up, the first malloc: a program that worked
   * 1.2 s before its first -- or, never allocating, at exit -- reported
   * 0.000171 s, the harness hunt, session 29); from the set-up when that
   * came first (the dynamic loader's allocations) */
  if (!client.start_ns) client.start_ns = client_now_ns();
  /* the look-ups write_reports_once needs (launcher_process): made whether
   * or not a report is asked now -- a launcher may set HEAPLAB_STATS later.
   * (dlsym's allocations -- a missing symbol's error string -- to glibc; the
   * mark not looked for when the process's malloc is another's: they would
   * be the program's, which counts them -- preload scenario own_malloc) */
  in_setup = 1;
  malloc_elsewhere = malloc_defined_elsewhere(&malloc_elsewhere_who);
#ifndef HL_PRELOAD_PREFIX /* (a test linking the prefixed build keeps glibc's names) */
  if (!malloc_elsewhere) malloc_redirected = calls_redirected();
#endif
  if (!malloc_elsewhere) launcher_process = CLIENT_LAUNCHER_MARK_SYMBOL != NULL;
  in_setup = 0;
  /* a relative HEAPLAB_STATS / HEAPLAB_TRACE_EVENTS is taken from here: a
   * program that called chdir() or daemon() before its first malloc wrote
   * its report where it had gone (/path.<pid> after daemon()) */
  if (env("HEAPLAB_STATS") || env("HEAPLAB_TRACE_EVENTS")) {
    if (!getcwd(start_dir, sizeof start_dir)) start_dir[0] = 0;
    /* registered before __libc_start_main registers _dl_fini (this
     * constructor runs in the dynamic loader's _dl_init, before the
     * program's _start): the handler runs after _dl_fini, where the
     * reports are written (at_exit).  Four of it: each one taken
     * registers itself again, and an exit() from glibc (err(), errx():
     * not through this library's exit) finds the list empty only when four
     * threads are at once in the moment before that (one copy: 1 of 20 runs
     * of eight threads calling errx() at once lost the report, with getpid()
     * made 2 ms -- the review of session 34).  After the reports each
     * returns at once. */
    exit_wait_pid = (int)getpid();
    for (int i = 0; i < 4; i++) atexit(exit_waits_for_the_reports);
    /* quick_exit() ends the process with glibc's own _exit (not this
     * library's): registered first, this handler runs after the program's */
    at_quick_exit(reports_at_quick_exit);
  }
  atomic_store_explicit(&libc_ready, true, memory_order_relaxed);
}

/* Create the heap.  Runs once, in the first thread that allocates after the
 * environment is there; its own allocations (in_setup) go to glibc. */
static NOINLINE hl_heap *setup(void) {
  int s = atomic_load_explicit(&state, memory_order_acquire);
  if (s == ST_HEAPLAB) return HEAP;
  if (s != ST_NONE || in_setup || inert) return NULL;
  /* An allocation made before libc has set environ (the dynamic loader's,
   * libc's own early ones) goes to glibc: the heap starts with the first
   * allocation that can read its options -- or the first after this
   * library's constructor ran, libc being set up by then: a program that
   * calls clearenv() (environ = NULL) before its first malloc ran on glibc
   * to the end. */
  if (!environ && !atomic_load_explicit(&libc_ready, memory_order_relaxed)) return NULL;
  int expect = ST_NONE;
  if (!atomic_compare_exchange_strong(&state, &expect, ST_STARTING)) return NULL;
  in_setup = 1;
  /* a successful malloc leaves errno alone: the reservation's refused
   * attempts, the /proc reads of the set-up must not show */
  int saved_errno = errno;
  int next = ST_SYSTEM;
  const char *alloc = env("HEAPLAB_ALLOCATOR");
  if (alloc && *alloc && strcmp(alloc, "heaplab") != 0) {
    if (strcmp(alloc, "libc") != 0)
      hl__say("libheaplab-malloc: HEAPLAB_ALLOCATOR=%s: expected heaplab or libc; "
                      "using the system allocator\n", alloc);
  } else {
    hl_options o;
    char err[1024];
    hl_options_defaults(&o);
    o.mode = HL_MODE_MANUAL;
    o.small_max = 16384;
    o.warm_pages = 16;
    o.dump_unused = 0; /* a core dump of the program's pages, not 32 GiB */
    /* (the mode set first: HEAPLAB_GENERATIONAL, HEAPLAB_GC_TRIGGER_BYTES
     * and every other collected-only option's variable are the program's
     * collected heaps', ignored by hl_options_from_env on a manual heap) */
    int rc = hl_options_from_env(&o, err, sizeof err);
    /* the library's small_max is a default, not the user's: with a smaller
     * HEAPLAB_PAGE_SIZE it is lowered to what a page allows (page_size/4),
     * rather than refusing a valid page size */
    if (!rc && !env("HEAPLAB_SMALL_MAX") && o.small_max > o.page_size / 4)
      o.small_max = o.page_size / 4;
    /* and its warm_pages means 1 MiB kept warm (16 pages of 64 KiB), whatever
     * the page size: 16 pages of 1 MiB kept 16 MiB after a program freed
     * everything (page_size=1m), 16 of 4 KiB 64 KiB */
    if (!rc && !env("HEAPLAB_WARM_PAGES"))
      o.warm_pages = o.page_size >= (1 << 20) ? 1 : (1 << 20) / o.page_size;
    /* under a finite RLIMIT_AS or RLIMIT_DATA, at most half of it
     * (client.h; HEAPLAB_RESERVE_BYTES given: as asked) */
    if (!rc && !env("HEAPLAB_RESERVE_BYTES")) client_cap_reservation(&o);
    if (!rc && env("HEAPLAB_MODE") && !env_is("HEAPLAB_MODE", "manual")) {
      snprintf(err, sizeof err, "environment HEAPLAB_MODE=%s: the preloaded heap is always manual",
               env("HEAPLAB_MODE"));
      rc = HL_EVALUE;
    }
    hl_heap *h = NULL;
    if (!rc) rc = hl_heap_new(&o, &h, err, sizeof err);
    if (rc) {
      hl__say("libheaplab-malloc: %s; using the system allocator\n", err);
    } else {
      /* The large path's blocks are glibc's.  glibc raises its mmap
       * threshold each time a mapped block is freed (up to 32 MiB), and
       * blocks under the threshold live in its heap, which gives back only
       * its top: a server's freed hash tables stayed charged, and reloading
       * redis-server cost 8 MiB more than its first load.  Fixed thresholds
       * turn the adjustment off: a block from 1 MiB up is a mapping of its
       * own, unmapped when freed, and the heap's top is trimmed past 2 MiB
       * (the 2:1 ratio glibc's own adjustment keeps; a lower trim threshold
       * refaulted a buffer grown and freed in a loop: 91,000 page faults in
       * bench-preload realloc). */
      enum { MAP_THRESHOLD = 1024 * 1024 };
      (void)IN_LIBC(__libc_mallopt(M_MMAP_THRESHOLD, MAP_THRESHOLD));
      (void)IN_LIBC(__libc_mallopt(M_TRIM_THRESHOLD, 2 * MAP_THRESHOLD));
      h->sys_map_threshold = MAP_THRESHOLD; /* the large path's growth stays under it */
      atomic_store_explicit(&heap_ptr, h, memory_order_release);
      next = ST_HEAPLAB;
    }
  }
  /* the process that started with the library, also when this is a
   * (v)fork child of it allocating first (before the constructor: this one) */
  bool child = start_pid && (int)getpid() != start_pid;
  setup_pid = child ? start_pid : (int)getpid();
  const char *sv = env("HEAPLAB_STATS"), *ev = env("HEAPLAB_TRACE_EVENTS");
  if ((sv && *sv) || (ev && *ev)) {
    int parent = child ? start_ppid : (int)getppid();
    client_identify((const void *)setup); /* (this copy's file, not its name) */
    bool preloaded = client_preloaded(parent);
    descendant_stats = sv && *sv &&
                       ((preloaded && client_environ_has(parent, "HEAPLAB_STATS", sv)) ||
                        /* a launcher's mark (client.h): its report was written over */
                        client_marked_by_another(env("HEAPLAB_STATS_OWNER"), sv));
    descendant_events = ev && *ev && preloaded &&
                        client_environ_has(parent, "HEAPLAB_TRACE_EVENTS", ev);
  }
  client.launcher = "libheaplab-malloc.so";
  client.allocator = next == ST_HEAPLAB ? "heaplab" : "libc";
  client.heap = next == ST_HEAPLAB ? HEAP : NULL;
  client.pid = setup_pid;
  if (!client.start_ns) client.start_ns = client_now_ns(); /* (before the constructor) */
  const char *sp = env("HEAPLAB_STATS"), *ep = env("HEAPLAB_TRACE_EVENTS");
  if (sp && *sp) (void)path_from_start("HEAPLAB_STATS", sp, stats_path, sizeof stats_path);
  if (ep && *ep) (void)path_from_start("HEAPLAB_TRACE_EVENTS", ep, events_path, sizeof events_path);
  stats_stream = stats_path[0] && client_stream_path(stats_path);
  events_stream = events_path[0] && client_stream_path(events_path);
  in_setup = 0;
  errno = saved_errno;
  atomic_store_explicit(&state, next, memory_order_release);
  return next == ST_HEAPLAB ? HEAP : NULL;
}

/* The heap, or NULL while allocations go to glibc. */
static inline hl_heap *the_heap(void) {
  hl_heap *h = HEAP;
  return hl_likely(h != NULL) ? h : setup();
}

/* ---- reports at exit ---- */

/* The exit path's waits -- for the reports' writer (exit_waited), for
 * another thread's set-up
 * (write_reports_once): done(arg) asked at once and after each of up to ms
 * sleeps of 1 ms; whether it said so.  (nanosleep, not a condition
 * variable: a signal handler's _exit may be the one waiting.) */
static bool poll_ms(int ms, bool (*done)(void *), void *arg) {
  for (int i = 0;; i++) {
    if (done(arg)) return true;
    if (i == ms) return false;
    struct timespec d = {0, 1000000};
    nanosleep(&d, NULL);
  }
}

/* path with %p replaced by the pid and %% by one % (so that any path can be
 * named: the harness's temporary folder under a TMPDIR holding "%p" was
 * rewritten, and the report went elsewhere); a fork child's gets ".<pid>"
 * (not on a stream, which every process writes in place).
 * False when there is none, or when it does not fit in out (a line said:
 * it was cut without a word). */
static bool report_name(const char *var, const char *path, bool descendant, bool stream,
                        char *out, size_t len) {
  if (!*path) return false;
  int pid = (int)getpid();
  size_t n = 0;
  bool pct = false;
  const char *p = path;
  for (; *p && n + 24 < len; p++) {
    if (p[0] == '%' && p[1] == 'p') {
      n += (size_t)snprintf(out + n, len - n, "%d", pid);
      p++;
      pct = true;
    } else if (p[0] == '%' && p[1] == '%') {
      out[n++] = '%';
      p++;
    } else {
      out[n++] = *p;
    }
  }
  out[n] = 0;
  if (*p) {
    hl__say("libheaplab-malloc: %s: the path with each %%p made the pid is longer than %zu "
            "bytes: no report written\n", var, len - 25);
    return false;
  }
  /* (a stream -- /dev/stderr, /dev/null, a FIFO -- is written in place by
   * every process: client_stream_path) */
  if (!pct && (pid != setup_pid || descendant) && !stream && !client_stream_path(out))
    snprintf(out + n, len - n, ".%d", pid);
  return true;
}

/* (on the system allocator -- HEAPLAB_ALLOCATOR=libc, a bad option's
 * fallback -- the file is written empty: glibc's allocator has no heaplab
 * events, and a script reading each arm's file finds it, as it finds the
 * report that says "allocator": "libc") */
static void write_events(client_out *f) {
  static hl_event buf[256];
  size_t got = 0;
  if (atomic_load(&state) != ST_HEAPLAB) return;
  do {
    if (hl_events_read(HEAP, buf, 256, &got, 1)) return;
    for (size_t i = 0; i < got; i++) {
      client_out_puts(f, "{\"kind\": ");
      client_json_string(f, hl_event_name(buf[i].kind));
      client_out_puts(f, ", \"cycle\": ");
      client_out_u64(f, buf[i].cycle);
      client_out_puts(f, ", \"time_ns\": ");
      client_out_u64(f, buf[i].time_ns);
      for (int k = 0; k < buf[i].nfields; k++) {
        const char *name = hl_event_field(buf[i].kind, k);
        if (!name) continue;
        client_out_puts(f, ", ");
        client_json_string(f, name);
        client_out_puts(f, ": ");
        client_out_i64(f, buf[i].fields[k]);
      }
      client_out_puts(f, "}\n");
    }
  } while (got == 256);
}

static void write_report(client_out *f) { client_write_report(f); }

/* (Is the heap free to be read at exit: client_heap_free_at_exit, client.c,
 * the launchers' check too.) */

/* Flush the exiting thread's cache before the report (exit(): the
 * destructor)?  Not from _exit, _Exit or quick_exit -- the ways out a
 * signal handler may take: the handler may have interrupted the lock-free
 * fast path of this very thread's cache, half-updated (the stats read the
 * caches' counts as they read another running thread's: struct hl_tcache). */
static bool flush_at_report;
/* (the heap's busy check is the caller's: write_reports_once) */
static void write_reports(void) {
  static char name[4200]; /* (static: the exiting thread's stack may be 16 KiB) */
  if (atomic_load(&state) == ST_HEAPLAB && flush_at_report) hl_thread_flush(HEAP);
  /* The report's own allocations go to the heap under its lock (free: the
   * busy check), not through this thread's cache: a handler that
   * interrupted the making of this thread's first cache -- the caches'
   * registry lock held, the heap's not -- made another for the report and
   * waited for that lock for ever (1 of 2,000 runs of exit_in_signal_handler
   * on a loaded machine; its new_threads mode widens the window). */
  hl__manual_caches_bypassed(true);
  if (report_name("HEAPLAB_STATS", stats_path, descendant_stats, stats_stream, name,
                  sizeof name)) {
    static char exe[1024]; /* (static: the exiting thread's stack may be 16 KiB) */
    hl__prim_os_self_exe(exe, sizeof exe);
    client.interpreter = exe;
    int err = client_save(name, write_report);
    if (err) /* (hl__strerror: strerror may translate, and gettext allocates) */
      hl__say("libheaplab-malloc: HEAPLAB_STATS=%s: cannot write %s: %s\n", stats_path,
              name, hl__strerror(err));
  }
  if (report_name("HEAPLAB_TRACE_EVENTS", events_path, descendant_events, events_stream, name,
                  sizeof name)) {
    int err = client_save(name, write_events);
    if (err)
      hl__say("libheaplab-malloc: HEAPLAB_TRACE_EVENTS=%s: cannot write %s: %s\n",
              events_path, name, hl__strerror(err));
  }
  hl__manual_caches_bypassed(false);
}

/* The reports are written on a stack of their own: exit() runs the
 * destructors on the exiting thread's stack, which may be a 16 KiB
 * PTHREAD_STACK_MIN one (or a signal handler's alternate stack), and the
 * report -- /proc reads into stack buffers, stdio -- overflowed it: a
 * SIGSEGV at exit where glibc exits 3 (tests/preload/c/preload_report_
 * edges.c).  The direct call when no stack can be mapped, and in the
 * sanitizer builds (whose runtimes must be told of a stack switch; the
 * library is not tested there). */
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#include <sys/mman.h>
#include <ucontext.h>
#define REPORT_STACK ((size_t)256 << 10)
static ucontext_t report_ctx, exit_ctx;
static void write_reports_on_own_stack(void) {
  void *stack = mmap(NULL, REPORT_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
  if (stack == MAP_FAILED || getcontext(&report_ctx) != 0) {
    if (stack != MAP_FAILED) munmap(stack, REPORT_STACK);
    write_reports();
    return;
  }
  report_ctx.uc_stack.ss_sp = stack;
  report_ctx.uc_stack.ss_size = REPORT_STACK;
  report_ctx.uc_link = &exit_ctx; /* (back here when write_reports returns) */
  makecontext(&report_ctx, write_reports, 0);
  if (swapcontext(&exit_ctx, &report_ctx) != 0) write_reports();
  munmap(stack, REPORT_STACK);
}
#else
static void write_reports_on_own_stack(void) { write_reports(); }
#endif

/* HEAPLAB_VERIFY=1: damage verify found -- a free block written after it was
 * freed, or overflowed into, found when a malloc was about to hand it out
 * (manual.c), or any failure of hl_heap_check -- is the program's error, as
 * the corruption glibc detects is ("double free or corruption (out)"): the
 * heap's message on stderr, then abort.  Nothing ran a check in a preloaded
 * program: a write after free or an overflow went unseen (the verify hunt,
 * session 29). */
void hl__preload_verify_failed(hl_heap *h) {
  hl__say("libheaplab-malloc: HEAPLAB_VERIFY: %s\n", hl_heap_error(h));
  abort();
}

/* The thread holds `lock` -- the heap's (internal.h: hl__owner_set and
 * hl__owner_clear keep hl__lock_holder) or the thread caches' (manual.c,
 * tc_global) -- and is about to wait for it again: `what` -- a call of the
 * malloc family made under the lock, or a signal handler's that interrupted
 * it, or such a handler's fork() or pthread_exit.  It waited for
 * its own thread for ever, in silence (a futex wait, no CPU; preload
 * scenario malloc_in_signal_handler).  One line, then abort: the core
 * dump's backtrace shows who called.  A second time (the program's SIGABRT
 * handler allocates: a crash reporter's backtrace()) the default action,
 * not that handler. */
HL_TLS bool hl__lock_holder;
void hl__reentered(const char *what, const char *lock) {
  static _Atomic int said;
  if (atomic_fetch_add(&said, 1) == 0) {
    hl__say("libheaplab-malloc: %s on a thread that holds %s -- from inside the "
            "heap (a C library call made under the lock allocated) or from a signal handler "
            "that interrupted it -- would wait for itself for ever: aborting\n", what, lock);
  } else {
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGABRT, &dfl, NULL);
  }
  abort();
}

/* HEAPLAB_VERIFY=1: the whole heap's check (at malloc_trim and at exit). */
static void verify_check(hl_heap *h) {
  if (h && h->opt.verify && hl_heap_check(h) != HL_OK) hl__preload_verify_failed(h);
}

/* Two threads that call exit() at once: glibc 2.36 runs the exit handlers
 * one at a time off one list, each thread taking the next, and a thread
 * that finds the list empty ends the process (_IO_cleanup, _exit).  The
 * reports are written in _dl_fini, the last handler the program has: a
 * second exit() arriving while the first thread wrote them found nothing
 * left and ended the process under the writer -- 72 of 200 runs of two
 * threads exiting at once lost the report, one left its .tmp file (the
 * preload hunt, session 32).  So a handler of the library's, registered
 * below _dl_fini, is still in the list then: the exit() that takes it waits
 * until at_exit has finished (or 30 s: a destructor that never returns),
 * registering itself again first, so that a third exit() waits too.  The
 * thread that wrote the reports finds it done and goes on.
 * It waits only for a writer that can finish: not in another process (a
 * child forked by a destructor during exit, whose copy of the list has lost
 * _dl_fini: it waited for ever, and its parent in waitpid), not on the
 * writer's own thread (a signal handler calling exit() inside at_exit), and
 * for a writer to begin 1 s at most -- an exit() called by a destructor that
 * _dl_fini runs before at_exit waited for the very thread it runs on, for
 * ever (the review of this wait, session 32).  Once it gave up it never
 * waits again (it had registered itself again each time). */
static _Atomic bool reports_done, exit_wait_gave_up;
static _Atomic long exit_writer_tid; /* the thread in at_exit, once it began */
static _Atomic long first_exit_tid;  /* the first thread in this library's exit() */
static bool reports_written(void *for_a_writer) {
  return atomic_load(&reports_done) || (*(bool *)for_a_writer && atomic_load(&exit_writer_tid));
}
/* Whether the reports are done (or, for a writer, at_exit has begun)
 * within ms milliseconds. */
static bool exit_waited(int ms, bool for_a_writer) {
  return poll_ms(ms, reports_written, &for_a_writer);
}
static void exit_waits_for_the_reports(void) {
  /* (the process known by own_pid, not getpid(): between glibc's handing
   * this handler out and its registering itself again a third exit() finds
   * the list empty, so nothing slow comes before the registration -- a
   * getpid() taking 2 ms there lost every report of err()/errx() from four
   * threads, which do not come through this library's exit: the review of
   * session 34) */
  if (atomic_load(&reports_done) || atomic_load(&exit_wait_gave_up) ||
      atomic_load(&own_pid) != exit_wait_pid || atomic_load(&exit_writer_tid) == syscall(SYS_gettid))
    return;
  /* (registered again first: a third exit() arriving while this one waits
   * must find it -- registered after the wait for a writer to begin, 1 of
   * 60 runs of four threads lost the report again: the list was empty) */
  atexit(exit_waits_for_the_reports);
  if (!exit_waited(1000, true) || !exit_waited(30000, false))
    atomic_store(&exit_wait_gave_up, true);
}

/* That handler leaves a window: glibc unlocks its list to call it, and a
 * third exit() that takes the lock before the handler has registered itself
 * again finds the list empty and ends the process under the writer -- 1 of
 * 500 runs of eight threads exiting at once lost the report, 68 of 100 of
 * four with a 2 ms pause put there, and the fresh-clone CI of session 33
 * failed on it (preload scenario exit_from_many_threads).  So the library
 * exports exit() too: the first thread in it goes on to glibc's exit; every
 * later one (another thread of this process, with a report asked) waits here,
 * before glibc's list, for the reports, as the handler waits.  The handler
 * stays for the exit()s that do not come through here, glibc's own: after
 * main returns, and in err(), errx(), verr(), verrx(), error(), argp's
 * errors, the last thread's pthread_exit -- for those the window is the few
 * instructions before the handler registers itself again.
 * A later caller whose first is stuck before the report (an atexit handler
 * of the first that joins this very thread) waits 1 s for a writer to
 * begin, then goes on into glibc's list; that gives up nothing (the
 * handler's protection stays: exit_wait_gave_up is the handler's). */
__attribute__((unused)) static void exit_after_the_first(void) {
  long me = syscall(SYS_gettid), first = 0;
  if (!exit_wait_pid || !own_process() ||
      atomic_compare_exchange_strong(&first_exit_tid, &first, me) || first == me ||
      atomic_load(&reports_done) || atomic_load(&exit_wait_gave_up))
    return;
  if (exit_waited(1000, true)) (void)exit_waited(30000, false);
}

/* (a definition starts at f: defined, not a PLT stub) */
static bool a_definition(void *f, Dl_info *info) {
  const ElfW(Sym) *sym = NULL;
  return f && dladdr1(f, info, (void **)&sym, RTLD_DL_SYMENT) && info->dli_sname &&
         info->dli_saddr == f && sym && sym->st_shndx != SHN_UNDEF;
}
/* The version of glibc's first malloc, which programs linked against glibc
 * ask for: an object that defines malloc at that version only (no default
 * version -- glibc's libc_malloc_debug.so, which MALLOC_CHECK_ and mtrace
 * need since glibc 2.34) takes their calls when it comes first, but dlsym
 * without a version skips it and answers this library's (LD_PRELOAD=
 * "libc_malloc_debug.so $P" wrote a blank report and said nothing; the
 * preload hunt, session 34). */
#if defined(__x86_64__) && !defined(__ILP32__)
#define MALLOC_BASE_VERSION "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define MALLOC_BASE_VERSION "GLIBC_2.17"
#endif
/* Is the process's malloc another object's -- the program's own (its
 * executable defines malloc: it comes first in symbol lookup) or an
 * allocator preloaded before this library?  Its file in *who.  The
 * definition dlsym finds, checked with dladdr1: a symbol that starts there
 * and is defined.  A program without PIE that takes malloc's address
 * (Debian's python3) has dlsym answer its PLT stub, an undefined symbol
 * with an address, which is no definition (the calls come here) -- dladdr
 * names it "malloc" all the same: a program that took the address and never
 * allocated was told its malloc was its own, and got no report.  The name
 * is not checked: mimalloc's malloc is also its __libc_malloc, the name
 * dladdr gave (a blank report was written; the preload hunt, session 34). */
static bool malloc_defined_elsewhere(const char **who) {
  Dl_info info, self;
  void *f = dlsym(RTLD_DEFAULT, "malloc");
  (void)dlerror();
  if (!dladdr((void *)malloc_defined_elsewhere, &self) || !a_definition(f, &info)) return false;
#ifdef MALLOC_BASE_VERSION
  if (info.dli_fbase == self.dli_fbase) {
    Dl_info libc;
    f = dlvsym(RTLD_DEFAULT, "malloc", MALLOC_BASE_VERSION); /* (libc's, usually) */
    (void)dlerror();
    if (!a_definition(f, &info) || !dladdr((void *)gnu_get_libc_version, &libc) ||
        info.dli_fbase == libc.dli_fbase)
      return false;
  }
#endif
  if (info.dli_fbase == self.dli_fbase) return false;
  static char exe[1024];
  if (info.dli_fname && info.dli_fname[0]) {
    *who = info.dli_fname;
  } else {
    hl__prim_os_self_exe(exe, sizeof exe);
    *who = exe[0] ? exe : "the program";
  }
  return true;
}

/* Is the process's malloc_usable_size this library's (dlsym answers its
 * definition here, or a PLT stub that leads here) and does a call of it
 * not run this library's code?  Then a tool redirects the family at the
 * code's address -- valgrind's memcheck, massif, helgrind, drd and dhat
 * replace every function of it, in this library as in libc -- and no
 * allocation comes here.  malloc_usable_size(NULL) is the probe: it touches
 * no heap, allocates nothing, and the replacements answer 0 too. */
#ifndef HL_PRELOAD_PREFIX
static bool calls_redirected(void) {
  Dl_info info, self;
  size_t (*f)(void *) = (size_t (*)(void *))dlsym(RTLD_DEFAULT, "malloc_usable_size");
  (void)dlerror();
  if (!f || !dladdr((void *)calls_redirected, &self) ||
      (a_definition((void *)f, &info) && info.dli_fbase != self.dli_fbase))
    return false; /* (none, or another object's: not this question) */
  atomic_store(&usable_size_probed, false);
  (void)f(NULL);
  return !atomic_load(&usable_size_probed);
}
#endif

/* A fork child is a process of its own: its parent's writer (another
 * thread, forked meanwhile) is not its writer, nor are its parent's reports
 * its own. */
/* glibc's fork() holds every arena's lock from after the prepare handlers
 * until before the parent's and child's: a signal handler calling _exit
 * there found no busy heap (under HEAPLAB_ALLOCATOR=libc there is none) and
 * the report's allocations waited for those locks for ever (2 of 15 runs of
 * a fork loop beside a second thread hung: the review of session 34).  The
 * report allocates nothing now, but a program that never allocated has its
 * heap set up at exit, from glibc: inside glibc's allocator for that time
 * (hl__in_libc_malloc; with a heap, the heap's own fork handler holds its
 * lock then, and the exit finds it busy). */
static void fork_in_libc(void) { hl__in_libc_malloc++; }
static void fork_out_of_libc(void) { hl__in_libc_malloc--; }
/* (the set-up's report paths, half made or not yet, were not the child's:
 * its exit says it writes none -- it wrote nothing and said nothing) */
static bool forked_in_setup;
static void forked_child(void) {
  fork_out_of_libc();
  /* forked while another thread set the heap up: that thread is not in the
   * child, whose calls go to glibc (the_heap: not ST_NONE) -- say so, or its
   * every exit waited half a second for a set-up that never ends */
  int starting = ST_STARTING;
  if (!in_setup && atomic_compare_exchange_strong(&state, &starting, ST_SYSTEM))
    forked_in_setup = true;
  atomic_store(&own_pid, (int)getpid());
  atomic_store(&exit_writer_tid, 0);
  atomic_store(&first_exit_tid, 0);
  atomic_store(&reports_done, false);
}

/* Write the reports once per process: from the library's destructor (exit()),
 * from _exit/_Exit and from quick_exit.  The first caller writes; another
 * thread's later call waits for it (30 s at most: _exit would end the process
 * under the writer, as a second exit() did); the writer's own thread -- a
 * signal handler calling _exit inside at_exit -- goes on at once. */
/* by_exit: from exit() (the destructor); else from _exit, _Exit or
 * quick_exit, which a signal handler may call -- also one that interrupted
 * an allocation of its own thread, which holds the heap lock (or is inside
 * its cache's lock-free fast path).  So, in this order: nothing asked,
 * nothing done (no check, no lock); then the heap's busy check, which never
 * waits for ever (client_heap_free_at_exit); only then what may lock or allocate --
 * verify's check, the heap's set-up, the report.  (verify_check and a dlsym
 * ran first: a SIGALRM handler calling _exit hung 6 of 6 runs under
 * HEAPLAB_VERIFY=1 with no report asked, and 1 of 300 with HEAPLAB_STATS --
 * the review of f384a21.) */
/* (poll_ms: the state, in *s, is no longer ST_STARTING) */
static bool set_up_ended(void *s) { return (*(int *)s = atomic_load(&state)) != ST_STARTING; }
static void write_reports_once(bool by_exit) {
  long me = syscall(SYS_gettid), writer = 0;
  if (!atomic_compare_exchange_strong(&exit_writer_tid, &writer, me)) {
    if (writer != me) (void)exit_waited(30000, false);
    return;
  }
  int s = atomic_load(&state), saved_errno = errno;
  /* The heap being set up: by another thread, wait for it (half a second
   * at most); by this one -- a signal handler calling _exit interrupted the
   * first allocation -- nothing is there yet, not even the report's path.
   * It ended without a word (the preload suite's exit_in_signal_handler
   * under load: verify+stats, no report and no line). */
  bool env_asked = libc_ready && (env("HEAPLAB_STATS") || env("HEAPLAB_TRACE_EVENTS"));
  if (s == ST_STARTING && env_asked && !in_setup) (void)poll_ms(500, set_up_ended, &s);
  if (s == ST_STARTING && env_asked) {
    hl__say("libheaplab-malloc: the heap is busy at exit (being set up: exit() or _exit() from "
            "a signal handler that interrupted the first allocation?): no report written\n");
    goto done;
  }
  if (forked_in_setup && env_asked) {
    hl__say("libheaplab-malloc: process %d was forked (or its parent was) while another thread "
            "set the heap up: no report written\n", (int)getpid());
    goto done;
  }
  hl_heap *h = s == ST_HEAPLAB ? HEAP : NULL;
  /* a program that never allocated reports too (its heap set up below) */
  bool unset = s == ST_NONE && env_asked;
  bool asked = unset || stats_path[0] || events_path[0];
  /* HEAPLAB_VERIFY's whole-heap check: at exit() always; from _exit & co.
   * only with a report asked (nothing asked, nothing done: docs/clients.md) */
  bool check = h && h->opt.verify && (by_exit || asked);
  if (!asked && !check) goto done;
  /* A handler that interrupted glibc's own allocator on this thread -- a
   * large block's (the manual heap takes those from glibc outside its
   * lock), a foreign block's free, any call under HEAPLAB_ALLOCATOR=libc --
   * passes the heap's check with glibc's arena lock held (or, in a program
   * of one thread, glibc's lists half-updated).  The report's allocations
   * waited for that lock for ever (18 of 30 runs hung, the h34exit helper,
   * session 34); since session 40 it makes none, and neither does verify's
   * check, so it is written there (preload scenario exit_in_glibc_malloc).
   * Two things at exit still call glibc's allocator: the heap's set-up for a
   * program that never allocated (below: busy at once, this thread's own
   * state) and the exiting thread's flush, whose trim takes its lists from
   * glibc (skipped: flush_at_report). */
  if ((unset && hl__in_libc_malloc) || (h && !client_heap_free_at_exit(h))) {
    if (asked)
      hl__say("libheaplab-malloc: the heap is busy at exit (exit() or _exit() from a signal "
              "handler that interrupted an allocation?): no report written\n");
    else
      hl__say("libheaplab-malloc: the heap is busy at exit (exit() from a signal handler that "
              "interrupted an allocation?): HEAPLAB_VERIFY's check at exit skipped\n");
    goto done;
  }
  /* From here failures wait for the heap's errlock a bounded time: the
   * handler may have interrupted this thread holding it, the heap's lock
   * free (a refused free_sized under verify), and the report's vma_count
   * fails without /proc (hl__errors_at_exit: it waited for ever) */
  hl__errors_at_exit(true);
  if (check) verify_check(h);
  if (!asked) goto done;
  /* one report per process, as docs/clients.md says -- unless it never
   * called this library because the process's malloc is another object's
   * (the program defines its own, or an allocator preloaded first): its
   * report was blank, 0 mallocs, as if nothing had been allocated */
  if (unset && malloc_elsewhere) {
    hl__say("libheaplab-malloc: malloc is defined by %s, which comes before this library: "
            "no allocation came here; no report written\n", malloc_elsewhere_who);
    stats_path[0] = events_path[0] = 0;
  } else if (unset && malloc_redirected) {
    hl__say("libheaplab-malloc: the program's calls of malloc do not reach this library "
            "(a tool redirects them: valgrind?): no allocation came here; no report written\n");
    stats_path[0] = events_path[0] = 0;
  } else if (unset) {
    (void)the_heap();
    s = atomic_load(&state);
  }
  /* In a launcher's process the stats report is the launcher's own: the
   * library's, written after it, replaced heaplab-lua's with one of its 35
   * mallocs.  The event trace is the library's (the launchers write none:
   * skipped too, it was lost -- the review, session 32).  (The mark looked
   * up at the start: launcher_process; checked after the set-up, which
   * fills stats_path: the review, session 33.) */
  if (stats_path[0] && launcher_process) stats_path[0] = 0;
  /* (not inside glibc's allocator: the flush may run a trim, whose lists
   * are glibc's -- exit() from a handler that interrupted a large block's
   * malloc, the thread's cache full, hung; the cached blocks count as used,
   * as after _exit) */
  flush_at_report = by_exit && !hl__in_libc_malloc;
  if ((s == ST_HEAPLAB || s == ST_SYSTEM) && (stats_path[0] || events_path[0]))
    write_reports_on_own_stack();
done:
  hl__errors_at_exit(false);
  atomic_store(&reports_done, true);
  errno = saved_errno;
}

/* After the program's atexit handlers (they may still allocate), before
 * libc's own destructors. */
__attribute__((destructor)) static void at_exit(void) {
  if (inert) return;
  write_reports_once(true);
}

/* Is this the process the library's memory belongs to (not a vfork child)? */
static bool own_process(void) {
  return !inert && atomic_load(&own_pid) == (int)getpid();
}

static void reports_at_quick_exit(void) {
  if (own_process()) write_reports_once(false);
}

/* _exit and _Exit: a program that ends with them runs no exit handler and no
 * destructor -- dash ends every shell that way, a fork child often does
 * (Python's os._exit, multiprocessing's children) -- and wrote no report.
 * Only calls through the dynamic symbol are seen: glibc's own (exit() after
 * the handlers, posix_spawn's child, abort paths) and a raw exit_group
 * system call are not.  A vfork child's _exit (its exec failed) writes
 * nothing: the memory is its parent's. */
#ifndef HL_PRELOAD_PREFIX /* (a test program linking the prefixed build keeps glibc's) */
__attribute__((visibility("default"), noreturn)) void _exit(int status) {
  if (own_process()) write_reports_once(false);
  if (next_exit) next_exit(status);
  for (;;) {
    syscall(SYS_exit_group, status);
    syscall(SYS_exit, status);
  }
}
__attribute__((visibility("default"), noreturn, alias("_exit"))) void _Exit(int status);

__attribute__((visibility("default"), noreturn)) void exit(int status) {
  exit_after_the_first();
  if (!next_exit_handlers) { /* (called before this library's constructor) */
    next_exit_handlers = (void (*)(int))dlsym(RTLD_NEXT, "exit");
    if (!next_exit_handlers) _exit(status);
  }
  next_exit_handlers(status);
  _exit(status); /* (not reached) */
}

/* A program that ends by a signal it sends itself, its default action
 * fatal: CPython after an uncaught KeyboardInterrupt (SIGINT set to SIG_DFL,
 * then kill(getpid(), SIGINT): status 130), bash and make after their SIGINT
 * clean-up.  No exit handler runs and it wrote no report (python3 stopped
 * by Ctrl-C: the preload hunt, session 34).  kill() of this process (its
 * pid) or of its group (0, or minus the group's id), killpg() of its group
 * and raise() write the reports first, as _exit does -- when the signal
 * will end it: not caught, not ignored, not a stop or a
 * default-ignored signal, not blocked in this thread (which then takes it
 * before kill returns).  Not seen: glibc's own raise (abort), a signal from
 * another process. */
static bool ends_this_process(int sig) {
  switch (sig) {
  case SIGCHLD: case SIGCONT: case SIGURG: case SIGWINCH: /* (ignored by default) */
  case SIGSTOP: case SIGTSTP: case SIGTTIN: case SIGTTOU: /* (stop) */
    return false;
  default:
    break;
  }
  if (sig <= 0 || sig >= NSIG) return false;
  if (sig == SIGKILL) return true;
  struct sigaction sa;
  sigset_t blocked;
  /* (a handler of SA_SIGINFO shares sa_handler's storage: not SIG_DFL
   * unless it is a null pointer, which the kernel takes as SIG_DFL too) */
  return sigaction(sig, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL &&
         pthread_sigmask(SIG_BLOCK, NULL, &blocked) == 0 && !sigismember(&blocked, sig);
}
/* (next_kill, next_killpg, next_raise: looked up by the constructor -- kill is
 * async-signal-safe and bash and make call it from their signal handlers,
 * where a dlsym could wait for the loader's lock the interrupted code holds;
 * before the constructor, the system calls) */
static void reports_before_fatal(int sig) {
  if (own_process() && ends_this_process(sig)) write_reports_once(false);
}
__attribute__((visibility("default"))) int kill(pid_t pid, int sig) {
  if (pid == 0 || pid == atomic_load(&own_pid) || (pid < -1 && pid == -getpgrp()))
    reports_before_fatal(sig);
  return next_kill ? next_kill(pid, sig) : (int)syscall(SYS_kill, pid, sig);
}
/* (bash's `kill -- -$$` is killpg: glibc's killpg calls its own kill, not
 * this one) */
__attribute__((visibility("default"))) int killpg(pid_t pgrp, int sig) {
  if (pgrp == 0 || pgrp == getpgrp()) reports_before_fatal(sig);
  if (next_killpg) return next_killpg(pgrp, sig);
  if (pgrp < 0) {
    errno = EINVAL;
    return -1;
  }
  return (int)syscall(SYS_kill, -pgrp, sig);
}
__attribute__((visibility("default"))) int raise(int sig) {
  reports_before_fatal(sig);
  return next_raise ? next_raise(sig)
                    : (int)syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), sig);
}
#endif

/* ---- the malloc family ---- */

static NOINLINE void *fail_nomem(void) {
  errno = ENOMEM;
  return NULL;
}

/* A pointer outside the reservation that is not a live large block: a freed
 * large block still in the core's quarantine (verify, manual.c: its memory
 * still the heap's, its address known, until 256 later blocks or 64 MiB
 * have followed it; handed to glibc as a foreign pointer, it was glibc's to
 * judge -- an abort at best, "free(): invalid pointer" -- and once glibc had
 * reused the memory, a block of someone else's freed) -- true; the call `what` is
 * refused, the heap's error says so (what NULL: no error) -- or foreign,
 * false. */
/* ... or a pointer inside a live large block (its system block: the
 * record, the lead, the bytes): handed to glibc as foreign, it aborted the
 * program ("free(): invalid pointer"), or -- bytes there that looked like a
 * chunk header -- glibc took it and handed the live block's memory out again
 * (the preload hunt, session 25).  A walk of the list
 * (hl__manual_inside_large): verify's cost, and only for pointers that are
 * no block of the heap.  Takes the lock. */
static bool freed_large(hl_heap *h, const void *ptr, const char *what) {
  if (!h->opt.verify) return false;
  bool locked = hl__lock(h);
  bool q = hl__manual_quarantined(h, ptr);
  const hl_large *in = q ? NULL : hl__manual_inside_large(h, ptr);
  if (q && what)
    hl__fail(h, HL_EINVAL, "%s: %p is a freed large block%s", what, ptr,
             strcmp(what, "free") ? "" : " (double free?)");
  else if (in && what)
    hl__fail(h, HL_EINVAL, "%s: %p is inside the live large block %p (%" PRIu64 " bytes), not "
             "a block", what, ptr, (const void *)(in + 1), in->size);
  hl__unlock(h, locked);
  return q || in;
}

/* Is ptr a large block of h?  Then free it (lock taken here; under verify
 * into the core's quarantine). */
static bool free_large(hl_heap *h, void *ptr) {
  bool locked = hl__lock(h);
  bool mine = hl__large_contains(h, ptr), damaged = false;
  void *raw = NULL;
  if (mine) {
    h->tally.manual_frees++;
    raw = hl__manual_large_freed(h, hl__large_of(ptr), &damaged);
  }
  hl__unlock(h, locked);
  hl__large_sys_free(raw); /* (outside the heap lock: manual.c's large_new says why) */
  if (damaged) hl__preload_verify_failed(h);
  return mine;
}

/* Is ptr a large block of h?  Its size in *size. */
static bool large_block(hl_heap *h, const void *ptr, size_t *size) {
  bool locked = hl__lock(h);
  bool mine = hl__large_contains(h, ptr);
  if (mine) *size = hl__large_of(ptr)->size;
  hl__unlock(h, locked);
  return mine;
}

/* The slow paths may run a trim, whose refused advice (a fault injection
 * arm, the map limit) sets errno: a call that succeeds leaves errno as it
 * found it, as glibc's free does since 2.33 (POSIX 2024). */
static NOINLINE void *malloc_slow(size_t n) {
  int saved = errno;
  hl_heap *h = the_heap();
  if (!h) return IN_LIBC(__libc_malloc(n));
  void *p = hl__tcache_pop(h, n);
  if (!p) p = hl__manual_malloc_any(h, n); /* (a large block when no small page is left) */
  if (!p) return fail_nomem();
  errno = saved;
  return p;
}

/* The fast paths.  This copy of the core (built with HL_PRELOAD, its
 * symbols hidden) has one heap, setup's, and never closes it: so a thread
 * whose cache pointer is set has a cache of that heap, and the fast paths
 * need not compare the heap and its serial as manual.h's hl__cache_of does
 * (three thread-local loads: 8 of malloc's 37 instructions).  The pointer is
 * set (manual.c, tcache_for) only after this thread read heap_ptr, and
 * cleared when the thread's caches go. */
EXPORT void *NAME(malloc)(size_t n) {
  hl_tcache *tc = hl__tls.cache;
  if (hl_likely(tc != NULL)) {
    void *b = hl__tcache_take(HEAP, tc, n);
    if (hl_likely(b != NULL)) return b;
  }
  if (ON_SYSTEM()) return __libc_malloc(n);
  return malloc_slow(n);
}

/* A call the heap refused as the program's error -- a double free, a
 * free or realloc of a block that is not live -- which it catches with
 * HEAPLAB_VERIFY=1 (or without thread caches: every free is checked then).
 * glibc aborts on the errors it detects; the heap has refused the call and
 * the program goes on, so it says so: one line on stderr (the heap's
 * message) for each of the first 10.  It had been recorded only in the heap's
 * error, which nothing in a preloaded program reads. */
static NOINLINE void report_refused(hl_heap *h) {
  static _Atomic int shown;
  int n = atomic_fetch_add(&shown, 1);
  if (n < 10) hl__say("libheaplab-malloc: %s: refused\n", hl_heap_error(h));
  else if (n == 10) hl__say("libheaplab-malloc: further refused calls not shown\n");
}

static NOINLINE void free_slow(void *ptr) {
  int saved = errno;
  hl_heap *h = HEAP;
  if (h && hl__in_reservation(h, ptr)) {
    if (!hl__manual_free_small(h, ptr)) report_refused(h);
  } else if (!h || !free_large(h, ptr)) {
    if (h && freed_large(h, ptr, "free")) report_refused(h);
    else IN_LIBC_VOID(__libc_free(ptr)); /* foreign */
  }
  errno = saved;
}

EXPORT void NAME(free)(void *ptr) {
  hl_tcache *tc = hl__tls.cache; /* (set: HEAP is too; see malloc) */
  if (hl_likely(tc != NULL)) {
    hl_heap *h = HEAP;
    if (hl_likely(hl__in_reservation(h, ptr)) &&
        hl__tcache_put(h, tc, ptr, h->pages[hl__page_of(h, ptr)].cls))
      return;
  }
  if (ON_SYSTEM()) { /* (glibc's free keeps errno: 2.33) */
    __libc_free(ptr);
    return;
  }
  if (ptr) free_slow(ptr);
}

EXPORT void *NAME(calloc)(size_t count, size_t size) {
  if (ON_SYSTEM()) return __libc_calloc(count, size);
  if (size && count > SIZE_MAX / size) return fail_nomem();
  size_t n = count * size;
  int saved = errno;
  hl_heap *h = the_heap();
  if (!h) return IN_LIBC(__libc_calloc(count, size));
  void *p;
  if (n <= h->small_max) {
    p = hl__tcache_pop(h, n);
    if (!p) p = hl__manual_malloc(h, n);
    if (p) memset(p, 0, n);
    else p = hl__manual_calloc_large(h, n); /* no small page left */
  } else {
    p = hl__manual_calloc_large(h, n);
  }
  if (!p) return fail_nomem();
  errno = saved;
  return p;
}

/* glibc's own function of that name: looked up in libc.so.6 itself, not
 * RTLD_NEXT, which finds the next library's -- Debian's redis-server links
 * libjemalloc.so.2, whose malloc_usable_size must never see glibc's block */
static void *glibc_sym(const char *name) {
  void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
  void *f = libc ? dlsym(libc, name) : NULL;
  if (libc) dlclose(libc);
  return f;
}

/* glibc's `name` (a function of <malloc.h>), looked up at its first use;
 * NULL when libc has none. */
#define GLIBC(name)                                                      \
  __extension__({                                                        \
    static __typeof__(&name) _Atomic glibc_fn_;                          \
    __typeof__(&name) f_ = glibc_fn_;                                    \
    if (!f_) glibc_fn_ = f_ = (__typeof__(&name))glibc_sym(#name);       \
    f_;                                                                  \
  })

/* glibc's malloc_usable_size, for foreign blocks */
static size_t foreign_usable_size(void *ptr) {
  size_t (*f)(void *) = GLIBC(malloc_usable_size);
  return f ? f(ptr) : 0;
}

EXPORT void *NAME(realloc)(void *ptr, size_t n) {
  if (ON_SYSTEM()) return __libc_realloc(ptr, n);
  if (!ptr) return NAME(malloc)(n);
  if (n == 0) { /* glibc: frees and returns NULL */
    NAME(free)(ptr);
    return NULL;
  }
  hl_heap *h = HEAP;
  if (!h) return IN_LIBC(__libc_realloc(ptr, n));
  int saved = errno;
  void *q;
  if (hl__in_reservation(h, ptr)) {
    q = hl__manual_realloc(h, ptr, 0, n);
    if (!q && hl__manual_usable_size(h, ptr) == 0) { /* not a live block */
      report_refused(h);
      errno = EINVAL;
      return NULL;
    }
  } else {
    bool foreign;
    /* (under verify a large block that moves is freed into the quarantine,
     * not by the system realloc: manual.c, realloc_large_verify) */
    q = hl__manual_realloc_outside(h, ptr, n, &foreign);
    if (foreign && freed_large(h, ptr, "realloc")) {
      report_refused(h);
      errno = EINVAL;
      return NULL;
    }
    if (foreign) return IN_LIBC(__libc_realloc(ptr, n)); /* glibc's block stays glibc's */
  }
  if (!q) return fail_nomem();
  errno = saved;
  return q;
}

EXPORT void *NAME(reallocarray)(void *ptr, size_t count, size_t size) {
  if (size && count > SIZE_MAX / size) return fail_nomem();
  return NAME(realloc)(ptr, count * size);
}

/* glibc 2.36: an alignment that is not a power of two is rounded up to one;
 * one past SIZE_MAX / 2 + 1 is EINVAL. */
static void *aligned(size_t align, size_t n) {
  if (ON_SYSTEM()) return __libc_memalign(align, n); /* (which rounds the same way) */
  if (align > SIZE_MAX / 2 + 1) {
    errno = EINVAL;
    return NULL;
  }
  if (align & (align - 1)) {
    size_t a = 16;
    while (a < align) a <<= 1;
    align = a;
  }
  int saved = errno;
  hl_heap *h = the_heap();
  if (!h) return IN_LIBC(__libc_memalign(align, n));
  void *p = hl__manual_memalign(h, align, n);
  if (!p) return fail_nomem();
  errno = saved;
  return p;
}

EXPORT void *NAME(memalign)(size_t align, size_t n) { return aligned(align, n); }
EXPORT void *NAME(aligned_alloc)(size_t align, size_t n) { return aligned(align, n); }

EXPORT int NAME(posix_memalign)(void **out, size_t align, size_t n) {
  if (align % sizeof(void *) || (align & (align - 1)) || align == 0) return EINVAL;
  int saved = errno;
  void *p = aligned(align, n);
  errno = saved; /* posix_memalign reports through its result only */
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

EXPORT void *NAME(valloc)(size_t n) { return aligned(hl__prim_os_page_size(), n); }

EXPORT void *NAME(pvalloc)(size_t n) {
  size_t ps = hl__prim_os_page_size();
  if (n > SIZE_MAX - 2 * ps) return fail_nomem();
  return aligned(ps, n ? (n + ps - 1) & ~(ps - 1) : ps);
}

EXPORT size_t NAME(malloc_usable_size)(void *ptr) {
  if (!ptr) { /* (also calls_redirected's probe) */
    atomic_store_explicit(&usable_size_probed, true, memory_order_relaxed);
    return 0;
  }
  hl_heap *h = HEAP;
  if (h && hl__in_reservation(h, ptr)) {
    /* verify: a freed (or interior) pointer has no usable size -- 0, where
     * the class's size would hide the program's use of a freed block */
    if (h->opt.verify) return hl__manual_usable_size(h, ptr);
    return h->cls_size[h->pages[hl__page_of(h, ptr)].cls];
  }
  size_t n;
  if (h && large_block(h, ptr, &n)) return n;
  if (h && freed_large(h, ptr, NULL)) return 0; /* (not glibc's reading of it) */
  return foreign_usable_size(ptr);
}

/* C23 */
/* A wrong size must not corrupt the heap: without verify the size is
 * ignored (treated as free).  HEAPLAB_VERIFY=1: a size that does not match
 * the block is refused and reported, as the core's hl_free_sized refuses it
 * (hl__manual_free_sized_ok: another class's size for a small block, a large
 * block's outside its bounds) -- it was freed in silence. */
EXPORT void NAME(free_sized)(void *ptr, size_t size) {
  hl_heap *h = HEAP;
  if (ptr && h && h->opt.verify && !hl__manual_free_sized_ok(h, ptr, size)) {
    int saved = errno;
    report_refused(h);
    errno = saved;
    return;
  }
  NAME(free)(ptr);
}

/* ... and free_aligned_sized's alignment and size, the same way (it was
 * never checked) */
EXPORT void NAME(free_aligned_sized)(void *ptr, size_t align, size_t size) {
  hl_heap *h = HEAP;
  if (ptr && h && h->opt.verify && !hl__manual_free_aligned_sized_ok(h, ptr, align, size)) {
    int saved = errno;
    report_refused(h);
    errno = saved;
    return;
  }
  NAME(free)(ptr);
}

/* Runs a trim on the heap (beyond the warm cache) and glibc's on the
 * foreign blocks; 1 when some memory went back. */
EXPORT int NAME(malloc_trim)(size_t pad) {
  /* no cancellation point in here, as in glibc's (hl__wait says why) */
  int cs;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
  int (*glibc_trim)(size_t) = GLIBC(malloc_trim);
  int released = glibc_trim ? IN_LIBC(glibc_trim(pad)) : 0;
  hl_heap *h = HEAP;
  if (h) {
    hl_stats before, after;
    hl_thread_flush(h);
    verify_check(h);
    hl_stats_get(h, &before);
    hl_trim(h);
    hl_stats_get(h, &after);
    if (after.released_pages > before.released_pages) released = 1;
  }
  pthread_setcancelstate(cs, NULL);
  return released;
}

/* ---- introspection ----
 * glibc's mallinfo2 and malloc_stats see only glibc's heap: the large
 * blocks (they are glibc's), the foreign ones and the library's metadata.
 * A program asking them how much it has allocated (LLVM's
 * sys::Process::GetMallocUsage, a server's memory report) would miss every
 * small block: heaplab's pages are added to glibc's answer. */

/* Bytes of heaplab's resident small pages and of the small blocks in use
 * (those in thread caches included: they count as used by their pages). */
static bool small_heap_bytes(uint64_t *resident, uint64_t *used) {
  hl_heap *h = HEAP;
  hl_stats st;
  int cs; /* (no cancellation point in mallinfo: hl__wait says why) */
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
  int rc = h ? hl_stats_get(h, &st) : HL_EINVAL;
  pthread_setcancelstate(cs, NULL);
  if (rc) return false;
  uint64_t pages = st.owned_pages + st.retired_pool_pages + st.partial_pool_pages +
                   st.free_pool_pages;
  uint64_t bytes = pages * h->page_size;
  *resident = bytes > st.subpage_released_bytes ? bytes - st.subpage_released_bytes : 0;
  *used = st.small_live_bytes;
  return true;
}

/* glibc's figures plus the small heap: arena (non-mapped bytes) and the
 * bytes in use and free in it. */
EXPORT struct mallinfo2 NAME(mallinfo2)(void) {
  struct mallinfo2 (*f)(void) = GLIBC(mallinfo2);
  struct mallinfo2 mi;
  memset(&mi, 0, sizeof mi);
  if (f) mi = IN_LIBC(f());
  uint64_t resident, used;
  if (small_heap_bytes(&resident, &used)) {
    mi.arena += resident;
    mi.uordblks += used;
    mi.fordblks += resident > used ? resident - used : 0;
  }
  return mi;
}

/* The same in int fields, wrapped as glibc's are. */
EXPORT struct mallinfo NAME(mallinfo)(void) {
  struct mallinfo2 m = NAME(mallinfo2)();
  struct mallinfo mi = {
      .arena = (int)m.arena, .ordblks = (int)m.ordblks, .smblks = (int)m.smblks,
      .hblks = (int)m.hblks, .hblkhd = (int)m.hblkhd, .usmblks = (int)m.usmblks,
      .fsmblks = (int)m.fsmblks, .uordblks = (int)m.uordblks, .fordblks = (int)m.fordblks,
      .keepcost = (int)m.keepcost};
  return mi;
}

/* glibc's report on stderr, then the small heap's in the same form. */
EXPORT void NAME(malloc_stats)(void) {
  void (*f)(void) = GLIBC(malloc_stats);
  int saved = errno;
  if (f) IN_LIBC_VOID(f());
  uint64_t resident, used;
  if (small_heap_bytes(&resident, &used))
    hl__say("heaplab small blocks (libheaplab-malloc.so):\n"
                    "system bytes     = %10" PRIu64 "\nin use bytes     = %10" PRIu64 "\n",
            resident, used);
  errno = saved;
}

/* glibc's mallopt and malloc_info, counted as the library's own calls into
 * glibc's allocator (IN_LIBC): each takes glibc's arena locks (malloc_info
 * each arena's while it reads it), and a signal handler's _exit that
 * interrupted one under HEAPLAB_ALLOCATOR=libc passed the busy check: the
 * report, allocating through glibc then, waited for the lock its own thread
 * held, for ever (preload scenario exit_in_signal_handler's
 * stats+libc+mallopt and +malloc_info: 18 and 14 of 20 runs hung, h39exit,
 * session 39; they were glibc's, called past the library -- the carried
 * "counter's gaps").  The report allocates nothing now (written there,
 * under HEAPLAB_ALLOCATOR=libc); what the count still guards is the heap's
 * set-up at exit of a program that never allocated (a mallopt before the
 * first malloc is common) and the exiting thread's flush.  They change
 * nothing else: glibc's figures and settings, as before. */
EXPORT int NAME(mallopt)(int param, int value) { return IN_LIBC(__libc_mallopt(param, value)); }

EXPORT int NAME(malloc_info)(int options, FILE *fp) {
  int (*f)(int, FILE *) = GLIBC(malloc_info);
  if (!f) {
    errno = ENOSYS;
    return -1;
  }
  return IN_LIBC(f(options, fp));
}

/* ---- mlockall ---- */

/* The kernel's mlockall locks every mapping of the process, and this heap's
 * reservation (32 GiB by default: one readable, writable mapping, never
 * mprotected) and side tables are mappings: MCL_CURRENT faulted all of it
 * in (a python3 that called it as root was killed by the OOM killer), and
 * without CAP_IPC_LOCK the kernel measured the process -- reservation
 * included -- against RLIMIT_MEMLOCK and refused a call glibc's process
 * passes.  So the library's mlockall is the kernel's on everything but the
 * heap's unused address space: the program's mappings and the pages the
 * heap has carved are locked (faulted in, or on first touch with
 * MCL_ONFAULT); under MCL_FUTURE each page carved later is locked as the
 * kernel locks a new mapping (pages.c), the large blocks being glibc's
 * mappings anyway; and RLIMIT_MEMLOCK is checked against the process's size
 * without the unused reservation.  munlockall is the kernel's, and ends the
 * carved pages' locking. */

enum { UNUSED_MAX = 16 };
struct lock_walk {
  uintptr_t lo[UNUSED_MAX], hi[UNUSED_MAX]; /* the heap's unused ranges */
  size_t n;
  bool onfault;
  int err; /* the first refusal that is not the kernel's "cannot" */
};

/* Lock a mapping but the unused ranges in it.  A part the kernel will not
 * lock or fault in ([vsyscall], a guard page: ENOMEM; EAGAIN) is passed
 * over, as mlockall passes over it; any other refusal (a sandbox's EPERM or
 * ENOSYS) stops the walk. */
static int lock_mapping(void *arg, uintptr_t lo, uintptr_t hi) {
  struct lock_walk *w = arg;
  while (lo < hi) {
    uintptr_t end = hi;
    bool skipped = false;
    for (size_t i = 0; i < w->n && !skipped; i++) {
      if (w->lo[i] <= lo && lo < w->hi[i]) {
        lo = w->hi[i];
        skipped = true;
      } else if (lo < w->lo[i] && w->lo[i] < end) {
        end = w->lo[i];
      }
    }
    if (skipped) continue;
    int e = hl__prim_os_lock((void *)lo, end - lo, w->onfault);
    if (e && e != ENOMEM && e != EAGAIN) {
      w->err = e;
      return 1;
    }
    lo = end;
  }
  return 0;
}

/* The heap's unused ranges, read in the same critical section that starts
 * (MCL_FUTURE) or stops the carved pages' locking: a page carved after it
 * is locked by the carve, one before it by the walk -- with the ranges read
 * earlier, pages carved while the call ran were locked by neither (13 runs
 * of 20 left blocks unlocked, the preload hunt). */
static void lock_carving(hl_heap *h, int flags, struct lock_walk *w) {
  bool locked = hl__lock(h);
  h->lock_carved = !(flags & MCL_FUTURE) ? 0 : w->onfault ? HL_LOCK_ONFAULT : HL_LOCK_PAGES;
  h->lock_err = 0;
  w->n = hl__pages_unused_ranges(h, w->lo, w->hi, UNUSED_MAX);
  hl__unlock(h, locked);
}

/* Where the library cannot walk -- the maps unreadable (no /proc), mlock2
 * refused (a seccomp sandbox that allows mlockall) -- the kernel's mlockall
 * on fault (it would fault the reservation in), then the unused ranges
 * unlocked: the program's pages are locked as they are touched, not faulted
 * in now.  The kernel measures the reservation against RLIMIT_MEMLOCK there:
 * without CAP_IPC_LOCK under a limit, ENOMEM -- with nothing changed, as a
 * refused mlockall changes nothing.  (It had returned 0 and locked nothing;
 * then, refused, had left MCL_FUTURE on: the session's hunt and review.) */
static int mlockall_on_fault(hl_heap *h, int flags, struct lock_walk *w) {
  if (syscall(SYS_mlockall, flags | MCL_ONFAULT) != 0) return -1;
  lock_carving(h, flags, w);
  for (size_t i = 0; i < w->n; i++) munlock((void *)w->lo[i], w->hi[i] - w->lo[i]);
  return 0;
}

EXPORT int NAME(mlockall)(int flags) {
  /* the heap first: one made after MCL_FUTURE would have its whole
   * reservation locked */
  hl_heap *h = the_heap();
  const int known = MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT;
  if (!h || !flags || (flags & ~known) || flags == MCL_ONFAULT)
    return (int)syscall(SYS_mlockall, flags); /* glibc's, or its EINVAL */
  struct lock_walk w = {.onfault = (flags & MCL_ONFAULT) != 0};
  int saved = errno;
  if (flags & MCL_CURRENT) {
    /* can it walk?  The maps and the status readable, and mlock2 allowed
     * (a call of length 0 locks nothing; a sandbox's filter refuses it) */
    char st[4096];
    int fd = hl__prim_os_proc_self_open("maps");
    bool walk = fd >= 0 && hl__prim_os_status(st, sizeof st) == 0 && hl__prim_os_lock(&w, 0, false) == 0;
    if (fd >= 0) close(fd);
    if (!walk) {
      int r = mlockall_on_fault(h, flags, &w);
      if (r == 0) errno = saved;
      return r;
    }
    /* the kernel's test (mm/mlock.c): the process's size within
     * RLIMIT_MEMLOCK, or CAP_IPC_LOCK -- the size without the heap's
     * unused ranges */
    struct rlimit rl;
    if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
      bool locked = hl__lock(h);
      w.n = hl__pages_unused_ranges(h, w.lo, w.hi, UNUSED_MAX);
      hl__unlock(h, locked);
      uint64_t size = hl__prim_os_status_value(st, "VmSize", 10) * 1024, unused = 0;
      for (size_t i = 0; i < w.n; i++) unused += w.hi[i] - w.lo[i];
      size = size > unused ? size - unused : 0;
      size_t ps = hl__prim_os_page_size();
      bool cap = (hl__prim_os_status_value(st, "CapEff", 16) >> 14) & 1; /* CAP_IPC_LOCK */
      if (!cap && size / ps > rl.rlim_cur / ps) {
        errno = ENOMEM;
        return -1;
      }
    }
  }
  /* the locks of mappings made from now on (the kernel's def_flags):
   * MCL_FUTURE sets them; mlockall without it clears them, as munlockall
   * does (which also unlocks the mappings, locked again below) */
  long r = flags & MCL_FUTURE ? syscall(SYS_mlockall, flags & (MCL_FUTURE | MCL_ONFAULT))
                              : syscall(SYS_munlockall);
  if (r != 0) return -1;
  lock_carving(h, flags, &w);
  if (!(flags & MCL_CURRENT)) return 0;
  int e = hl__prim_os_maps_each(lock_mapping, &w);
  /* (the maps gone, or a refusal the probe did not meet, half-way) */
  if ((e || w.err) && mlockall_on_fault(h, flags, &w) != 0) return -1;
  errno = saved;
  return 0;
}

EXPORT int NAME(munlockall)(void) {
  long r = syscall(SYS_munlockall);
  hl_heap *h = HEAP;
  if (h) {
    bool locked = hl__lock(h);
    h->lock_carved = 0;
    hl__unlock(h, locked);
  }
  return (int)r;
}

#ifndef HL_PRELOAD_PREFIX
/* dlopen with RTLD_DEEPBIND (PHP loads every extension so: php -v aborted
 * in pdo.so's MINIT, "double free or corruption (out)"; the real-programs
 * hunt of session 36).  Such an object looks its symbols up in itself and
 * its dependencies before the global scope, so its malloc family binds to
 * libc.so.6's -- past this library -- while the program's stays here: a
 * block the program made and the object freed went to glibc's free, which
 * aborted (and the reverse went to glibc as a foreign block).  After such a
 * dlopen every object it loaded that takes a name of the malloc family from
 * glibc (an undefined symbol the handle's scope finds in libc.so.6) has that
 * reference bound to this library's function -- its GOT slot written, under
 * full RELRO made writable for the write -- as if it had been looked up in
 * the global scope; everything else stays deep-bound.  An object that
 * brings its own allocator (a dependency defining malloc) keeps it.
 *
 * dlopen is entered by a jump, not a call: glibc takes the caller's return
 * address to choose the namespace and the RPATH/RUNPATH a bare name is
 * searched in, and every dlopen without RTLD_DEEPBIND reaches glibc's with
 * the program's return address untouched.  A DEEPBIND dlopen is called from
 * here: a bare name is no longer searched in its caller's RPATH/RUNPATH
 * (docs/clients.md). */
#if (defined(__x86_64__) && !defined(__ILP32__)) || defined(__aarch64__)
#define DEEPBIND_REBIND 1
#if defined(__x86_64__)
#define REL_JUMP_SLOT R_X86_64_JUMP_SLOT
#define REL_GLOB_DAT R_X86_64_GLOB_DAT
#define REL_ABS64 R_X86_64_64
#else
#define REL_JUMP_SLOT R_AARCH64_JUMP_SLOT
#define REL_GLOB_DAT R_AARCH64_GLOB_DAT
#define REL_ABS64 R_AARCH64_ABS64
#endif
#endif

/* the dlopen after this library's (glibc's): set by dlopen_first */
__attribute__((visibility("hidden"))) void *(*_Atomic hl__next_dlopen)(const char *, int);

static void *(*next_dlopen(void))(const char *, int) {
  void *(*f)(const char *, int) = hl__next_dlopen;
  if (!f) {
    f = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
    hl__next_dlopen = f;
  }
  return f;
}

/* the first dlopen (the look-up above), called, not jumped to */
__attribute__((visibility("hidden"), used)) void *hl__dlopen_first(const char *file, int flags);
__attribute__((visibility("hidden"), used)) void *hl__dlopen_first(const char *file, int flags) {
  void *(*f)(const char *, int) = next_dlopen();
  if (!f) {
    errno = ENOSYS;
    return NULL;
  }
  return f(file, flags);
}

#ifdef DEEPBIND_REBIND
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations" /* (glibc marks mallinfo) */
static const struct {
  const char *name;
  void *fn;
} family[] = {
    {"malloc", (void *)NAME(malloc)},
    {"free", (void *)NAME(free)},
    {"calloc", (void *)NAME(calloc)},
    {"realloc", (void *)NAME(realloc)},
    {"reallocarray", (void *)NAME(reallocarray)},
    {"memalign", (void *)NAME(memalign)},
    {"aligned_alloc", (void *)NAME(aligned_alloc)},
    {"posix_memalign", (void *)NAME(posix_memalign)},
    {"valloc", (void *)NAME(valloc)},
    {"pvalloc", (void *)NAME(pvalloc)},
    {"malloc_usable_size", (void *)NAME(malloc_usable_size)},
    {"malloc_trim", (void *)NAME(malloc_trim)},
    {"free_sized", (void *)NAME(free_sized)},
    {"free_aligned_sized", (void *)NAME(free_aligned_sized)},
    {"mallinfo", (void *)NAME(mallinfo)},
    {"mallinfo2", (void *)NAME(mallinfo2)},
    {"malloc_stats", (void *)NAME(malloc_stats)},
    {"mallopt", (void *)NAME(mallopt)},
    {"malloc_info", (void *)NAME(malloc_info)},
};
#pragma GCC diagnostic pop
#define FAMILY_N (sizeof family / sizeof family[0])

#define REBIND_MAX 1024
struct rebind {
  bool deep[FAMILY_N];     /* the handle's scope finds glibc's */
  ElfW(Addr) glibc[FAMILY_N]; /* that function of glibc's */
  struct link_map *first;  /* the handle's object: it and those after it in */
  ElfW(Addr) base[REBIND_MAX]; /* its namespace (read under the loader's lock) */
  size_t n;
  bool listed;
};

static int family_index(const char *name) {
  for (size_t i = 0; i < FAMILY_N; i++)
    if (!strcmp(family[i].name, name)) return (int)i;
  return -1;
}

/* a d_ptr of the dynamic section: glibc relocated most in place */
static ElfW(Addr) dyn_ptr(ElfW(Addr) base, ElfW(Addr) v) { return v < base ? v + base : v; }

/* a slot in the pages of RELRO that glibc made read-only (whole pages:
 * _dl_protect_relro rounds the end down) is written with the page writable */
static void write_slot(ElfW(Addr) *slot, ElfW(Addr) v, ElfW(Addr) relro, ElfW(Addr) relro_end) {
  if (*slot == v) return;
  ElfW(Addr) a = (ElfW(Addr))slot, ps = (ElfW(Addr))hl__prim_os_page_size();
  if (a >= (relro & ~(ps - 1)) && a < (relro_end & ~(ps - 1))) {
    void *page = (void *)(a & ~(ps - 1));
    if (mprotect(page, ps, PROT_READ | PROT_WRITE) != 0) return; /* (left deep-bound) */
    *slot = v;
    mprotect(page, ps, PROT_READ);
  } else {
    *slot = v;
  }
}

/* Only a reference bound to glibc's function (or a PLT slot not yet bound,
 * still pointing into the object) is written: one an earlier dlopen bound
 * elsewhere -- to an allocator a deep-bound plugin brought, whose blocks
 * are live -- is left as it is. */
static void rebind_relocs(ElfW(Addr) base, const ElfW(Rela) *r, size_t bytes, const ElfW(Sym) *symtab,
                          const char *strtab, const struct rebind *rb, ElfW(Addr) relro,
                          ElfW(Addr) relro_end, ElfW(Addr) lo, ElfW(Addr) hi) {
  for (size_t i = 0; i < bytes / sizeof *r; i++) {
    unsigned long type = ELF64_R_TYPE(r[i].r_info);
    if (type != REL_JUMP_SLOT && type != REL_GLOB_DAT && type != REL_ABS64) continue;
    const ElfW(Sym) *s = &symtab[ELF64_R_SYM(r[i].r_info)];
    if (!ELF64_R_SYM(r[i].r_info) || s->st_shndx != SHN_UNDEF) continue;
    int k = family_index(strtab + s->st_name);
    if (k < 0 || !rb->deep[k]) continue;
    ElfW(Addr) add = type == REL_ABS64 ? (ElfW(Addr))r[i].r_addend : 0;
    ElfW(Addr) *slot = (ElfW(Addr) *)(base + r[i].r_offset), cur = *slot;
    bool unbound = type == REL_JUMP_SLOT && cur >= lo && cur < hi;
    if (cur != rb->glibc[k] + add && !unbound) continue;
    write_slot(slot, (ElfW(Addr))family[k].fn + add, relro, relro_end);
  }
}

static int rebind_object(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  struct rebind *rb = arg;
  if (!rb->listed) { /* (dl_iterate_phdr holds the loader's lock: the list stands) */
    for (struct link_map *m = rb->first; m && rb->n < REBIND_MAX; m = m->l_next)
      rb->base[rb->n++] = m->l_addr;
    rb->listed = true;
  }
  size_t i = 0;
  while (i < rb->n && rb->base[i] != info->dlpi_addr) i++;
  if (i == rb->n || !info->dlpi_addr) return 0; /* (another object, another namespace's) */
  const ElfW(Dyn) *dyn = NULL;
  ElfW(Addr) relro = 0, relro_end = 0, lo = ~(ElfW(Addr))0, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_LOAD) {
      if (info->dlpi_addr + ph->p_vaddr < lo) lo = info->dlpi_addr + ph->p_vaddr;
      if (info->dlpi_addr + ph->p_vaddr + ph->p_memsz > hi) hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
    }
    if (ph->p_type == PT_DYNAMIC) dyn = (const ElfW(Dyn) *)(info->dlpi_addr + ph->p_vaddr);
    if (ph->p_type == PT_GNU_RELRO) {
      relro = info->dlpi_addr + ph->p_vaddr;
      relro_end = relro + ph->p_memsz;
    }
  }
  if (!dyn) return 0;
  ElfW(Addr) base = info->dlpi_addr, symtab = 0, strtab = 0, jmprel = 0, rela = 0;
  size_t pltsz = 0, relasz = 0;
  long pltrel = 0;
  for (; dyn->d_tag != DT_NULL; dyn++) {
    switch (dyn->d_tag) {
    case DT_SYMTAB: symtab = dyn_ptr(base, dyn->d_un.d_ptr); break;
    case DT_STRTAB: strtab = dyn_ptr(base, dyn->d_un.d_ptr); break;
    case DT_JMPREL: jmprel = dyn_ptr(base, dyn->d_un.d_ptr); break;
    case DT_PLTRELSZ: pltsz = dyn->d_un.d_val; break;
    case DT_PLTREL: pltrel = (long)dyn->d_un.d_val; break;
    case DT_RELA: rela = dyn_ptr(base, dyn->d_un.d_ptr); break;
    case DT_RELASZ: relasz = dyn->d_un.d_val; break;
    case DT_TEXTREL: return 0; /* (relocations in read-only text: left alone) */
    case DT_FLAGS:
      if (dyn->d_un.d_val & DF_TEXTREL) return 0;
      break;
    default: break;
    }
  }
  if (!symtab || !strtab) return 0;
  const ElfW(Sym) *st = (const ElfW(Sym) *)symtab;
  if (jmprel && pltrel == DT_RELA)
    rebind_relocs(base, (const ElfW(Rela) *)jmprel, pltsz, st, (const char *)strtab, rb, relro,
                  relro_end, lo, hi);
  if (rela)
    rebind_relocs(base, (const ElfW(Rela) *)rela, relasz, st, (const char *)strtab, rb, relro,
                  relro_end, lo, hi);
  return 0;
}

static pthread_mutex_t rebind_lock = PTHREAD_MUTEX_INITIALIZER;

static void rebind_deep_objects(void *handle) {
  struct link_map *lm = NULL;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm) return;
  void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
  if (!libc) return;
  bool deep[FAMILY_N], any = false;
  ElfW(Addr) glibc[FAMILY_N];
  for (size_t i = 0; i < FAMILY_N; i++) {
    void *mine = dlsym(handle, family[i].name), *theirs = dlsym(libc, family[i].name);
    deep[i] = mine && mine == theirs;
    glibc[i] = (ElfW(Addr))theirs;
    any |= deep[i];
  }
  (void)dlerror();
  dlclose(libc);
  if (!any) return;
  /* (the look-ups above take the loader's lock, which a constructor's
   * RTLD_DEEPBIND dlopen holds when it comes here: not under this lock) */
  static struct rebind rb; /* (8 KiB: off the caller's stack) */
  pthread_mutex_lock(&rebind_lock);
  memset(&rb, 0, sizeof rb);
  memcpy(rb.deep, deep, sizeof deep);
  memcpy(rb.glibc, glibc, sizeof glibc);
  rb.first = lm;
  dl_iterate_phdr(rebind_object, &rb);
  pthread_mutex_unlock(&rebind_lock);
}
#endif /* DEEPBIND_REBIND */

/* a dlopen with RTLD_DEEPBIND (the jump below) */
__attribute__((visibility("hidden"), used)) void *hl__dlopen_deepbind(const char *file, int flags);
__attribute__((visibility("hidden"), used)) void *hl__dlopen_deepbind(const char *file, int flags) {
  void *handle = hl__dlopen_first(file, flags);
#ifdef DEEPBIND_REBIND
  if (handle && file && !inert && !malloc_elsewhere && !malloc_redirected) {
    int saved = errno;
    rebind_deep_objects(handle);
    errno = saved;
  }
#endif
  return handle;
}

#if defined(__x86_64__) && !defined(__ILP32__)
__asm__(".text\n"
        ".globl dlopen\n"
        ".type dlopen, @function\n"
        "dlopen:\n"
        "  testl $8, %esi\n" /* RTLD_DEEPBIND */
        "  jnz hl__dlopen_deepbind\n"
        "  movq hl__next_dlopen(%rip), %rax\n"
        "  testq %rax, %rax\n"
        "  jz hl__dlopen_first\n"
        "  jmp *%rax\n"
        ".size dlopen, .-dlopen\n");
#elif defined(__aarch64__) /* (written, not built here: this project's machines are x86-64) */
__asm__(".text\n"
        ".globl dlopen\n"
        ".type dlopen, %function\n"
        "dlopen:\n" /* (conditional branches reach 32 KiB: b to the functions) */
        "  tbz w1, #3, 1f\n" /* RTLD_DEEPBIND (8) */
        "  b hl__dlopen_deepbind\n"
        "1:\n"
        "  adrp x16, hl__next_dlopen\n"
        "  ldr x16, [x16, :lo12:hl__next_dlopen]\n"
        "  cbnz x16, 2f\n"
        "  b hl__dlopen_first\n"
        "2:\n"
        "  br x16\n"
        ".size dlopen, .-dlopen\n");
#else
EXPORT void *dlopen(const char *file, int flags) {
  return flags & RTLD_DEEPBIND ? hl__dlopen_deepbind(file, flags) : hl__dlopen_first(file, flags);
}
#endif
#endif /* !HL_PRELOAD_PREFIX */
