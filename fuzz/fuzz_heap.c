/*
 * fuzz_heap.c -- libFuzzer target: the input is a program of operations on
 * the C API, run against a shadow model.
 *
 * The first bytes choose the heap (mode, generational, collector, page size,
 * small_max, release and reuse policies, a small reservation and small
 * triggers) and may carry option strings ("name", "value") applied with
 * hl_options_set; every later byte group is one operation:
 *
 *   collected heaps  alloc with handles, release, dup, slot set/get, payload
 *                    read/write (in range and out of it), fill (small),
 *                    collect (major -1/0/1), trim, memory pressure, raw
 *                    hl_obj_new / hl_obj_new_in / hl_obj_set under hl_enter,
 *                    stale handles, bad arguments
 *   manual heaps     malloc, calloc, free, free_sized, realloc, writes,
 *                    thread flush, frees and allocations from another thread,
 *                    trim, double frees (verify), bad arguments
 *   both             fault injection (any site, every mode, several errnos),
 *                    stats / events / faults / resident bytes; an operation
 *                    byte of 0xef (collected; 0xed manual), a probe before,
 *                    reads the event ring with hl_events_peek and
 *                    hl_events_consume (the bindings' protocol, a part, an
 *                    upto already consumed or past the end, bad arguments)
 *                    against a model of heaplab.h's promises (op_events);
 *                    with b9 bit 6 (configure), an operation byte of 0xcf
 *                    (collected; 0xdf manual) is op_fapi: hl_inject_named
 *                    (and its refusals), one past hl_max_size / hl_max_refs,
 *                    hl_heap_options, the wait hook set, removed and changed
 *                    by another thread while allocations wait
 *
 * After EVERY operation, too: each fault site's fired count is what its
 * schedule takes of its calls, and each paced wait ran the wait hook (set
 * on every heap) at its start and its end (check_api_laws); every heap's
 * hl_heap_options is checked once it is made.
 *
 * After EVERY operation: hl_heap_check must pass (verify=1 poisons and checks
 * free slots) and every object the model says is live is compared with the
 * heap: payload bytes, slot count, every slot's target (by identity), the
 * fills' checksums, the number of handles.  Nothing live is ever lost or
 * corrupted: that is the property.  With compact (a full collection may
 * move objects) the model compares identity, not fixed addresses: one
 * address per object within a check, none shared, handle identities
 * stable, pinned objects (conservative roots) where they were, hl_ref_same
 * true for two handles of one object and false for two objects.
 * Every error the API returns must be one
 * the operation can have, with a message.  A violation aborts with a line
 * saying what was wrong (libFuzzer then saves the input).
 *
 * A configuration byte of 0xc0 or more where the option strings' count is
 * read brings the extension (configure()): compaction, sub-page release,
 * huge pages, mark threads, the large path's arms, root regions (precise
 * and conservative; removed and added again with their stale words, each
 * add after hl_roots_fit as the bindings do it, and hl_roots_fit's bound:
 * the reservation's words fit, one more does not) and hl_thin.  Within it, b9 >= 0x80 brings the API
 * extension: one more byte (heap_limit_bytes) and an operation byte of
 * 0xf0 or more for the samplers (summaries and series against a model of
 * their windows), interrupts during long calls (a helper thread; HL_EINTR,
 * no handle, the heap usable), hl_vma_count (one VMA unless dump_toggle)
 * and the refusal hook (op_api).  The hook itself is set on every heap:
 * every NULL from hl_malloc/calloc/realloc must have run it once, with the
 * documented arguments, in the calling thread, no lock held.
 *
 * Out-of-memory is an accepted answer only when the model's live bytes are
 * near the reservation: an allocation that fails while they are far below
 * it is a finding (issue 16, defect 1: with the trigger above the
 * reservation this fired within seconds before allocations collected first).
 * FUZZ_HEAP_STRICT_OOM=0 accepts every out-of-memory.
 *
 * Manual heaps run with verify=1 three times in four; the fourth runs with
 * verify=0, because verify turns the thread caches off and they would
 * otherwise never be fuzzed.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "heaplab.h"

#define FUZZ_NAME "fuzz_heap"
#include "fuzz_input.h"

/* ---- the heap under test ---- */

static hl_heap *H;
static hl_options O;
static bool manual_mode, verbose, strict_oom;
static uint64_t budget; /* model bytes at most (a quarter of the reservation) */

static const char *msg(void) { return hl_heap_error(H); }

/* An error code an operation may return: anything else, or no message, fails. */
static void expect_rc(int rc, const char *what, int ok1, int ok2) {
  if (rc == HL_OK || rc == ok1 || rc == ok2) {
    if (rc != HL_OK && !msg()[0]) FAIL("%s returned %s with no message", what, hl_error_name(rc));
    return;
  }
  FAIL("%s returned %s: %s", what, hl_error_name(rc), msg());
}

static uint64_t model_bytes;
static uint64_t live_estimate(void);

/* Out of memory is honest when the same request still fails after a major
 * collection: the allocation had to collect before it gave up, so a retry
 * that succeeds means it did not (or not enough).  A small reservation (16
 * pages of 64 KiB) is honestly filled by live objects of a few size classes
 * plus the failed request's own garbage, whatever the live bytes -- the
 * earlier check, live bytes against a quarter of the reservation, alone
 * called that a defect.  Without a way to retry (retry NULL): honest when
 * every page is still in use after the collection -- or, when an injected
 * failure kept the parked pages from coming back (restore_fault_in_op), when
 * every page was carved from the reservation. */
static bool (*retry)(void); /* the request again: true when it succeeded */

/* Restores that failed (whole pages and sub-page runs), from the stats. */
static uint64_t failed_restores(void) {
  hl_stats st;
  if (hl_stats_get(H, &st) != HL_OK) return 0;
  return st.restore_failed_pages + st.subpage_restore_failed;
}
static uint64_t failed_restores_at_op; /* when the current operation began */

/* An injected failure kept a parked page from coming back in this operation:
 * a schedule is armed at a site a restore goes through (restore, the
 * MADV_DODUMP after it with dump_toggle, any) and has fired, and a restore
 * failed since the operation began.  Then the free, released and
 * reuse-failed pages left are no proof of a dishonest refusal (the page
 * taker tries the free pool's head and reuse_attempts parked pages, and
 * each failed). */
static bool restore_fault_in_op(void) {
  if (failed_restores() == failed_restores_at_op) return false;
  hl_fault_state fs[HL_SITE_COUNT];
  size_t n = 0;
  if (hl_faults_get(H, fs, HL_SITE_COUNT, &n)) return false;
  for (size_t i = 0; i < n; i++)
    if ((fs[i].site == HL_SITE_restore || fs[i].site == HL_SITE_dump ||
         fs[i].site == HL_SITE_any) && fs[i].mode != HL_FAULT_off && fs[i].fired)
      return true;
  return false;
}

static bool honest_oom(void) {
  if (H == NULL) return false;
  if (O.mode == HL_MODE_MANUAL) {
    /* A manual heap has nothing to collect: honest when every page of the
     * reservation is carved and none is empty (free, released, reuse-failed).
     * A page is a size class's (or a large block's) as long as one of its
     * blocks is live or in a thread cache ("blocks in a cache count as used
     * by their pages", docs/design.md, Manual mode): 16 pages of 64 KiB are
     * honestly used up by blocks of a dozen classes and a few large ones
     * (small_max 16 KiB, tcache on: 167 KB live, the reservation exhausted). */
    hl_stats st;
    uint64_t base = 0, bytes = 0;
    if (hl_stats_get(H, &st) || hl_heap_range(H, &base, &bytes)) return false;
    if (verbose)
      fprintf(stderr, "fuzz_heap: manual out of memory: %" PRIu64 " of %" PRIu64 " pages carved, "
              "%" PRIu64 " free, %" PRIu64 " released, %" PRIu64 " reuse-failed\n",
              st.total_pages, bytes / (uint64_t)O.page_size, st.free_pool_pages,
              st.released_pool_pages, st.reuse_failed_pool_pages);
    return st.total_pages >= bytes / (uint64_t)O.page_size && st.free_pool_pages == 0 &&
           st.released_pool_pages == 0 && st.reuse_failed_pool_pages == 0;
  }
  if (O.mode != HL_MODE_COLLECTED) return false;
  bool faulted = restore_fault_in_op(); /* (before the collection: it may take pages) */
  if (verbose) {
    hl_fault_state fs[HL_SITE_COUNT];
    size_t n = 0;
    hl_faults_get(H, fs, HL_SITE_COUNT, &n);
    for (size_t i = 0; i < n; i++)
      if (fs[i].mode != HL_FAULT_off)
        fprintf(stderr, "fuzz_heap: armed: %s %s %" PRId64 " errno %d: %" PRIu64 " calls, %" PRIu64
                " fired\n", hl_fault_site_name(fs[i].site), hl_fault_mode_name(fs[i].mode),
                fs[i].arg, fs[i].err, fs[i].calls, fs[i].fired);
    fprintf(stderr, "fuzz_heap: %" PRIu64 " restores failed in this operation\n",
            failed_restores() - failed_restores_at_op);
  }
  /* restores failing (injected) and every page carved from the reservation
   * when the request failed: honest whatever a retry does -- the request's
   * own garbage, freed by the collection (or by the retry's memory cycle),
   * is on pages that were never released and need no restore, so the same
   * request may fit once; a trim (releasing them) makes it fail again.
   * (subpage_release + generational + restore always: a fill refused with 20
   * KB live in 16 pages, the retry fitting -- the old rule called it a defect.) */
  if (faulted) {
    hl_stats st0;
    uint64_t pages0 = (uint64_t)O.reserve_bytes / (uint64_t)O.page_size;
    if (hl_stats_get(H, &st0) == HL_OK && st0.total_pages >= pages0) {
      if (verbose) fprintf(stderr, "fuzz_heap: out of memory with restores failing (injected), "
                           "every page carved\n");
      return true;
    }
  }
  if (hl_collect(H, 1, 1) != HL_OK) return false;
  if (retry) {
    bool ok = retry();
    if (verbose) fprintf(stderr, "fuzz_heap: after a major collection the retry %s\n",
                         ok ? "succeeded" : "failed too");
    return !ok;
  }
  hl_stats st;
  if (hl_stats_get(H, &st) != HL_OK) return false;
  uint64_t pages = (uint64_t)O.reserve_bytes / (uint64_t)O.page_size;
  if (st.total_pages < pages) return false; /* fresh pages were left */
  if (faulted) {
    if (verbose) fprintf(stderr, "fuzz_heap: out of memory with restores failing (injected)\n");
    return true;
  }
  return st.free_pool_pages == 0 && st.released_pool_pages == 0 &&
         st.reuse_failed_pool_pages == 0;
}

/* heap_limit_bytes (an option string may set it to a few bytes): a refusal
 * that names the limit is honest when what it reports live plus what was
 * asked passes the limit it names, and that is the heap's limit (whether the
 * live bytes it reports are right is the invariant checker's, verify=1). */
static bool limit_oom(void) {
  const char *m = strstr(msg(), "heap_limit_bytes ");
  unsigned long long lim, live, ask;
  if (!O.heap_limit_bytes || !m) return false;
  /* a request larger than the whole limit is refused before any collection
   * or system call (session 30): "heap_limit_bytes N is less than the M bytes
   * asked: ..." */
  if (sscanf(m, "heap_limit_bytes %llu is less than the %llu bytes asked", &lim, &ask) == 2)
    return lim == (unsigned long long)O.heap_limit_bytes && ask > lim;
  if (sscanf(m, "heap_limit_bytes %llu reached: %llu bytes live after a collection, %llu more "
                "asked", &lim, &live, &ask) != 3 &&
      sscanf(m, "heap_limit_bytes %llu reached: %llu bytes live, %llu more asked", &lim, &live,
             &ask) != 3)
    return false;
  return lim == (unsigned long long)O.heap_limit_bytes && live + ask > lim;
}

static void out_of_memory(const char *what) {
  if (!msg()[0]) FAIL("%s ran out of memory with no message", what);
  if (strict_oom && live_estimate() * 4 < (uint64_t)O.reserve_bytes && !limit_oom() &&
      !honest_oom())
    FAIL("%s: out of memory with %" PRIu64 " model bytes live in a %" PRId64
         "-byte reservation: %s", what, live_estimate(), O.reserve_bytes, msg());
}

static const int errnos[] = {ENOMEM, EAGAIN, EIO, EINVAL, EPERM, EBUSY, EFAULT};
#define NERRNOS (int)(sizeof errnos / sizeof errnos[0])

static void fault_snapshot(void);

static void op_inject(input *in) {
  int site = u8(in) % HL_SITE_COUNT, mode = u8(in) % HL_FAULT_MODE_COUNT;
  int64_t arg = u8(in) % 64;
  int err = errnos[u8(in) % NERRNOS];
  if (mode == HL_FAULT_every && arg < 1) arg = 1;
  int rc = hl_inject(H, site, mode, arg, err);
  if (rc) FAIL("inject(%s, %s, %" PRId64 ", %d): %s", hl_fault_site_name(site),
               hl_fault_mode_name(mode), arg, err, msg());
  fault_snapshot(); /* (the schedule laws start again: check_faults) */
  /* and one that must be refused */
  rc = hl_inject(H, HL_SITE_COUNT + (int)(arg % 3), mode, arg, err);
  if (rc != HL_EINVAL || !strstr(msg(), "site")) FAIL("inject with a bad site: %d %s", rc, msg());
}

/* ---- the event ring against a model of heaplab.h's promises (op_events) ----
 * Events are numbered from 0 in the order recorded; a peek copies without
 * consuming and says the number of its first; hl_events_consume(upto)
 * consumes those below upto still in the ring and says kept_from (every
 * event below it was consumed by an earlier read).  What the model knows:
 * the ring's first number never goes down and is the events consumed plus
 * those the full ring dropped (stats events_dropped); an event keeps its
 * number and contents until consumed or dropped; events come in order
 * (cycle count and time never go back); kept_from only moves with our own
 * reads and never passes the ring's first; one cycle event per cycle.
 * With the background collector events may be recorded between any two
 * calls: the model then checks bounds instead of equalities. */
#define EVMAX 256 /* events_capacity is at most 256 here (configure) */
static hl_event ev_win[EVMAX];      /* the last peek's events */
static uint64_t ev_win_first;       /* ... numbered from this */
static size_t ev_win_n;
static uint64_t ev_first_lo;        /* the ring's first number: at least this */
static uint64_t ev_next_lo;         /* events recorded: at least this many */
static uint64_t ev_taken_lo, ev_taken_hi; /* the kept_from a consume gives: in this range */
static uint64_t ev_consumed;        /* events our reads consumed */
static bool ev_consumed_known;
static uint64_t ev_seen_next;       /* one past the newest event seen */
static uint64_t ev_seen_cycle, ev_seen_time; /* ... its cycle and time */
static bool ev_base;                /* a full view: every event from ev_base_next on is */
static uint64_t ev_base_next, ev_base_cycles; /* still in the ring, and cycles then */

static bool ev_sync(void) { return O.mode == HL_MODE_MANUAL || O.collector == HL_COLLECTOR_SYNC; }

static void ev_reset(void) {
  ev_win_first = ev_win_n = 0;
  ev_first_lo = ev_next_lo = ev_taken_lo = ev_taken_hi = ev_consumed = 0;
  ev_consumed_known = true;
  ev_seen_next = ev_seen_cycle = ev_seen_time = 0;
  ev_base = false;
}

static int ev_nnames(int kind) {
  const char *f = hl_event_fields(kind);
  int n = f && *f ? 1 : 0;
  for (; f && *f; f++) n += *f == ',';
  return n;
}

/* Peek up to cap events into buf and check them against the model. */
static void ev_peek(hl_event *buf, size_t cap, size_t *n, uint64_t *first) {
  hl_stats s1, s2;
  if (hl_stats_get(H, &s1)) FAIL("stats: %s", msg());
  int rc = hl_events_peek(H, buf, cap, n, first);
  if (hl_stats_get(H, &s2)) FAIL("stats: %s", msg());
  if (rc) FAIL("events_peek(cap %zu): %s", cap, msg());
  uint64_t f = *first;
  if (*n > cap || *n > (size_t)O.events_capacity)
    FAIL("events_peek(cap %zu) copied %zu events (ring of %" PRId64 ")", cap, *n,
         O.events_capacity);
  if (f < ev_first_lo) FAIL("events_peek: first %" PRIu64 ", earlier %" PRIu64, f, ev_first_lo);
  if (f < ev_taken_lo)
    FAIL("events_peek: first %" PRIu64 " below what reads consumed (%" PRIu64 ")", f, ev_taken_lo);
  if (ev_consumed_known &&
      (f < s1.events_dropped + ev_consumed || f > s2.events_dropped + ev_consumed))
    FAIL("events_peek: first %" PRIu64 ", but %" PRIu64 " consumed and %" PRIu64 "-%" PRIu64
         " dropped", f, ev_consumed, s1.events_dropped, s2.events_dropped);
  if (ev_consumed == 0 && f == 0 && *n && s2.events_dropped == 0 && buf[0].kind != HL_EV_heap_created)
    FAIL("event 0 is %s, not heap_created", hl_event_name(buf[0].kind));
  for (size_t i = 0; i < *n; i++) {
    hl_event *e = &buf[i];
    uint64_t num = f + i;
    if (e->kind < 0 || e->kind >= HL_EV_COUNT || e->nfields < 0 ||
        e->nfields > ev_nnames(e->kind))
      FAIL("event %" PRIu64 " has kind %d and %d fields", num, e->kind, e->nfields);
    if (e->cycle > s2.cycles)
      FAIL("event %" PRIu64 " (%s) says cycle %" PRIu64 " of %" PRIu64, num,
           hl_event_name(e->kind), e->cycle, s2.cycles);
    const hl_event *p = i ? &buf[i - 1] : NULL;
    uint64_t pc = p ? p->cycle : ev_seen_cycle, pt = p ? p->time_ns : ev_seen_time;
    if ((p || (num >= ev_seen_next && ev_seen_next)) && (e->cycle < pc || e->time_ns < pt))
      FAIL("event %" PRIu64 " (%s, cycle %" PRIu64 ", %" PRIu64 " ns) comes before the one "
           "before it (cycle %" PRIu64 ", %" PRIu64 " ns)", num, hl_event_name(e->kind),
           e->cycle, e->time_ns, pc, pt);
    if (num >= ev_win_first && num < ev_win_first + ev_win_n &&
        memcmp(e, &ev_win[num - ev_win_first], sizeof *e))
      FAIL("event %" PRIu64 " changed since the last peek: %s, was %s", num,
           hl_event_name(e->kind), hl_event_name(ev_win[num - ev_win_first].kind));
    if (e->kind == HL_EV_cycle &&
        (e->fields[0] < 0 || e->fields[0] > 1 || e->fields[8] < 0 || e->fields[8] > 4 ||
         e->fields[9] < 0 || e->fields[9] > 1))
      FAIL("cycle event %" PRIu64 ": major %" PRId64 ", reason %" PRId64 ", minor %" PRId64, num,
           e->fields[0], e->fields[8], e->fields[9]);
  }
  if (*n && f + *n > ev_seen_next) {
    ev_seen_next = f + *n;
    ev_seen_cycle = buf[*n - 1].cycle, ev_seen_time = buf[*n - 1].time_ns;
  }
  bool all = *n < cap || *n == (size_t)O.events_capacity; /* the whole ring */
  if (all && f + *n < ev_next_lo)
    FAIL("events_peek: %" PRIu64 " events recorded, earlier %" PRIu64, f + *n, ev_next_lo);
  /* one cycle event per cycle since the last full view, when none is lost */
  if (all && ev_sync() && ev_base && f <= ev_base_next) {
    uint64_t cycles = 0;
    for (size_t i = ev_base_next - f; i < *n; i++) cycles += buf[i].kind == HL_EV_cycle;
    if (cycles != s2.cycles - ev_base_cycles)
      FAIL("%" PRIu64 " cycle events since event %" PRIu64 ", stats count %" PRIu64 " cycles",
           cycles, ev_base_next, s2.cycles - ev_base_cycles);
  }
  if (all && ev_sync()) ev_base = true, ev_base_next = f + *n, ev_base_cycles = s2.cycles;
  if (all && f + *n > ev_next_lo) ev_next_lo = f + *n;
  ev_first_lo = f;
  if (f < ev_taken_hi) ev_taken_hi = f; /* kept_from never passes the ring's first */
  if (ev_taken_hi < ev_taken_lo) FAIL("internal: kept_from's range is empty");
  if (*n) memcpy(ev_win, buf, *n * sizeof *buf);
  ev_win_first = f, ev_win_n = *n;
}

/* hl_events_read(clear) read n events (op_probe): first0 was a peek's just
 * before. */
static void ev_read_cleared(uint64_t first0, size_t n) {
  ev_consumed += n;
  ev_base = false;
  /* the reader's taken: the ring's first then (first0 or more) plus n */
  if (first0 + n > ev_taken_lo) ev_taken_lo = first0 + n;
  ev_taken_hi = ev_sync() ? ev_taken_lo : UINT64_MAX; /* (the next peek bounds it) */
  if (first0 + n > ev_first_lo) ev_first_lo = first0 + n;
  if (first0 + n > ev_next_lo) ev_next_lo = first0 + n;
}

static void op_events(input *in) {
  uint8_t how = u8(in), a = u8(in);
  static hl_event buf[EVMAX], buf2[EVMAX];
  size_t n = 0, n2 = 0;
  uint64_t first = 0, first2 = 0;
  if (how & 0x80) { /* what peek and consume must refuse */
    int rc = hl_events_peek(H, buf, 4, &n, NULL);
    if (rc != HL_EINVAL || !strstr(msg(), "first") || n)
      FAIL("events_peek(NULL first): %s, %zu events: %s", hl_error_name(rc), n, msg());
    rc = hl_events_peek(H, NULL, 1 + a % 8, &n, &first);
    if (rc != HL_EINVAL || !strstr(msg(), "NULL buffer") || n || first)
      FAIL("events_peek(NULL buffer): %s, %zu events from %" PRIu64 ": %s", hl_error_name(rc), n,
           first, msg());
    rc = hl_events_peek(NULL, buf, 4, &n, &first);
    if (rc != HL_EINVAL || n) FAIL("events_peek(NULL heap): %s", hl_error_name(rc));
    uint64_t kf = 1;
    rc = hl_events_consume(NULL, 0, &kf);
    if (rc != HL_EINVAL || kf) FAIL("events_consume(NULL heap): %s, kept_from %" PRIu64,
                                    hl_error_name(rc), kf);
  }
  /* a peek of a few, then of all: the first does not consume */
  size_t cap = how & 1 ? EVMAX : (size_t)(a % 16);
  ev_peek(buf, cap, &n, &first);
  ev_peek(buf2, EVMAX, &n2, &first2);
  if (ev_sync() && (first2 != first || n2 < n))
    FAIL("a peek consumed: %zu from %" PRIu64 ", then %zu from %" PRIu64, n, first, n2, first2);
  uint64_t next = first2 + n2, upto;
  switch (how >> 1 & 3) {
  case 0: upto = next; break;                                        /* the protocol */
  case 1: upto = first2 + a % (n2 + 1); break;                       /* a part */
  case 2: upto = first2 - (first2 < a % 8 ? first2 : a % 8); break;  /* consumed already */
  default: upto = next + 1 + a % 4 + (ev_sync() ? 0 : 1ull << 40);   /* past the end */
  }
  bool want_kept = !(how & 8);
  uint64_t kf = 7;
  int rc = hl_events_consume(H, upto, want_kept ? &kf : NULL);
  if ((how >> 1 & 3) == 3) {
    if (rc != HL_EINVAL || !strstr(msg(), "upto") || (want_kept && kf))
      FAIL("events_consume(%" PRIu64 ", past %" PRIu64 " recorded): %s, kept_from %" PRIu64
           ": %s", upto, next, hl_error_name(rc), kf, msg());
    ev_peek(buf, EVMAX, &n, &first);
    if (ev_sync() && (first != first2 || n != n2))
      FAIL("a refused consume consumed: %zu from %" PRIu64 ", before %zu from %" PRIu64, n, first,
           n2, first2);
    return;
  }
  if (rc) FAIL("events_consume(%" PRIu64 ") of %zu from %" PRIu64 ": %s", upto, n2, first2, msg());
  if (want_kept) {
    if (kf < ev_taken_lo || kf > ev_taken_hi)
      FAIL("events_consume: kept_from %" PRIu64 ", the model says %" PRIu64 "..%" PRIu64, kf,
           ev_taken_lo, ev_taken_hi);
    ev_taken_lo = ev_taken_hi = kf > upto ? kf : upto;
  } else {
    if (upto > ev_taken_lo) ev_taken_lo = upto;
    if (upto > ev_taken_hi) ev_taken_hi = upto;
  }
  if (ev_sync()) ev_consumed += upto > first2 ? upto - first2 : 0;
  else ev_consumed_known = false; /* (a drop meanwhile consumed some for it) */
  ev_base = false;
  if (upto > ev_first_lo) ev_first_lo = upto;
  ev_peek(buf, EVMAX, &n, &first);
  if (verbose)
    fprintf(stderr, "fuzz_heap: events %zu from %" PRIu64 ", consumed up to %" PRIu64
            " (kept from %" PRIu64 "), %zu left from %" PRIu64 "\n", n2, first2, upto, kf, n, first);
  uint64_t want = upto > first2 ? upto : first2;
  if (ev_sync() && (first != want || first + n != next))
    FAIL("events_consume(%" PRIu64 ") of %zu from %" PRIu64 " left %zu from %" PRIu64, upto, n2,
         first2, n, first);
}

static void op_probe(void) {
  hl_stats s;
  if (hl_stats_get(H, &s)) FAIL("stats: %s", msg());
  if (s.verify_failures) FAIL("verify failed in a cycle: %s", msg());
  hl_event ev[16];
  size_t n = 0;
  uint64_t first0 = 0;
  ev_peek(NULL, 0, &n, &first0); /* (the ring's first, for the event model) */
  if (hl_events_read(H, ev, 16, &n, 1) || n > 16) FAIL("events: %s", msg());
  ev_read_cleared(first0, n);
  for (size_t i = 0; i < n; i++)
    if (ev[i].kind < 0 || ev[i].kind >= HL_EV_COUNT || ev[i].nfields > HL_EVENT_MAX_FIELDS)
      FAIL("event %zu has kind %d and %d fields", i, ev[i].kind, ev[i].nfields);
  hl_fault_state fs[HL_SITE_COUNT];
  if (hl_faults_get(H, fs, HL_SITE_COUNT, &n) || n != HL_SITE_COUNT) FAIL("faults: %s", msg());
  for (size_t i = 0; i < n; i++)
    if (fs[i].fired > fs[i].calls) FAIL("site %zu fired %" PRIu64 " of %" PRIu64 " calls", i,
                                        fs[i].fired, fs[i].calls);
  uint64_t res = 0, base = 0, bytes = 0;
  if (hl_resident_bytes(H, &res)) FAIL("resident_bytes: %s", msg());
  hl_heap_range(H, &base, &bytes);
  if (res > bytes) FAIL("resident %" PRIu64 " > reservation %" PRIu64, res, bytes);
}

/* ======================================================================== */
/* The refusal hook (every heap), the samplers and hl_vma_count             */
/* ======================================================================== */

/* The refusal hook is set on every heap the harness makes (arg: hook_cookie):
 * every hl_malloc, hl_calloc and hl_realloc the harness calls is checked --
 * NULL (new size above 0) ran the hook exactly once, in the calling thread,
 * with the heap, the bytes asked (calloc: count * size, saturated) and the
 * arg it was set with; anything else ran it never.  In the hook, a call that
 * takes the heap's lock (hl_stats_get) must return: the hook runs with no lock
 * held (held, the call hangs, which libFuzzer reports as a timeout).  The
 * API extension's operations remove it, set it again with another arg, and
 * provoke refusals (op_hook). */
static char hook_cookie[2];
static bool hook_set;   /* the heap has the hook (hook_arg: its arg) */
static void *hook_arg;
static __thread struct {
  int calls;
  hl_heap *heap;
  size_t size;
  void *arg;
  int stats_rc;
} hook_seen;

static void on_refusal(hl_heap *heap, size_t size, void *arg) {
  hook_seen.calls++;
  hook_seen.heap = heap, hook_seen.size = size, hook_seen.arg = arg;
  hl_stats st;
  hook_seen.stats_rc = hl_stats_get(heap, &st);
}

static void set_hook(bool on, void *arg) {
  int rc = hl_set_refusal_hook(H, on ? on_refusal : NULL, arg);
  if (rc) FAIL("set_refusal_hook: %s (%s)", hl_error_name(rc), msg());
  hook_set = on, hook_arg = on ? arg : NULL;
}

static uint64_t refusals_seen; /* (FUZZ_HEAP_VERBOSE's tally) */

/* Before an allocation call: nothing seen yet in this thread. */
static void hook_arm(void) { hook_seen.calls = 0; }

/* After it: p its result, asked the bytes the hook must be given. */
static void hook_check(const void *p, size_t asked, const char *what) {
  int calls = hook_seen.calls;
  hook_seen.calls = 0;
  if (p || !hook_set) {
    if (calls) FAIL("%s %s, and the refusal hook ran %d times", what,
                    p ? "returned a block" : "was refused with no hook set", calls);
    return;
  }
  __atomic_fetch_add(&refusals_seen, 1, __ATOMIC_RELAXED);
  if (calls != 1) FAIL("%s returned NULL: the refusal hook ran %d times, not once, in the "
                       "allocating thread", what, calls);
  if (hook_seen.heap != H || hook_seen.size != asked || hook_seen.arg != hook_arg)
    FAIL("%s returned NULL: the refusal hook was given heap %p, %zu bytes, arg %p; expected "
         "%p, %zu, %p", what, (void *)hook_seen.heap, hook_seen.size, hook_seen.arg, (void *)H,
         asked, hook_arg);
  if (hook_seen.stats_rc)
    FAIL("%s: hl_stats_get in the refusal hook returned %s", what,
         hl_error_name(hook_seen.stats_rc));
}

/* A message of hl_heap_error(NULL) for a call that takes no heap (or a NULL
 * one) that failed: present and naming what it must name. */
static void expect_null_err(int rc, int want, const char *what, const char *names) {
  const char *m = hl_heap_error(NULL);
  if (rc != want || !m[0] || !strstr(m, names))
    FAIL("%s returned %s ('%s'); expected %s naming '%s'", what, hl_error_name(rc), m,
         hl_error_name(want), names);
}

/* ---- the samplers ----
 * The model: the interval and capacity each was opened with, when its
 * current phase began (open or reset returned: a sample taken later is in
 * the overall window), whether a mark is in force and when it was called
 * (mark_ns lies in that interval, and a sample taken after mark_ns is in the
 * after-mark window), the sample count of its phase at the last summary. */
#define NSMP 2
static struct {
  hl_sampler *s;
  uint64_t init_us, cap;
  uint64_t phase_ns;
  bool marked;
  uint64_t mark_lo, mark_hi;
  uint64_t samples;
} smp[NSMP];
static bool footprint_works; /* hl_footprint_get works here: every take samples */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A summary and what it must say of the model; then the series
 * [from, from+cap) and what each stored sample must satisfy. */
static void sampler_check(int i, uint64_t from, uint64_t cap) {
  hl_sampler *s = smp[i].s;
  /* the heap's reservation: what is resident of it is anonymous memory
   * resident now, in the process's rss and phys_footprint (a lower bound:
   * the summary's own sample is taken after it, and no other thread
   * releases with a synchronous collector and no prefault helper) */
  uint64_t res = 0;
  bool bound = H && O.collector == HL_COLLECTOR_SYNC && O.thp == HL_THP_NEVER &&
               hl_resident_bytes(H, &res) == HL_OK;
  hl_sampler_summary a;
  int rc = hl_sampler_summary_get(s, &a);
  if (rc) FAIL("sampler_summary_get: %s (%s)", hl_error_name(rc), hl_heap_error(NULL));
  if (footprint_works && a.samples < 1) FAIL("sampler summary: no sample, its own included");
  if (a.samples < smp[i].samples)
    FAIL("sampler summary: %" PRIu64 " samples, fewer than the %" PRIu64 " of the last summary "
         "of the phase", a.samples, smp[i].samples);
  smp[i].samples = a.samples;
  if (a.min_phys > a.max_phys || a.min_rss > a.max_rss)
    FAIL("sampler summary: phys [%" PRIu64 ", %" PRIu64 "], rss [%" PRIu64 ", %" PRIu64 "]",
         a.min_phys, a.max_phys, a.min_rss, a.max_rss);
  if (bound && footprint_works && (a.max_rss < res || a.max_phys < res))
    FAIL("sampler summary: max rss %" PRIu64 ", max phys %" PRIu64 " below the heap's %" PRIu64
         " resident bytes", a.max_rss, a.max_phys, res);
  if (smp[i].marked) {
    if (a.mark_ns < smp[i].mark_lo || a.mark_ns > smp[i].mark_hi)
      FAIL("sampler summary: mark_ns %" PRIu64 " outside the mark call [%" PRIu64 ", %" PRIu64
           "]", a.mark_ns, smp[i].mark_lo, smp[i].mark_hi);
    if (footprint_works &&
        (a.min_phys_after_mark > a.max_phys_after_mark || a.min_phys_after_mark < a.min_phys ||
         a.max_phys_after_mark > a.max_phys || !a.min_phys_after_mark))
      FAIL("sampler summary: after the mark [%" PRIu64 ", %" PRIu64 "], overall [%" PRIu64
           ", %" PRIu64 "]", a.min_phys_after_mark, a.max_phys_after_mark, a.min_phys,
           a.max_phys);
  } else if (a.mark_ns || a.min_phys_after_mark || a.max_phys_after_mark) {
    FAIL("sampler summary: no mark in this phase, but mark_ns %" PRIu64 " and after-mark [%"
         PRIu64 ", %" PRIu64 "]", a.mark_ns, a.min_phys_after_mark, a.max_phys_after_mark);
  }
  /* the thread keeps the interval it was opened with (only the stored
   * series thins out) */
  if (a.interval_us != smp[i].init_us)
    FAIL("sampler summary: interval %" PRIu64 " us, opened with %" PRIu64 " us (it never "
         "changes)", a.interval_us, smp[i].init_us);
  if (a.stored < (footprint_works ? 1u : 0u) || a.stored > (smp[i].cap & ~1ull))
    FAIL("sampler summary: %" PRIu64 " samples stored of a capacity of %" PRIu64, a.stored,
         smp[i].cap);

  /* the series */
  hl_sample buf[64];
  size_t n = 7;
  if (cap > 64) cap = 64;
  rc = hl_sampler_read(s, from, cap ? buf : NULL, cap, &n);
  if (rc) FAIL("sampler_read(%" PRIu64 ", %" PRIu64 "): %s (%s)", from, cap, hl_error_name(rc),
               hl_heap_error(NULL));
  if (n > cap || (n && from + n > (smp[i].cap & ~1ull)))
    FAIL("sampler_read(%" PRIu64 ", %" PRIu64 ") gave %zu samples of a capacity of %" PRIu64,
         from, cap, n, smp[i].cap);
  /* a summary after the read: every sample the read gave that was taken in
   * this phase is in its overall window (and after the mark, in that one) */
  hl_sampler_summary b;
  if (hl_sampler_summary_get(s, &b)) FAIL("sampler_summary_get: %s", hl_heap_error(NULL));
  smp[i].samples = b.samples;
  for (size_t k = 0; k < n; k++) {
    if (k && buf[k].t_ns < buf[k - 1].t_ns)
      FAIL("sampler series out of time order at %" PRIu64 ": %" PRIu64 " after %" PRIu64,
           from + k, buf[k].t_ns, buf[k - 1].t_ns);
    if (buf[k].t_ns > smp[i].phase_ns &&
        (buf[k].phys_footprint < b.min_phys || buf[k].phys_footprint > b.max_phys ||
         buf[k].rss < b.min_rss || buf[k].rss > b.max_rss))
      FAIL("sample %" PRIu64 " of the phase (phys %" PRIu64 ", rss %" PRIu64 ") is outside the "
           "summary's window: phys [%" PRIu64 ", %" PRIu64 "], rss [%" PRIu64 ", %" PRIu64 "]",
           from + k, buf[k].phys_footprint, buf[k].rss, b.min_phys, b.max_phys, b.min_rss,
           b.max_rss);
    if (smp[i].marked && buf[k].t_ns > b.mark_ns &&
        (buf[k].phys_footprint < b.min_phys_after_mark ||
         buf[k].phys_footprint > b.max_phys_after_mark))
      FAIL("sample %" PRIu64 " after the mark (phys %" PRIu64 ") is outside the after-mark "
           "window [%" PRIu64 ", %" PRIu64 "]", from + k, buf[k].phys_footprint,
           b.min_phys_after_mark, b.max_phys_after_mark);
  }
}

static const double smp_intervals[] = {0.0001, 0.0005, 0.002, 0.02, 10};
static const int64_t smp_caps[] = {16, 17, 33, 64, 1024};

static void op_sampler(input *in) {
  uint8_t how = u8(in), a = u8(in), b = u8(in);
  int i = how >> 7;
  switch (how % 8) {
  case 0: case 1: { /* open (or start, in microseconds) */
    if (smp[i].s) {
      hl_sampler_stop(smp[i].s);
      smp[i].s = NULL;
      break;
    }
    double iv = smp_intervals[a % 5];
    int64_t cap = smp_caps[b % 5];
    int rc = how % 8 == 0 ? hl_sampler_open(&smp[i].s, iv, cap)
                          : hl_sampler_start(&smp[i].s, (uint32_t)(iv * 1e6 + 0.5), (size_t)cap);
    if (rc) FAIL("sampler_open(%g, %" PRId64 "): %s (%s)", iv, cap, hl_error_name(rc),
                 hl_heap_error(NULL));
    smp[i].init_us = (uint64_t)(iv * 1e6 + 0.5), smp[i].cap = (uint64_t)cap;
    smp[i].phase_ns = now_ns(), smp[i].marked = false, smp[i].samples = 0;
    break;
  }
  case 2: { /* arguments it must refuse: hl_sampler_open leaves the output NULL (it clears it
             * first; not a documented promise, but what it does -- hl_sampler_start's own
             * capacity check returns before that and leaves the output as it was) */
    static const double bad_iv[] = {0, 0.00009, 10.5, -1, __builtin_nan("")};
    static const int64_t bad_cap[] = {15, 0, -1, (1 << 24) + 1, INT64_MAX};
    hl_sampler *s = (hl_sampler *)&smp; /* junk: must be overwritten with NULL */
    int rc;
    if (a & 1) {
      rc = hl_sampler_open(&s, bad_iv[b % 5], 64);
      expect_null_err(rc, HL_EINVAL, "sampler_open with a bad interval", "interval_s");
    } else if (a & 2) {
      rc = hl_sampler_open(&s, 0.01, bad_cap[b % 5]);
      expect_null_err(rc, HL_EINVAL, "sampler_open with a bad capacity", "capacity");
    } else if (a & 4) {
      rc = hl_sampler_start(&s, 1000, (size_t)(1 << 24) + 1 + b);
      expect_null_err(rc, HL_EINVAL, "sampler_start with a bad capacity", "capacity");
      s = NULL;
    } else {
      rc = hl_sampler_open(NULL, 0.01, 64);
      expect_null_err(rc, HL_EINVAL, "sampler_open with a NULL output", "NULL");
      s = NULL;
    }
    if (s) FAIL("a refused sampler_open left its output %p", (void *)s);
    /* and the calls on a NULL sampler */
    hl_sampler_summary sum;
    size_t n = 0;
    switch (b % 5) {
    case 0: expect_null_err(hl_sampler_mark(NULL), HL_EINVAL, "sampler_mark(NULL)", "NULL"); break;
    case 1: expect_null_err(hl_sampler_reset(NULL), HL_EINVAL, "sampler_reset(NULL)", "NULL"); break;
    case 2:
      expect_null_err(hl_sampler_summary_get(NULL, &sum), HL_EINVAL, "sampler_summary_get(NULL)",
                      "NULL");
      break;
    case 3:
      expect_null_err(hl_sampler_read(NULL, 0, NULL, 0, &n), HL_EINVAL, "sampler_read(NULL)",
                      "NULL");
      break;
    default: hl_sampler_stop(NULL);
    }
    break;
  }
  case 3: { /* mark */
    if (!smp[i].s) break;
    uint64_t lo = now_ns();
    if (hl_sampler_mark(smp[i].s)) FAIL("sampler_mark: %s", hl_heap_error(NULL));
    smp[i].mark_lo = lo, smp[i].mark_hi = now_ns(), smp[i].marked = true;
    break;
  }
  case 4: /* reset: a new phase, no mark */
    if (!smp[i].s) break;
    if (hl_sampler_reset(smp[i].s)) FAIL("sampler_reset: %s", hl_heap_error(NULL));
    smp[i].phase_ns = now_ns(), smp[i].marked = false, smp[i].samples = 0;
    break;
  case 5: { /* calls on a live sampler it must refuse */
    if (!smp[i].s) break;
    size_t n = 3;
    if (a & 1) {
      expect_null_err(hl_sampler_summary_get(smp[i].s, NULL), HL_EINVAL,
                      "sampler_summary_get(NULL output)", "output");
    } else if (a & 2) {
      expect_null_err(hl_sampler_read(smp[i].s, 0, NULL, 1 + b, &n), HL_EINVAL,
                      "sampler_read(NULL buffer)", "buffer");
    } else {
      hl_sample x;
      expect_null_err(hl_sampler_read(smp[i].s, 0, &x, 1, NULL), HL_EINVAL,
                      "sampler_read(NULL count)", "count");
    }
    break;
  }
  default: /* summary and series */
    if (smp[i].s) sampler_check(i, a % 40, b % 70);
  }
}

static void reset_samplers(void) {
  for (int i = 0; i < NSMP; i++) {
    if (smp[i].s) sampler_check(i, 0, 64);
    hl_sampler_stop(smp[i].s);
    smp[i].s = NULL;
  }
}

/* hl_vma_count: the reservation is one VMA for the heap's life (never
 * mprotected, advised whole) unless dump_toggle splits it on purpose, and
 * then one a page at most, or dump_unused=0 keeps its unused part out of
 * core dumps (two); HL_ESYS (the map unreadable) names the call. */
static void op_vma(input *in) {
  uint8_t how = u8(in);
  uint64_t n = 0;
  int rc;
  switch (how % 4) {
  case 0:
    rc = hl_vma_count(H, NULL);
    if (rc != HL_EINVAL || !strstr(msg(), "vma_count")) FAIL("vma_count(NULL output): %d %s", rc, msg());
    break;
  case 1:
    expect_null_err(hl_vma_count(NULL, &n), HL_EINVAL, "vma_count(NULL heap)", "heap");
    break;
  default:
    rc = hl_vma_count(H, &n);
    if (rc == HL_ESYS) {
      if (!strstr(msg(), "vma_count")) FAIL("vma_count failed: '%s'", msg());
      break;
    }
    if (rc) FAIL("vma_count: %s (%s)", hl_error_name(rc), msg());
    if (!O.dump_toggle && (O.dump_unused ? n != 1 : n < 1 || n > 2))
      FAIL("the reservation is %" PRIu64 " VMAs (dump_toggle off: one, or two with "
           "dump_unused=0: the part core dumps hold and the rest)", n);
    uint64_t base = 0, bytes = 0;
    hl_heap_range(H, &base, &bytes);
    if (n < 1 || n > bytes / (uint64_t)O.page_size)
      FAIL("the reservation is %" PRIu64 " VMAs (%" PRIu64 " pages)", n,
           bytes / (uint64_t)O.page_size);
  }
}

/* ======================================================================== */
/* Collected heaps                                                          */
/* ======================================================================== */

#define MAXOBJ 512
#define MAXSLOTS 4
#define MAXH 48
#define MAXFILL 2
#define NSTALE 8

typedef struct {
  bool used;
  uint32_t refs;
  uint64_t size;
  int32_t slot[MAXSLOTS]; /* model ids, -1 = empty */
  uint8_t *bytes;         /* the payload as the model knows it */
  uintptr_t addr;         /* the object: where it was allocated (compact=never: the heap never
                             moves it), else where the last check found it */
  uint64_t ident;         /* hl_ref_identity once asked (0: not yet) */
  uint32_t seen;          /* check epoch */
  uint32_t seen_handle_epoch; /* check epoch of first_handle */
  int first_handle;       /* its first handle in that check (hl_ref_same) */
} mobj;

static mobj objs[MAXOBJ];
static struct { hl_ref ref; int obj; } hnd[MAXH];
static int nh;
static struct { hl_ref ref; uint64_t sum, count; } fills[MAXFILL];
static int nfill;
static hl_ref stale[NSTALE];
static int nstale;
static uint32_t epoch;
static bool moving; /* compact != never: a full collection may move objects */

/* Root regions (only when the configuration's extension byte asks,
 * configure()): precise words (the heap updates them when an object moves)
 * and conservative words (a word into an object, interior too with
 * conservative_interior, keeps it and pins it). */
#define NREG 8
static void *regP[NREG], *regC[NREG];
static int regPid[NREG], regCid[NREG];
static uint64_t regCoff[NREG];
static bool have_regions, ext_ops, api_ops, fapi_ops;

static uint64_t live_estimate(void) { return model_bytes; }

static uint64_t pick_size(input *in) {
  uint8_t k = u8(in);
  uint16_t v = u16(in);
  switch (k % 5) {
  case 0: return v % 33;
  case 1: return v % ((uint64_t)O.small_max + 1);
  case 2: return (uint64_t)O.small_max + 1 + v % 4096; /* the large path */
  case 3: return v % 20000;
  default: return 16 * (v % 8);
  }
}

static void fill_pattern(uint8_t *p, uint64_t n, uint8_t seed) {
  for (uint64_t i = 0; i < n; i++) p[i] = (uint8_t)(seed + i * 7 + (i >> 8));
}

static int model_new(uint64_t size, uint32_t refs, uintptr_t addr, uint8_t seed) {
  for (int i = 0; i < MAXOBJ; i++) {
    if (objs[i].used) continue;
    mobj *m = &objs[i];
    m->bytes = malloc(size ? size : 1);
    if (!m->bytes) FAIL("model: out of memory");
    fill_pattern(m->bytes, size, seed);
    m->used = true, m->refs = refs, m->size = size, m->addr = addr, m->seen = 0, m->ident = 0;
    for (int k = 0; k < MAXSLOTS; k++) m->slot[k] = -1;
    model_bytes += size + 8 + 8ull * refs;
    return i;
  }
  return -1;
}

static bool model_full(void) {
  int used = 0;
  for (int i = 0; i < MAXOBJ; i++) used += objs[i].used;
  return used > MAXOBJ - 8 || model_bytes > budget;
}

/* Drop every model object no root reaches (the heap may free them). */
static void mark_from(int id) {
  if (id < 0 || objs[id].seen == epoch) return;
  objs[id].seen = epoch;
  for (uint32_t k = 0; k < objs[id].refs; k++) mark_from(objs[id].slot[k]);
}

static void model_collect(void) {
  epoch++;
  for (int i = 0; i < nh; i++) mark_from(hnd[i].obj);
  for (int i = 0; have_regions && i < NREG; i++) mark_from(regPid[i]), mark_from(regCid[i]);
  model_bytes = 0;
  for (int i = 0; i < MAXOBJ; i++) {
    mobj *m = &objs[i];
    if (!m->used) continue;
    if (m->seen != epoch) {
      free(m->bytes);
      memset(m, 0, sizeof *m);
    } else {
      model_bytes += m->size + 8 + 8ull * m->refs;
    }
  }
}

/* Compare object id with the real object at p, and everything it reaches.
 * compact=never: the object is where it was allocated.  Otherwise it may
 * have moved since the last check, but within one check every path to it
 * (handles, slots, root regions) must give one address -- the first path
 * that reaches it in this check records it -- and check_collected then
 * holds that no two model objects share an address, and every handle's
 * hl_ref_identity to the one it first gave. */
static void check_obj(int id, void *p, int depth) {
  mobj *m = &objs[id];
  if (!moving || m->seen == epoch) {
    if ((uintptr_t)p != m->addr)
      FAIL("object %d is at %p, expected %p (a slot points at another object)", id, p,
           (void *)m->addr);
    if (m->seen == epoch) return;
  }
  m->seen = epoch;
  m->addr = (uintptr_t)p;
  if (hl_obj_size(p) != m->size || hl_obj_refs(p) != m->refs)
    FAIL("object %d: size %" PRIu64 " refs %" PRIu64 ", expected %" PRIu64 " and %u", id,
         hl_obj_size(p), hl_obj_refs(p), m->size, m->refs);
  if (m->size && memcmp(hl_obj_payload(p), m->bytes, m->size)) {
    const uint8_t *got = hl_obj_payload(p);
    uint64_t at = 0;
    while (got[at] == m->bytes[at]) at++;
    FAIL("object %d (%" PRIu64 " bytes at %p) corrupted at byte %" PRIu64 ": %02x, expected %02x",
         id, m->size, p, at, got[at], m->bytes[at]);
  }
  for (uint32_t k = 0; k < m->refs; k++) {
    void *c = hl_obj_get(p, k);
    if (m->slot[k] < 0) {
      if (c) FAIL("object %d slot %u should be empty, holds %p", id, k, c);
    } else {
      if (!c) FAIL("object %d slot %u lost object %d", id, k, m->slot[k]);
      check_obj(m->slot[k], c, depth + 1);
    }
  }
}

static int cmp_addr(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

static void check_collected(void) {
  model_collect();
  epoch++;
  hl_enter(H);
  for (int i = 0; i < nh; i++) {
    hl_object_info info;
    int rc = hl_ref_info(H, hnd[i].ref, &info);
    if (rc) FAIL("handle %d (object %d) was lost: %s", i, hnd[i].obj, msg());
    check_obj(hnd[i].obj, (void *)(uintptr_t)info.object, 0);
    uint64_t ident = 0;
    if (hl_ref_identity(H, hnd[i].ref, &ident)) FAIL("identity of handle %d: %s", i, msg());
    mobj *m = &objs[hnd[i].obj];
    if (!m->ident) m->ident = ident;
    else if (m->ident != ident)
      FAIL("object %d's identity changed: %" PRIx64 " -> %" PRIx64, hnd[i].obj, m->ident, ident);
    /* hl_ref_same: the handle before it, and the object's first handle (moved or not) */
    if (m->seen_handle_epoch != epoch) m->seen_handle_epoch = epoch, m->first_handle = i;
    int other[2] = {i ? i - 1 : -1, m->first_handle};
    for (int k = 0; k < 2; k++) {
      if (other[k] < 0) continue;
      int same = -1;
      if (hl_ref_same(H, hnd[i].ref, hnd[other[k]].ref, &same))
        FAIL("ref_same of handles %d and %d: %s", i, other[k], msg());
      if (same != (hnd[i].obj == hnd[other[k]].obj))
        FAIL("ref_same says %d for handles %d and %d of objects %d and %d", same, i, other[k],
             hnd[i].obj, hnd[other[k]].obj);
    }
  }
  for (int i = 0; have_regions && i < NREG; i++) {
    void *w = __atomic_load_n(&regP[i], __ATOMIC_RELAXED);
    if (regPid[i] >= 0) {
      if (!w) FAIL("precise root word %d lost object %d", i, regPid[i]);
      check_obj(regPid[i], w, 0);
    }
    w = __atomic_load_n(&regC[i], __ATOMIC_RELAXED);
    if (regCid[i] >= 0) {
      /* pinned: where it was when the word was stored */
      uintptr_t a = (uintptr_t)w - regCoff[i];
      mobj *m = &objs[regCid[i]];
      if (m->seen == epoch && m->addr != a)
        FAIL("object %d, pinned by conservative word %d, moved: %p, the word says %p", regCid[i],
             i, (void *)m->addr, (void *)a);
      check_obj(regCid[i], (void *)a, 0);
    }
  }
  hl_leave(H);
  /* no two live model objects at one address */
  static struct { uintptr_t addr; int id; } at[MAXOBJ];
  int n = 0;
  for (int i = 0; i < MAXOBJ; i++)
    if (objs[i].used && objs[i].seen == epoch) at[n].addr = objs[i].addr, at[n++].id = i;
  qsort(at, (size_t)n, sizeof at[0], cmp_addr);
  for (int i = 1; i < n; i++)
    if (at[i].addr == at[i - 1].addr)
      FAIL("objects %d and %d are both at %p", at[i - 1].id, at[i].id, (void *)at[i].addr);
  for (int i = 0; i < nfill; i++) {
    uint64_t sum = 0, count = 0;
    int rc = hl_ref_checksum(H, fills[i].ref, &sum, &count);
    if (rc || sum != fills[i].sum || count != fills[i].count)
      FAIL("fill %d: checksum %" PRIx64 " over %" PRIu64 " objects, expected %" PRIx64
           " over %" PRIu64 " (%s)", i, sum, count, fills[i].sum, fills[i].count, msg());
  }
  hl_stats s;
  hl_stats_get(H, &s);
  if (s.handles != (uint64_t)(nh + nfill))
    FAIL("stats say %" PRIu64 " handles, the program holds %d", s.handles, nh + nfill);
  if (s.verify_failures) FAIL("a cycle's verification failed: %s", msg());
}

static int pick_handle(input *in) { return nh ? u8(in) % nh : -1; }

static void push_handle(hl_ref r, int obj) {
  if (nh == MAXH) FAIL("internal: handle table full");
  hnd[nh].ref = r, hnd[nh].obj = obj;
  nh++;
}

static void drop_handle(int i) {
  hl_ref r = hnd[i].ref;
  int rc = hl_ref_release(H, r);
  if (rc) FAIL("release of a live handle: %s", msg());
  stale[nstale++ % NSTALE] = r;
  hnd[i] = hnd[--nh];
}

static void op_alloc(input *in) {
  if (nh == MAXH) {
    drop_handle(0);
    return;
  }
  uint64_t size = pick_size(in);
  uint32_t refs = u8(in) % (MAXSLOTS + 1);
  uint8_t seed = u8(in);
  if (model_full()) return;
  hl_ref r = 0;
  int rc = hl_alloc(H, size, refs, &r);
  if (rc == HL_ENOMEM) {
    if (r) FAIL("alloc failed but gave a handle");
    out_of_memory("alloc");
    return;
  }
  if (rc) FAIL("alloc(%" PRIu64 ", %u): %s", size, refs, msg());
  hl_object_info info;
  if (hl_ref_info(H, r, &info) || info.size != size || info.refs != refs)
    FAIL("alloc(%" PRIu64 ", %u): info says %" PRIu64 " bytes, %" PRIu64 " refs", size, refs,
         info.size, info.refs);
  int id = model_new(size, refs, (uintptr_t)info.object, seed);
  if (id < 0) FAIL("internal: model full");
  /* a fresh object's slots are empty (its payload is not initialised) */
  for (uint32_t k = 0; k < refs; k++) {
    hl_ref c = 1;
    if (hl_ref_get(H, r, k, &c) || c) FAIL("a fresh object has slot %u set", k);
  }
  if (hl_ref_write(H, r, 0, objs[id].bytes, size)) FAIL("write: %s", msg());
  push_handle(r, id);
}

static void op_set(input *in) {
  int a = pick_handle(in), b = pick_handle(in);
  uint8_t k = u8(in), empty = u8(in) & 3;
  if (a < 0) return;
  mobj *m = &objs[hnd[a].obj];
  uint64_t slot = m->refs ? k % (m->refs + (k >> 7)) : k % 2; /* sometimes out of range */
  hl_ref v = (empty == 0 || b < 0) ? 0 : hnd[b].ref;
  int rc = hl_ref_set(H, hnd[a].ref, slot, v);
  if (slot >= m->refs) {
    if (rc != HL_ERANGE || !strstr(msg(), "slot")) FAIL("set of slot %" PRIu64 " of %u: %d %s",
                                                         slot, m->refs, rc, msg());
    return;
  }
  if (rc) FAIL("set: %s", msg());
  m->slot[slot] = v ? hnd[b].obj : -1;
}

static void op_get(input *in) {
  int a = pick_handle(in);
  uint8_t k = u8(in);
  if (a < 0) return;
  mobj *m = &objs[hnd[a].obj];
  uint64_t slot = m->refs ? k % (m->refs + (k >> 7)) : k % 2;
  hl_ref r = 0;
  int rc = hl_ref_get(H, hnd[a].ref, slot, &r);
  if (slot >= m->refs) {
    if (rc != HL_ERANGE || r)
      FAIL("get of slot %" PRIu64 " of %u: %d %s", slot, m->refs, rc, msg());
    return;
  }
  if (rc) FAIL("get: %s", msg());
  int child = m->slot[slot];
  if (child < 0) {
    if (r) FAIL("get of an empty slot gave a handle");
    return;
  }
  if (!r) FAIL("slot %" PRIu64 " lost object %d", slot, child);
  /* the new handle names what the slot holds (read held: nothing moves) */
  hl_object_info info, pinfo;
  hl_enter(H);
  if (hl_ref_info(H, r, &info) || hl_ref_info(H, hnd[a].ref, &pinfo) ||
      (uintptr_t)hl_obj_get((void *)(uintptr_t)pinfo.object, slot) != info.object ||
      (!moving && info.object != objs[child].addr))
    FAIL("get gave the wrong object");
  hl_leave(H);
  uint64_t ident = 0;
  if (hl_ref_identity(H, r, &ident)) FAIL("identity: %s", msg());
  if (objs[child].ident && ident != objs[child].ident)
    FAIL("get gave the wrong object: identity %" PRIx64 ", object %d's is %" PRIx64, ident, child,
         objs[child].ident);
  if (nh == MAXH) {
    if (hl_ref_release(H, r)) FAIL("release: %s", msg());
    return;
  }
  push_handle(r, child);
}

static void op_dup(input *in) {
  int a = pick_handle(in);
  if (a < 0 || nh == MAXH) return;
  hl_ref r = 0;
  if (hl_ref_dup(H, hnd[a].ref, &r) || !r || r == hnd[a].ref) FAIL("dup: %s", msg());
  push_handle(r, hnd[a].obj);
}

static void op_write(input *in) {
  int a = pick_handle(in);
  uint16_t off = u16(in), len = u8(in);
  uint8_t seed = u8(in), bad = u8(in);
  if (a < 0) return;
  mobj *m = &objs[hnd[a].obj];
  uint64_t o = m->size ? off % (m->size + (bad & 1)) : 0;
  uint64_t l = len;
  if (!(bad & 2) && o + l > m->size) l = m->size - o;
  uint8_t buf[256];
  fill_pattern(buf, l, seed);
  int rc = hl_ref_write(H, hnd[a].ref, o, buf, l);
  if (o + l > m->size) {
    if (rc != HL_ERANGE || !strstr(msg(), "write")) FAIL("write past the end: %d %s", rc, msg());
    return;
  }
  if (rc) FAIL("write: %s", msg());
  memcpy(m->bytes + o, buf, l);
}

static void op_read(input *in) {
  int a = pick_handle(in);
  uint16_t off = u16(in), len = u16(in);
  if (a < 0) return;
  mobj *m = &objs[hnd[a].obj];
  uint64_t o = off % (m->size + 2), l = len % (m->size + 2);
  uint8_t *buf = malloc(l ? l : 1);
  int rc = hl_ref_read(H, hnd[a].ref, o, buf, l);
  if (o > m->size || l > m->size - o) {
    if (rc != HL_ERANGE || !strstr(msg(), "read")) FAIL("read past the end: %d %s", rc, msg());
  } else if (rc) {
    FAIL("read: %s", msg());
  } else if (l && memcmp(buf, m->bytes + o, l)) {
    FAIL("read [%" PRIu64 ", +%" PRIu64 ") of object %d differs from the model", o, l, hnd[a].obj);
  }
  free(buf);
}

static uint64_t fill_args[4];
static bool fill_again(void) {
  hl_ref r = 0;
  if (fill_args[3] == 1 ? hl_fill(H, fill_args[0], fill_args[1], fill_args[2], &r)
                        : hl_fill_stride(H, fill_args[0], fill_args[1], fill_args[2], fill_args[3], &r))
    return false;
  if (hl_ref_release(H, r)) FAIL("release of a retried fill: %s", msg());
  return true;
}

static void op_fill(input *in) {
  uint64_t total = u16(in) % (32 << 10);
  uint64_t size = u8(in) % 4 == 0 ? 0 : 1 + u16(in) % ((uint64_t)O.small_max * 2);
  if (size < 16) total %= 2048; /* thousands of objects are slow to check each cycle */
  uint64_t refs = u8(in) % 3, stride = 1 + u8(in) % 4;
  if (nfill == MAXFILL || model_bytes + total * 2 > budget) {
    if (nfill) {
      if (hl_ref_release(H, fills[0].ref)) FAIL("release of a fill: %s", msg());
      fills[0] = fills[--nfill];
    }
    return;
  }
  hl_ref r = 0;
  int rc = stride == 1 ? hl_fill(H, total, size, refs, &r) /* (the same as stride 1) */
                       : hl_fill_stride(H, total, size, refs, stride, &r);
  if (rc == HL_ENOMEM || rc == HL_ESYS) {
    if (r) FAIL("a failed fill gave a handle");
    fill_args[0] = total, fill_args[1] = size, fill_args[2] = refs, fill_args[3] = stride;
    retry = fill_again;
    out_of_memory("fill");
    retry = NULL;
    return;
  }
  if (rc) FAIL("fill(%" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64 "): %s", total, size, refs,
               stride, msg());
  uint64_t sum = 0, count = 0;
  if (hl_ref_checksum(H, r, &sum, &count)) FAIL("checksum of a new fill: %s", msg());
  fills[nfill].ref = r, fills[nfill].sum = sum, fills[nfill].count = count;
  nfill++;
  model_bytes += total * 2;
}

static void op_fill_drop_page(input *in) {
  if (!nfill) return;
  int i = u8(in) % nfill;
  hl_object_info info;
  if (hl_ref_info(H, fills[i].ref, &info)) FAIL("fill root: %s", msg());
  if (!info.refs) return;
  if (hl_ref_set(H, fills[i].ref, u8(in) % info.refs, 0)) FAIL("dropping a fill page: %s", msg());
  /* what is left is the new expectation: the next checks hold it to that */
  if (hl_ref_checksum(H, fills[i].ref, &fills[i].sum, &fills[i].count))
    FAIL("checksum: %s", msg());
}

static void op_collect(input *in) {
  int major = (int)(u8(in) % 3) - 1;
  int64_t cycles = 1 + u8(in) % 2;
  expect_rc(hl_collect(H, cycles, major), "collect", HL_ENOMEM, -1);
}

/* Raw objects under hl_enter: allocated straight into a slot, or allocated
 * unrooted and stored before the next allocation; sometimes a chain. */
static void op_raw(input *in) {
  int a = pick_handle(in);
  uint8_t how = u8(in), k = u8(in), seed = u8(in);
  uint64_t size = pick_size(in);
  uint32_t refs = u8(in) % (MAXSLOTS + 1);
  if (a < 0 || model_full()) return;
  int pid = hnd[a].obj;
  if (!objs[pid].refs) return;
  hl_enter(H);
  if (how & 4) hl_enter(H); /* nested */
  hl_object_info info;
  if (hl_ref_info(H, hnd[a].ref, &info)) FAIL("info under hl_enter: %s", msg());
  void *parent = (void *)(uintptr_t)info.object;
  int depth = 1 + (how >> 4) % 3;
  for (int d = 0; d < depth; d++) {
    uint32_t slot = k % objs[pid].refs;
    void *o;
    if (how & 1) {
      o = hl_obj_new_in(H, parent, slot, size, refs);
    } else {
      o = hl_obj_new(H, size, refs);
      if (o) hl_obj_set(parent, slot, o);
    }
    if (!o) {
      if (!msg()[0]) FAIL("hl_obj_new failed with no message");
      out_of_memory("hl_obj_new");
      break;
    }
    if (hl_obj_size(o) != size || hl_obj_refs(o) != refs) FAIL("raw object has the wrong shape");
    for (uint32_t s = 0; s < refs; s++)
      if (hl_obj_get(o, s)) FAIL("a fresh raw object has slot %u set", s);
    int id = model_new(size, refs, (uintptr_t)o, seed);
    if (id < 0) FAIL("internal: model full");
    memcpy(hl_obj_payload(o), objs[id].bytes, size);
    objs[pid].slot[slot] = id;
    if (!refs || model_full()) break;
    pid = id, parent = o, seed += 31;
  }
  /* a raw store of one rooted object into another */
  if (how & 8 && nh > 1) {
    int b = (a + 1) % nh;
    mobj *m = &objs[hnd[a].obj];
    hl_object_info bi;
    if (m->refs && !hl_ref_info(H, hnd[b].ref, &bi)) {
      hl_obj_set((void *)(uintptr_t)info.object, k % m->refs, (void *)(uintptr_t)bi.object);
      m->slot[k % m->refs] = hnd[b].obj;
    }
  }
  if (how & 4) hl_leave(H);
  hl_leave(H);
}

static void op_stale(input *in) {
  if (!nstale) return;
  hl_ref r = stale[u8(in) % (nstale < NSTALE ? nstale : NSTALE)];
  hl_object_info info;
  uint8_t b[4];
  hl_ref out = 0;
  int rc;
  switch (u8(in) % 5) {
  case 0: rc = hl_ref_info(H, r, &info); break;
  case 1: rc = hl_ref_read(H, r, 0, b, 0); break;
  case 2: rc = hl_ref_release(H, r); break;
  case 3: rc = hl_ref_dup(H, r, &out); break;
  default: rc = hl_ref_set(H, r, 0, 0); break;
  }
  if (rc != HL_ESTALE || out)
    FAIL("a released handle was accepted: %s (%s)", hl_error_name(rc), msg());
}

static void op_bad(input *in) {
  hl_ref r = 1;
  int rc;
  switch (u8(in) % 6) {
  case 0:
    rc = hl_alloc(H, HL_MAX_SIZE + 1 + u8(in), 0, &r);
    if (rc != HL_EINVAL || r || !strstr(msg(), "size"))
      FAIL("alloc of a huge size: %d %s", rc, msg());
    break;
  case 1:
    rc = hl_alloc(H, 8, HL_MAX_REFS + 1 + u8(in), &r);
    if (rc != HL_EINVAL || r) FAIL("alloc of too many refs: %d %s", rc, msg());
    break;
  case 2:
    rc = hl_collect(H, 0, 0);
    if (rc != HL_EINVAL || !strstr(msg(), "cycles")) FAIL("collect 0 cycles: %d %s", rc, msg());
    break;
  case 3:
    hook_arm();
    if (hl_malloc(H, 16)) FAIL("malloc on a collected heap");
    hook_check(NULL, 16, "malloc on a collected heap");
    if (!strstr(msg(), "manual")) FAIL("malloc on a collected heap: '%s'", msg());
    break;
  case 4:
    rc = hl_ref_info(H, 0, NULL);
    if (rc == HL_OK) FAIL("info with NULL output");
    break;
  default:
    rc = hl_fill_stride(H, 1024, 16, 0, 0, &r);
    if (rc != HL_EINVAL || !strstr(msg(), "stride")) FAIL("fill stride 0: %d %s", rc, msg());
  }
}

static void op_churn(input *in) {
  hl_churn_result cr;
  uint64_t size = 16 + u8(in) % 256;
  int rc = hl_churn(H, 0.001, size, size * (1 + u8(in) % 64), 0, &cr);
  if (rc == HL_ENOMEM) out_of_memory("churn");
  else if (rc) FAIL("churn: %s", msg());
}

/* Allocate and drop at once, many times: cycles run inside allocation, and
 * nothing stays live (issue 16, defect 1's loop). */
static void op_burst(input *in) {
  int n = 1 + u8(in) * 4;
  uint64_t size = pick_size(in) % ((uint64_t)O.small_max + 1);
  for (int i = 0; i < n; i++) {
    hl_ref r = 0;
    int rc = hl_alloc(H, size, 0, &r);
    if (rc == HL_ENOMEM) {
      out_of_memory("alloc in a burst");
      return;
    }
    if (rc || hl_ref_release(H, r)) FAIL("burst: %s", msg());
  }
}

/* A region removed (hl_roots_remove) and added again: while it is out its
 * words keep nothing and the model follows none of them; it comes back with
 * the words it had -- stale then (compaction no longer updated them, what
 * they kept may have died), which any region may hold ("any value is
 * allowed in any region", docs/design.md) -- and the model follows none of
 * them until op_region stores one again.  Removing a base not registered,
 * or adding one registered, must be refused with HL_EINVAL and a message. */
static bool regOut[2]; /* [0] the precise region, [1] the conservative one */

/* hl_roots_fit, as the bindings call it before they allocate a region's
 * words (they call nothing else first): a count the reservation holds fits,
 * one past it is HL_EINVAL naming the reservation -- and hl_roots_add, which
 * checks the same bound, refuses it before it reads a word or looks at the
 * base (regP, registered or not).  k picks the count: the most, past it by
 * 1 + k, a small one, or one near 2^64 (no add: its base would pass the end
 * of the address space first). */
static void roots_fit_probe(uint8_t k) {
  uint64_t base = 0, bytes = 0;
  if (hl_heap_range(H, &base, &bytes)) FAIL("heap_range: %s", msg());
  uint64_t most = bytes / sizeof(void *);
  uint64_t words = k % 4 == 0 ? most : k % 4 == 1 ? most + 1 + k : k % 4 == 2 ? k : UINT64_MAX - k;
  int rc = hl_roots_fit(H, words);
  if (words <= most) {
    if (rc) FAIL("roots_fit of %" PRIu64 " words (%" PRIu64 " at most): %s '%s'", words, most,
                 hl_error_name(rc), msg());
    return;
  }
  if (rc != HL_EINVAL || !strstr(msg(), "larger than the heap's reservation"))
    FAIL("roots_fit of %" PRIu64 " words, past the %" PRIu64 " the reservation holds: %s '%s'",
         words, most, hl_error_name(rc), msg());
  if (k % 4 != 1) return;
  rc = hl_roots_add(H, regP, words, 0);
  if (rc != HL_EINVAL || !strstr(msg(), "larger than the heap's reservation"))
    FAIL("roots_add of %" PRIu64 " words, past the %" PRIu64 " the reservation holds: %s '%s'",
         words, most, hl_error_name(rc), msg());
}

static void region_toggle(int kind) {
  void *base = kind ? (void *)regC : (void *)regP;
  int *ids = kind ? regCid : regPid;
  if (!regOut[kind]) {
    int rc = hl_roots_add(H, base, NREG, kind);
    if (rc != HL_EINVAL || !strstr(msg(), "already registered"))
      FAIL("roots_add of a registered base: %s '%s'", hl_error_name(rc), msg());
    if (hl_roots_remove(H, base)) FAIL("roots_remove of region %d: %s", kind, msg());
    rc = hl_roots_remove(H, base);
    if (rc != HL_EINVAL || !strstr(msg(), "not a registered region"))
      FAIL("roots_remove of a removed base: %s '%s'", hl_error_name(rc), msg());
    for (int i = 0; i < NREG; i++) ids[i] = -1;
    regOut[kind] = true;
  } else {
    /* (as a binding adds one: hl_roots_fit first) */
    if (hl_roots_fit(H, NREG)) FAIL("roots_fit of region %d's %d words: %s", kind, NREG, msg());
    if (hl_roots_add(H, base, NREG, kind)) FAIL("roots_add of region %d again: %s", kind, msg());
    regOut[kind] = false;
  }
}

/* A root region word: precise ones stored with hl_roots_store (and moved
 * within the region, held), conservative ones an object's address (interior
 * with conservative_interior), or junk, or nothing.  A how byte with bits 0
 * and 5-7 set removes or adds again a region instead (bit 4: which one,
 * region_toggle); a word stored into a region that is out brings it back
 * first. */
static void op_region(input *in) {
  uint8_t k = u8(in), how = u8(in);
  int a = pick_handle(in);
  int i = k % NREG;
  if ((how & 0xe1) == 0xe1) {
    roots_fit_probe(k);
    region_toggle(how >> 4 & 1);
    return;
  }
  if (regOut[!(how & 1)]) region_toggle(!(how & 1));
  if (how & 1) {
    hl_ref r = (how & 2) && a >= 0 ? hnd[a].ref : 0;
    uint64_t v = 0, bad = 0;
    if (hl_roots_store(H, &regP[i], &v, &r, 1, &bad)) FAIL("roots_store: %s", msg());
    regPid[i] = r ? hnd[a].obj : -1;
    if (how & 8) {
      int j = (i + 1) % NREG;
      hl_enter(H);
      __atomic_store_n(&regP[j], __atomic_load_n(&regP[i], __ATOMIC_RELAXED), __ATOMIC_RELAXED);
      __atomic_store_n(&regP[i], NULL, __ATOMIC_RELAXED);
      hl_leave(H);
      regPid[j] = regPid[i], regPid[i] = -1;
    }
  } else {
    if (a < 0 || !(how & 2)) {
      __atomic_store_n(&regC[i], (how & 4) ? (void *)(uintptr_t)0xdeadbeef0 : NULL,
                       __ATOMIC_RELAXED);
      regCid[i] = -1;
      return;
    }
    mobj *m = &objs[hnd[a].obj];
    uint64_t span = 8 + 8 * (uint64_t)m->refs + m->size;
    uint64_t off = O.conservative_interior ? (how >> 4) % span : 0;
    hl_enter(H);
    hl_object_info info;
    if (hl_ref_info(H, hnd[a].ref, &info)) FAIL("info: %s", msg());
    __atomic_store_n(&regC[i], (void *)(uintptr_t)(info.object + off), __ATOMIC_RELAXED);
    hl_leave(H);
    regCid[i] = hnd[a].obj, regCoff[i] = off;
  }
}

/* hl_thin of a fill: the thinned copy is kept as a fill when there is room. */
static void op_thin(input *in) {
  if (!nfill) return;
  int i = u8(in) % nfill;
  uint64_t every = 1 + u8(in) % 5;
  hl_ref r = 0;
  int rc = hl_thin(H, fills[i].ref, every, &r);
  if (rc == HL_ENOMEM) {
    if (r) FAIL("a failed thin gave a handle");
    out_of_memory("thin");
    return;
  }
  if (rc) FAIL("thin: %s", msg());
  uint64_t sum, count;
  if (hl_ref_checksum(H, r, &sum, &count)) FAIL("checksum of a thinned fill: %s", msg());
  if (nfill < MAXFILL) {
    fills[nfill].ref = r, fills[nfill].sum = sum, fills[nfill].count = count;
    nfill++;
  } else if (hl_ref_release(H, r)) {
    FAIL("release of a thinned fill: %s", msg());
  }
}

/* ---- interrupts ----
 * A helper thread interrupts from before a long call until after it
 * returns: hl_interrupt() itself, or a signal it raises in itself that
 * hl_interrupt_attach made call it -- SIGWINCH (whose default ignores), or
 * INTR_SIG, whose handler before the attach (intr_chained) must still run
 * once for each signal.  A collection of a million cycles and a churn of
 * 30 s can only end by the interrupt: HL_EINTR, whose message says it (a
 * library that ignored it would run past libFuzzer's -timeout).  A fill,
 * a checksum and a thin of a fill may end first: HL_OK is then right too,
 * and the result is checked.  Interrupted: no handle made, and the heap
 * usable -- a collection after it runs (an interrupt is the call's it
 * stopped, not the next one's) and every live object is checked as after
 * every operation. */
#define INTR_SIG (SIGRTMIN + 4)
static atomic_int intr_done;
static atomic_uint_fast64_t intr_chained;
static uint64_t intr_calls, intr_stopped; /* (FUZZ_HEAP_VERBOSE's tally) */

static void intr_prev_handler(int sig) {
  (void)sig;
  atomic_fetch_add(&intr_chained, 1);
}

typedef struct {
  int sig;         /* 0: hl_interrupt() */
  uint64_t raised; /* signals raised */
} intr_job;

static void *interrupter(void *arg) {
  intr_job *j = arg;
  while (!atomic_load(&intr_done)) {
    if (j->sig) raise(j->sig), j->raised++;
    else hl_interrupt();
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

static void op_interrupt(input *in) {
  uint8_t how = u8(in), a = u8(in), b = u8(in);
  intr_job j = {0, 0};
  switch (how >> 5 & 3) {
  case 1: j.sig = SIGWINCH; break;
  case 2: j.sig = INTR_SIG; break;
  case 3: { /* what attach must refuse */
    static const int bad[] = {0, -1, 65, 1000, SIGKILL, SIGSTOP};
    int sig = bad[a % 6];
    int rc = hl_interrupt_attach(sig);
    if (sig == SIGKILL || sig == SIGSTOP) expect_null_err(rc, HL_ESYS, "interrupt_attach", "sigaction");
    else expect_null_err(rc, HL_EINVAL, "interrupt_attach", "signal number");
    break;
  }
  }
  if (j.sig) {
    int rc = hl_interrupt_attach(j.sig);
    if (rc) FAIL("interrupt_attach(%d): %s (%s)", j.sig, hl_error_name(rc), hl_heap_error(NULL));
  }
  int what = how % 5;
  int fi = nfill ? a % nfill : -1;
  uint64_t size = 1 + a % 8, objects = 4096 * (1 + b % 3), cost = objects * 32 + objects * size;
  if ((what == 3 || what == 4) && fi < 0) what = 0;
  if (what == 2 && model_bytes + cost > budget) what = 0;
  uint64_t chained0 = atomic_load(&intr_chained);
  atomic_store(&intr_done, 0);
  pthread_t t;
  if (pthread_create(&t, NULL, interrupter, &j)) return;
  int rc;
  hl_ref r = 0;
  uint64_t sum = 0, count = 0;
  hl_churn_result cr;
  switch (what) {
  case 0: rc = hl_collect(H, 1000000, (int)(b % 3) - 1); break;
  case 1: {
    uint64_t sz = 16 + b % 256;
    rc = hl_churn(H, 30.0, sz, sz * (1 + a % 32), 0, &cr);
    break;
  }
  case 2: rc = hl_fill_stride(H, objects * size, size, 0, 1, &r); break;
  case 3: rc = hl_ref_checksum(H, fills[fi].ref, &sum, &count); break;
  default: rc = hl_thin(H, fills[fi].ref, 1 + b % 5, &r);
  }
  atomic_store(&intr_done, 1);
  pthread_join(t, NULL);
  intr_calls++;
  static const char *names[] = {"collect of a million cycles", "churn of 30 s", "fill",
                                "checksum", "thin"};
  if (j.sig == INTR_SIG && atomic_load(&intr_chained) - chained0 != j.raised)
    FAIL("%" PRIu64 " signals %d raised, the handler before hl_interrupt_attach's ran %" PRIu64
         " times", j.raised, j.sig, (uint64_t)(atomic_load(&intr_chained) - chained0));
  if (rc == HL_EINTR) {
    intr_stopped++;
    if (!strstr(msg(), "interrupted")) FAIL("%s interrupted: '%s'", names[what], msg());
    if (r) FAIL("an interrupted %s made a handle", names[what]);
    rc = hl_collect(H, 2, 1);
    if (rc == HL_EINTR) FAIL("a collection after an interrupted %s was interrupted: %s",
                             names[what], msg());
    expect_rc(rc, "collect after an interrupt", HL_ENOMEM, -1);
    return;
  }
  if (rc == HL_ENOMEM || rc == HL_ESYS) {
    if (r) FAIL("a failed %s gave a handle", names[what]);
    if (what == 0) expect_rc(rc, names[what], HL_ENOMEM, -1);
    else if (what == 2) {
      fill_args[0] = objects * size, fill_args[1] = size, fill_args[2] = 0, fill_args[3] = 1;
      retry = fill_again;
      out_of_memory("fill (interrupted)");
      retry = NULL;
    } else if (what == 3) expect_rc(rc, names[what], HL_ENOMEM, -1);
    else out_of_memory(names[what]);
    return;
  }
  if (rc) FAIL("%s under interrupts: %s (%s)", names[what], hl_error_name(rc), msg());
  switch (what) {
  case 0: case 1: FAIL("%s returned HL_OK under interrupts", names[what]);
  case 2:
    if (!r) FAIL("a fill gave no handle");
    if (hl_ref_checksum(H, r, &sum, &count)) FAIL("checksum of a fill: %s", msg());
    if (nfill < MAXFILL && model_bytes + cost <= budget) {
      fills[nfill].ref = r, fills[nfill].sum = sum, fills[nfill].count = count;
      nfill++;
      model_bytes += cost;
    } else if (hl_ref_release(H, r)) {
      FAIL("release of a fill: %s", msg());
    }
    break;
  case 3:
    if (sum != fills[fi].sum || count != fills[fi].count)
      FAIL("checksum of fill %d under interrupts: %" PRIx64 " over %" PRIu64 " objects, expected %"
           PRIx64 " over %" PRIu64, fi, sum, count, fills[fi].sum, fills[fi].count);
    break;
  default:
    if (!r) FAIL("a thin gave no handle");
    if (hl_ref_release(H, r)) FAIL("release of a thinned fill: %s", msg());
  }
}

/* ======================================================================== */
/* Faults by name, the size limits, the effective options, the wait hook    */
/* ======================================================================== */

/* What heaplab.h promises of hl_inject_named, hl_max_size / hl_max_refs,
 * hl_heap_options and hl_heap_set_wait_hook, checked two ways: laws after
 * EVERY operation (so every input checks them) and an operation of its own,
 * op_fapi -- an operation byte of 0xcf (collected; 0xdf manual) when the
 * extension's b9 has bit 6 set (configure(); a probe otherwise, so the
 * inputs before it mean what they meant).
 *
 * The fault schedules (syscall.c, heaplab.h's modes): after every operation
 * each site's state is what was armed (a refused inject changes nothing),
 * and its fired count is what its mode takes of its calls -- first N:
 * min(calls, N); always: calls; every N: calls / N; sticky: at most calls;
 * off: no call counted.  stats faults_fired counts failed calls: up by at
 * least the most any site fired and at most their sum.  With the restore
 * site armed (errno not EAGAIN, "any" off) every restore is one call at the
 * site and every fired one a failed restore (restore_failed_pages,
 * subpage_restore_failed): the injected failure was taken, and the checks
 * after the operation (verify, every live object) say the heap survived it.
 * Exact where no other thread calls the heap (sync collector or manual, no
 * prefault helper); bounds otherwise.
 *
 * The wait hook is set on every heap: each paced wait (stats pacing_waits)
 * runs it once with begins 1 and once with 0, in the allocating thread, with
 * the heap and arg it was set with, the end with the hook the wait began
 * with, and with the heap lock dropped (the first wait of each input, and of
 * op_fapi's drills: another thread takes the lock, hl_stats_get, while the
 * hook waits for it).  No paced wait (sync, manual), no call. */
static pthread_t main_thread;
static bool faults_exact(void) { return ev_sync() && O.thp_prefault == 0; }

static hl_fault_state fsnap[HL_SITE_COUNT];
static uint64_t law_restores, law_restore_fails; /* (FUZZ_HEAP_VERBOSE's tally) */
static uint64_t fsnap_fired, fsnap_restores, fsnap_restore_failed;

static void faults_read(hl_fault_state *fs, hl_stats *st) {
  size_t n = 0;
  if (hl_stats_get(H, st)) FAIL("stats: %s", msg());
  if (hl_faults_get(H, fs, HL_SITE_COUNT, &n) || n != HL_SITE_COUNT) FAIL("faults: %s", msg());
}

static void fault_snapshot_from(const hl_fault_state *fs, const hl_stats *st) {
  memcpy(fsnap, fs, sizeof fsnap);
  fsnap_fired = st->faults_fired;
  fsnap_restores = st->restore_calls + st->subpage_restores + st->subpage_restore_failed;
  fsnap_restore_failed = st->restore_failed_pages + st->subpage_restore_failed;
}

/* After hl_inject / hl_inject_named armed a site: the laws start again. */
static void fault_snapshot(void) {
  hl_fault_state fs[HL_SITE_COUNT];
  hl_stats st;
  faults_read(fs, &st);
  fault_snapshot_from(fs, &st);
}

static void check_faults(void) {
  hl_fault_state fs[HL_SITE_COUNT];
  hl_stats st;
  faults_read(fs, &st);
  bool exact = faults_exact();
  uint64_t slack = exact ? 0 : 8, dsum = 0, dmax = 0;
  for (int i = 0; i < HL_SITE_COUNT; i++) {
    const hl_fault_state *f = &fs[i], *s = &fsnap[i];
    const char *name = hl_fault_site_name(i);
    if (f->site != i || f->mode != s->mode || f->arg != s->arg || f->err != s->err)
      FAIL("site %s: %s %" PRId64 " errno %d, armed %s %" PRId64 " errno %d", name,
           hl_fault_mode_name(f->mode), f->arg, f->err, hl_fault_mode_name(s->mode), s->arg,
           s->err);
    if (f->calls < s->calls || f->fired < s->fired)
      FAIL("site %s: %" PRIu64 " calls, %" PRIu64 " fired; before, %" PRIu64 " and %" PRIu64, name,
           f->calls, f->fired, s->calls, s->fired);
    uint64_t c = f->calls, want;
    bool ok = true;
    switch (f->mode) {
    case HL_FAULT_off: ok = !c && !f->fired; want = 0; break;
    case HL_FAULT_first:
      want = c < (uint64_t)f->arg ? c : (uint64_t)f->arg;
      ok = exact ? f->fired == want : f->fired <= (uint64_t)f->arg && f->fired <= c + slack;
      break;
    case HL_FAULT_always: want = c; ok = exact ? f->fired == c : f->fired <= c + slack; break;
    case HL_FAULT_every:
      want = c / (uint64_t)f->arg;
      ok = exact ? f->fired == want : f->fired <= (c + slack) / (uint64_t)f->arg;
      break;
    default: want = c; ok = f->fired <= c + slack; break; /* sticky: the pages it covers */
    }
    if (!ok)
      FAIL("site %s, %s %" PRId64 ": %" PRIu64 " of %" PRIu64 " calls failed, the schedule takes "
           "%s%" PRIu64, name, hl_fault_mode_name(f->mode), f->arg, f->fired, c,
           f->mode == HL_FAULT_sticky ? "at most " : "", want);
    uint64_t d = f->fired - s->fired;
    dsum += d;
    if (d > dmax) dmax = d;
  }
  uint64_t dF = st.faults_fired - fsnap_fired;
  if (st.faults_fired < fsnap_fired || (exact && (dF < dmax || dF > dsum)))
    FAIL("stats faults_fired went from %" PRIu64 " to %" PRIu64 ", the sites fired %" PRIu64
         " (the most one site: %" PRIu64 ")", fsnap_fired, st.faults_fired, dsum, dmax);
  const hl_fault_state *r = &fs[HL_SITE_restore], *rs = &fsnap[HL_SITE_restore];
  if (exact && r->mode != HL_FAULT_off && r->err != EAGAIN &&
      fs[HL_SITE_any].mode == HL_FAULT_off) {
    uint64_t calls = r->calls - rs->calls;
    uint64_t done = st.restore_calls + st.subpage_restores + st.subpage_restore_failed -
                    fsnap_restores;
    uint64_t failed = st.restore_failed_pages + st.subpage_restore_failed - fsnap_restore_failed;
    law_restores += calls, law_restore_fails += failed;
    if (calls != done)
      FAIL("site restore counted %" PRIu64 " calls, the stats %" PRIu64 " restores", calls, done);
    if (O.dump_toggle ? failed < r->fired - rs->fired : failed != r->fired - rs->fired)
      FAIL("site restore (%s %" PRId64 ", %s) fired %" PRIu64 " times, %" PRIu64
           " restores failed", hl_fault_mode_name(r->mode), r->arg, hl_errno_name(r->err),
           r->fired - rs->fired, failed);
  }
  fault_snapshot_from(fs, &st);
}

/* ---- the wait hook ---- */
static char wcookie[4]; /* hook A's args: &wcookie[0], &wcookie[1]; B's: &wcookie[2], NULL */
static void wait_hook_a(hl_heap *heap, int begins, void *arg);
static void wait_hook_b(hl_heap *heap, int begins, void *arg);
static int wh_set;                   /* the hook now: 0 none, 1 A, 2 B, -1 changing */
static uint64_t wh_begins, wh_ends;  /* calls (the allocating thread only) */
static __thread bool wh_in;
static __thread hl_wait_hook wh_fn;
static __thread void *wh_arg;
static bool wh_probe;                /* the next begin checks the lock */
static uint64_t wsnap_waits, wsnap_begins;

static pthread_mutex_t probe_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t probe_cv = PTHREAD_COND_INITIALIZER;
static bool probe_done;
static void *lock_prober(void *arg) {
  (void)arg;
  hl_stats st;
  if (hl_stats_get(H, &st)) FAIL("stats from another thread during a paced wait: %s", msg());
  pthread_mutex_lock(&probe_mu);
  probe_done = true;
  pthread_cond_signal(&probe_cv);
  pthread_mutex_unlock(&probe_mu);
  return NULL;
}

/* In the hook: another thread must be able to take the heap lock. */
static void lock_probe(void) {
  pthread_t t;
  probe_done = false;
  if (pthread_create(&t, NULL, lock_prober, NULL)) return;
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 10;
  pthread_mutex_lock(&probe_mu);
  int rc = 0;
  while (!probe_done && rc == 0) rc = pthread_cond_timedwait(&probe_cv, &probe_mu, &until);
  bool done = probe_done;
  pthread_mutex_unlock(&probe_mu);
  if (!done) FAIL("the wait hook runs with the heap lock held: another thread's hl_stats_get "
                  "waited 10 s");
  pthread_join(t, NULL);
}

static void wait_hook_check(hl_wait_hook self, hl_heap *heap, int begins, void *arg) {
  const char *me = self == wait_hook_a ? "A" : "B";
  if (heap != H) FAIL("wait hook %s called with heap %p, not %p", me, (void *)heap, (void *)H);
  if (!pthread_equal(pthread_self(), main_thread))
    FAIL("wait hook %s called in another thread than the allocating one", me);
  bool arg_ok = self == wait_hook_a ? arg == &wcookie[0] || arg == &wcookie[1]
                                    : arg == &wcookie[2] || arg == NULL;
  if (!arg_ok) FAIL("wait hook %s called with arg %p, never set with it", me, arg);
  if (begins == 1) {
    if (wh_in) FAIL("wait hook %s: a wait begins inside a wait", me);
    wh_in = true, wh_fn = self, wh_arg = arg;
    wh_begins++;
    if (wh_probe) wh_probe = false, lock_probe();
  } else if (begins == 0) {
    if (!wh_in) FAIL("wait hook %s: a wait ends that did not begin", me);
    if (wh_fn != self || wh_arg != arg)
      FAIL("a wait begun with hook %s (arg %p) ended with hook %s (arg %p)",
           wh_fn == wait_hook_a ? "A" : "B", wh_arg, me, arg);
    wh_in = false;
    wh_ends++;
  } else {
    FAIL("wait hook %s called with begins %d", me, begins);
  }
}
static void wait_hook_a(hl_heap *heap, int begins, void *arg) {
  wait_hook_check(wait_hook_a, heap, begins, arg);
}
static void wait_hook_b(hl_heap *heap, int begins, void *arg) {
  wait_hook_check(wait_hook_b, heap, begins, arg);
}

static void wait_snapshot(void) {
  hl_stats st;
  if (hl_stats_get(H, &st)) FAIL("stats: %s", msg());
  wsnap_waits = st.pacing_waits, wsnap_begins = wh_begins;
}

static void set_wait_hook(int which, int argi) {
  static void *const args[4] = {&wcookie[0], &wcookie[1], &wcookie[2], NULL};
  hl_wait_hook fn = which == 1 ? wait_hook_a : which == 2 ? wait_hook_b : NULL;
  void *arg = which == 1 ? args[argi & 1] : which == 2 ? args[2 + (argi & 1)] : args[argi & 3];
  int rc = hl_heap_set_wait_hook(H, fn, arg);
  if (rc) FAIL("set_wait_hook: %s", msg());
  wh_set = which;
  wait_snapshot();
}

/* After every operation: one begin and one end per paced wait of the hook. */
static void check_waits(const char *when) {
  hl_stats st;
  if (hl_stats_get(H, &st)) FAIL("stats: %s", msg());
  if (wh_in) FAIL("%s: a paced wait's hook began and did not end", when);
  if (wh_begins != wh_ends) FAIL("%s: %" PRIu64 " waits began, %" PRIu64 " ended", when,
                                 wh_begins, wh_ends);
  uint64_t waits = st.pacing_waits - wsnap_waits, calls = wh_begins - wsnap_begins;
  if (wh_set >= 0 && calls != (wh_set ? waits : 0))
    FAIL("%s: %" PRIu64 " paced waits (stats), the hook %s ran for %" PRIu64, when, waits,
         wh_set == 1 ? "A" : wh_set == 2 ? "B" : "(none set)", calls);
  if (ev_sync() && st.pacing_waits)
    FAIL("%s: %" PRIu64 " paced waits with the sync collector", when, st.pacing_waits);
  wsnap_waits = st.pacing_waits, wsnap_begins = wh_begins;
}

/* ---- the effective options ---- */
static void check_options(const char *when) {
  hl_options e;
  memset(&e, 0xa5, sizeof e);
  int rc = hl_heap_options(H, &e);
  if (rc) FAIL("%s: heap_options: %s", when, msg());
  hl_stats st;
  uint64_t bytes = 0;
  if (hl_stats_get(H, &st) || hl_heap_range(H, NULL, &bytes)) FAIL("stats: %s", msg());
  hl_options want = O;
  uint64_t ps = (uint64_t)O.page_size, align = 2u << 20;
  uint64_t res = (uint64_t)O.reserve_bytes / ps * ps;
  if (O.thp != HL_THP_NEVER && ps < align) res = res < align ? align : res / align * align;
  want.reserve_bytes = (int64_t)res; /* (at most 8 MiB here: never halved, or no heap) */
  if (want.young_min_bytes > want.young_bytes) want.young_min_bytes = want.young_bytes;
  if ((uint64_t)e.reserve_bytes != st.reserved_bytes || (uint64_t)e.reserve_bytes != bytes)
    FAIL("%s: heap_options says reserve_bytes %" PRId64 ", stats reserved_bytes %" PRIu64
         ", the range %" PRIu64, when, e.reserve_bytes, st.reserved_bytes, bytes);
  if (memcmp(&e, &want, sizeof e)) {
    for (int i = 0; i < hl_option_count(); i++) {
      hl_option_info info;
      int64_t got = 0, w = 0;
      hl_option_info_get(i, &info);
      if (hl_options_get(&e, info.name, &got) || hl_options_get(&want, info.name, &w))
        FAIL("options_get(%s) failed", info.name);
      if (got != w) {
        int64_t given = 0;
        hl_options_get(&O, info.name, &given);
        FAIL("%s: heap_options says %s %" PRId64 ", the heap was made with %" PRId64
             " (effective: %" PRId64 ")", when, info.name, got, given, w);
      }
    }
    FAIL("%s: heap_options differs from the options the heap was made with outside any "
         "option's field", when);
  }
  char err[256];
  if (hl_options_validate(&e, err, sizeof err))
    FAIL("%s: heap_options' effective options do not validate: %s", when, err);
}

/* ---- op_fapi ---- */

/* A fault schedule armed by names: site and mode by their names, N, the
 * errno as NULL (ENOMEM), its name (or "E<n>" for one without), a decimal
 * number or "+n"; read back by hl_faults_get as armed (off: errno 0). */
static void fapi_inject(uint8_t how, uint8_t a, uint8_t b, uint16_t v) {
  int site = a % HL_SITE_COUNT, mode = (a >> 4) % HL_FAULT_MODE_COUNT;
  int64_t arg = b % 64;
  if (mode == HL_FAULT_every && arg < 1) arg = 1;
  int e = (how & 0x40) ? errnos[v % NERRNOS] : 1 + v % 4095;
  char ebuf[32];
  const char *es;
  switch (how >> 4 & 3) {
  case 0: es = NULL, e = ENOMEM; break;
  case 1: es = hl_errno_name(e); break;
  case 2: snprintf(ebuf, sizeof ebuf, "%d", e), es = ebuf; break;
  default: snprintf(ebuf, sizeof ebuf, "+%d", e), es = ebuf; break;
  }
  if (mode == HL_FAULT_off) e = 0;
  int rc = hl_inject_named(H, hl_fault_site_name(site), hl_fault_mode_name(mode), arg, es);
  if (rc) FAIL("inject_named(%s, %s, %" PRId64 ", %s): %s", hl_fault_site_name(site),
               hl_fault_mode_name(mode), arg, es ? es : "NULL", msg());
  hl_fault_state fs[HL_SITE_COUNT];
  hl_stats st;
  faults_read(fs, &st);
  const hl_fault_state *f = &fs[site];
  if (f->mode != mode || f->arg != arg || f->err != e || (faults_exact() && (f->calls || f->fired)))
    FAIL("inject_named(%s, %s, %" PRId64 ", %s) reads back as %s %" PRId64 " errno %d, %" PRIu64
         " calls, %" PRIu64 " fired (errno %d expected)", hl_fault_site_name(site),
         hl_fault_mode_name(mode), arg, es ? es : "NULL", hl_fault_mode_name(f->mode), f->arg,
         f->err, f->calls, f->fired, e);
  for (int i = 0; i < HL_SITE_COUNT; i++)
    if (i != site && (fs[i].mode != fsnap[i].mode || fs[i].arg != fsnap[i].arg ||
                      fs[i].err != fsnap[i].err))
      FAIL("inject_named(%s, ...) changed site %s", hl_fault_site_name(site),
           hl_fault_site_name(i));
  fault_snapshot_from(fs, &st);
}

/* What hl_inject_named must refuse: HL_EINVAL, a message naming what was
 * wrong (and the choices, for an unknown site or mode), nothing armed. */
static void fapi_inject_bad(uint8_t a, uint8_t b) {
  check_faults(); /* (the state before, in fsnap) */
  const char *site = hl_fault_site_name(a % HL_SITE_COUNT), *mode = "always", *err = "EIO";
  const char *want = NULL, *list = NULL;
  int64_t arg = b % 8;
  char bad[48];
  switch ((a >> 4) % 10) {
  case 0: site = NULL, want = "NULL site"; break;
  case 1: snprintf(bad, sizeof bad, "%sx", site), site = bad, want = bad, list = "site"; break;
  case 2: mode = NULL, want = "NULL mode"; break;
  case 3: mode = b & 1 ? "sometimes" : "never", want = mode, list = "mode"; break;
  case 4: err = b & 1 ? "0" : "-5", want = err; break;
  case 5: err = b & 1 ? "4096" : "99999999999999999999", want = err; break;
  case 6: err = b & 1 ? "ENOTANERRNO" : " 5", want = err; break;
  case 7: mode = "first", arg = -1 - b, want = "N >= 0"; break;
  case 8: mode = "every", arg = -(int64_t)(b % 2), want = "N >= 1"; break;
  default: {
    int rc = hl_inject_named(NULL, site, mode, arg, err);
    if (rc != HL_EINVAL) FAIL("inject_named(NULL heap): %s", hl_error_name(rc));
    check_faults();
    return;
  }
  }
  int rc = hl_inject_named(H, site, mode, arg, err);
  if (rc != HL_EINVAL || !strstr(msg(), want))
    FAIL("inject_named(%s, %s, %" PRId64 ", %s): %s '%s', not HL_EINVAL naming '%s'",
         site ? site : "NULL", mode ? mode : "NULL", arg, err, hl_error_name(rc), msg(), want);
  if (list) /* the choices */
    for (int i = 0; i < (*list == 's' ? HL_SITE_COUNT : HL_FAULT_MODE_COUNT); i++) {
      const char *c = *list == 's' ? hl_fault_site_name(i) : hl_fault_mode_name(i);
      if (!strstr(msg(), c)) FAIL("inject_named: unknown %s: '%s' does not list %s", list, msg(), c);
    }
  check_faults(); /* nothing armed */
}

/* One past hl_max_size / hl_max_refs is HL_EINVAL (a manual heap: HL_EMODE),
 * no handle; at the bounds, with heap_limit_bytes, the limit refuses it
 * (the bounds themselves accepted). */
static void fapi_limits(uint8_t how, uint8_t a) {
  if (hl_max_size() != HL_MAX_SIZE || hl_max_refs() != HL_MAX_REFS)
    FAIL("hl_max_size %" PRIu64 ", hl_max_refs %" PRIu64 ": not HL_MAX_SIZE, HL_MAX_REFS",
         hl_max_size(), hl_max_refs());
  hl_stats s0, s1;
  if (hl_stats_get(H, &s0)) FAIL("stats: %s", msg());
  uint64_t over = 1 + a % 3;
  hl_ref r = 77;
  int rc = hl_alloc(H, hl_max_size() + over, a % 4, &r);
  int want = manual_mode ? HL_EMODE : HL_EINVAL;
  if (rc != want || r || (!manual_mode && !strstr(msg(), "size")))
    FAIL("alloc(hl_max_size() + %" PRIu64 "): %s '%s', handle %" PRIu64, over, hl_error_name(rc),
         msg(), r);
  r = 77;
  rc = hl_alloc(H, a, hl_max_refs() + over, &r);
  if (rc != want || r || (!manual_mode && !strstr(msg(), "refs")))
    FAIL("alloc(%u, hl_max_refs() + %" PRIu64 "): %s '%s', handle %" PRIu64, a, over,
         hl_error_name(rc), msg(), r);
  if (!manual_mode && how & 0x40) { /* the raw path */
    hl_enter(H);
    void *o = how & 0x20 ? hl_obj_new(H, a, hl_max_refs() + over)
                         : hl_obj_new(H, hl_max_size() + over, 0);
    const char *m = msg();
    bool named = strstr(m, how & 0x20 ? "refs" : "size") != NULL;
    hl_leave(H);
    if (o || !named) FAIL("hl_obj_new past the bounds: %p '%s'", o, msg());
  }
  if (!manual_mode && O.heap_limit_bytes && how & 0x10) { /* the bounds themselves */
    r = 77;
    rc = how & 0x20 ? hl_alloc(H, 0, hl_max_refs(), &r) : hl_alloc(H, hl_max_size(), 0, &r);
    if (rc != HL_ENOMEM || r || !limit_oom())
      FAIL("alloc at %s with heap_limit_bytes %" PRId64 ": %s '%s' (the limit must refuse it)",
           how & 0x20 ? "hl_max_refs()" : "hl_max_size()", O.heap_limit_bytes, hl_error_name(rc),
           msg());
  }
  if (hl_stats_get(H, &s1)) FAIL("stats: %s", msg());
  if (s1.handles != s0.handles) FAIL("refused allocations changed the handles: %" PRIu64 " -> %"
                                     PRIu64, s0.handles, s1.handles);
}

static void fapi_options(uint8_t a) {
  check_options("op_fapi");
  hl_options e;
  memset(&e, 0x5a, sizeof e);
  int rc = hl_heap_options(NULL, &e);
  hl_options zero;
  memset(&zero, 0, sizeof zero);
  if (rc != HL_EINVAL || memcmp(&e, &zero, sizeof e))
    FAIL("heap_options(NULL heap): %s, the output %szeroed", hl_error_name(rc),
         memcmp(&e, &zero, sizeof e) ? "not " : "");
  if (a & 1) {
    rc = hl_heap_options(H, NULL);
    if (rc != HL_EINVAL || !strstr(msg(), "NULL")) FAIL("heap_options(NULL out): %s '%s'",
                                                         hl_error_name(rc), msg());
  }
}

/* Allocations that may wait (the large path, adding up past
 * large_trigger_bytes), each dropped at once; out of memory as everywhere
 * (the request retried after a major collection). */
static uint64_t paced_size;
static bool paced_again(void) {
  hl_ref r = 0;
  if (hl_alloc(H, paced_size, 0, &r)) return false;
  if (hl_ref_release(H, r)) FAIL("release: %s", msg());
  return true;
}
static void paced_allocs(int n, uint16_t v) {
  uint64_t span = (uint64_t)O.large_trigger_bytes / 4;
  if (span > 32768) span = 32768;
  for (int i = 0; i < n; i++) {
    uint64_t size = (uint64_t)O.small_max + 1 + (v + (uint64_t)i * 4099) % span;
    hl_ref r = 0;
    int rc = hl_alloc(H, size, 0, &r);
    if (rc == HL_ENOMEM) {
      if (r) FAIL("a refused paced allocation gave a handle");
      paced_size = size;
      retry = paced_again;
      out_of_memory("a paced allocation");
      retry = NULL;
      return;
    }
    if (rc || hl_ref_release(H, r)) FAIL("paced allocation of %" PRIu64 ": %s", size, msg());
  }
}

static atomic_int tog_done;
static void *hook_toggler(void *arg) {
  unsigned k = (unsigned)(uintptr_t)arg;
  static void *const args[4] = {&wcookie[0], &wcookie[1], &wcookie[2], NULL};
  while (!atomic_load(&tog_done)) {
    int which = k % 3, ai = (k >> 2) & 1;
    int rc = hl_heap_set_wait_hook(H, which == 1 ? wait_hook_a : which == 2 ? wait_hook_b : NULL,
                                   which == 1 ? args[ai] : args[2 + ai]);
    if (rc) FAIL("set_wait_hook from another thread: %s", hl_error_name(rc));
    k = k * 1103515245u + 12345u;
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

static void fapi_wait(uint8_t how, uint8_t a, uint16_t v) {
  switch (how >> 4 & 3) {
  case 0: /* set, removed, set again; a NULL heap refused */
    set_wait_hook(a % 3, a >> 2);
    if (how & 0x40) {
      int rc = hl_heap_set_wait_hook(NULL, wait_hook_a, &wcookie[0]);
      if (rc != HL_EINVAL) FAIL("set_wait_hook(NULL heap): %s", hl_error_name(rc));
    }
    break;
  case 1: case 2: /* each hook in turn, the law checked after each */
    if (manual_mode) break;
    for (int k = 0; k < 3; k++) {
      set_wait_hook((a + k) % 3, a >> (2 + k));
      wh_probe = true;
      paced_allocs(2 + (a >> 4), v);
      check_waits("op_fapi's paced allocations");
    }
    wh_probe = false;
    break;
  default: { /* changed by another thread while allocations wait */
    if (manual_mode) break;
    pthread_t t;
    atomic_store(&tog_done, 0);
    if (pthread_create(&t, NULL, hook_toggler, (void *)(uintptr_t)(a | v << 8))) break;
    wh_set = -1;
    paced_allocs(4 + (a >> 3), v);
    atomic_store(&tog_done, 1);
    pthread_join(t, NULL);
    if (wh_in) FAIL("a paced wait's hook began and did not end (the hook changing)");
    if (wh_begins != wh_ends) FAIL("%" PRIu64 " waits began, %" PRIu64 " ended (the hook "
                                   "changing)", wh_begins, wh_ends);
    set_wait_hook(1, 0);
  }
  }
}

static void op_fapi(input *in) {
  uint8_t how = u8(in), a = u8(in), b = u8(in);
  uint16_t v = u16(in);
  if (verbose) fprintf(stderr, "fuzz_heap: op_fapi %u (how 0x%02x)\n", how % 6, how);
  switch (how % 6) {
  case 0: case 1: fapi_inject(how, a, b, v); break;
  case 2: fapi_inject_bad(a, b); break;
  case 3: fapi_limits(how, a); break;
  case 4: fapi_options(a); break;
  default: fapi_wait(how, a, v);
  }
}

/* After every operation (both modes). */
static void check_api_laws(void) {
  check_faults();
  check_waits("after the operation");
}

static void op_api(input *in);

static void run_collected(input *in) {
  ev_reset();
  have_regions = false;
  regOut[0] = regOut[1] = false;
  for (int i = 0; i < NREG; i++) regP[i] = regC[i] = NULL, regPid[i] = regCid[i] = -1;
  if (ext_ops) {
    if (hl_roots_fit(H, NREG) || hl_roots_add(H, regP, NREG, 0) || hl_roots_add(H, regC, NREG, 1))
      FAIL("roots_fit/roots_add: %s", msg());
    have_regions = true;
  }
  while (in->n) {
    uint8_t op = u8(in);
    failed_restores_at_op = failed_restores();
    switch (api_ops && op >= 0xf0 ? 16 : op % 16) {
    case 16: op_api(in); break; /* (the API extension) */
    case 0: case 1: op_alloc(in); break;
    case 2: if (nh) drop_handle(u8(in) % nh); break;
    case 3: op_dup(in); break;
    case 4: op_set(in); break;
    case 5: op_get(in); break;
    case 6: op_write(in); break;
    case 7: op_read(in); break;
    case 8: if (op & 16) op_fill_drop_page(in); else op_fill(in); break;
    case 9: op_collect(in); break;
    case 10: expect_rc(hl_trim(H), "trim", -1, -1); if (op & 16) hl_memory_pressure(H); break;
    case 11: op_raw(in); break;
    case 12: op_inject(in); break;
    case 13:
      if (ext_ops && op & 16) op_region(in);
      else if (ext_ops && op & 32) op_thin(in);
      else op_stale(in);
      break;
    case 14: if (op & 16) op_churn(in); else op_bad(in); break;
    default:
      if (op & 16) op_burst(in);
      else if (op == 0xef) op_events(in); /* (0xef: was a probe; 1 in 8 of its bytes) */
      else if (op == 0xcf && fapi_ops) op_fapi(in); /* (b9 bit 6) */
      else op_probe();
      break;
    }
    check_collected();
    check_api_laws();
    if (hl_heap_check(H)) FAIL("heap check after op %u: %s", op % 16, msg());
  }
}

static void reset_collected(void) {
  for (int i = 0; i < MAXOBJ; i++) free(objs[i].bytes);
  memset(objs, 0, sizeof objs);
  nh = nfill = nstale = 0;
  model_bytes = 0;
}

/* ======================================================================== */
/* Manual heaps                                                             */
/* ======================================================================== */

#define MAXB 256
typedef struct {
  uint8_t *p;      /* the block */
  uint64_t size;   /* what was asked */
  uint8_t *bytes;  /* its contents as the model knows them */
} mblock;
static mblock blk[MAXB];
static int nb;
static void *freed[NSTALE];
static int nfreed;

static uint64_t manual_size(input *in) {
  uint8_t k = u8(in);
  uint16_t v = u16(in);
  switch (k % 4) {
  case 0: return v % 65;
  case 1: return v % ((uint64_t)O.small_max + 1);
  case 2: return (uint64_t)O.small_max + 1 + v % 8192;
  default: return v % 3000;
  }
}

static void block_add(void *p, uint64_t size, uint8_t seed, bool write) {
  mblock *b = &blk[nb++];
  b->p = p, b->size = size;
  b->bytes = malloc(size ? size : 1);
  if (!b->bytes) FAIL("model: out of memory");
  if (write) {
    fill_pattern(b->bytes, size, seed);
    memcpy(p, b->bytes, size);
  } else {
    memcpy(b->bytes, p, size);
  }
  model_bytes += size;
}

static void block_forget(int i) {
  model_bytes -= blk[i].size;
  freed[nfreed++ % NSTALE] = blk[i].p;
  free(blk[i].bytes);
  blk[i] = blk[--nb];
}

static bool is_live(void *p) {
  for (int i = 0; i < nb; i++)
    if (blk[i].p == p) return true;
  return false;
}

static void check_new_block(void *p, uint64_t size, const char *what) {
  if ((uintptr_t)p % 16) FAIL("%s(%" PRIu64 ") = %p is not 16-byte aligned", what, size, p);
  size_t us = hl_usable_size(H, p);
  if (us < size) FAIL("%s(%" PRIu64 "): usable size %zu", what, size, us);
  if (is_live(p)) FAIL("%s(%" PRIu64 ") handed out %p, which is live", what, size, p);
  /* no overlap with a live block */
  for (int i = 0; i < nb; i++) {
    uintptr_t a = (uintptr_t)blk[i].p, b = (uintptr_t)p;
    if (b < a + (blk[i].size ? blk[i].size : 1) && a < b + (size ? size : 1))
      FAIL("%s(%" PRIu64 ") = %p overlaps the live block %p (%" PRIu64 " bytes)", what, size, p,
           blk[i].p, blk[i].size);
  }
}

static void op_malloc(input *in) {
  uint64_t size = manual_size(in);
  uint8_t seed = u8(in);
  if (nb == MAXB || model_bytes + size > budget) return;
  hook_arm();
  void *p = hl_malloc(H, size);
  hook_check(p, size, "malloc");
  if (!p) {
    out_of_memory("malloc");
    return;
  }
  check_new_block(p, size, "malloc");
  block_add(p, size, seed, true);
}

static void op_calloc(input *in) {
  uint64_t count = u8(in) % 40, size = manual_size(in) / 8;
  uint8_t over = u8(in);
  if (over == 0xff) {
    hook_arm();
    if (hl_calloc(H, SIZE_MAX / 2, 3)) FAIL("calloc of an overflowing size succeeded");
    hook_check(NULL, SIZE_MAX, "calloc of an overflowing size");
    if (!strstr(msg(), "overflow")) FAIL("calloc overflow: '%s'", msg());
    return;
  }
  if (nb == MAXB || model_bytes + count * size > budget) return;
  hook_arm();
  uint8_t *p = hl_calloc(H, count, size);
  hook_check(p, count * size, "calloc");
  if (!p) {
    out_of_memory("calloc");
    return;
  }
  check_new_block(p, count * size, "calloc");
  for (uint64_t i = 0; i < count * size; i++)
    if (p[i])
      FAIL("calloc(%" PRIu64 ", %" PRIu64 "): byte %" PRIu64 " is %02x", count, size, i, p[i]);
  block_add(p, count * size, over, over & 1);
}

static void op_free(input *in, int how) {
  if (!nb) return;
  int i = u8(in) % nb;
  if (how) hl_free_sized(H, blk[i].p, blk[i].size);
  else hl_free(H, blk[i].p);
  block_forget(i);
}

static void op_realloc(input *in) {
  uint64_t size = manual_size(in);
  uint8_t seed = u8(in), which = u8(in);
  if (!nb || which % 8 == 0) {
    /* realloc(NULL, n) is malloc */
    if (nb == MAXB || model_bytes + size > budget) return;
    hook_arm();
    void *p = hl_realloc(H, NULL, 0, size);
    hook_check(p, size, "realloc(NULL)");
    if (!p) return out_of_memory("realloc(NULL)");
    check_new_block(p, size, "realloc(NULL)");
    block_add(p, size, seed, true);
    return;
  }
  int i = which % nb;
  if (model_bytes + size > budget) return;
  mblock *b = &blk[i];
  if (size == 0) { /* realloc to 0 frees */
    hook_arm();
    if (hl_realloc(H, b->p, b->size, 0)) FAIL("realloc to 0 returned a block");
    if (hook_seen.calls) FAIL("realloc to 0 ran the refusal hook");
    block_forget(i);
    return;
  }
  hook_arm();
  void *p = hl_realloc(H, b->p, b->size, size);
  hook_check(p, size, "realloc");
  if (!p) {
    out_of_memory("realloc");
    /* the block is untouched: the next check holds it to that */
    return;
  }
  if ((uintptr_t)p % 16) FAIL("realloc gave %p, not 16-byte aligned", p);
  if (hl_usable_size(H, p) < size) FAIL("realloc: usable size below %" PRIu64, size);
  uint64_t keep = size < b->size ? size : b->size;
  if (keep && memcmp(p, b->bytes, keep))
    FAIL("realloc %" PRIu64 " -> %" PRIu64 " lost the contents", b->size, size);
  uint8_t *nbytes = malloc(size ? size : 1);
  memcpy(nbytes, b->bytes, keep);
  fill_pattern(nbytes + keep, size - keep, seed);
  memcpy((uint8_t *)p + keep, nbytes + keep, size - keep);
  free(b->bytes);
  model_bytes = model_bytes - b->size + size;
  if (p != b->p) {
    for (int k = 0; k < nb; k++)
      if (k != i && blk[k].p == p) FAIL("realloc moved the block onto a live one");
    freed[nfreed++ % NSTALE] = b->p;
  }
  b->p = p, b->size = size, b->bytes = nbytes;
}

static void op_mwrite(input *in) {
  if (!nb) return;
  mblock *b = &blk[u8(in) % nb];
  uint64_t off = b->size ? u16(in) % b->size : 0, len = u8(in);
  if (off + len > b->size) len = b->size - off;
  fill_pattern(b->bytes + off, len, u8(in));
  memcpy(b->p + off, b->bytes + off, len);
}

/* Another thread allocates some blocks (they join the model) and frees some
 * of ours; it flushes its cache or leaves it to the thread's exit. */
typedef struct {
  int nfree, nalloc, flush;
  void *frees[8];
  uint64_t fsize[8];
  void *got[8];
  uint64_t gsize[8];
} remote_job;

static void *remote(void *arg) {
  remote_job *j = arg;
  for (int i = 0; i < j->nfree; i++)
    if (j->fsize[i] & 1) hl_free(H, j->frees[i]);
    else hl_free_sized(H, j->frees[i], j->fsize[i] >> 1);
  for (int i = 0; i < j->nalloc; i++) {
    hook_arm();
    j->got[i] = hl_malloc(H, j->gsize[i]);
    hook_check(j->got[i], j->gsize[i], "malloc in another thread");
  }
  if (j->flush) hl_thread_flush(H);
  return NULL;
}

static void op_remote(input *in) {
  remote_job j = {0};
  j.nfree = nb ? u8(in) % (nb < 8 ? nb + 1 : 8) : 0;
  j.nalloc = u8(in) % 8;
  j.flush = u8(in) & 1;
  for (int i = 0; i < j.nfree; i++) {
    int k = u8(in) % nb;
    j.frees[i] = blk[k].p;
    j.fsize[i] = blk[k].size << 1 | (u8(in) & 1);
    block_forget(k);
  }
  for (int i = 0; i < j.nalloc; i++) j.gsize[i] = manual_size(in);
  pthread_t t;
  if (pthread_create(&t, NULL, remote, &j)) return;
  pthread_join(t, NULL);
  for (int i = 0; i < j.nalloc; i++) {
    if (!j.got[i]) continue;
    if (nb == MAXB || model_bytes + j.gsize[i] > budget) {
      hl_free(H, j.got[i]);
      continue;
    }
    check_new_block(j.got[i], j.gsize[i], "malloc in another thread");
    block_add(j.got[i], j.gsize[i], (uint8_t)i, true);
  }
}

static void op_double_free(input *in) {
  if (!O.verify || !nfreed) return;
  void *p = freed[u8(in) % (nfreed < NSTALE ? nfreed : NSTALE)];
  if (is_live(p)) return; /* handed out again: freeing it would be a real free */
  hl_stats before, after;
  hl_stats_get(H, &before);
  hl_free(H, p);
  hl_stats_get(H, &after);
  /* small blocks: "double free"; a large one is no longer known at all */
  if (after.manual_frees != before.manual_frees ||
      !(strstr(msg(), "double free") || strstr(msg(), "not a block")))
    FAIL("a double free of %p was not refused ('%s')", p, msg());
}

static void op_mbad(input *in) {
  switch (u8(in) % 4) {
  case 0:
    if (hl_collect(H, 1, 0) != HL_EMODE || !strstr(msg(), "manual"))
      FAIL("collect on a manual heap: %s", msg());
    break;
  case 1: {
    hl_ref r = 5;
    if (hl_alloc(H, 8, 0, &r) != HL_EMODE || r) FAIL("alloc on a manual heap: %s", msg());
    break;
  }
  case 2: {
    int local;
    if (hl_usable_size(H, &local)) FAIL("usable size of a stack address");
    hl_free(H, NULL);
    break;
  }
  default:
    if (u8(in) % 8) break; /* rare: ASan prints a line for each */
    hook_arm();
    if (hl_malloc(H, (size_t)1 << 62)) FAIL("malloc(2^62) succeeded");
    hook_check(NULL, (size_t)1 << 62, "malloc(2^62)");
    if (!msg()[0]) FAIL("malloc(2^62) failed with no message");
  }
}

/* The refusal hook: removed, set again (another arg, a NULL arg), refused
 * for a NULL heap, and refusals that must run it -- a collected heap has
 * no blocks (hl_malloc, hl_calloc, hl_realloc: NULL, EMODE); a manual heap
 * refuses an overflowing calloc, and with heap_limit_bytes a block or a
 * growth past it (the block it was asked to grow untouched: the next check
 * holds it to that). */
static void op_hook(input *in) {
  uint8_t how = u8(in), a = u8(in);
  uint16_t v = u16(in);
  switch (how % 8) {
  case 0: set_hook(false, NULL); break;
  case 1: set_hook(true, &hook_cookie[1]); break;
  case 2: set_hook(true, NULL); break;
  case 3:
    expect_null_err(hl_set_refusal_hook(NULL, on_refusal, NULL), HL_EINVAL,
                    "set_refusal_hook(NULL heap)", "heap");
    break;
  case 4:
    hook_arm();
    if (hl_calloc(H, SIZE_MAX / 4 + v, 5)) FAIL("calloc of an overflowing size succeeded");
    hook_check(NULL, SIZE_MAX, "calloc of an overflowing size");
    if (!strstr(msg(), "overflow")) FAIL("calloc overflow: '%s'", msg());
    break;
  case 5:
    if (!manual_mode) {
      hook_arm();
      if (hl_malloc(H, v)) FAIL("malloc on a collected heap");
      hook_check(NULL, v, "malloc on a collected heap");
      hook_arm();
      if (hl_calloc(H, a, v)) FAIL("calloc on a collected heap");
      hook_check(NULL, (size_t)a * v, "calloc on a collected heap");
      hook_arm();
      if (hl_realloc(H, NULL, 0, v)) FAIL("realloc(NULL) on a collected heap");
      hook_check(NULL, v, "realloc(NULL) on a collected heap");
      if (!strstr(msg(), "manual")) FAIL("malloc on a collected heap: '%s'", msg());
    } else if (O.heap_limit_bytes) {
      size_t n = (size_t)O.heap_limit_bytes + 1 + v;
      hook_arm();
      void *p = hl_malloc(H, n);
      hook_check(p, n, "malloc past heap_limit_bytes");
      if (p) FAIL("malloc(%zu) past heap_limit_bytes %" PRId64 " succeeded", n, O.heap_limit_bytes);
      if (!limit_oom()) FAIL("malloc(%zu) past heap_limit_bytes: '%s'", n, msg());
    }
    break;
  case 6:
    if (manual_mode && O.heap_limit_bytes && nb) {
      mblock *b = &blk[a % nb];
      size_t n = b->size + (size_t)O.heap_limit_bytes + 1 + v;
      hook_arm();
      void *p = hl_realloc(H, b->p, b->size, n);
      hook_check(p, n, "realloc past heap_limit_bytes");
      if (p) FAIL("realloc(%zu) past heap_limit_bytes %" PRId64 " succeeded", n,
                  O.heap_limit_bytes);
      if (!limit_oom()) FAIL("realloc(%zu) past heap_limit_bytes: '%s'", n, msg());
    }
    break;
  default: set_hook(true, &hook_cookie[0]); break;
  }
}

/* The API extension's operations (api_ops: configure()). */
static void op_api(input *in) {
  uint8_t k = u8(in);
  switch (k % 4) {
  case 0: op_sampler(in); break;
  case 1: if (manual_mode) op_hook(in); else op_interrupt(in); break;
  case 2: op_vma(in); break;
  default: op_hook(in);
  }
}

static void check_manual(void) {
  for (int i = 0; i < nb; i++) {
    mblock *b = &blk[i];
    if (b->size && memcmp(b->p, b->bytes, b->size)) {
      uint64_t at = 0;
      while (b->p[at] == b->bytes[at]) at++;
      FAIL("block %p (%" PRIu64 " bytes) corrupted at byte %" PRIu64 ": %02x, expected %02x",
           b->p, b->size, at, b->p[at], b->bytes[at]);
    }
    if (hl_usable_size(H, b->p) < b->size)
      FAIL("block %p (%" PRIu64 " bytes) is no longer live (usable %zu)", b->p, b->size,
           hl_usable_size(H, b->p));
  }
}

static void run_manual(input *in) {
  ev_reset();
  while (in->n) {
    uint8_t op = u8(in);
    switch (api_ops && op >= 0xf0 ? 14 : op % 14) {
    case 14: op_api(in); break; /* (the API extension) */
    case 0: case 1: op_malloc(in); break;
    case 2: op_calloc(in); break;
    case 3: op_free(in, 0); break;
    case 4: op_free(in, 1); break;
    case 5: case 6: op_realloc(in); break;
    case 7: op_mwrite(in); break;
    case 8: hl_thread_flush(H); break;
    case 9: expect_rc(hl_trim(H), "trim", -1, -1); break;
    case 10: op_inject(in); break;
    case 11: op_remote(in); break;
    case 12: if (op & 16) op_double_free(in); else op_mbad(in); break;
    default: /* (0xed as 0xef above; 0xdf as 0xcf) */
      if (op == 0xed) op_events(in);
      else if (op == 0xdf && fapi_ops) op_fapi(in);
      else op_probe();
      break;
    }
    check_manual();
    check_api_laws();
    if (hl_heap_check(H)) FAIL("heap check after op %u: %s", op % 14, msg());
  }
}

static void reset_manual(void) {
  for (int i = 0; i < nb; i++) free(blk[i].bytes);
  nb = nfreed = 0;
  model_bytes = 0;
}

/* ======================================================================== */
/* The heap's configuration                                                 */
/* ======================================================================== */

static void set(const char *name, int64_t v) {
  char err[256];
  if (hl_options_set_int(&O, name, v, err, sizeof err))
    FAIL("option %s=%" PRId64 ": %s", name, v, err);
}

static int64_t at_most(int64_t v, int64_t hi) { return v < hi ? v : hi; }

/* Returns false when the input's options cannot make a heap (skip it). */
static bool configure(input *in) {
  hl_options_defaults(&O);
  uint8_t b0 = u8(in), b1 = u8(in), b2 = u8(in), b3 = u8(in), b4 = u8(in), b5 = u8(in);
  static const int64_t pages[] = {4096, 8192, 16384, 65536};
  int64_t ps = pages[b1 & 3];
  static const int64_t smax[] = {16, 64, 256, 1 << 20};
  set("mode", b0 & 1);
  /* collected mode's: a manual heap refuses them (since session 31; a
   * manual input's bits meant nothing before -- it never collected -- and
   * made 3 of 4 manual inputs no heap at all once refused) */
  if (O.mode == HL_MODE_COLLECTED) {
    set("generational", b0 >> 1 & 1);
    set("collector", b0 >> 2 & 1);
  }
  set("page_release", (b0 >> 3 & 1) ^ 1);
  set("dump_toggle", b0 >> 4 & 1);
  set("release_advice", b0 >> 5 & 1);
  set("reuse_failed_order", b0 >> 6 & 1);
  set("sweep", b0 >> 7 & 1);
  set("page_size", ps);
  set("small_max", at_most(smax[b1 >> 2 & 3], ps / 4));
  set("major_sweep", (b1 >> 4 & 3) % 3);
  set("fallback_advice", (b1 >> 6 & 3) % 3);
  set("warm_pages", b2 % 9);
  set("warm_demand_trims", b2 >> 4 & 3);
  set("release_per_sweep", 1 + (b2 >> 6) * 8);
  set("tcache_blocks", (int64_t[]){0, 4, 64, 1024}[b4 & 3]);
  set("upgrade_per_sweep", (b4 >> 2 & 3) * 2);
  set("upgrade_budget_counts", b4 >> 4 & 1);
  set("verify", (b0 & 1) && (b4 >> 5 & 3) == 3 ? 0 : 1);
  set("reuse_attempts", 1 + (b4 >> 7));
  set("gc_trigger_bytes", (int64_t)65536 << (b5 & 3));
  set("gc_trigger_min_bytes", 65536);
  set("gc_trigger_max_bytes", (int64_t)1 << 20);
  set("young_bytes", (int64_t)65536 << (b5 >> 2 & 3));
  set("young_min_bytes", 65536); /* (the nursery adapts when young_bytes is above it) */
  set("large_trigger_bytes", (int64_t)65536 << (b5 >> 4 & 3));
  set("tenure_full_marks", b5 >> 6);
  set("quiet_bytes", 16384);
  set("major_backstop_cycles", 4);
  set("events_capacity", 64);
  set("syscall_retry_max", 2);
  set("syscall_retry_backoff_us", 0);
  set("pacing_max_wait_ms", 5);
  set("reserve_bytes", at_most((int64_t)(1 + b3 % 8) << 20, 8 << 20));
  if (O.reserve_bytes < 16 * ps) set("reserve_bytes", 16 * ps);
  if (b3 & 0x80) { /* the trigger above the reservation (issue 16, defect 1) */
    set("gc_trigger_max_bytes", 16 << 20);
    set("gc_trigger_bytes", 16 << 20);
  }

  /* The extension: a byte of 0xc0 or more here (its value mod 3 is still
   * the number of option strings) brings three more configuration bytes --
   * compaction, sub-page release, huge pages, mark threads, the large path's
   * arms -- and the operations on root regions and hl_thin.  Inputs written
   * before it (every byte here below 0xc0) mean what they meant. */
  uint8_t b6 = u8(in);
  ext_ops = b6 >= 0xc0;
  api_ops = fapi_ops = false;
  if (ext_ops) {
    uint8_t b7 = u8(in), b8 = u8(in), b9 = u8(in);
    if (O.mode == HL_MODE_COLLECTED) {
      set("compact", (int64_t[]){HL_COMPACT_NEVER, HL_COMPACT_SPARSE, HL_COMPACT_ALWAYS,
                                 HL_COMPACT_ALWAYS}[b7 & 3]);
      set("compact_live_pct", 1 + (b7 >> 2 & 15) * 6);
    }
    set("conservative_interior", (b7 >> 6 & 1) ^ 1);
    set("large_pacing", (b7 >> 7) ^ 1);
    if (O.page_release && !O.dump_toggle) set("subpage_release", b8 & 1);
    set("thp", (b8 >> 1 & 3) % 3);
    set("mark_threads", 1 + (b8 >> 3 & 3));
    set("adaptive_trigger", (b8 >> 5 & 1) ^ 1);
    set("quiet_counts_large", (b8 >> 6 & 1) ^ 1);
    set("thp_prefault", (b8 >> 7) * 2);
    set("large_map_bytes", (int64_t[]){131072, 0, 8192, 32768}[b9 & 3]);
    /* (b9 bit 2, 0 in the seeds before it: the default, 1) */
    set("dump_unused", (b9 >> 2 & 1) ^ 1);
    /* The API extension: b9 >= 0x80 (the extension's seeds before it have
     * b9 below 4) brings one more byte -- heap_limit_bytes, so that manual
     * heaps refuse (the refusal hook) -- and operations on the samplers,
     * interrupts, hl_vma_count and the refusal hook: an operation byte of
     * 0xf0 or more (op_api). */
    api_ops = b9 >= 0x80;
    /* b9 bit 6 (0 in every committed seed before it): an operation byte of
     * 0xcf (collected; 0xdf manual), a probe otherwise, is op_fapi's -- faults
     * by name, the size limits, the effective options, the wait hook */
    fapi_ops = b9 & 0x40;
    if (api_ops) {
      uint8_t b10 = u8(in);
      set("heap_limit_bytes", (int64_t[]){0, 0, 256 << 10, 1 << 20}[b10 & 3]);
    }
  }

  /* option strings from the input: names from the table, values as given */
  int nstr = b6 % 3;
  for (int i = 0; i < nstr; i++) {
    hl_option_info info;
    hl_option_info_get(u8(in) % hl_option_count(), &info);
    char val[24];
    size_t len = u8(in) % sizeof val;
    for (size_t k = 0; k < len; k++) val[k] = (char)u8(in);
    val[len] = 0;
    char err[256] = "";
    int rc = hl_options_set(&O, info.name, val, err, sizeof err);
    if (rc && !strstr(err, info.name)) FAIL("option %s='%s' refused without naming it: '%s'",
                                            info.name, val, err);
  }
  /* what an option string may not change: speed, verify, the control arms */
  if (!(O.mode == 1 && O.verify == 0)) O.verify = 1;
  O.reserve_bytes = at_most(O.reserve_bytes, 8 << 20);
  O.syscall_retry_backoff_us = 0;
  if (O.syscall_retry_max < 0 || O.syscall_retry_max > 3) O.syscall_retry_max = 3;
  O.pacing_max_wait_ms = at_most(O.pacing_max_wait_ms, 5);
  O.events_capacity = at_most(O.events_capacity, 256);
  O.min_cycle_interval_ms = at_most(O.min_cycle_interval_ms, 2);
  /* (an option string may set a trigger above the reservation: defect 1) */
  O.gc_trigger_bytes = at_most(O.gc_trigger_bytes, 16 << 20);
  O.gc_trigger_max_bytes = at_most(O.gc_trigger_max_bytes, 16 << 20);
  O.gc_trigger_min_bytes = at_most(O.gc_trigger_min_bytes, O.gc_trigger_max_bytes);
  O.young_bytes = at_most(O.young_bytes, 1 << 20);
  O.large_trigger_bytes = at_most(O.large_trigger_bytes, 1 << 20);
  O.release_per_sweep = at_most(O.release_per_sweep, 4096);
  O.record_refused_release = 0;
  O.init_page_state = 1;
  O.restore_before_format = 1;
  if (O.small_max > O.page_size / 4) O.small_max = O.page_size / 4;
  if (O.reserve_bytes < 16 * O.page_size) O.reserve_bytes = 16 * O.page_size;
  moving = O.compact != HL_COMPACT_NEVER;
  char err[256];
  if (hl_options_validate(&O, err, sizeof err)) {
    if (verbose) fprintf(stderr, "fuzz_heap: options refused: %s\n", err);
    return false;
  }
  return true;
}

/* op_mbad asks a manual heap for 2^62 bytes, which goes to the system
 * allocator: ASan's must return NULL, as glibc's does, not abort the run.
 * tools/fuzz.sh sets allocator_may_return_null=1, but the target run by
 * hand (fuzz_heap -runs=0 fuzz/corpus/fuzz_heap) runs with the caller's
 * ASAN_OPTIONS, and three seeds reach that operation.  (ASAN_OPTIONS given
 * still overrides this.) */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  verbose = getenv("FUZZ_HEAP_VERBOSE") != NULL;
  main_thread = pthread_self();
  strict_oom = !getenv("FUZZ_HEAP_STRICT_OOM") || atoi(getenv("FUZZ_HEAP_STRICT_OOM"));
  hl_footprint f;
  footprint_works = hl_footprint_get(&f) == HL_OK;
  /* INTR_SIG's handler before hl_interrupt_attach chains to it */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = intr_prev_handler;
  sigemptyset(&sa.sa_mask);
  if (sigaction(INTR_SIG, &sa, NULL)) FAIL("sigaction(%d): %s", INTR_SIG, strerror(errno));
  /* op_interrupt's signals unblocked: a mask inherited with them blocked
   * kept every interrupt pending -- under `perf record` (SIGWINCH blocked
   * in its workload) a collect of a million cycles ran on or returned
   * HL_OK, and three api seeds failed or ran past 20 s */
  sigset_t ss;
  sigemptyset(&ss);
  sigaddset(&ss, SIGWINCH);
  sigaddset(&ss, INTR_SIG);
  if (pthread_sigmask(SIG_UNBLOCK, &ss, NULL)) FAIL("pthread_sigmask: unblock failed");
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  input in = {data, size};
  if (!configure(&in)) return 0;
  char err[256];
  int rc = hl_heap_new(&O, &H, err, sizeof err);
  if (rc) {
    if (!err[0]) FAIL("hl_heap_new failed with no message");
    if (verbose) fprintf(stderr, "fuzz_heap: no heap: %s\n", err);
    return 0;
  }
  manual_mode = O.mode == HL_MODE_MANUAL;
  budget = (uint64_t)O.reserve_bytes / 4;
  set_hook(true, &hook_cookie[0]);
  wh_begins = wh_ends = law_restores = law_restore_fails = 0;
  set_wait_hook(1, 0); /* (every heap: check_waits) */
  wh_probe = true;     /* (the input's first paced wait checks the lock) */
  fault_snapshot();
  check_options("after hl_heap_new");
  refusals_seen = intr_calls = intr_stopped = 0;
  if (verbose)
    fprintf(stderr, "fuzz_heap: %s heap, page %" PRId64 ", small_max %" PRId64 ", reserve %" PRId64
            ", generational %" PRId64 ", collector %" PRId64 ", verify %" PRId64 "\n",
            manual_mode ? "manual" : "collected", O.page_size, O.small_max, O.reserve_bytes,
            O.generational, O.collector, O.verify);
  if (manual_mode) {
    run_manual(&in);
    for (int i = 0; i < nb; i++) hl_free(H, blk[i].p);
    hl_thread_flush(H);
    reset_manual();
  } else {
    run_collected(&in);
    reset_collected();
    if (verbose) {
      hl_stats st;
      hl_stats_get(H, &st);
      fprintf(stderr, "fuzz_heap: compact %" PRId64 ": %" PRIu64 " cycles, %" PRIu64
              " compactions, %" PRIu64 " pinned\n", O.compact, st.cycles, st.compactions,
              st.pinned_objects);
    }
  }
  reset_samplers();
  if (verbose)
    fprintf(stderr, "fuzz_heap: %s: %" PRIu64 " refusals ran the hook, %" PRIu64 " long calls "
            "under interrupts, %" PRIu64 " interrupted\n", api_ops ? "api extension" : "no api "
            "extension", refusals_seen, intr_calls, intr_stopped);
  if (verbose)
    fprintf(stderr, "fuzz_heap: %" PRIu64 " paced waits ran the wait hook; restore armed: %"
            PRIu64 " restores, %" PRIu64 " failed\n", wh_begins, law_restores, law_restore_fails);
  if (hl_heap_check(H)) FAIL("final heap check: %s", msg());
  hl_heap_free(H);
  H = NULL;
  return 0;
}
