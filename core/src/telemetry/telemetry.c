/*
 * telemetry.c -- stats names, events (a ring buffer of structured records),
 * fault-site names, errno names and error messages.  Each list is the X-macro
 * declared once in heaplab.h.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../internal.h"

/* ---- errors ---- */

/* This thread's last message of a call on a heap: of its own last failure
 * (err_own until it is read), or the copy of a heap's that it last read --
 * err_seq says which of the heap's failures it is.  The numbers come from
 * one sequence for the whole process, so a heap made later at the same
 * address (its errseq 0 until it fails) never matches a stale copy.
 *
 * And apart, err_none: the thread's last failure of a call that had no heap
 * (hl_heap_error(NULL)).  It shared err_buf, so any failure on a heap, or
 * merely reading hl_heap_error(h), replaced it -- a binding raising a
 * failed hl_heap_new's error after a heap call in between raised the heap's
 * message, or "" (the embedding hunt, session 28). */
static _Thread_local const hl_heap *err_heap;
static _Thread_local uint64_t err_seq;
static _Thread_local bool err_own;
static _Thread_local uint64_t err_serial; /* (err_own's heap: not one made later at its address) */
static _Thread_local char err_buf[256];
static _Thread_local char err_none[256];
static _Atomic uint64_t failures;
/* The report at exit (hl__errors_at_exit): 0 not in it; 1 in it, errlock
 * waited for HL_ERRLOCK_EXIT_WAIT_NS at most; 2 a wait gave up -- no more
 * waits.  A signal handler calling _exit (or exit) that interrupted this
 * thread inside errlock -- a refused free_sized under HEAPLAB_VERIFY copies
 * its message to the heap there, the heap's lock free -- wrote the report,
 * whose vma_count fails without /proc (hl__fail): it waited for errlock, its
 * own thread's, for ever (preload scenario exit_in_handler_inside_errlock:
 * 5 of 30 runs hung, h39exit, session 39). */
static _Thread_local int err_at_exit;

void hl__errors_at_exit(bool on) { err_at_exit = on ? 1 : 0; }

/* errlock taken (true), or, in the report at exit, not to be had: false.
 * (Not on any allocation's path: failures and hl_heap_error only.) */
static bool errlock_take(hl_heap *m) {
  if (!err_at_exit) {
    pthread_mutex_lock(&m->errlock);
    return true;
  }
  if (err_at_exit == 1 && prim_mutex_lock_within(&m->errlock, HL_ERRLOCK_EXIT_WAIT_NS) == 0)
    return true;
  err_at_exit = 2;
  return false;
}

void hl__fmt_err(char *err, size_t errlen, const char *fmt, ...) {
  /* also the thread's last failure outside any heap (hl_heap_error(NULL)):
   * with err NULL, which the option calls allow, the message was lost (the
   * C API hunt, session 26).  Formatted aside first: an argument may be
   * err_none itself (hl_heap_error(NULL)'s result). */
  char msg[sizeof err_none];
  va_list ap, again;
  va_start(ap, fmt);
  va_copy(again, ap);
  vsnprintf(msg, sizeof msg, fmt, ap);
  if (err && errlen) vsnprintf(err, errlen, fmt, again); /* (err may be longer) */
  va_end(again);
  va_end(ap);
  hl__fail(NULL, 0, "%s", msg);
}

int hl__failv(const hl_heap *h, int code, const char *fmt, va_list ap) {
  if (!h) {
    /* (formatted aside: an argument may be err_none itself) */
    char msg[sizeof err_none];
    vsnprintf(msg, sizeof msg, fmt, ap);
    memcpy(err_none, msg, sizeof msg);
    return code;
  }
  char msg[sizeof err_buf];
  vsnprintf(msg, sizeof msg, fmt, ap);
  memcpy(err_buf, msg, sizeof msg);
  err_heap = h;
  err_own = true;
  /* Also kept on the heap, for a caller asking from another thread. */
  hl_heap *m = (hl_heap *)h;
  err_serial = m->serial;
  if (!errlock_take(m)) { /* (the thread's own copy only: the report at exit) */
    err_seq = atomic_fetch_add_explicit(&failures, 1, memory_order_relaxed) + 1;
    return code;
  }
  memcpy(m->errmsg, err_buf, sizeof err_buf);
  m->errseq = err_seq = atomic_fetch_add_explicit(&failures, 1, memory_order_relaxed) + 1;
  pthread_mutex_unlock(&m->errlock);
  return code;
}

int hl__fail(const hl_heap *h, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  hl__failv(h, code, fmt, ap);
  va_end(ap);
  return code;
}

/* The message of this thread's last failed call on h, the first time it is
 * asked for (a binding raising that call's error: another thread's failure
 * in between does not take its place); after that, and in a thread whose
 * last failure was elsewhere, the heap's last failure's, whichever thread
 * it was in.  A thread kept the first message it read, or made, for good:
 * it read it again after other threads' failures -- a background cycle's
 * "verify:" among them, which has no caller to return to.  With h NULL:
 * err_none, which nothing on a heap touches. */
const char *hl_heap_error(const hl_heap *h) {
  if (!h) return err_none;
  if (err_heap == h && err_own && err_serial == h->serial) {
    err_own = false;
    return err_buf;
  }
  err_own = false;
  hl_heap *m = (hl_heap *)h;
  if (!errlock_take(m)) return err_buf; /* (the report at exit: this thread's last) */
  if (err_heap != h || err_seq != m->errseq) {
    memcpy(err_buf, m->errmsg, sizeof err_buf);
    err_heap = h;
    err_seq = m->errseq;
  }
  pthread_mutex_unlock(&m->errlock);
  return err_buf;
}

static const char *const error_names[] = {
#define EN(name, value, desc) [value] = #name,
    HL_ERRORS(EN)
#undef EN
};

const char *hl_error_name(int code) {
  if (code < 0 || code >= HL_ERROR_COUNT) return "UNKNOWN";
  return error_names[code];
}

const char *hl_version(void) { return HL_VERSION_STRING; }
int hl_abi_version(void) { return HL_ABI_VERSION; }

/* ---- stats ---- */

static const char *const stat_names[] = {
#define SN(name, desc) #name,
    HL_STATS(SN)
#undef SN
};
static const char *const stat_desc[] = {
#define SD(name, desc) desc,
    HL_STATS(SD)
#undef SD
};
#define NSTATS ((int)(sizeof stat_names / sizeof stat_names[0]))

int hl_stat_count(void) { return NSTATS; }
const char *hl_stat_name(int i) { return i >= 0 && i < NSTATS ? stat_names[i] : NULL; }
const char *hl_stat_description(int i) { return i >= 0 && i < NSTATS ? stat_desc[i] : NULL; }

/* The public stats: the tally (counters only ever added to), then every
 * gauge from the state that owns it -- the counters of hl__charge, the
 * pools' page counts, the handles, the prim layer's syscall counts. */
void hl__stats_fill(hl_heap *h, hl_stats *st) {
  HL_ASSERT_LOCKED(h);
  hl__aword_flush(h); /* the counts of reserved slots not handed out */
  *st = h->tally;
  st->small_bytes_since_cycle = h->ctr.since_cycle[HL_SMALL];
  st->large_bytes_since_cycle = h->ctr.since_cycle[HL_LARGE];
  st->small_allocated_bytes = h->ctr.allocated[HL_SMALL];
  st->large_allocated_bytes = h->ctr.allocated[HL_LARGE];
  st->small_live_bytes = h->ctr.live[HL_SMALL];
  st->large_live_bytes = h->ctr.live[HL_LARGE];
  st->large_objects = h->ctr.large_objects;
  st->objects_allocated = h->ctr.objects_allocated;
  st->objects_freed = h->ctr.objects_freed;
  st->tenured_pages = h->tenured_pages;
  st->marked_objects = h->marked_objects;
  st->marked_bytes = h->marked_bytes;
  st->gc_trigger_bytes = hl__trigger_in_force(h);
  st->total_pages = h->high_water;
  st->owned_pages = h->state_count[PS_OWNED];
  st->retired_pool_pages = h->state_count[PS_RETIRED];
  st->partial_pool_pages = h->state_count[PS_PARTIAL];
  st->free_pool_pages = h->state_count[PS_FREE];
  st->released_pool_pages = h->state_count[PS_RELEASED];
  st->reuse_failed_pool_pages = h->state_count[PS_REUSE_FAILED];
  st->in_flight_pages = h->state_count[PS_IN_FLIGHT];
  st->fallback_pool_pages = h->fallback_count;
  st->handles = h->handles_live;
  st->syscalls = atomic_load(&h->prim.syscalls);
  st->syscall_retries = atomic_load(&h->prim.retries);
  st->syscall_gave_up = atomic_load(&h->prim.gave_up);
  st->faults_fired = atomic_load(&h->prim.fired);
  st->syscall_stall_ns = atomic_load(&h->prim.stall_ns);
  st->trim_backoff_ns = h->trim_backoff.ns;
  st->subpage_released_bytes = h->sub_out << h->os_shift;
  st->subpage_fallback_bytes = h->sub_fallback << h->os_shift;
  st->subpage_pages = h->sub_pages;
  hl__manual_stats(h, st);
}

/* ---- events ---- */

static const char *const event_names[] = {
#define EVN(name, fields) #name,
    HL_EVENTS(EVN)
#undef EVN
};
static const char *const event_fields[] = {
#define EVF(name, fields) fields,
    HL_EVENTS(EVF)
#undef EVF
};

const char *hl_event_name(int k) { return k >= 0 && k < HL_EV_COUNT ? event_names[k] : NULL; }
const char *hl_event_fields(int k) { return k >= 0 && k < HL_EV_COUNT ? event_fields[k] : NULL; }

/* The field names one by one, split once. */
static char field_names[HL_EV_COUNT][HL_EVENT_MAX_FIELDS][32];
static pthread_once_t fields_once = PTHREAD_ONCE_INIT;
static void fields_init(void) {
  for (int k = 0; k < HL_EV_COUNT; k++) {
    const char *f = event_fields[k];
    for (int i = 0; i < HL_EVENT_MAX_FIELDS && *f; i++) {
      size_t n = strcspn(f, ",");
      snprintf(field_names[k][i], sizeof field_names[k][i], "%.*s", (int)n, f);
      f += n + (f[n] == ',');
    }
  }
}

const char *hl_event_field(int k, int i) {
  if (k < 0 || k >= HL_EV_COUNT || i < 0 || i >= HL_EVENT_MAX_FIELDS) return NULL;
  pthread_once(&fields_once, fields_init);
  return field_names[k][i][0] ? field_names[k][i] : NULL;
}

/* Record an event (heap lock held). */
void hl__event(hl_heap *h, int kind, int nfields, ...) {
  if (!h->events) return;
  uint64_t slot = (h->ev_head + h->ev_count) % h->ev_cap;
  if (h->ev_count == h->ev_cap) {
    h->ev_head = (h->ev_head + 1) % h->ev_cap;
    h->ev_first++;
    h->tally.events_dropped++;
  } else {
    h->ev_count++;
  }
  hl_event *e = &h->events[slot];
  memset(e, 0, sizeof *e);
  e->kind = kind;
  e->cycle = h->tally.cycles;
  e->time_ns = hl__prim_now_ns();
  if (nfields > HL_EVENT_MAX_FIELDS) nfields = HL_EVENT_MAX_FIELDS;
  e->nfields = nfields;
  va_list ap;
  va_start(ap, nfields);
  for (int i = 0; i < nfields; i++) e->fields[i] = va_arg(ap, int64_t);
  va_end(ap);
}

/* ---- fault sites ---- */

static const char *const site_names[] = {
#define SITE(name, desc) #name,
    HL_FAULT_SITES(SITE)
#undef SITE
};
static const char *const mode_names[] = {
#define MODE(name, desc) #name,
    HL_FAULT_MODES(MODE)
#undef MODE
};

const char *hl_fault_site_name(int s) { return s >= 0 && s < HL_SITE_COUNT ? site_names[s] : NULL; }
const char *hl_fault_mode_name(int m) {
  return m >= 0 && m < HL_FAULT_MODE_COUNT ? mode_names[m] : NULL;
}
int hl_fault_site_index(const char *name) {
  for (int i = 0; name && i < HL_SITE_COUNT; i++)
    if (strcmp(site_names[i], name) == 0) return i;
  return -1;
}
int hl_fault_mode_index(const char *name) {
  for (int i = 0; name && i < HL_FAULT_MODE_COUNT; i++)
    if (strcmp(mode_names[i], name) == 0) return i;
  return -1;
}

static const struct { const char *name; int value; } errnos[] = {
#define E(name) {#name, name},
#include "errno_names.h"
#undef E
};
#define ERRNO_LISTED 8 /* the messages list the eight first */

/* "E<n>" for every number in [1, 4095] without a name: filled once, read
 * only after (thread-safe, no allocation after the first call). */
#define ERRNO_MAX 4095
static char errno_numbered[ERRNO_MAX + 1][6];
static pthread_once_t errno_numbered_once = PTHREAD_ONCE_INIT;
static void errno_numbered_init(void) {
  for (int i = 1; i <= ERRNO_MAX; i++) snprintf(errno_numbered[i], sizeof errno_numbered[i], "E%d", i);
}

int hl_errno_index(const char *name) {
  if (!name) return -1;
  for (size_t i = 0; i < sizeof errnos / sizeof errnos[0]; i++)
    if (strcmp(errnos[i].name, name) == 0) return errnos[i].value;
  /* "E<n>", the name hl_errno_name gives a number without one: it reads
   * back (the state of a site written as a fault spec arms the same) */
  if (name[0] != 'E' || name[1] < '1' || name[1] > '9' || strlen(name) > 5) return -1;
  int n = 0;
  for (const char *p = name + 1; *p; p++) {
    if (*p < '0' || *p > '9') return -1;
    n = n * 10 + (*p - '0');
  }
  return n <= ERRNO_MAX && strcmp(hl_errno_name(n), name) == 0 ? n : -1;
}

/* "EAGAIN, ENOMEM, ..." for messages. */
void hl__errno_list(char *buf, size_t len) {
  size_t n = 0;
  buf[0] = 0;
  for (size_t i = 0; i < ERRNO_LISTED && n < len; i++)
    n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : "", errnos[i].name);
}

const char *hl_errno_name(int e) {
  for (size_t i = 0; i < sizeof errnos / sizeof errnos[0]; i++)
    if (errnos[i].value == e) return errnos[i].name;
  if (e < 1 || e > ERRNO_MAX) return "E?";
  pthread_once(&errno_numbered_once, errno_numbered_init);
  return errno_numbered[e];
}

int hl_footprint_get(hl_footprint *out) {
  if (!out) return hl__fail(NULL, HL_EINVAL, "hl_footprint_get: NULL output pointer");
  int e = hl__prim_os_footprint(out); /* (its own errno: a close() after may change errno) */
  if (e == 0) return HL_OK;
  memset(out, 0, sizeof *out); /* (no figures: a part read is none) */
  return hl__fail(NULL, HL_ESYS, "footprint: %s could not be read: %s", hl__prim_os_footprint_source,
                  hl__strerror(e));
}
