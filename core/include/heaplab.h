/*
 * heaplab.h -- the one public header of libheaplab.
 *
 * A garbage-collected heap and page allocator built for experiments on what the
 * operating system really charges a process.  Everything a caller can name is
 * declared here: opaque types, the options table, the statistics, the event
 * kinds, the fault-injection sites and the functions.  The options, stats,
 * events and fault sites are each declared ONCE, as X-macro lists below; the C
 * structs, the tables in the library, the Python binding (its CFFI cdef is this
 * file run through the preprocessor with HL_CDEF defined) and the Lua module are
 * all generated or read from those lists.
 *
 * Conventions
 *   - Functions that can fail return an int error code: HL_OK (0) or one of
 *     hl_error.  The message of the last failure on a heap, from the calling
 *     thread, is hl_heap_error(heap).  Nothing here aborts on bad input.
 *   - Slot indices are 0-based.
 *   - Sizes and byte counters are 64-bit.
 */
#ifndef HEAPLAB_H
#define HEAPLAB_H

#ifndef HL_CDEF
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
#endif

#define HL_VERSION_MAJOR 0
#define HL_VERSION_MINOR 1

/* ------------------------------------------------------------------------ */
/* Errors                                                                   */
/* ------------------------------------------------------------------------ */

/* X(NAME, value, description) */
#define HL_ERRORS(X)                                                           \
  X(OK, 0, "ok")                                                               \
  X(EINVAL, 1, "invalid argument")                                             \
  X(ENOMEM, 2, "out of memory")                                                \
  X(ERANGE, 3, "index out of range")                                           \
  X(ESTALE, 4, "released or unknown handle")                                   \
  X(EFOREIGN, 5, "handle belongs to another heap")                             \
  X(ECLOSED, 6, "heap is closed")                                              \
  X(EOPTION, 7, "unknown option")                                              \
  X(EVALUE, 8, "option value out of range")                                    \
  X(EMODE, 9, "operation not available in this heap mode")                     \
  X(ESYS, 10, "system call failed")                                            \
  X(ECHECK, 11, "heap invariant violated")

typedef enum hl_error {
#define HL__ERR_ENUM(name, value, desc) HL_##name = value,
  HL_ERRORS(HL__ERR_ENUM)
#undef HL__ERR_ENUM
  HL_ERROR_COUNT
} hl_error;

/* ------------------------------------------------------------------------ */
/* Options                                                                  */
/* ------------------------------------------------------------------------ */

/* Option value kinds. */
typedef enum hl_option_kind {
  HL_OPT_BOOL = 0,  /* 0 or 1 */
  HL_OPT_INT = 1,   /* a count */
  HL_OPT_BYTES = 2, /* a byte count; strings accept k/m/g/t suffixes (KiB...) */
  HL_OPT_ENUM = 3   /* an index into the comma-separated choices */
} hl_option_kind;

/*
 * X(name, kind, default, min, max, choices, description)
 * Every option is an int64_t field of hl_options.  The environment variable
 * HEAPLAB_<NAME> (upper case) overrides the default (hl_options_from_env).
 * Control arms: the descriptions name the seed defect a value reproduces.
 */
#define HL_OPTIONS(X)                                                          \
  X(mode, ENUM, 0, 0, 1, "collected,manual",                                   \
    "collected: roots + precise tracing; manual: explicit sized free")        \
  X(page_size, BYTES, 65536, 4096, 1048576, "",                                \
    "BiBOP page size (power of two, >= OS page)")                             \
  X(small_max, BYTES, 512, 16, 16384, "",                                      \
    "largest small object in bytes (<= page_size/4); larger go to the large path") \
  X(reserve_bytes, BYTES, 34359738368, 1048576, 1099511627776, "",             \
    "virtual reservation for small pages (halved until the kernel accepts it)") \
  X(page_release, BOOL, 1, 0, 1, "",                                           \
    "return empty pages to the OS; 0 = the seed's 'before' (kept forever)")   \
  X(warm_pages, INT, 64, 0, 1048576, "",                                       \
    "empty pages kept resident as a warm cache")                              \
  X(warm_demand_trims, INT, 8, 0, 16, "",                                      \
    "while allocating, also keep as many empty pages as were taken in the last N trim intervals (0 = warm_pages only, the seed's policy)") \
  X(release_per_sweep, INT, 1024, 1, 1048576, "",                              \
    "pages released per trim at most")                                        \
  X(release_advice, ENUM, 0, 0, 1, "dontneed,free",                            \
    "primary advice: dontneed drops RSS now; free is lazy and stays charged")  \
  X(fallback_advice, ENUM, 2, 0, 2, "none,dontneed,free",                      \
    "advice used when the primary is refused; such pages are upgraded later") \
  X(upgrade_per_sweep, INT, 1024, 0, 1048576, "",                              \
    "primary-advice retries on fallback pages per trim (0 = never upgrade)")  \
  X(upgrade_budget_counts, ENUM, 0, 0, 1, "attempts,scanned",                  \
    "what the upgrade budget counts; scanned = the seed's stalling defect")   \
  X(reuse_attempts, INT, 4, 1, 4096, "",                                       \
    "released pages tried per page acquisition before a fresh page")          \
  X(reuse_failed_order, ENUM, 0, 0, 1, "fifo,lifo",                            \
    "where a page that failed restore is parked; lifo = the seed's defect")   \
  X(dump_toggle, BOOL, 0, 0, 1, "",                                            \
    "pair release with MADV_DONTDUMP and reuse with MADV_DODUMP (bmalloc; splits VMAs)") \
  X(syscall_retry_max, INT, 100, -1, 1000000000, "",                           \
    "EAGAIN retries per syscall; -1 = unbounded spin (the seed's livelock)")  \
  X(syscall_retry_backoff_us, INT, 1000, 0, 10000000, "",                      \
    "sleep between EAGAIN retries, microseconds")                             \
  X(sweep, ENUM, 0, 0, 1, "retired,full",                                      \
    "retired: sweep pages retired since the last cycle; full: every page")    \
  X(major_sweep, ENUM, 0, 0, 2, "auto,never,always",                           \
    "when partial pages are swept too (auto: quiet, pressure or backstop)")   \
  X(quiet_bytes, BYTES, 6291456, 0, 1099511627776, "",                         \
    "a cycle is quiet below min(trigger/4, quiet_bytes) allocated since the last") \
  X(quiet_counts_large, BOOL, 1, 0, 1, "",                                     \
    "count large-path bytes in the quiet test; 0 = the seed's defect")        \
  X(major_backstop_cycles, INT, 16, 0, 1048576, "",                            \
    "a major sweep at least this often (0 = no backstop)")                    \
  X(gc_trigger_bytes, BYTES, 25165824, 65536, 1099511627776, "",               \
    "small-path bytes allocated between cycles (starting value when adaptive)") \
  X(gc_trigger_min_bytes, BYTES, 4194304, 65536, 1099511627776, "",            \
    "lower bound of the adaptive trigger")                                    \
  X(gc_trigger_max_bytes, BYTES, 1073741824, 65536, 1099511627776, "",         \
    "upper bound of the adaptive trigger")                                    \
  X(adaptive_trigger, BOOL, 1, 0, 1, "",                                       \
    "double the trigger on high survival twice in a row, halve on low")       \
  X(gc_live_ratio, INT, 200, 0, 1000, "",                                      \
    "percent of the bytes the last cycle marked added to the trigger (0 = off)") \
  X(generational, BOOL, 0, 0, 1, "",                                           \
    "collected mode, sticky mark bits: most cycles mark only what was allocated since the last one (slot stores go through the API: hl_obj_set)") \
  X(young_bytes, BYTES, 33554432, 65536, 1099511627776, "",                    \
    "generational: small-path bytes allocated between minor cycles")          \
  X(full_growth_ratio, INT, 50, 1, 1000, "",                                   \
    "generational: a full mark once promoted bytes reach this percent of the last full mark's live bytes") \
  X(tenure_full_marks, INT, 8, 0, 1000000, "",                                 \
    "generational: a page at least 7/8 live after two full marks in a row is tenured -- later full marks keep its marks and do not trace it -- until every Nth full mark, which marks everything (0 = no tenuring)") \
  X(large_trigger_bytes, BYTES, 25165824, 4096, 1099511627776, "",             \
    "large-path bytes that request a cycle")                                  \
  X(large_pacing, BOOL, 1, 0, 1, "",                                           \
    "make a large allocator wait for the cycle it requested; 0 = the seed's legacy path") \
  X(heap_limit_bytes, BYTES, 0, 0, 1099511627776, "",                          \
    "budget pacing holds the heap under (0 = none)")                          \
  X(pacing_max_wait_ms, INT, 1000, 1, 600000, "",                              \
    "longest a paced allocation waits for one cycle")                         \
  X(pacing_give_up_cycles, INT, 4, 1, 1000, "",                                \
    "paced waits stop after this many cycles in a row that free nothing")     \
  X(collector, ENUM, 0, 0, 1, "sync,background",                               \
    "sync: cycles run in the allocating thread; background: a collector thread") \
  X(min_cycle_interval_ms, INT, 0, 0, 600000, "",                              \
    "background collector: least time between cycles")                        \
  X(verify, BOOL, 0, 0, 1, "",                                                 \
    "poison freed slots and check heap invariants every cycle")               \
  X(events_capacity, INT, 4096, 16, 1048576, "",                               \
    "events kept in the ring buffer (older ones are dropped and counted)")    \
  X(tcache_blocks, INT, 1024, 0, 1024, "",                                     \
    "manual mode: blocks per size class cached per thread (0 = no cache)")    \
  X(tcache_bytes, BYTES, 65536, 0, 1073741824, "",                             \
    "manual mode: bytes per size class cached per thread, at least 16 blocks (0 = no limit)") \
  X(record_refused_release, BOOL, 0, 0, 1, "",                                 \
    "control: 1 = the seed's defect, a refused release recorded as released") \
  X(init_page_state, BOOL, 1, 0, 1, "",                                        \
    "control: 0 = the seed's defect, release state not initialised on a fresh page") \
  X(restore_before_format, BOOL, 1, 0, 1, "",                                  \
    "control: 0 = the seed's defect, a reused page is formatted before it is restored")

typedef struct hl_options {
#define HL__OPT_FIELD(name, kind, def, lo, hi, choices, desc) int64_t name;
  HL_OPTIONS(HL__OPT_FIELD)
#undef HL__OPT_FIELD
} hl_options;

/* Enum values of the enum-valued options, in the order of their choices. */
enum {
  HL_MODE_COLLECTED = 0, HL_MODE_MANUAL = 1,
  HL_ADVICE_DONTNEED = 0, HL_ADVICE_FREE = 1,
  HL_FALLBACK_NONE = 0, HL_FALLBACK_DONTNEED = 1, HL_FALLBACK_FREE = 2,
  HL_BUDGET_ATTEMPTS = 0, HL_BUDGET_SCANNED = 1,
  HL_ORDER_FIFO = 0, HL_ORDER_LIFO = 1,
  HL_SWEEP_RETIRED = 0, HL_SWEEP_FULL = 1,
  HL_MAJOR_AUTO = 0, HL_MAJOR_NEVER = 1, HL_MAJOR_ALWAYS = 2,
  HL_COLLECTOR_SYNC = 0, HL_COLLECTOR_BACKGROUND = 1
};

typedef struct hl_option_info {
  const char *name;
  int kind;            /* hl_option_kind */
  int64_t def;
  int64_t min;
  int64_t max;
  const char *choices; /* comma-separated, for HL_OPT_ENUM; "" otherwise */
  const char *description;
} hl_option_info;

/* Number of options, and the declaration of option i (0 <= i < count). */
int hl_option_count(void);
int hl_option_info_get(int index, hl_option_info *out);
/* Index of a named option, or -1. */
int hl_option_index(const char *name);

/* Fill with the declared defaults (no environment). */
void hl_options_defaults(hl_options *opts);
/* Apply HEAPLAB_<NAME> environment overrides.  A bad value is an error naming
 * the variable and the allowed range; err may be NULL. */
int hl_options_from_env(hl_options *opts, char *err, size_t errlen);
/* Set an option by name from a string ("64k", "true", "lifo", "-1"). */
int hl_options_set(hl_options *opts, const char *name, const char *value,
                   char *err, size_t errlen);
/* Set an option by name from a number (enum options take the choice index). */
int hl_options_set_int(hl_options *opts, const char *name, int64_t value,
                       char *err, size_t errlen);
int hl_options_get(const hl_options *opts, const char *name, int64_t *out);
/* Check every field and the relations between them. */
int hl_options_validate(const hl_options *opts, char *err, size_t errlen);

/* ------------------------------------------------------------------------ */
/* Statistics                                                               */
/* ------------------------------------------------------------------------ */

/* X(name, description).  Every stat is a uint64_t field of hl_stats. */
#define HL_STATS(X)                                                            \
  X(cycles, "collection cycles run")                                           \
  X(major_sweeps, "cycles that swept partial pages too")                       \
  X(major_quiet, "major sweeps chosen because the cycle was quiet")            \
  X(major_pressure, "major sweeps chosen because of memory pressure")          \
  X(major_backstop, "major sweeps chosen by the backstop")                     \
  X(major_forced, "major sweeps forced by the caller or major_sweep=always")   \
  X(major_full_mark, "generational: major sweeps after a full mark the old generation's growth called") \
  X(minor_cycles, "generational: cycles that marked only objects allocated since the last cycle") \
  X(promoted_bytes, "generational: bytes minor cycles marked (promoted to the old generation)") \
  X(dirty_pages_scanned, "generational: pages a minor cycle scanned for stores into old objects") \
  X(whole_marks, "generational: full marks that marked the tenured pages too (every tenure_full_marks-th, explicit, pressure)") \
  X(tenured_pages, "generational: pages tenured now (full marks keep their marks)")  \
  X(remembered_pages_scanned, "generational: tenured pages a full mark traced for references to younger objects") \
  X(verify_failures, "cycles whose verification failed (verify=true; hl_heap_error says why)") \
  X(gc_trigger_bytes, "small-path trigger in force")                           \
  X(small_bytes_since_cycle, "small-path bytes allocated since the last cycle") \
  X(large_bytes_since_cycle, "large-path bytes allocated since the last cycle") \
  X(small_allocated_bytes, "small-path bytes allocated in all")                \
  X(large_allocated_bytes, "large-path bytes allocated in all")                \
  X(small_live_bytes, "small slot bytes in use (after the last sweep plus new)") \
  X(large_live_bytes, "large-path bytes in use")                               \
  X(large_objects, "large objects in use")                                     \
  X(objects_allocated, "objects allocated in all")                             \
  X(objects_freed, "objects freed (swept or explicitly freed)")                \
  X(swept_pages, "pages swept in all")                                         \
  X(major_swept_pages, "partial pages swept by major sweeps")                  \
  X(handles, "live handles (roots)")                                           \
  X(total_pages, "pages carved from the reservation")                          \
  X(reserved_bytes, "bytes of the reservation")                                \
  X(owned_pages, "pages in the owned state (allocating)")                      \
  X(retired_pool_pages, "pages retired, waiting for a sweep")                  \
  X(partial_pool_pages, "swept pages holding live objects")                    \
  X(free_pool_pages, "empty resident pages (warm cache and trim backlog)")     \
  X(released_pool_pages, "pages given back to the OS")                         \
  X(reuse_failed_pool_pages, "released pages whose restore failed")            \
  X(in_flight_pages, "pages being advised outside the lock")                   \
  X(fallback_pool_pages, "released (or reuse-failed) pages still on the fallback advice")        \
  X(fresh_pages, "pages taken fresh from the reservation")                     \
  X(reused_pages, "released pages restored and reused")                        \
  X(warm_reused_pages, "free (warm) pages reused")                             \
  X(populated_pages, "pages a bulk phase faulted in with one call each")        \
  X(released_pages, "pages released (primary or fallback advice)")             \
  X(release_calls, "release advice calls")                                     \
  X(rejected_pages, "pages whose release was refused (returned to the free pool)") \
  X(fallback_pages, "pages released with the fallback advice")                 \
  X(upgraded_pages, "fallback pages upgraded to the primary advice")           \
  X(upgrade_attempts, "pages attempted by upgrades")                           \
  X(upgrade_calls, "upgrade advice calls")                                     \
  X(restore_calls, "restore calls on reuse")                                   \
  X(restore_failed_pages, "restore attempts that failed")                      \
  X(trims, "trim passes run")                                                  \
  X(trim_ns, "time spent advising in trims, nanoseconds")                      \
  X(syscalls, "system calls made through the retry helper")                    \
  X(syscall_retries, "EAGAIN retries")                                         \
  X(syscall_gave_up, "calls that gave up after syscall_retry_max retries")     \
  X(faults_fired, "injected faults fired")                                     \
  X(pacing_waits, "large allocations that waited for a cycle")                 \
  X(pacing_wait_ns, "time large allocations waited, nanoseconds")              \
  X(pacing_timeouts, "paced waits cut short by pacing_max_wait_ms")            \
  X(pacing_gave_up, "paced waits skipped after cycles that freed nothing")     \
  X(cycle_requests, "cycles requested by the byte counters")                   \
  X(collector_wakeups, "background collector wake-ups")                        \
  X(gc_ns, "time spent in cycles (mark + sweep), nanoseconds")                 \
  X(mark_ns, "of gc_ns: marking (roots, dirty pages, tracing), nanoseconds")  \
  X(minor_gc_ns, "of gc_ns: minor cycles (generational), nanoseconds")        \
  X(max_pause_ns, "longest cycle, nanoseconds")                                \
  X(events_dropped, "events overwritten before they were read")              \
  X(manual_mallocs, "manual mode allocations")                                 \
  X(manual_frees, "manual mode frees")                                         \
  X(tcache_refills, "manual mode thread-cache refills")                        \
  X(tcache_flushes, "manual mode thread-cache flushes")                        \
  X(thp_disabled, "1 when the reservation was advised MADV_NOHUGEPAGE")

typedef struct hl_stats {
#define HL__STAT_FIELD(name, desc) uint64_t name;
  HL_STATS(HL__STAT_FIELD)
#undef HL__STAT_FIELD
} hl_stats;

int hl_stat_count(void);
const char *hl_stat_name(int index);
const char *hl_stat_description(int index);

/* ------------------------------------------------------------------------ */
/* Events (structured records in a ring buffer)                             */
/* ------------------------------------------------------------------------ */

#define HL_EVENT_MAX_FIELDS 10

/* X(name, "comma,separated,field,names") -- at most HL_EVENT_MAX_FIELDS. */
#define HL_EVENTS(X)                                                           \
  X(heap_created, "reserved_bytes,page_size,thp_disabled,reserve_attempts")    \
  X(cycle, "major,duration_ns,small_bytes,large_bytes,swept_pages,freed_objects,live_bytes,trigger_bytes,reason,minor") \
  X(major_sweep, "reason,spliced_pages,small_bytes,large_bytes,quiet_limit")   \
  X(trim, "released,calls,rejected,fallback,upgraded,upgrade_attempts,duration_ns,free_after,gave_up") \
  X(restore_failed, "page,errno,order")                                        \
  X(syscall_gave_up, "site,errno,retries,page")                                \
  X(pacing_wait, "large_bytes,waited_ns,timed_out,gave_up")                   \
  X(trigger_adapted, "old_bytes,new_bytes,survival_pct")

typedef enum hl_event_kind {
#define HL__EV_ENUM(name, fields) HL_EV_##name,
  HL_EVENTS(HL__EV_ENUM)
#undef HL__EV_ENUM
  HL_EV_COUNT
} hl_event_kind;

typedef struct hl_event {
  int32_t kind;      /* hl_event_kind */
  int32_t nfields;
  uint64_t cycle;    /* cycle count when recorded */
  uint64_t time_ns;  /* CLOCK_MONOTONIC */
  int64_t fields[HL_EVENT_MAX_FIELDS];
} hl_event;

const char *hl_event_name(int kind);
/* Comma-separated field names of an event kind. */
const char *hl_event_fields(int kind);

/* ------------------------------------------------------------------------ */
/* Fault injection                                                          */
/* ------------------------------------------------------------------------ */

/* X(name, description): the syscall sites.  "any" matches every call. */
#define HL_FAULT_SITES(X)                                                      \
  X(reserve, "mmap of the reservation")                                        \
  X(release, "primary release advice")                                         \
  X(fallback, "fallback release advice")                                       \
  X(upgrade, "primary advice retried on a fallback page")                      \
  X(restore, "restore of a released page before reuse")                        \
  X(dump, "MADV_DONTDUMP / MADV_DODUMP toggles (dump_toggle)")                 \
  X(meta, "release of the side-table bits of released pages")                  \
  X(populate, "faulting in a page a bulk phase (fill) will write whole")         \
  X(any, "every call through the retry helper")

typedef enum hl_fault_site {
#define HL__SITE_ENUM(name, desc) HL_SITE_##name,
  HL_FAULT_SITES(HL__SITE_ENUM)
#undef HL__SITE_ENUM
  HL_SITE_COUNT
} hl_fault_site;

/* X(name, description): schedules. */
#define HL_FAULT_MODES(X)                                                      \
  X(off, "disarmed")                                                           \
  X(first, "fail the first N calls")                                           \
  X(always, "fail every call")                                                 \
  X(every, "fail every Nth call")                                              \
  X(sticky, "fail every call whose range covers page N")

typedef enum hl_fault_mode {
#define HL__MODE_ENUM(name, desc) HL_FAULT_##name,
  HL_FAULT_MODES(HL__MODE_ENUM)
#undef HL__MODE_ENUM
  HL_FAULT_MODE_COUNT
} hl_fault_mode;

typedef struct hl_fault_state {
  int32_t site;     /* hl_fault_site */
  int32_t mode;     /* hl_fault_mode */
  int64_t arg;      /* N */
  int32_t err;      /* errno returned */
  int32_t pad;
  uint64_t calls;   /* calls seen at this site since armed */
  uint64_t fired;   /* failures injected since armed */
} hl_fault_state;

const char *hl_fault_site_name(int site);
const char *hl_fault_mode_name(int mode);
int hl_fault_site_index(const char *name);
int hl_fault_mode_index(const char *name);
/* errno by name ("EAGAIN", "ENOMEM", "EINVAL", "EIO", ...) or -1. */
int hl_errno_index(const char *name);
const char *hl_errno_name(int err);

/* ------------------------------------------------------------------------ */
/* Process footprint (independent of any heap)                              */
/* ------------------------------------------------------------------------ */

typedef struct hl_footprint {
  uint64_t rss;            /* Rss of /proc/self/smaps_rollup */
  uint64_t anonymous;      /* Anonymous */
  uint64_t lazyfree;       /* LazyFree: MADV_FREE pages not yet reclaimed */
  uint64_t swap;           /* Swap */
  uint64_t phys_footprint; /* Linux: Anonymous + Swap (Darwin: task_vm_info) */
} hl_footprint;

int hl_footprint_get(hl_footprint *out);

/* A footprint sampler: a thread reading the process footprint every
 * interval_us, keeping the lowest and highest values (overall and since the
 * last mark) and a time series for plots.  When the series fills, every
 * other sample is dropped and the interval doubles, so a long phase still
 * spans the whole buffer.  Assertions on asynchronous reclamation use the
 * LOWEST value seen after a marked event, never a reading at a chosen instant. */
typedef struct hl_sampler hl_sampler;

typedef struct hl_sample {
  uint64_t t_ns;           /* CLOCK_MONOTONIC */
  uint64_t phys_footprint;
  uint64_t rss;
  uint64_t lazyfree;
} hl_sample;

typedef struct hl_sampler_summary {
  uint64_t samples;        /* taken since start */
  uint64_t min_phys, max_phys;               /* since start (or reset) */
  uint64_t min_phys_after_mark, max_phys_after_mark; /* since the last mark */
  uint64_t min_rss, max_rss;
  uint64_t mark_ns;        /* time of the last mark, 0 if none */
  uint64_t interval_us;    /* current interval */
  uint64_t stored;         /* samples in the series */
} hl_sampler_summary;

int hl_sampler_start(hl_sampler **out, uint32_t interval_us, size_t capacity);
/* Take a sample now and start the "after mark" window with it. */
int hl_sampler_mark(hl_sampler *s);
/* Take a sample now and restart the overall window (min/max) with it. */
int hl_sampler_reset(hl_sampler *s);
int hl_sampler_summary_get(hl_sampler *s, hl_sampler_summary *out);
/* Copy stored samples [from, from+cap) of the series. */
int hl_sampler_read(hl_sampler *s, size_t from, hl_sample *buf, size_t cap, size_t *count);
/* Stop the thread and free the sampler.  NULL is ignored. */
void hl_sampler_stop(hl_sampler *s);

/* ------------------------------------------------------------------------ */
/* Heaps                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct hl_heap hl_heap;

/* Create a heap.  opts NULL = defaults plus HEAPLAB_* environment.  On failure
 * *out is NULL and the message is written to err (may be NULL). */
int hl_heap_new(const hl_options *opts, hl_heap **out, char *err, size_t errlen);
/* Close a heap: every object, handle and page is gone.  NULL is ignored. */
void hl_heap_free(hl_heap *heap);
/* Message of the calling thread's last failure when it was on this heap;
 * otherwise the heap's last failure from any thread ("" if none). */
const char *hl_heap_error(const hl_heap *heap);
int hl_heap_options(const hl_heap *heap, hl_options *out);

int hl_stats_get(hl_heap *heap, hl_stats *out);
/* Copy up to cap events, oldest first; clear = consume them. */
int hl_events_read(hl_heap *heap, hl_event *buf, size_t cap, size_t *count,
                   int clear);
/* Bytes of the heap's reservation resident now (mincore). */
int hl_resident_bytes(hl_heap *heap, uint64_t *out);
/* VMAs of /proc/self/maps that overlap the heap's reservation. */
int hl_vma_count(hl_heap *heap, uint64_t *out);
/* The reservation's address range. */
int hl_heap_range(hl_heap *heap, uint64_t *base, uint64_t *bytes);
/* Check every invariant (pool accounting, states, free slots, poison when
 * verify is on).  HL_ECHECK with a message naming the first violation. */
int hl_heap_check(hl_heap *heap);
/* Run a trim pass now (release beyond the warm cache, upgrades). */
int hl_trim(hl_heap *heap);
/* Tell the heap the OS is under memory pressure: the next cycle sweeps major. */
int hl_memory_pressure(hl_heap *heap);

/* Arm a fault schedule at a site (HL_FAULT_off disarms).  err is an errno. */
int hl_inject(hl_heap *heap, int site, int mode, int64_t arg, int err);
/* State of every site: buf must hold HL_SITE_COUNT entries. */
int hl_faults_get(hl_heap *heap, hl_fault_state *buf, size_t cap, size_t *count);

/* ------------------------------------------------------------------------ */
/* Collected mode: handles (roots)                                          */
/* ------------------------------------------------------------------------ */

/* A handle is a root: while it exists its object survives.  0 is "no object".
 * A handle names its heap; a released handle is detected (HL_ESTALE). */
typedef uint64_t hl_ref;

#define HL_MAX_REFS ((uint64_t)1 << 24)    /* reference slots per object */
#define HL_MAX_SIZE ((uint64_t)1 << 40)    /* payload bytes per object */
/* The same limits as functions, for bindings that cannot see macros. */
uint64_t hl_max_refs(void);
uint64_t hl_max_size(void);

typedef struct hl_object_info {
  uint64_t size;     /* payload bytes */
  uint64_t refs;     /* reference slots */
  uint64_t address;  /* payload address */
  uint64_t object;   /* object (header) address: identity */
  int32_t large;     /* 1 when on the large path */
  int32_t pad;
} hl_object_info;

int hl_alloc(hl_heap *heap, uint64_t size, uint64_t refs, hl_ref *out);
int hl_ref_release(hl_heap *heap, hl_ref ref);
/* A second, independent root to the same object. */
int hl_ref_dup(hl_heap *heap, hl_ref ref, hl_ref *out);
int hl_ref_info(hl_heap *heap, hl_ref ref, hl_object_info *out);
/* Slot i of ref's object: a new handle in *out, or 0 when the slot is empty. */
int hl_ref_get(hl_heap *heap, hl_ref ref, uint64_t slot, hl_ref *out);
/* Store value's object (0 = empty) in slot i of ref's object. */
int hl_ref_set(hl_heap *heap, hl_ref ref, uint64_t slot, hl_ref value);
/* Bulk phase: ceil(total/size) objects of `size` payload bytes (and `refs`
 * empty slots), payload written (touched).  The returned root has one slot
 * per page the objects landed on (per object for large objects); each slot
 * holds that group's index: a small tree of small objects (up to 63 slots a
 * node) whose leaves are the objects.  Setting a root slot to empty drops
 * that page's objects.  The index lives on heaplab's pages too, so a dropped
 * fill goes back to the OS whole.  size 0 counts as 1 byte of total. */
int hl_fill(hl_heap *heap, uint64_t total_bytes, uint64_t size, uint64_t refs,
            hl_ref *out);
/* The same, keeping only every stride-th object: the others are garbage as
 * soon as they are allocated, so the pages come out partially live once swept
 * (stride 2: half of every page).  total_bytes counts every object. */
int hl_fill_stride(hl_heap *heap, uint64_t total_bytes, uint64_t size, uint64_t refs,
                   uint64_t stride, hl_ref *out);
/* A checksum of the payloads of every object reachable from ref. */
int hl_ref_checksum(hl_heap *heap, hl_ref ref, uint64_t *sum, uint64_t *objects);
/* Copy bytes in or out of the payload. */
int hl_ref_write(hl_heap *heap, hl_ref ref, uint64_t offset, const void *src,
                 uint64_t len);
int hl_ref_read(hl_heap *heap, hl_ref ref, uint64_t offset, void *dst,
                uint64_t len);

/* Synchronous collections.  major: -1 = policy decides, 0 = no, 1 = force. */
int hl_collect(hl_heap *heap, int cycles, int major);

typedef struct hl_churn_result {
  uint64_t allocated_bytes;
  uint64_t allocations;
  uint64_t cycles;          /* cycles completed during the churn */
  uint64_t pacing_waits;
  uint64_t pacing_wait_ns;
  uint64_t elapsed_ns;
  uint64_t peak_large_live_bytes;
} hl_churn_result;

/* Keep a ring of live_bytes of objects of `size` alive while allocating at
 * rate bytes/s (0 = as fast as possible) for duration_s seconds. */
int hl_churn(hl_heap *heap, double duration_s, uint64_t size,
             uint64_t live_bytes, double rate_bytes_per_s, hl_churn_result *out);

/* ------------------------------------------------------------------------ */
/* Collected mode: raw objects, for C clients that root their own pointers  */
/* ------------------------------------------------------------------------ */

/*
 * Raw object pointers are not roots.  A pointer stays valid while its object
 * is reachable from a handle, a registered root region, or a slot of a
 * reachable object.  The heap never moves objects.
 *
 * hl_enter/hl_leave hold the heap for a stretch of calls from one thread:
 * calls in between skip the per-call lock, and cycles they trigger run
 * inline.  Calls may nest.
 */
void hl_enter(hl_heap *heap);
void hl_leave(hl_heap *heap);

/* Allocate; NULL on failure (hl_heap_error says why). Slots start empty. */
void *hl_obj_new(hl_heap *heap, uint64_t size, uint64_t refs);
/* Allocate straight into slot `slot` of `parent` (so it is never unrooted). */
void *hl_obj_new_in(hl_heap *heap, void *parent, uint64_t slot, uint64_t size,
                    uint64_t refs);
void *hl_obj_payload(const void *obj);
uint64_t hl_obj_size(const void *obj);
uint64_t hl_obj_refs(const void *obj);
void *hl_obj_get(const void *obj, uint64_t slot);
/* Store a reference into a slot.  Every store into a slot must go through
 * hl_obj_set (or hl_obj_new_in / hl_ref_set): it is the write barrier of a
 * generational heap (option generational), which otherwise would not see
 * an old object refer to a young one, and would free the young one.  Like
 * every raw-object call it takes no lock: with collector=background, make
 * raw stores with the heap held (hl_enter), or a cycle may run beside them. */
void hl_obj_set(void *obj, uint64_t slot, void *value);

#ifndef HL_CDEF
/* Read access compiled into the caller, for hot loops.  The object layout
 * is part of the ABI: an 8-byte header {uint32_t refs; uint32_t size}, then
 * `refs` slots of void *, then the payload.  No checks: slot < refs is the
 * caller's business (hl_obj_get/hl_obj_set check).  The slots are read-only
 * here on purpose: a store must go through hl_obj_set (the write barrier). */
#define HL_OBJ_HEADER_BYTES 8
static inline void *const *hl_obj_slots(const void *obj) {
  return (void *const *)((const char *)obj + HL_OBJ_HEADER_BYTES);
}
static inline void *hl_obj_data(void *obj) {
  return (char *)obj + HL_OBJ_HEADER_BYTES + (uint64_t)(*(uint32_t *)obj) * sizeof(void *);
}
#endif

/* Register an array of object pointers scanned as roots.  conservative = 1:
 * every word that points into an object keeps it alive (E7). */
int hl_roots_add(hl_heap *heap, void *base, uint64_t words, int conservative);
int hl_roots_remove(hl_heap *heap, void *base);

/* ------------------------------------------------------------------------ */
/* Manual mode                                                              */
/* ------------------------------------------------------------------------ */

/* malloc-like allocation on the same pages, pools and release machinery.
 * Thread-safe.  Blocks are 16-byte aligned; 0 bytes gives a unique block. */
void *hl_malloc(hl_heap *heap, size_t size);
void *hl_calloc(hl_heap *heap, size_t count, size_t size);
/* Free with the size the block was allocated with (Lua passes it). */
void hl_free_sized(hl_heap *heap, void *ptr, size_t size);
/* Free when the caller does not know the size (CPython). */
void hl_free(hl_heap *heap, void *ptr);
void *hl_realloc(hl_heap *heap, void *ptr, size_t old_size, size_t new_size);
/* Usable size of a block, 0 if ptr is not a live block of this heap. */
size_t hl_usable_size(hl_heap *heap, const void *ptr);
/* Return the calling thread's cached blocks to the heap. */
void hl_thread_flush(hl_heap *heap);

/* ------------------------------------------------------------------------ */
/* Misc                                                                     */
/* ------------------------------------------------------------------------ */

const char *hl_error_name(int code);
const char *hl_version(void);

#ifndef HL_CDEF
#ifdef __cplusplus
}
#endif
#endif
#endif /* HEAPLAB_H */
