/*
 * heap.c -- the front door: every public entry of a heap (heaplab.h) is
 * here.  Each checks its arguments once, takes the heap lock through the one
 * helper (hl__lock: nothing when the thread holds the heap with hl_enter),
 * and hands over to the layer that does the work; the layers below trust
 * their callers and assert the lock.  The hot entries (hl_obj_new,
 * hl_obj_new_in, hl_malloc, hl_free, hl_free_sized) try an inline fast path
 * first (internal.h, manual/manual.h) and call out only when it misses.
 *
 * Not here: the options (telemetry/options.c), the footprint sampler
 * (telemetry/sampler.c), the names of stats, events, sites and errors
 * (telemetry/telemetry.c) -- none of them takes a heap.
 */
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "manual/manual.h"

/* Never NULL: "no heap" is HL_NOT_HELD, so hl__held == h also says h is
 * not NULL (one test less on the raw objects' fast path). */
char hl__not_held;
_Thread_local __attribute__((tls_model("initial-exec"))) hl_heap *hl__held = HL_NOT_HELD;
_Thread_local uint32_t hl__held_depth;
#ifdef HL_ASSERTS
_Thread_local char hl__thread_token;

void hl__assert_fail(const char *cond, const char *file, int line, const char *func) {
  /* no allocation: the heap may be what is broken */
  hl__say(HL_SAY_NAME ": assertion failed: %s (%s:%d, %s)\n", cond, file, line, func);
  abort();
}
#endif

static _Atomic uint64_t heap_serial;

/* (internal.h, hl__lock_raw: the heap lock is taken by another thread) */
void hl__lock_contended(pthread_mutex_t *m) {
  for (int i = 0; i < 100; i++) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if (pthread_mutex_trylock(m) == 0) return;
  }
  pthread_mutex_lock(m);
}

/* ---- interrupts ---- */

_Atomic uint64_t hl__interrupts;
_Thread_local hl_long_call hl__long_call;

void hl_interrupt(void) { atomic_fetch_add_explicit(&hl__interrupts, 1, memory_order_relaxed); }

/* The handler each signal chains to, read by heaplab's handler in one atomic
 * load: a record is never written once published (an attach that finds the
 * host's handler changed publishes another, interned: the hosts' few
 * handlers each get one record, kept for the process's life).  It was a
 * struct rewritten in place, which a handler running on another thread could
 * read half-written -- the host's new function with its old flags.  (What
 * made ThreadSanitizer see such rewrites in a test whose host never changes
 * its handler: its sigaction interceptor keeps its own table, written field
 * by field and copied out byte by byte, unlocked, so an attach reading it
 * while another thread put the host's handler back got heaplab's function
 * with the host's flags, or the host's with heaplab's -- a change, and
 * chained[] rewritten, 2 to 5 runs of 20.  The kernel's sigaction is atomic;
 * the interceptor's is not, and any rewrite must be safe anyway.) */
struct chained_rec {
  struct sigaction sa;
  struct chained_rec *next; /* every record made, for the interning */
};
static _Atomic(const struct chained_rec *) chained[65];
static struct chained_rec *chained_recs; /* under attach_lock */

/* The signals whose default action is to do nothing (SIGCONT's continuing
 * is the kernel's, handler or not), and those whose default stops the
 * process. */
static bool default_ignores(int sig) {
  return sig == SIGCHLD || sig == SIGURG || sig == SIGWINCH || sig == SIGCONT;
}
static bool default_stops(int sig) { return sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU; }

static void on_signal(int sig, siginfo_t *info, void *ctx) {
  int saved = errno;
  hl_interrupt();
  const struct chained_rec *rec = atomic_load_explicit(&chained[sig], memory_order_acquire);
  if (!rec) { /* (published before the handler is installed: never) */
    errno = saved;
    return;
  }
  const struct sigaction *old = &rec->sa;
  if (old->sa_flags & SA_SIGINFO) {
    if (old->sa_sigaction) old->sa_sigaction(sig, info, ctx);
  } else if (old->sa_handler == SIG_DFL && default_stops(sig)) {
    /* what the signal did before: stop the process -- now, the signal let
     * through (it is blocked in its handler) -- and, continued, be attached
     * still (this handler set itself aside for good: a SIGTSTP interrupted
     * only the first time) */
    struct sigaction ours;
    sigset_t one;
    sigaction(sig, NULL, &ours);
    signal(sig, SIG_DFL);
    sigemptyset(&one);
    sigaddset(&one, sig);
    pthread_sigmask(SIG_UNBLOCK, &one, NULL);
    raise(sig);
    sigaction(sig, &ours, NULL); /* (the handler's mask comes back as it returns) */
  } else if (old->sa_handler == SIG_DFL && !default_ignores(sig)) {
    signal(sig, SIG_DFL); /* what the signal did before: end the process */
    raise(sig);
  } else if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
    old->sa_handler(sig);
  }
  /* (a default that ignores -- SIGWINCH, SIGCHLD: nothing more; the
   * default was put back and raised, and the handler was gone after the
   * first signal) */
  errno = saved;
}

/* Attaching is a check, then a change, of the process's handler: two
 * threads attaching at once both found heaplab's handler missing, and the
 * second saved the first's handler -- heaplab's own -- as the one to chain:
 * each signal then called it again until the stack ran out (SIGSEGV; the
 * Lua binding attaches around each long call, from any thread running a
 * state: 8 of 60 runs of two threads' checksums, the review of session 28).
 * So one attach at a time, and heaplab's handler is never the chained one. */
static pthread_mutex_t attach_lock = PTHREAD_MUTEX_INITIALIZER;

/* The record of the handler a (flags, mask, function), made if there is none
 * yet; NULL when out of memory.  Under attach_lock. */
static const struct chained_rec *chained_find(const struct sigaction *a) {
  for (const struct chained_rec *r = chained_recs; r; r = r->next)
    if (r->sa.sa_flags == a->sa_flags && !memcmp(&r->sa.sa_mask, &a->sa_mask, sizeof a->sa_mask) &&
        ((a->sa_flags & SA_SIGINFO) ? (void *)r->sa.sa_sigaction == (void *)a->sa_sigaction
                                    : (void *)r->sa.sa_handler == (void *)a->sa_handler))
      return r;
  struct chained_rec *r = hl__sys_malloc(sizeof *r);
  if (!r) return NULL;
  r->sa = *a;
  r->next = chained_recs;
  chained_recs = r;
  return r;
}

int hl_interrupt_attach(int signo) {
  if (signo <= 0 || signo > 64)
    return hl__fail(NULL, HL_EINVAL, "hl_interrupt_attach: %d is no signal number [1, 64]", signo);
  /* Attached already and still in place: nothing to do.  Replaced since (a
   * Python signal.signal(SIGINT, ...) and back, which the harness's and the
   * sweeps' Ctrl-C deferrals do: Ctrl-C no longer stopped a long fill after
   * any harness run -- the review, session 26): in front again, chaining the
   * handler there now. */
  pthread_mutex_lock(&attach_lock);
  /* zeroed: glibc's sigaction fills only the kernel's 8 bytes of sa_mask,
   * the rest of the 128-byte sigset_t kept the stack's garbage, and the
   * handler found matched no record -- a new one at each attach (it was a
   * rewrite of chained[] under a running handler: the CI of session 28) */
  struct sigaction now;
  memset(&now, 0, sizeof now);
  if (sigaction(signo, NULL, &now) != 0) {
    int e = errno;
    pthread_mutex_unlock(&attach_lock);
    return hl__fail(NULL, HL_ESYS, "hl_interrupt_attach: signal %d: sigaction: %s", signo,
                    hl__strerror(e));
  }
  /* ... and zeroing is not enough: glibc 2.36 copies the whole 128 bytes from
   * a kernel record of its own stack, past the kernel's 8 its stack's garbage,
   * which differs from one call path to the next -- still a new record at
   * most attaches: the Lua module's, once per long call, grew the list
   * without bound (and each attach searched it all; the pacing fixes,
   * session 30).  The mask is the signals in it, nothing more -- every byte
   * of it zeroed first: glibc's sigemptyset clears only the kernel's word
   * (its __NSIG_WORDS, 1), the other 15 of this local kept the stack's
   * garbage, and the memcmp of the masks failed again wherever that differed
   * (make coverage's -O0 build: 691 records for 4001 attaches; session 41). */
  sigset_t mask;
  memset(&mask, 0, sizeof mask);
  sigemptyset(&mask);
  for (int s = 1; s < NSIG; s++)
    if (sigismember(&now.sa_mask, s) == 1) sigaddset(&mask, s);
  now.sa_mask = mask;
  /* heaplab's function, whatever the flags read with it: never chained (a
   * torn read, above, gave on_signal with the host's flags -- chained, it
   * called itself for each signal until the stack ran out) */
  if ((void *)now.sa_sigaction == (void *)on_signal || (void *)now.sa_handler == (void *)on_signal) {
    pthread_mutex_unlock(&attach_lock);
    return HL_OK;
  }
  /* The handler is process-wide and this library's code: a program that
   * dlcloses the library afterwards took the signal in unmapped code
   * (SIGSEGV).  So it stays loaded (registry.c, hl__pin_code). */
  hl__pin_code();
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  /* the chained handler is in place before heaplab's can run; a record
   * equal to the handler found, made once and never written again (a
   * handler running still, on another thread, may be reading the one
   * published before) */
  const struct chained_rec *rec = chained_find(&now);
  if (!rec) {
    pthread_mutex_unlock(&attach_lock);
    return hl__fail(NULL, HL_ENOMEM,
                    "hl_interrupt_attach: signal %d: no memory for the handler to chain", signo);
  }
  atomic_store_explicit(&chained[signo], rec, memory_order_release);
  if (sigaction(signo, &sa, NULL) != 0) {
    int e = errno;
    pthread_mutex_unlock(&attach_lock);
    return hl__fail(NULL, HL_ESYS, "hl_interrupt_attach: signal %d: sigaction: %s", signo,
                    hl__strerror(e));
  }
  pthread_mutex_unlock(&attach_lock);
  return HL_OK;
}

/* A NULL heap is a failure outside any heap: its message is hl_heap_error(NULL)'s
 * (it said the thread's last such failure before, another call's). */
#define CHECK_HEAP(h)                                                          \
  do {                                                                         \
    if (!(h)) return hl__fail(NULL, HL_EINVAL, "%s: the heap is NULL", __func__); \
  } while (0)

/* Is a field of a fault spec a number?  A sign and a digit, as strtoll reads
 * it, from its first character: '+5' was taken for an errno name, and
 * strtoll, which skips blanks, read ' 5' as errno 5 (the release hunt,
 * session 25). */
static bool spec_number(const char *x) {
  return isdigit((unsigned char)x[x[0] == '+' || x[0] == '-']);
}

/* ---- fault schedules from the environment ----
 * HEAPLAB_FAULT_<SITE>=mode[:N][:ERRNO], e.g. HEAPLAB_FAULT_RESTORE=always:EIO,
 * HEAPLAB_FAULT_RELEASE=first:2000:ENOMEM.  The errno defaults to ENOMEM.
 * Anything else -- a site that does not exist, a number with junk after it,
 * a fourth field -- is an error naming the variable. */
static int fault_from_env(hl_heap *h, const char *var, const char *site, const char *v,
                          char *err, size_t errlen) {
  char buf[128];
  if (strlen(v) >= sizeof buf) {
    hl__fmt_err(err, errlen, "environment %s: the value is too long", var);
    return HL_EVALUE;
  }
  snprintf(buf, sizeof buf, "%s", v);
  char *fields[4] = {0};
  int nf = 0;
  for (char *p = buf, *f = buf;; p++) {
    if (*p == ':' || !*p) {
      bool last = !*p;
      *p = 0;
      if (nf == 3) {
        hl__fmt_err(err, errlen, "environment %s=%s: expected mode[:N][:ERRNO], got %d fields",
                    var, v, nf + 1);
        return HL_EVALUE;
      }
      fields[nf++] = f;
      f = p + 1;
      if (last) break;
    }
  }
  int64_t arg = 0;
  const char *errname = NULL, *number = NULL;
  /* the optional number, then the optional errno, in either order */
  for (int i = 1; i < nf; i++) {
    const char *x = fields[i];
    bool numeric = spec_number(x);
    if (numeric && number != NULL && errname == NULL) {
      errname = x; /* mode:N:ERRNO with ERRNO a number: 'first:5:11' */
      continue;
    }
    if (numeric ? number != NULL : errname != NULL) {
      hl__fmt_err(err, errlen, "environment %s=%s: expected mode[:N][:ERRNO], got two %s", var, v,
                  numeric ? "numbers" : "errno names");
      return HL_EVALUE;
    }
    if (numeric) {
      number = x;
      char *end = NULL;
      errno = 0;
      long long n = strtoll(x, &end, 10);
      if (*end) {
        hl__fmt_err(err, errlen, "environment %s=%s: N '%s' is not a decimal number", var, v, x);
        return HL_EVALUE;
      }
      /* a number too long for N is one: out of range, not "not a decimal
       * number" (the C API hunt, session 33) -- the range its mode takes
       * (hl_inject's: every's N from 1, first's and sticky's from 0), not
       * int64_t's, which every:-99999999999999999999 was told it was in
       * (session 43); an unknown mode is said as such (hl_inject_named) */
      if (errno) {
        int m = hl_fault_mode_index(fields[0]);
        if (m >= 0) {
          hl__fmt_err(err, errlen,
                      "environment %s=%s: N '%s' is out of range [%" PRId64 ", %" PRId64 "]", var,
                      v, x, hl_fault_mode_min_arg(m), INT64_MAX);
          return HL_EVALUE;
        }
        n = 0;
      }
      arg = n;
    } else {
      errname = x;
    }
  }
  int rc = hl_inject_named(h, site, fields[0], arg, errname);
  if (!rc) {
    int at = hl_fault_site_index(site);
    if (at >= 0 && hl_fault_mode_index(fields[0]) != HL_FAULT_off) h->env_faults |= 1u << at;
    return HL_OK;
  }
  hl__fmt_err(err, errlen, "environment %s=%s: %s", var, v, hl_heap_error(h));
  return HL_EVALUE; /* a bad value of a variable, whatever inject said */
}

/* A failure an environment's fault caused blamed the system -- "the address
 * space is exhausted -- RLIMIT_AS, or too many heaps open" for
 * HEAPLAB_FAULT_RESERVE=always, which an embedder's user may have set for
 * another program (the embedding hunt, session 28): the messages name the
 * variable. */
bool hl__injected_faults(const hl_heap *h, int site, char *buf, size_t len) {
  size_t n = 0;
  if (len) buf[0] = 0;
  for (int i = 0; i < HL_SITE_COUNT; i++) {
    if (!(h->env_faults & (1u << i))) continue;
    if (site >= 0 && i != site && i != HL_SITE_any) continue;
    uint64_t fired = atomic_load(&h->prim.faults[i].fired);
    if (!fired) continue;
    char var[64];
    snprintf(var, sizeof var, "HEAPLAB_FAULT_%s", hl_fault_site_name(i));
    for (char *p = var; *p; p++) *p = (char)toupper((unsigned char)*p);
    const char *v = getenv(var);
    if (n < len)
      n += (size_t)snprintf(buf + n, len - n, "%s%s=%s fired %" PRIu64 " time%s", n ? ", " : "",
                            var, v ? v : "?", fired, fired == 1 ? "" : "s");
  }
  if (!n) return false;
  if (n < len)
    snprintf(buf + n, len - n, " (a fault injected from the environment, not the system's)");
  return true;
}

static int faults_from_env(hl_heap *h, char *err, size_t errlen) {
  extern char **environ;
  static const char prefix[] = "HEAPLAB_FAULT_";
  for (char **e = environ; e && *e; e++) {
    if (strncmp(*e, prefix, sizeof prefix - 1)) continue;
    const char *eq = strchr(*e, '=');
    if (!eq) continue;
    char var[96], site[64];
    size_t vn = (size_t)(eq - *e), sn = vn - (sizeof prefix - 1);
    if (vn >= sizeof var || sn >= sizeof site) {
      hl__fmt_err(err, errlen, "environment %.*s...: no fault site has so long a name",
                  (int)(sizeof var - 8), *e);
      return HL_EVALUE;
    }
    memcpy(var, *e, vn);
    var[vn] = 0;
    for (size_t i = 0; i < sn; i++) site[i] = (char)tolower((unsigned char)var[sizeof prefix - 1 + i]);
    site[sn] = 0;
    if (!eq[1]) continue; /* set but empty: nothing armed */
    int rc = fault_from_env(h, var, site, eq + 1, err, errlen);
    if (rc) return rc;
  }
  return HL_OK;
}

/* ---- creating and closing ---- */

static void heap_destroy(hl_heap *h) {
  hl__registry_remove(h);
  hl__manual_destroy(h);
  hl__large_destroy_all(h);
  hl__handles_destroy(h);
  hl__identities_free(h);
  hl__pages_destroy(h);
  hl__prim_ctx_destroy(&h->prim);
  hl__sys_free(h->size_to_cls);
  hl__sys_free(h->aword_of);
  hl__sys_free(h->events);
  hl__mark_stack_release(h);
  hl__release_scratch_free(h);
  pthread_mutex_destroy(&h->lock);
  pthread_mutex_destroy(&h->errlock);
  pthread_mutex_destroy(&h->req_lock);
  pthread_cond_destroy(&h->cycle_done);
  pthread_cond_destroy(&h->collector_cv);
  hl__sys_free(h);
}

static int heap_new(const hl_options *opts, hl_heap **out, char *err, size_t errlen) {
  if (!out) {
    hl__fmt_err(err, errlen, "hl_heap_new: NULL output pointer");
    return HL_EINVAL;
  }
  *out = NULL;
  hl_options o;
  if (opts) {
    o = *opts;
  } else {
    hl_options_defaults(&o);
    int rc = hl_options_from_env(&o, err, errlen);
    if (rc) return rc;
  }
  int rc = hl_options_validate(&o, err, errlen);
  if (rc) return rc;
  hl_heap *h = hl__sys_calloc(1, sizeof *h);
  if (!h) {
    hl__fmt_err(err, errlen, "hl_heap_new: out of memory");
    return HL_ENOMEM;
  }
  h->opt = o;
  h->serial = atomic_fetch_add(&heap_serial, 1) + 1;
  h->tag = (uint16_t)(h->serial & 0xffff) ? (uint16_t)(h->serial & 0xffff) : 1;
  pthread_mutex_init(&h->lock, NULL); /* (hl__lock_raw spins before it sleeps) */
  pthread_mutex_init(&h->errlock, NULL);
  pthread_mutex_init(&h->req_lock, NULL);
  pthread_cond_init(&h->cycle_done, NULL);
  pthread_cond_init(&h->collector_cv, NULL);
  h->handles_free = HL_NIL;
  hl__prim_ctx_init(&h->prim, o.syscall_retry_max, o.syscall_retry_backoff_us);
  h->ev_cap = (uint64_t)o.events_capacity;
  h->events = hl__sys_calloc(h->ev_cap, sizeof(hl_event));
  if (!h->events) {
    hl__fmt_err(err, errlen, "hl_heap_new: out of memory for %" PRIu64 " event%s", h->ev_cap,
                hl__s(h->ev_cap));
    rc = HL_ENOMEM;
    goto fail;
  }
  if ((rc = faults_from_env(h, err, errlen))) goto fail;
  hl__classes_init(h);
  if (!h->size_to_cls) {
    hl__fmt_err(err, errlen, "hl_heap_new: out of memory");
    rc = HL_ENOMEM;
    goto fail;
  }
  if ((rc = hl__pages_init(h, err, errlen))) goto fail;
  /* The effective options (hl_heap_options, h.options, h:options()) say
   * what the heap runs with, not only what was asked: the reservation it
   * got (rounded down to whole pages -- 2 MiB chunks with thp -- and halved
   * while the kernel refused it, or cut to half the room under RLIMIT_AS),
   * and the nursery's lower bound, at most young_bytes (gc/cycle.c).
   * (A heap made with reserve_bytes=64g under an 8 GiB RLIMIT_AS reported
   * 64 GiB while it had reserved 4 GiB: the option hunt, session 31.) */
  h->opt.reserve_bytes = (int64_t)h->reserved;
  if (h->opt.young_min_bytes > h->opt.young_bytes) h->opt.young_min_bytes = h->opt.young_bytes;
  if ((rc = hl__registry_add(h))) {
    hl__fmt_err(err, errlen, "hl_heap_new: out of memory, or 65,535 heaps live already (each "
                "needs a handle tag of its own)");
    goto fail;
  }
  h->trigger = (uint64_t)o.gc_trigger_bytes;
  h->young = (uint64_t)o.young_bytes;
  h->growth_free = UINT64_MAX;
  /* mark_threads=0: the CPUs this process may run on, at most 8 */
  /* (a manual heap never marks: it neither counts the CPUs -- sysconf and
   * sched_getaffinity, libc code and tables the preloaded library would
   * otherwise fault in at its set-up -- nor registers the helpers' fork
   * handler, which hl__markers_run registers before any helper starts) */
  uint64_t mt = o.mark_threads ? (uint64_t)o.mark_threads
                : o.mode == HL_MODE_COLLECTED ? hl__prim_os_cpus() : 1;
  h->mark_threads = (uint32_t)(mt < 1 ? 1 : mt > HL_MARK_THREADS_MAX ? HL_MARK_THREADS_MAX : mt);
  if (o.mode == HL_MODE_COLLECTED) hl__markers_init();
  /* the helpers' stacks and packets, mapped now rather than in a mark (a
   * mark at vm.max_map_count must map nothing: gc/mark.c); without them
   * the marks run alone (a manual heap never marks) */
  if (o.mode == HL_MODE_COLLECTED && h->mark_threads > 1) hl__mark_arena_reserve(true);
  /* and the marking thread's own stack (gc/mark.c), for the same reason */
  if (o.mode == HL_MODE_COLLECTED && (rc = hl__mark_stack_reserve(h))) {
    hl__fmt_err(err, errlen, "hl_heap_new: cannot reserve the mark stack (out of address space)");
    goto fail;
  }
  hl__alloc_limit_update(h);
  /* manual mode: a trim once the free pool holds this many pages beyond
   * warm_pages -- a quarter of them, and at least 1 MiB's worth, counted in
   * bytes (16 pages of the default 64 KiB): 16 pages were 16 MiB more kept
   * resident with page_size=1m (page_size is at most 1 MiB: one page) */
  uint64_t trim_batch = ((uint64_t)1 << 20) / (uint64_t)o.page_size;
  if (trim_batch == 0) trim_batch = 1;
  h->manual_trim_threshold =
      (uint64_t)o.warm_pages / 4 > trim_batch ? (uint64_t)o.warm_pages / 4 : trim_batch;
  if (o.mode == HL_MODE_COLLECTED && o.collector == HL_COLLECTOR_BACKGROUND &&
      (rc = hl__collector_start(h))) {
    hl__fmt_err(err, errlen, "hl_heap_new: cannot start the collector thread (%s)", hl__strerror(rc));
    rc = HL_ESYS;
    goto fail;
  }
  *out = h;
  return HL_OK;
fail:
  {
    char inj[200];
    size_t len = err ? strlen(err) : 0;
    if (err && len + 3 < errlen && hl__injected_faults(h, -1, inj, sizeof inj) &&
        !strstr(err, "HEAPLAB_FAULT_"))
      snprintf(err + len, errlen - len, " -- %s", inj);
  }
  heap_destroy(h);
  return rc;
}

/* The message also is the thread's last failure outside any heap, as
 * heaplab.h's conventions say: a caller passing err NULL read "" from
 * hl_heap_error(NULL). */
int hl_heap_new(const hl_options *opts, hl_heap **out, char *err, size_t errlen) {
  char msg[1024] = ""; /* (the caller's buffer may be longer than the thread's) */
  bool mine = !err || errlen < sizeof msg;
  int rc = heap_new(opts, out, mine ? msg : err, mine ? sizeof msg : errlen);
  if (rc != HL_OK) {
    char *m = mine ? msg : err;
#ifdef __linux__
    /* at vm.max_map_count every mmap says ENOMEM -- the reservation's, a
     * side table's, the system allocator's -- and the message named causes
     * that were not it (RLIMIT_AS, too many heaps, a smaller reserve_bytes:
     * the release hunt, session 25): the limit is named too */
    uint64_t maps, limit;
    size_t len = strlen(m), cap = mine ? sizeof msg : errlen;
    if (rc == HL_ENOMEM && hl__prim_os_at_map_limit(&maps, &limit) && len + 1 < cap)
      snprintf(m + len, cap - len, " -- the process has %" PRIu64 " mappings, at "
               "vm.max_map_count (%" PRIu64 "): unmap some first", maps, limit);
#endif
    hl__fmt_err(mine ? err : NULL, errlen, "%s", m); /* (the thread's, and err's if not m) */
  }
  return rc;
}

void hl_heap_free(hl_heap *h) {
  if (!h) return;
  /* this thread's hold first: a background collector waiting for the lock
   * would never see its stop, and the join below never returned */
  if (hl__held == h) {
    hl__held = HL_NOT_HELD;
    hl__held_depth = 0;
    hl__unlock_raw(h);
  }
  hl__collector_stop(h);
  hl__lock_raw(h);
  while (h->in_cycle) hl__wait(h, &h->cycle_done);
  h->closing = true;
  hl__unlock_raw(h);
  heap_destroy(h);
}

int hl_heap_options(const hl_heap *h, hl_options *out) {
  if (out) memset(out, 0, sizeof *out);
  CHECK_HEAP(h);
  if (!out) return hl__fail(h, HL_EINVAL, "hl_heap_options: NULL output");
  *out = h->opt;
  return HL_OK;
}

int hl_heap_set_wait_hook(hl_heap *h, hl_wait_hook fn, void *arg) {
  CHECK_HEAP(h);
  bool locked = hl__lock(h);
  h->wait_hook = fn;
  h->wait_hook_arg = fn ? arg : NULL;
  hl__unlock(h, locked);
  return HL_OK;
}

/* ---- handles ---- */

/* The one allocation of the handle API: the fast path, else the sequence. */
static inline void *obj_new(hl_heap *h, uint64_t size, uint64_t refs, const char *what) {
  void *obj = hl__obj_alloc_fast(h, size, refs);
  return hl_likely(obj != NULL) ? obj : hl__obj_alloc(h, size, refs, 0, what);
}

int hl_alloc(hl_heap *h, uint64_t size, uint64_t refs, hl_ref *out) {
  if (out) *out = 0;
  CHECK_HEAP(h);
  if (!out) return hl__fail(h, HL_EINVAL, "alloc: NULL output");
  int rc = hl__check_alloc_args(h, "alloc", size, refs);
  if (rc) return rc;
  bool locked = hl__lock(h);
  void *obj = obj_new(h, size, refs, "alloc");
  rc = obj ? hl__handle_new(h, obj, out) : HL_ENOMEM;
  hl__unlock(h, locked);
  if (rc) *out = 0;
  return rc;
}

int hl_ref_release(hl_heap *h, hl_ref ref) {
  CHECK_HEAP(h);
  bool locked = hl__lock(h);
  int rc = hl__handle_release(h, ref);
  hl__unlock(h, locked);
  return rc;
}

/* The object of a live handle, its header checked: a header that does not
 * fit its slot or block was overwritten (an overflow of the block before
 * it), and every call below would read or write past the object by what it
 * says (a 40-byte object read as 1,094,795,585 slots).  Two loads and a
 * compare (hl__hdr_fits): measured in the handle calls' loop, within the
 * noise (docs/clients.md).  Every handle call that reads its object goes
 * through it -- hl_ref_dup and hl_ref_identity too, which read it with
 * hl__handle_get alone: a dup of a damaged object gave a second root to it
 * and identity named it (a Python hash, a Lua o:id()), where info and ==
 * said HL_ECHECK -- and hl_ref_checksum and hl_thin (workload/), which
 * walked the refs a damaged root's header said (a crash).
 * Lock held. */
int hl__handle_obj(hl_heap *h, hl_ref ref, void **obj) {
  int rc = hl__handle_get(h, ref, obj);
  if (rc || hl_likely(hl__hdr_fits(h, *obj))) return rc;
  char msg[200];
  hl__hdr_describe(h, *obj, msg, sizeof msg);
  *obj = NULL;
  return hl__fail(h, HL_ECHECK, "handle 0x%llx: %s", (unsigned long long)ref, msg);
}

int hl_ref_dup(hl_heap *h, hl_ref ref, hl_ref *out) {
  if (out) *out = 0;
  CHECK_HEAP(h);
  if (!out) return hl__fail(h, HL_EINVAL, "dup: NULL output");
  bool locked = hl__lock(h);
  void *obj;
  int rc = hl__handle_obj(h, ref, &obj);
  if (!rc) rc = hl__handle_new(h, obj, out);
  hl__unlock(h, locked);
  if (rc) *out = 0;
  return rc;
}

static void info_of(void *obj, hl_object_info *out) {
  hl_objhdr *hd = obj;
  out->refs = hd->refs;
  out->size = hl__obj_size(obj);
  out->address = (uint64_t)(uintptr_t)hl__obj_payload(obj);
  out->object = (uint64_t)(uintptr_t)obj;
  out->large = hd->size == HL_SIZE_LARGE;
  out->pad = 0;
}

int hl_ref_info(hl_heap *h, hl_ref ref, hl_object_info *out) {
  if (out) memset(out, 0, sizeof *out);
  CHECK_HEAP(h);
  if (!out) return hl__fail(h, HL_EINVAL, "info: NULL output");
  bool locked = hl__lock(h);
  void *obj;
  int rc = hl__handle_obj(h, ref, &obj);
  if (!rc) info_of(obj, out);
  hl__unlock(h, locked);
  return rc;
}

int hl_ref_identity(hl_heap *h, hl_ref ref, uint64_t *out) {
  if (out) *out = 0;
  CHECK_HEAP(h);
  if (!out) return hl__fail(h, HL_EINVAL, "identity: NULL output");
  bool locked = hl__lock(h);
  void *obj;
  int rc = hl__handle_obj(h, ref, &obj);
  if (!rc) rc = hl__identity(h, obj, out);
  hl__unlock(h, locked);
  if (rc) *out = 0;
  return rc;
}

int hl_ref_same(hl_heap *h, hl_ref a, hl_ref b, int *out) {
  if (out) *out = 0;
  CHECK_HEAP(h);
  if (!out) return hl__fail(h, HL_EINVAL, "same: NULL output");
  /* both handles' objects under one hold of the lock: a cycle between two
   * reads (another thread's, the background collector's) could move the
   * object, and two handles to it compared unequal (the moving collector
   * hunt, session 30) */
  bool locked = hl__lock(h);
  /* hl__handle_obj (lock held, as here): a handle whose object's header was
   * overwritten is HL_ECHECK, as hl_ref_info says (equality went through it
   * before hl_ref_same, and said so) */
  void *x = NULL, *y = NULL;
  int rc = hl__handle_obj(h, a, &x);
  if (!rc) rc = hl__handle_obj(h, b, &y);
  if (!rc) *out = x == y;
  hl__unlock(h, locked);
  return rc;
}

static int slot_check(hl_heap *h, void *obj, uint64_t slot, const char *what) {
  uint32_t refs = ((hl_objhdr *)obj)->refs;
  if (slot >= refs)
    return hl__fail(h, HL_ERANGE, "%s: slot %" PRIu64 " out of range for an object with %" PRIu32
                    " slot%s", what, slot, refs, hl__s(refs));
  return HL_OK;
}

int hl_ref_get(hl_heap *h, hl_ref ref, uint64_t slot, hl_ref *out) {
  if (out) *out = 0;
  CHECK_HEAP(h);
  if (!out) return hl__fail(h, HL_EINVAL, "get: NULL output");
  bool locked = hl__lock(h);
  void *obj;
  int rc = hl__handle_obj(h, ref, &obj);
  if (!rc) rc = slot_check(h, obj, slot, "get");
  if (!rc) {
    void *v = hl__slots(obj)[slot];
    /* a slot stored with hl_obj_set may hold any word: a handle is made to
     * an object only (one made to a payload address read its bytes as a
     * header, and hl_ref_read faulted) */
    if (v && hl__resolve(h, v, false) != v)
      rc = hl__fail(h, HL_ECHECK, "get: slot %" PRIu64 " of object %p holds %p, not an object "
                    "(a payload address? hl_obj_payload and Ref.address are payloads)", slot,
                    obj, v);
    else if (v)
      rc = hl__handle_new(h, v, out);
  }
  hl__unlock(h, locked);
  if (rc) *out = 0;
  return rc;
}

int hl_ref_set(hl_heap *h, hl_ref ref, uint64_t slot, hl_ref value) {
  CHECK_HEAP(h);
  bool locked = hl__lock(h);
  void *obj, *v = NULL;
  int rc = hl__handle_obj(h, ref, &obj);
  if (!rc) rc = slot_check(h, obj, slot, "set");
  if (!rc && value) rc = hl__handle_obj(h, value, &v);
  if (!rc) hl__store(h, obj, slot, v);
  hl__unlock(h, locked);
  return rc;
}

static int payload_check(hl_heap *h, void *obj, uint64_t off, uint64_t len, const char *what) {
  uint64_t size = hl__obj_size(obj);
  if (off > size || len > size - off)   /* (off + len may pass 2^64: said as a count) */
    return hl__fail(h, HL_ERANGE, "%s: %" PRIu64 " byte%s at offset %" PRIu64 " outside a %" PRIu64
                    "-byte payload", what, len, hl__s(len), off, size);
  return HL_OK;
}

int hl_ref_write(hl_heap *h, hl_ref ref, uint64_t off, const void *src, uint64_t len) {
  CHECK_HEAP(h);
  if (!src && len) return hl__fail(h, HL_EINVAL, "write: NULL source");
  bool locked = hl__lock(h);
  void *obj;
  int rc = hl__handle_obj(h, ref, &obj);
  if (!rc) rc = payload_check(h, obj, off, len, "write");
  /* (memmove: src may be the payload itself -- bytes moved within the
   * object; memcpy's overlap was undefined, an ASan report) */
  if (!rc && len) memmove(hl__obj_payload(obj) + off, src, len);
  hl__unlock(h, locked);
  return rc;
}

int hl_ref_read(hl_heap *h, hl_ref ref, uint64_t off, void *dst, uint64_t len) {
  CHECK_HEAP(h);
  if (!dst && len) return hl__fail(h, HL_EINVAL, "read: NULL destination");
  bool locked = hl__lock(h);
  void *obj;
  int rc = hl__handle_obj(h, ref, &obj);
  if (!rc) rc = payload_check(h, obj, off, len, "read");
  if (!rc && len) memmove(dst, hl__obj_payload(obj) + off, len); /* (dst may be the payload) */
  hl__unlock(h, locked);
  return rc;
}

int hl_thin(hl_heap *h, hl_ref ref, uint64_t every, hl_ref *out) {
  if (out) *out = 0;
  CHECK_HEAP(h);
  if (!out) return hl__fail(h, HL_EINVAL, "thin: NULL output");
  if (h->opt.mode != HL_MODE_COLLECTED)
    return hl__fail(h, HL_EMODE, "thin: needs a collected heap (this one is manual)");
  if (every < 1 || every > HL_THIN_MAX_EVERY)
    return hl__fail(h, HL_EINVAL, "thin: every %" PRIu64 " out of range [1, %d]", every,
                    HL_THIN_MAX_EVERY);
  bool locked = hl__lock(h);
  hl_long_call was = hl__long_call_begin();
  int rc = hl__thin(h, ref, every, out);
  hl__long_call_end(was);
  hl__unlock(h, locked);
  if (rc) *out = 0;
  return rc;
}

int hl_ref_checksum(hl_heap *h, hl_ref ref, uint64_t *sum, uint64_t *objects) {
  if (sum) *sum = 0;
  if (objects) *objects = 0;
  CHECK_HEAP(h);
  if (!sum) return hl__fail(h, HL_EINVAL, "checksum: NULL output");
  bool locked = hl__lock(h);
  hl_long_call was = hl__long_call_begin();
  int rc = hl__checksum(h, ref, sum, objects);
  hl__long_call_end(was);
  hl__unlock(h, locked);
  return rc;
}

/* ---- workloads ---- */

/* A fill touches every byte it allocates: headers, slots, payload, the index.
 * More than the machine has available would end in the OOM killer, and more
 * small bytes than the reservation in ENOMEM half-way: both are refused up
 * front, with what the fill would touch.  The garbage of a stride is
 * collected as the fill goes, so it counts up to two triggers' worth. */
static int fill_fits(hl_heap *h, uint64_t count, uint64_t size, uint64_t refs, uint64_t stride) {
  uint64_t bytes = hl__obj_bytes(size, refs);
  bool large = bytes > h->small_max;
  /* a slot of its class, or the block with its record and malloc's header */
  uint64_t block = large ? bytes + sizeof(hl_large) + 16 : h->cls_size[hl__class_of(h, bytes)];
  uint64_t kept = (count + stride - 1) / stride;
  double index = (double)kept * 8 * 1.25 + 4096; /* a slot per object, nodes' headers */
  double garbage = (double)(count - kept) * (double)block;
  double cap = 2.0 * (double)hl__trigger_in_force(h);
  double touched = (double)kept * (double)block + index + (garbage < cap ? garbage : cap);
  uint64_t avail = hl__prim_os_available_bytes();
  if (touched > (double)avail)
    return hl__fail(h, HL_EINVAL,
                    "fill: %" PRIu64 " object%s of %" PRIu64 " byte%s would touch about %.0f "
                    "bytes (%" PRIu64 "-byte blocks, the index), more than this machine's memory "
                    "available now (%" PRIu64 " bytes)", count, hl__s(count), size, hl__s(size),
                    touched, block, avail);
  double on_pages = large ? index : touched;
  if (on_pages > (double)h->reserved)
    return hl__fail(h, HL_ENOMEM,
                    "fill: %" PRIu64 " object%s of %" PRIu64 " byte%s need%s about %.0f bytes of "
                    "pages, more than the reservation of %" PRIu64 " bytes (reserve_bytes)",
                    count, hl__s(count), size, hl__s(size), count == 1 ? "s" : "", on_pages,
                    h->reserved);
  return HL_OK;
}

int hl_fill(hl_heap *h, uint64_t total, uint64_t size, uint64_t refs, hl_ref *out) {
  return hl_fill_stride(h, total, size, refs, 1, out);
}

int hl_fill_stride(hl_heap *h, uint64_t total, uint64_t size, uint64_t refs, uint64_t stride,
                   hl_ref *out) {
  if (out) *out = 0;
  CHECK_HEAP(h);
  if (!out) return hl__fail(h, HL_EINVAL, "fill: NULL output");
  if (stride < 1 || stride > HL_FILL_MAX_STRIDE)
    return hl__fail(h, HL_EINVAL, "fill: stride %" PRIu64 " out of range [1, %d]", stride,
                    HL_FILL_MAX_STRIDE);
  int rc = hl__check_alloc_args(h, "fill", size, refs);
  if (rc) return rc;
  if (total > HL_MAX_SIZE)
    return hl__fail(h, HL_EINVAL, "fill: total_bytes %" PRIu64 " exceeds the maximum %" PRIu64,
                    total, HL_MAX_SIZE);
  uint64_t each = size ? size : 1;
  uint64_t count = (total + each - 1) / each;
  if (count > ((uint64_t)1 << 31))
    return hl__fail(h, HL_EINVAL, "fill: %" PRIu64 " objects is more than 2^31", count);
  bool locked = hl__lock(h);
  hl_long_call was = hl__long_call_begin();
  rc = fill_fits(h, count, size, refs, stride);
  if (!rc) rc = hl__fill(h, total, size, refs, stride, out);
  hl__long_call_end(was);
  hl__unlock(h, locked);
  if (rc) *out = 0;
  return rc;
}

int hl_churn(hl_heap *h, double duration_s, uint64_t size, uint64_t live_bytes, double rate,
             hl_churn_result *out) {
  if (out) memset(out, 0, sizeof *out);
  CHECK_HEAP(h);
  if (!out) return hl__fail(h, HL_EINVAL, "churn: NULL output");
  if (!(duration_s > 0 && duration_s <= 3600))
    return hl__fail(h, HL_EINVAL, "churn: duration_s %g out of range (0, 3600]",
                    hl__g(duration_s));
  if (!(rate >= 0 && rate < 1e15))
    return hl__fail(h, HL_EINVAL, "churn: rate_bytes_per_s %g out of range [0, 1e15)",
                    hl__g(rate));
  int rc = hl__check_alloc_args(h, "churn", size, 0);
  if (rc) return rc;
  if (size == 0) return hl__fail(h, HL_EINVAL, "churn: size must be at least 1 byte");
  if (live_bytes < size)
    return hl__fail(h, HL_EINVAL, "churn: live_bytes %" PRIu64 " is smaller than one object of %"
                    PRIu64, live_bytes, size);
  uint64_t ring_n = live_bytes / size;
  if (ring_n > HL_MAX_REFS)
    return hl__fail(h, HL_EINVAL, "churn: a ring of %" PRIu64 " objects exceeds %" PRIu64,
                    ring_n, (uint64_t)HL_MAX_REFS);
  hl_long_call was = hl__long_call_begin();
  rc = hl__churn(h, duration_s, size, live_bytes, rate, out);
  hl__long_call_end(was);
  if (rc) memset(out, 0, sizeof *out); /* (an interrupted churn's figures too: the one rule) */
  return rc;
}

/* ---- collections, probes ---- */

int hl_collect(hl_heap *h, int64_t cycles, int major) {
  CHECK_HEAP(h);
  if (h->opt.mode != HL_MODE_COLLECTED)
    return hl__fail(h, HL_EMODE, "collect: a manual heap has no collector (use hl_trim)");
  if (cycles < 1 || cycles > HL_COLLECT_MAX_CYCLES)
    return hl__fail(h, HL_EINVAL, "collect: cycles %" PRId64 " out of range [1, %d]", cycles,
                    HL_COLLECT_MAX_CYCLES);
  if (major < -1 || major > 1)
    return hl__fail(h, HL_EINVAL, "collect: major %d is not -1 (policy), 0 or 1", major);
  bool locked = hl__lock(h);
  int rc = HL_OK;
  hl_long_call was = hl__long_call_begin();
  uint64_t mark = hl__call_mark();
  for (int64_t i = 0; i < cycles && !rc; i++) {
    if (i && hl__interrupted(mark)) {
      rc = hl__fail(h, HL_EINTR, "collect: interrupted after %" PRId64 " of %" PRId64 " cycles",
                    i, cycles);
      break;
    }
    rc = hl__cycle(h, major, REASON_EXPLICIT);
  }
  hl__long_call_end(was);
  hl__unlock(h, locked);
  return rc;
}

int hl_stats_get(hl_heap *h, hl_stats *out) {
  if (out) memset(out, 0, sizeof *out);
  CHECK_HEAP(h);
  if (!out) return hl__fail(h, HL_EINVAL, "stats: NULL output");
  bool locked = hl__lock(h);
  hl__stats_fill(h, out);
  hl__unlock(h, locked);
  return HL_OK;
}

/* Copy up to cap events from the ring's oldest; *first (if asked) is the
 * number of buf[0]. */
static int events_copy(hl_heap *h, hl_event *buf, size_t cap, size_t *count, int clear,
                       uint64_t *first, const char *fn) {
  if (count) *count = 0;
  if (first) *first = 0;
  CHECK_HEAP(h);
  if (!count) return hl__fail(h, HL_EINVAL, "%s: NULL count", fn);
  if (!buf && cap)
    return hl__fail(h, HL_EINVAL, "%s: NULL buffer of %zu event%s", fn, cap, hl__s(cap));
  bool locked = hl__lock(h);
  size_t n = h->ev_count < cap ? h->ev_count : cap;
  for (size_t i = 0; i < n; i++) buf[i] = h->events[(h->ev_head + i) % h->ev_cap];
  if (first) *first = h->ev_first;
  if (clear) {
    h->ev_head = (h->ev_head + n) % h->ev_cap;
    h->ev_count -= n;
    h->ev_first += n;
    h->ev_taken = h->ev_first;
  }
  *count = n;
  hl__unlock(h, locked);
  return HL_OK;
}

int hl_events_read(hl_heap *h, hl_event *buf, size_t cap, size_t *count, int clear) {
  return events_copy(h, buf, cap, count, clear, NULL, "hl_events_read");
}

int hl_events_peek(hl_heap *h, hl_event *buf, size_t cap, size_t *count, uint64_t *first) {
  if (count) *count = 0;
  if (!first) return hl__fail(h, HL_EINVAL, "hl_events_peek: NULL first");
  return events_copy(h, buf, cap, count, 0, first, "hl_events_peek");
}

int hl_events_consume(hl_heap *h, uint64_t upto, uint64_t *kept_from) {
  if (kept_from) *kept_from = 0;
  CHECK_HEAP(h);
  bool locked = hl__lock(h);
  uint64_t next = h->ev_first + h->ev_count; /* the number the next event gets */
  if (upto > next) {
    hl__unlock(h, locked);
    return hl__fail(h, HL_EINVAL,
                    "hl_events_consume: upto %" PRIu64 " is past the events recorded (numbered "
                    "below %" PRIu64 "): pass first + count of a peek",
                    upto, next);
  }
  if (kept_from) *kept_from = h->ev_taken;
  if (upto > h->ev_first) {
    uint64_t n = upto - h->ev_first;
    if (n > h->ev_count) n = h->ev_count;
    h->ev_head = (h->ev_head + n) % h->ev_cap;
    h->ev_count -= n;
    h->ev_first += n;
  }
  if (upto > h->ev_taken) h->ev_taken = upto;
  hl__unlock(h, locked);
  return HL_OK;
}

int hl_heap_range(hl_heap *h, uint64_t *base, uint64_t *bytes) {
  if (base) *base = 0;
  if (bytes) *bytes = 0;
  CHECK_HEAP(h);
  if (base) *base = (uint64_t)(uintptr_t)h->base;
  if (bytes) *bytes = h->reserved;
  return HL_OK;
}

int hl_resident_bytes(hl_heap *h, uint64_t *out) {
  if (out) *out = 0;
  CHECK_HEAP(h);
  if (!out) return hl__fail(h, HL_EINVAL, "resident_bytes: NULL output");
  bool locked = hl__lock(h);
  uint64_t len = (uint64_t)h->high_water << h->page_shift;
  /* thp: a huge page backs a chunk whole, so the uncarved rest of the last
   * carved chunk may be resident too (up to 2 MiB less a page: a 1 MiB fill
   * showed 1.3 MiB here for 2 MiB of AnonHugePages), and so may the chunks
   * a fill's prefault helper has faulted in ahead of it: the range counted
   * runs to the end of both; the count itself is the kernel's (a chunk
   * split by a partial release counts only its charged subpages) */
  if (h->chunk) {
    len = (len + PRIM_HUGE_BYTES - 1) / PRIM_HUGE_BYTES * PRIM_HUGE_BYTES;
    uint64_t ahead = hl__prefault_reach(h);
    if (ahead > len) len = ahead;
    if (len > h->reserved) len = h->reserved;
  }
  hl__unlock(h, locked);
  /* (outside the lock: PAGEMAP_SCAN of a dense 128 MiB takes 0.15-0.35 ms) */
  int e = len ? hl__prim_os_resident(h->base, len, out) : 0;
  if (!len || e) *out = 0;
  if (e) return hl__fail(h, HL_ESYS, "resident_bytes: cannot count the resident pages (%s)",
                         hl__strerror(e));
  return HL_OK;
}

int hl_vma_count(hl_heap *h, uint64_t *out) {
  if (out) *out = 0;
  CHECK_HEAP(h);
  if (!out) return hl__fail(h, HL_EINVAL, "vma_count: NULL output");
  int e = hl__prim_os_vma_count((uintptr_t)h->base, (uintptr_t)h->base + h->reserved, out);
  if (e) *out = 0;
  if (e) return hl__fail(h, HL_ESYS, "vma_count: cannot read the memory map (%s)", hl__strerror(e));
  return HL_OK;
}

int hl_heap_check(hl_heap *h) {
  CHECK_HEAP(h);
  bool locked = hl__lock(h);
  char msg[256];
  int rc = hl__check_locked(h, msg, sizeof msg);
  if (rc == HL_OK && h->quarantine) rc = hl__manual_quarantine_check(h, msg, sizeof msg);
  hl__unlock(h, locked);
  if (rc) return hl__fail(h, rc, "check: %s", msg);
  return HL_OK;
}

int hl_trim(hl_heap *h) {
  CHECK_HEAP(h);
  bool locked = hl__lock(h);
  hl__trim_now(h);
  hl__unlock(h, locked);
  return HL_OK;
}

int hl_memory_pressure(hl_heap *h) {
  CHECK_HEAP(h);
  /* (it set a flag no cycle reads and returned success, where hl_collect
   * says HL_EMODE: the C API hunt, session 33) */
  if (h->opt.mode != HL_MODE_COLLECTED)
    return hl__fail(h, HL_EMODE, "memory_pressure: a manual heap has no collector (use hl_trim)");
  bool locked = hl__lock(h);
  h->pressure = true;
  hl__unlock(h, locked);
  return HL_OK;
}

/* ---- fault injection ---- */

int64_t hl_fault_mode_min_arg(int mode) {
  if (mode == HL_FAULT_every) return 1;
  if (mode == HL_FAULT_first || mode == HL_FAULT_sticky) return 0;
  return INT64_MIN; /* (always, off: any N) */
}

int hl_inject(hl_heap *h, int site, int mode, int64_t arg, int err) {
  CHECK_HEAP(h);
  if (site < 0 || site >= HL_SITE_COUNT)
    return hl__fail(h, HL_EINVAL, "inject: site %d out of range [0, %d)", site, HL_SITE_COUNT);
  if (mode < 0 || mode >= HL_FAULT_MODE_COUNT)
    return hl__fail(h, HL_EINVAL, "inject: mode %d out of range [0, %d)", mode,
                    HL_FAULT_MODE_COUNT);
  if (arg < hl_fault_mode_min_arg(mode))
    return hl__fail(h, HL_EINVAL, "inject: %s needs N >= %" PRId64 ", got %" PRId64,
                    hl_fault_mode_name(mode), hl_fault_mode_min_arg(mode), arg);
  if (mode != HL_FAULT_off && (err <= 0 || err > 4095))
    return hl__fail(h, HL_EINVAL, "inject: errno %d is not a positive errno value", err);
  /* a disarmed site records no errno, as one never armed: "off" with the
   * default ENOMEM showed errno ENOMEM (the fault hunt, session 33) */
  hl__prim_arm(&h->prim, site, mode, arg, mode == HL_FAULT_off ? 0 : err);
  return HL_OK;
}

/* "a, b, c": the names 0..count-1 of a list, for a message. */
static const char *name_list(char *buf, size_t len, const char *(*name)(int), int count) {
  size_t n = 0;
  buf[0] = 0;
  for (int i = 0; i < count && n < len; i++)
    n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : "", name(i));
  return buf;
}

int hl_inject_named(hl_heap *h, const char *site, const char *mode, int64_t arg,
                    const char *err) {
  CHECK_HEAP(h);
  char list[200];
  /* the site first, named when unknown, then the mode (a NULL mode beside an
   * unknown site said "NULL mode": fuzz_options, the fresh-clone CI) */
  if (!site) return hl__fail(h, HL_EINVAL, "inject: NULL site");
  int s = hl_fault_site_index(site);
  if (s < 0)
    return hl__fail(h, HL_EINVAL, "inject: unknown site '%s' (%s)", site,
                    name_list(list, sizeof list, hl_fault_site_name, HL_SITE_COUNT));
  if (!mode) return hl__fail(h, HL_EINVAL, "inject: NULL mode");
  int m = hl_fault_mode_index(mode);
  if (m < 0)
    return hl__fail(h, HL_EINVAL, "inject: unknown mode '%s' (%s)", mode,
                    name_list(list, sizeof list, hl_fault_mode_name, HL_FAULT_MODE_COUNT));
  int e = m == HL_FAULT_off ? 0 : ENOMEM; /* (off records none: hl_inject) */
  if (err) {
    char *end = NULL;
    errno = 0;
    long long n = strtoll(err, &end, 10);
    if (spec_number(err) && !*end && !errno) {
      if (n <= 0 || n > 4095)
        return hl__fail(h, HL_EINVAL, "inject: errno %s must be in [1, 4095]", err);
      e = (int)n;
    } else if ((e = hl_errno_index(err)) < 0) {
      hl__errno_list(list, sizeof list);
      return hl__fail(h, HL_EINVAL,
                      "inject: unknown errno '%s' (%s, ... any errno name, or a number in [1, 4095])",
                      err, list);
    }
  }
  return hl_inject(h, s, m, arg, e);
}

int hl_faults_get(hl_heap *h, hl_fault_state *buf, size_t cap, size_t *count) {
  if (count) *count = 0;
  CHECK_HEAP(h);
  if (!count || (!buf && cap)) return hl__fail(h, HL_EINVAL, "faults: NULL output");
  size_t n = cap < HL_SITE_COUNT ? cap : HL_SITE_COUNT;
  for (size_t i = 0; i < n; i++) {
    prim_fault *f = &h->prim.faults[i];
    buf[i] = (hl_fault_state){(int32_t)i, atomic_load(&f->mode), atomic_load(&f->arg),
                              atomic_load(&f->err), 0, atomic_load(&f->calls),
                              atomic_load(&f->fired)};
  }
  *count = n;
  return HL_OK;
}

/* heaplab.h's inline accessors assume this layout */
_Static_assert(sizeof(hl_objhdr) == HL_OBJ_HEADER_BYTES && offsetof(hl_objhdr, refs) == 0,
               "object header layout is part of the ABI");

uint64_t hl_max_refs(void) { return HL_MAX_REFS; }
uint64_t hl_max_size(void) { return HL_MAX_SIZE; }

/* ---- holding a heap ---- */

int hl_enter(hl_heap *h) {
  CHECK_HEAP(h);
  if (hl__held == h) {
    hl__held_depth++;
    return HL_OK;
  }
  /* One held heap per thread (hl__held): taking a second forgot the first
   * -- a call on it then locked its mutex again and hung, and its hl_leave
   * never unlocked it. */
  if (hl__held != HL_NOT_HELD)
    return hl__fail(h, HL_EINVAL,
                    "hl_enter: this thread already holds another heap (a thread holds one "
                    "heap at a time: hl_leave it first)");
  hl__lock_raw(h);
  /* Another thread's cycle may be in its trim, the lock dropped around the
   * syscalls.  Holding the heap now, this thread could run into it later
   * (hl_collect, a memory cycle) and wait on cycle_done -- which lets go of
   * the mutex, and a third thread's whole cycle could run while this one
   * holds raw pointers: sweep an object it has not stored yet, or (compact)
   * move one it has.  So the heap is held only once no cycle runs: from then
   * on every cycle is this thread's own.  And once no manual realloc has a
   * large block out of the heap (its system realloc outside the lock): a
   * fork() from the holding thread does not wait for that (fork_prepare
   * waits only on heaps its thread does not hold), and the child kept the
   * block out for good -- its own next fork() waited for it for ever. */
  while (h->in_cycle || h->large_moving) hl__wait(h, &h->cycle_done);
  hl__held = h;
  hl__held_depth = 1;
  return HL_OK;
}

void hl_leave(hl_heap *h) {
  if (!h || hl__held != h) return;
  if (--hl__held_depth) return;
  hl__held = HL_NOT_HELD;
  hl__unlock_raw(h);
}

/* ---- raw objects ----
 * A C client's allocation path: with the heap held, the inline fast path
 * (no call, so these save no registers on their common path); the argument
 * checks call out only when one fails. */

static inline bool obj_args_bad(hl_heap *h, uint64_t size, uint64_t refs) {
  if (hl_likely(h->opt.mode == HL_MODE_COLLECTED && size <= HL_MAX_SIZE && refs <= HL_MAX_REFS))
    return false;
  return hl__check_alloc_args(h, "hl_obj_new", size, refs) != HL_OK;
}

/* (with the heap held the fast path has just missed: straight to the sequence) */
static inline void *obj_new_raw(hl_heap *h, uint64_t size, uint64_t refs, const char *what) {
  return hl__held == h ? hl__obj_alloc(h, size, refs, 0, what) : obj_new(h, size, refs, what);
}

/* A raw call on a NULL heap: NULL, and hl_heap_error(NULL) says so (it kept
 * an older message: the C API hunt, session 26). */
static NOINLINE __attribute__((cold)) void *null_heap(const char *fn) {
  hl__fail(NULL, HL_EINVAL, "%s: the heap is NULL", fn);
  return NULL;
}

static NOINLINE void *obj_new_general(hl_heap *h, uint64_t size, uint64_t refs) {
  if (!h) return null_heap("hl_obj_new");
  if (obj_args_bad(h, size, refs)) return NULL;
  bool locked = hl__lock(h);
  void *obj = obj_new_raw(h, size, refs, "hl_obj_new");
  hl__unlock(h, locked);
  return obj;
}

static NOINLINE void *obj_new_in_general(hl_heap *h, void *parent, uint64_t slot,
                                          uint64_t size, uint64_t refs) {
  if (!h) return null_heap("hl_obj_new_in");
  if (!parent) {
    hl__fail(h, HL_EINVAL, "hl_obj_new_in: the parent is NULL");
    return NULL;
  }
  if (obj_args_bad(h, size, refs)) return NULL;
  if (slot >= ((hl_objhdr *)parent)->refs) {
    hl__fail(h, HL_ERANGE, "obj_new_in: slot %" PRIu64 " out of range", slot);
    return NULL;
  }
  bool locked = hl__lock(h);
  h->nomove++; /* parent is a raw pointer across the allocation */
  void *obj = obj_new_raw(h, size, refs, "hl_obj_new_in");
  h->nomove--;
  if (obj) hl__store(h, parent, slot, obj);
  hl__unlock(h, locked);
  return obj;
}

/* The fast paths: the heap held by this thread (hl__held == h, so h is not
 * NULL: hl__held is never NULL), its lock is this thread's; a manual heap's
 * alloc_limit is 0, so its mode needs no test.  A store into an object a
 * generational mark traced (HL_HDR_OLD, or a large parent) takes the
 * barrier's slow path after the object is made: store_old_ret, a tail call,
 * so the common path saves no registers. */
static NOINLINE void *store_old_ret(hl_heap *h, void *parent, void *obj) {
  hl__store_old(h, parent);
  return obj;
}

void *hl_obj_new(hl_heap *h, uint64_t size, uint64_t refs) {
  void *obj = hl__held == h ? hl__obj_alloc_fast_t(h, size, refs, true) : NULL;
  return hl_likely(obj != NULL) ? obj : obj_new_general(h, size, refs);
}

void *hl_obj_new_in(hl_heap *h, void *parent, uint64_t slot, uint64_t size, uint64_t refs) {
  if (hl_likely(hl__held == h && parent && slot < ((hl_objhdr *)parent)->refs)) {
    void *obj = hl__obj_alloc_fast_t(h, size, refs, true);
    if (hl_likely(obj != NULL)) {
      hl__slots(parent)[slot] = obj;
      if (hl_likely(!(((hl_objhdr *)parent)->size & HL_HDR_OLD))) return obj;
      return store_old_ret(h, parent, obj);
    }
  }
  return obj_new_in_general(h, parent, slot, size, refs);
}

void *hl_obj_payload(const void *obj) { return obj ? hl__obj_payload((void *)obj) : NULL; }
uint64_t hl_obj_size(const void *obj) { return obj ? hl__obj_size(obj) : 0; }
uint64_t hl_obj_refs(const void *obj) { return obj ? ((const hl_objhdr *)obj)->refs : 0; }
void *hl_obj_get(const void *obj, uint64_t slot) {
  if (!obj || slot >= ((const hl_objhdr *)obj)->refs) return NULL;
  return hl__slots((void *)obj)[slot];
}
/* verify=true: a value stored by hl_obj_set is NULL or an object of obj's
 * heap -- not a payload address (hl_obj_payload, Python's Ref.address), not
 * memory of malloc's or a stack's: the mark skipped such a word, and a
 * handle made to it later read garbage as a header.  Refused with the
 * heap's error, the slot left as it was.  Only while a heap with verify on
 * exists (a relaxed load otherwise) and only for a small parent (the
 * registry knows reservations: a large object's heap is not looked up). */
static NOINLINE __attribute__((cold)) bool obj_set_verified(void *obj, uint64_t slot,
                                                           void *value) {
  hl_heap *h = hl__registry_find_locked(obj);
  hl__registry_unlock();
  if (!h || !h->opt.verify) return true;
  bool locked = hl__lock(h);
  bool ok = hl__resolve(h, value, false) == value;
  hl__unlock(h, locked);
  if (!ok)
    hl__fail(h, HL_ECHECK, "hl_obj_set: slot %" PRIu64 " of object %p: %p is not an object of "
             "this heap (a payload address? hl_obj_payload and Ref.address are payloads); "
             "not stored", slot, obj, value);
  return ok;
}

void hl_obj_set(void *obj, uint64_t slot, void *value) {
  if (!obj || slot >= ((hl_objhdr *)obj)->refs) return;
  /* (without a verify heap: one relaxed load and a branch predicted not
   * taken; no timing claimed -- measured only on a loaded machine) */
  if (hl_unlikely(hl__registry_verifying() != 0) && value &&
      !obj_set_verified(obj, slot, value))
    return;
  hl__store_any(obj, slot, value);
}

/* (the bound: a region's bytes, not its words, within the reservation's) */
static int roots_fit(hl_heap *h, const char *fn, uint64_t words) {
  if (words > h->reserved / sizeof(void *))
    return hl__fail(h, HL_EINVAL, "%s: a region of %" PRIu64 " words is larger than the heap's "
                    "reservation (%" PRIu64 " bytes, reserve_bytes: %" PRIu64 " words at most)",
                    fn, words, h->reserved, h->reserved / sizeof(void *));
  return HL_OK;
}

int hl_roots_fit(hl_heap *h, uint64_t words) {
  CHECK_HEAP(h);
  if (h->opt.mode != HL_MODE_COLLECTED) /* (hl_roots_add's order: the mode first) */
    return hl__fail(h, HL_EMODE, "hl_roots_fit: root regions need a collected heap");
  return roots_fit(h, "hl_roots_fit", words);
}

int hl_roots_add(hl_heap *h, void *base, uint64_t words, int conservative) {
  CHECK_HEAP(h);
  if (!base && words) return hl__fail(h, HL_EINVAL, "hl_roots_add: NULL region");
  /* the marker reads the region a word at a time: aligned words only */
  if ((uintptr_t)base % sizeof(void *))
    return hl__fail(h, HL_EINVAL, "hl_roots_add: region %p is not %zu-byte aligned", base,
                    sizeof(void *));
  if (words > (UINTPTR_MAX - (uintptr_t)base) / sizeof(void *))
    return hl__fail(h, HL_EINVAL, "hl_roots_add: %" PRIu64 " words from %p pass the end of the "
                    "address space", words, base);
  if (h->opt.mode != HL_MODE_COLLECTED)
    return hl__fail(h, HL_EMODE, "hl_roots_add: root regions need a collected heap");
  int fit = roots_fit(h, "hl_roots_add", words);
  if (fit) return fit;
  bool locked = hl__lock(h);
  int rc = hl__roots_add(h, base, words, conservative);
  hl__unlock(h, locked);
  return rc;
}

int hl_roots_store(hl_heap *h, void **words, uint64_t *values, const hl_ref *refs,
                   uint64_t count, uint64_t *bad) {
  if (bad) *bad = UINT64_MAX;
  CHECK_HEAP(h);
  if (count && (!words || !values))
    return hl__fail(h, HL_EINVAL, "hl_roots_store: NULL %s", words ? "values" : "words");
  /* (every ref is checked before values is written: on an error it is as
   * it was -- heaplab.h's one rule for what a failed call leaves) */
  /* (its failure ignored, the words were stored without the heap held: the
   * C API hunt, session 26) */
  int rc = hl_enter(h);
  if (rc) return rc;
  for (uint64_t i = 0; refs && i < count && rc == HL_OK; i++) {
    hl_object_info info;
    if (refs[i] && (rc = hl_ref_info(h, refs[i], &info)) != HL_OK && bad) *bad = i;
  }
  for (uint64_t i = 0; refs && i < count && rc == HL_OK; i++) {
    hl_object_info info;
    if (refs[i] && hl_ref_info(h, refs[i], &info) == HL_OK) values[i] = info.object;
  }
  if (rc == HL_OK)
    for (uint64_t i = 0; i < count; i++)
      __atomic_store_n(&words[i], (void *)(uintptr_t)values[i], __ATOMIC_RELAXED);
  hl_leave(h);
  return rc;
}

int hl_roots_remove(hl_heap *h, void *base) {
  CHECK_HEAP(h);
  bool locked = hl__lock(h);
  int rc = hl__roots_remove(h, base);
  hl__unlock(h, locked);
  return rc;
}

/* ---- manual mode ----
 * The fast paths are a thread cache's pop and push (manual/manual.h); the
 * mode is checked when they miss. */

static int manual_check(hl_heap *h, const char *what) {
  if (h->opt.mode != HL_MODE_MANUAL)
    return hl__fail(h, HL_EMODE, "%s: needs a manual heap (mode=manual)", what);
  return HL_OK;
}

/* The fast path keeps nothing live into the miss call, so the compiler
 * needs no saved registers for it. */
/* A refused allocation: the client's hook (hl_set_refusal_hook), then
 * NULL.  h is not NULL. */
static NOINLINE __attribute__((cold)) void *refused(hl_heap *h, size_t size) {
  hl_refusal_fn fn = h->on_refusal;
  if (fn) fn(h, size, h->on_refusal_arg);
  return NULL;
}

int hl_set_refusal_hook(hl_heap *h, hl_refusal_fn fn, void *arg) {
  CHECK_HEAP(h);
  h->on_refusal = fn;
  h->on_refusal_arg = fn ? arg : NULL;
  return HL_OK;
}

static NOINLINE __attribute__((cold)) void *malloc_miss_quiet(hl_heap *h, size_t size) {
  if (!h) return null_heap("hl_malloc");
  if (manual_check(h, "malloc")) return NULL;
  return hl__manual_malloc(h, size);
}

/* The fast path keeps nothing live into the miss call, so the compiler
 * needs no saved registers for it. */
static NOINLINE __attribute__((cold)) void *malloc_miss(hl_heap *h, size_t size) {
  void *p = malloc_miss_quiet(h, size);
  return p || !h ? p : refused(h, size);
}

void *hl_malloc(hl_heap *h, size_t size) {
  void *p = hl__tcache_pop(h, size);
  return hl_likely(p != NULL) ? p : malloc_miss(h, size);
}

void *hl__malloc(hl_heap *h, size_t size) {
  void *p = hl__tcache_pop(h, size);
  return hl_likely(p != NULL) ? p : malloc_miss_quiet(h, size);
}

void *hl_calloc(hl_heap *h, size_t count, size_t size) {
  if (!h) return null_heap("hl_calloc");
  if (size && count > SIZE_MAX / size) {
    hl__fail(h, HL_EINVAL, "calloc: %zu x %zu overflows", count, size);
    return refused(h, SIZE_MAX);
  }
  size_t n = count * size;
  if (n > h->small_max) {
    void *p = manual_check(h, "calloc") ? NULL : hl__manual_calloc_large(h, n);
    return p ? p : refused(h, n);
  }
  /* a slot: zeroed here (its page is written anyway); a refusal names calloc
   * (it said "malloc:") */
  if (manual_check(h, "calloc")) return refused(h, n);
  void *p = hl__manual_calloc_small(h, n);
  if (!p) return refused(h, n);
  memset(p, 0, n);
  return p;
}

static NOINLINE void free_miss(hl_heap *h, void *ptr) {
  if (!h || !ptr) return;
  if (manual_check(h, "free")) return;
  if (hl__in_reservation(h, ptr)) hl__manual_free_small(h, ptr);
  else hl__manual_free_large(h, ptr);
}

/* (h NULL has no cache, and NULL is outside the reservation: both reach
 * the miss, which returns; manual.h, hl__tls) */
void hl_free(hl_heap *h, void *ptr) {
  hl_tcache *tc = hl__cache_of(h);
  if (hl_likely(tc != NULL) && hl_likely(hl__in_reservation(h, ptr)) &&
      hl__tcache_put(h, tc, ptr, h->pages[hl__page_of(h, ptr)].cls))
    return;
  free_miss(h, ptr);
}

/* The size names the class: a block of size <= small_max is always small
 * (only realloc moves a block between the paths, and it moves it). */
static NOINLINE __attribute__((cold)) void free_sized_miss(hl_heap *h, void *ptr, size_t size) {
  if (!h || !ptr) return;
  if (h->opt.verify) {
    if (manual_check(h, "free") == HL_OK && hl__manual_free_sized_ok(h, ptr, size)) free_miss(h, ptr);
    return;
  }
  free_miss(h, ptr);
}

/* (verify's checks are in the miss, so that the fast path -- a push -- needs
 * no stack frame: with them inline it saved registers on every free,
 * `heaplab-manual-bench 1 lifo` 8.4-9.3 ns a pair against 6.7-7.9 without,
 * five processes each) */
void hl_free_sized(hl_heap *h, void *ptr, size_t size) {
  hl_tcache *tc = hl__cache_of(h);
  if (hl_likely(tc != NULL) &&
      hl_likely(!h->opt.verify && size <= h->small_max && hl__in_reservation(h, ptr)) &&
      hl__tcache_put(h, tc, ptr, hl__class_of(h, size)))
    return;
  free_sized_miss(h, ptr, size);
}

void *hl_realloc(hl_heap *h, void *ptr, size_t old_size, size_t new_size) {
  if (!h) return null_heap("hl_realloc");
  if (!ptr) return hl_malloc(h, new_size);
  if (manual_check(h, "realloc")) return new_size ? refused(h, new_size) : NULL;
  if (new_size == 0) {
    /* old_size 0 is "unknown" here as in a resize (hl__manual_realloc): a
     * sized free of 0 put the block in the smallest class's bin, and verify
     * refused it as a size mismatch and kept it live */
    if (old_size) hl_free_sized(h, ptr, old_size);
    else hl_free(h, ptr);
    return NULL;
  }
  void *p = hl__manual_realloc(h, ptr, old_size, new_size);
  return p ? p : refused(h, new_size);
}

size_t hl_usable_size(hl_heap *h, const void *ptr) {
  /* a collected heap has objects, no blocks: 0 (an object's address gave
   * its slot's size) */
  if (!h || !ptr || h->opt.mode != HL_MODE_MANUAL) return 0;
  return hl__manual_usable_size(h, ptr);
}

void hl_thread_flush(hl_heap *h) {
  if (!h) return;
  hl__manual_thread_flush(h);
}
