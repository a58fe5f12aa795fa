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
 *     hl_error, and leave a message, in one of two places of the calling
 *     thread's (a successful call clears neither):
 *     hl_heap_error(heap): the message of the calling thread's last failed
 *     call on heap, the first time it is asked for; after that (or with no
 *     failed call of its own there) the heap's last failure's, in whatever
 *     thread (a background cycle's).  The string stays as it is until the
 *     thread's next failed call on a heap (or hl_heap_new: a bad
 *     HEAPLAB_FAULT_* fails on the heap it makes) or its next
 *     hl_heap_error(heap), of any heap: copy it before those.
 *     hl_heap_error(NULL): the calling thread's last failure of a call that
 *     had no heap -- hl_heap_new, the option calls (also with err NULL),
 *     the samplers, hl_footprint_get, hl_interrupt_attach, a call given a
 *     NULL heap.  Calls on heaps, failed or not, and hl_heap_error(heap)
 *     leave it alone: it stays as it is until the thread's next failed
 *     call that had no heap (the pointer itself is the thread's, valid
 *     until the thread ends).
 *   - Nothing here aborts on bad input.  Every call that takes a pointer
 *     refuses a NULL one it needs: a call returning an int with HL_EINVAL,
 *     one returning a pointer with NULL (hl_heap_error says why, both).  The
 *     calls that return nothing -- hl_heap_free, hl_leave, hl_free,
 *     hl_free_sized, hl_thread_flush, hl_sampler_stop, hl_obj_set -- do
 *     nothing with a NULL, as free(NULL) does; the raw-object readers
 *     (hl_obj_payload, hl_obj_size, hl_obj_refs, hl_obj_get) return NULL or
 *     0 for a NULL object; the lookups by name (hl_option_index,
 *     hl_fault_site_index, ...) return -1 or NULL.  An optional pointer
 *     says so where it is declared (err of the option calls, objects of
 *     hl_ref_checksum, the two of hl_heap_range).  hl_obj_slots and
 *     hl_obj_data, compiled into the caller, check nothing.
 *   - What a failed call leaves, one rule for every call: each
 *     out-parameter it was given (not NULL) -- a pointer it writes a result
 *     to: hl_ref *out, uint64_t *out, size_t *count, a struct, an
 *     hl_heap ** or hl_sampler ** -- is zeroed, whatever the error (a NULL
 *     heap, a stale handle, an interrupted churn): a handle 0, a pointer
 *     NULL, a count 0, a struct all zeros.  The one exception is
 *     hl_roots_store's *bad, which names the ref that failed (UINT64_MAX
 *     when none did).  Buffers a call copies into (the event, fault state
 *     and sample buffers, hl_ref_read's dst) are not written; their count
 *     says how many entries hold data (0).  What a call updates in place --
 *     the options struct of hl_options_set*, hl_options_from_env*,
 *     hl_roots_store's values -- is left as it was.
 *   - The environment.  The library reads these variables, and no others,
 *     and only in these calls:
 *       HEAPLAB_<OPTION> (HEAPLAB_PAGE_SIZE, ..., one per option below, upper
 *         case): by hl_options_from_env and hl_options_from_env_except, and
 *         by hl_heap_new given opts NULL (which calls hl_options_from_env);
 *         never by hl_heap_new given opts.  A bad value is an error naming
 *         the variable.  The same calls write one warning line to stderr
 *         for each HEAPLAB_* variable that is neither an option nor one of
 *         heaplab's tools' (a typo: "did you mean ...?"), once per variable,
 *         whatever its name's length (past 256 such variables, one line
 *         says the rest are not listed).
 *       HEAPLAB_FAULT_<SITE> (HEAPLAB_FAULT_RESERVE=always,
 *         HEAPLAB_FAULT_RELEASE=first:2000:EAGAIN: mode[:N][:ERRNO], the
 *         sites and modes of hl_inject_named): by every hl_heap_new,
 *         WHATEVER opts is -- they arm the new heap's fault schedules
 *         (docs/clients.md).  A bad value fails hl_heap_new (HL_EVALUE,
 *         naming the variable); a failure an armed fault causes says so
 *         and names the variable.  Unset them in a program that must not
 *         inherit them (unsetenv before its first hl_heap_new).
 *       HEAPLAB_COUNTERS_FILE=path: by the process's first hl_heap_new,
 *         whatever opts is, once: an observer's file (a regular file of
 *         4096 bytes, or an empty one, made 4096) is mapped shared and
 *         every heap counts its system calls, EAGAIN retries and give-ups
 *         into it (experiment E6, docs/experiments/e6.md).  Any other file
 *         is left as it is, with one warning line on stderr.
 *     The tools built on the library (the launchers, libheaplab-malloc.so,
 *     the Python harness) read more of their own: docs/clients.md.
 *   - No function here is a cancellation point (as no call of glibc's malloc
 *     is): a thread cancelled with pthread_cancel (deferred) while in one
 *     goes on to the call's end and is cancelled at its own next
 *     cancellation point, the heap's locks released.
 *   - A program may dlopen and dlclose libheaplab.so.  Once a thread of the
 *     library's own has run (a parallel mark's helpers, a background
 *     collector, a sampler, a fill's prefault helper), a thread has used
 *     a manual heap's thread cache (freed by a key destructor at that
 *     thread's exit), or hl_interrupt_attach installed its signal handler,
 *     the library stays loaded after dlclose, for the process's life: that
 *     code may still run.
 *   - Slot indices are 0-based.
 *   - Sizes and byte counters are 64-bit.
 */
#ifndef HEAPLAB_H
#define HEAPLAB_H

#ifndef HL_CDEF
#include <stddef.h>
#include <stdint.h>

/* HL_VERSION_STRING, _MAJOR, _MINOR, _PATCH: generated by Meson from the
 * project's version (the one place it is declared).  A build without Meson
 * (the rockspec) defines the three numbers instead. */
#if defined(__has_include)
#if __has_include("heaplab_version.h")
#include "heaplab_version.h"
#endif
#endif
#ifndef HL_VERSION_STRING
#define HL__VSTR(x) #x
#define HL__VERSION(a, b, c) HL__VSTR(a) "." HL__VSTR(b) "." HL__VSTR(c)
#define HL_VERSION_STRING HL__VERSION(HL_VERSION_MAJOR, HL_VERSION_MINOR, HL_VERSION_PATCH)
#endif
#ifdef __cplusplus
extern "C" {
#endif
#endif

/*
 * HL_ABI_VERSION: the version of the binary interface -- the size and the
 * field offsets of every struct declared here (hl_options, hl_stats,
 * hl_event, ...), the values of every enum and X-macro list, the functions
 * and their signatures.  Every change to any of them (a field added, even at
 * the end: a caller's struct is the size its header says; an option
 * inserted between two others; a function added, as hl_ref_same in 4: a
 * program that calls it must not load a library without it) comes with
 * HL_ABI_VERSION + 1, and the shared library's soname follows it:
 * libheaplab.so.<HL_ABI_VERSION>.  A program
 * built against another version does not load the new library at all
 * (instead of being corrupted by it: hl_options grew 312 -> 384 -> 464
 * bytes, and hl_stats 488 -> 888, under one soname libheaplab.so.0 --
 * the embedding hunt, session 28).  A program that loads the library some
 * other way (dlopen by path, a static copy) compares hl_abi_version() with
 * the HL_ABI_VERSION it was built with.  tests/c/public_layout_is_pinned.c
 * pins the layout of this version and fails until both change together
 * (docs/clients.md, "Embedding libheaplab in a C program").
 */
#define HL_ABI_VERSION 6

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
  X(ECHECK, 11, "heap invariant violated")                                     \
  X(ETYPE, 12, "value of the wrong type")                                      \
  X(EINTR, 13, "interrupted")

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
  HL_OPT_ENUM = 3   /* one of a list of named choices */
} hl_option_kind;

/*
 * The choices of each enum option, declared once: CHOICES(FIRST, REST) lists
 * (PREFIX, NAME, token).  They make the C constants (HL_<PREFIX>_<NAME>,
 * numbered from 0 in order) and the option's choices string ("token,..."),
 * so the two cannot disagree.
 */
#define HL_CHOICES_mode(F, R) F(MODE, COLLECTED, collected) R(MODE, MANUAL, manual)
#define HL_CHOICES_release_advice(F, R) F(ADVICE, DONTNEED, dontneed) R(ADVICE, FREE, free)
#define HL_CHOICES_fallback_advice(F, R)                                       \
  F(FALLBACK, NONE, none) R(FALLBACK, DONTNEED, dontneed) R(FALLBACK, FREE, free)
#define HL_CHOICES_upgrade_budget_counts(F, R)                                 \
  F(BUDGET, ATTEMPTS, attempts) R(BUDGET, SCANNED, scanned)
#define HL_CHOICES_reuse_failed_order(F, R) F(ORDER, FIFO, fifo) R(ORDER, LIFO, lifo)
#define HL_CHOICES_sweep(F, R) F(SWEEP, RETIRED, retired) R(SWEEP, FULL, full)
#define HL_CHOICES_major_sweep(F, R)                                           \
  F(MAJOR, AUTO, auto) R(MAJOR, NEVER, never) R(MAJOR, ALWAYS, always)
#define HL_CHOICES_collector(F, R)                                             \
  F(COLLECTOR, SYNC, sync) R(COLLECTOR, BACKGROUND, background)
#define HL_CHOICES_compact(F, R)                                               \
  F(COMPACT, NEVER, never) R(COMPACT, SPARSE, sparse) R(COMPACT, ALWAYS, always)
#define HL_CHOICES_thp(F, R) F(THP, NEVER, never) R(THP, MADVISE, madvise) R(THP, POPULATE, populate)

#define HL__CHOICE_CONST(prefix, name, token) HL_##prefix##_##name,
#define HL__CHOICE_FIRST(prefix, name, token) #token
#define HL__CHOICE_REST(prefix, name, token) "," #token
/* The choices string of enum option `opt`: "collected,manual". */
#define HL_CHOICES(opt) HL_CHOICES_##opt(HL__CHOICE_FIRST, HL__CHOICE_REST)

enum hl_mode { HL_CHOICES_mode(HL__CHOICE_CONST, HL__CHOICE_CONST) };
enum hl_advice { HL_CHOICES_release_advice(HL__CHOICE_CONST, HL__CHOICE_CONST) };
enum hl_fallback { HL_CHOICES_fallback_advice(HL__CHOICE_CONST, HL__CHOICE_CONST) };
enum hl_budget { HL_CHOICES_upgrade_budget_counts(HL__CHOICE_CONST, HL__CHOICE_CONST) };
enum hl_order { HL_CHOICES_reuse_failed_order(HL__CHOICE_CONST, HL__CHOICE_CONST) };
enum hl_sweep { HL_CHOICES_sweep(HL__CHOICE_CONST, HL__CHOICE_CONST) };
enum hl_major { HL_CHOICES_major_sweep(HL__CHOICE_CONST, HL__CHOICE_CONST) };
enum hl_collector { HL_CHOICES_collector(HL__CHOICE_CONST, HL__CHOICE_CONST) };
enum hl_compact { HL_CHOICES_compact(HL__CHOICE_CONST, HL__CHOICE_CONST) };
enum hl_thp { HL_CHOICES_thp(HL__CHOICE_CONST, HL__CHOICE_CONST) };

/*
 * X(name, kind, heaps, default, min, max, choices, description)
 * Every option is an int64_t field of hl_options.  The environment variable
 * HEAPLAB_<NAME> (upper case) overrides the default (hl_options_from_env).
 * heaps: ALL, or COLLECTED for an option only a collected heap reads (the
 * collector's: its triggers, sweeps, nursery, marking, pacing, compaction --
 * nothing of a manual heap's code reads it).  hl_option_info.collected_only
 * says it; a manual heap ignores such an option's HEAPLAB_ variable
 * (hl_options_from_env), and so do the launchers, the preloaded library
 * and the harness's allocator arms, from this one column.
 * An enum option's min and max are its first and last choice.
 * Control arms: the descriptions name the seed defect a value reproduces.
 */
#define HL_OPTIONS(X)                                                          \
  X(mode, ENUM, ALL, HL_MODE_COLLECTED, HL_MODE_COLLECTED, HL_MODE_MANUAL, HL_CHOICES(mode), \
    "collected: roots + precise tracing; manual: explicit sized free")        \
  X(page_size, BYTES, ALL, 65536, 4096, 1048576, "",                                \
    "BiBOP page size (power of two, >= OS page)")                             \
  X(small_max, BYTES, ALL, 512, 16, 16384, "",                                      \
    "largest small object in bytes (<= page_size/4); larger go to the large path") \
  X(reserve_bytes, BYTES, ALL, 34359738368, 1048576, 1099511627776, "",             \
    "virtual reservation for small pages (halved until the kernel accepts it; the heap's effective options say what it got)") \
  X(thp, ENUM, ALL, HL_THP_NEVER, HL_THP_NEVER, HL_THP_POPULATE, HL_CHOICES(thp),   \
    "transparent huge pages: never (MADV_NOHUGEPAGE: 4 KiB faults); madvise (MADV_HUGEPAGE on a reservation of 2 MiB-aligned 2 MiB chunks: a chunk is backed by a huge page at its first touch; trims release whole chunks first, one call per run of them -- a whole chunk even when its free pages go past what the trim would take (up to release_per_sweep; less than a chunk out of the warm cache) -- and count the huge pages they split); populate (as madvise, and a fresh chunk is faulted in with one MADV_POPULATE_WRITE). Default never, measured (docs/performance.md, fourth round): the 192 MiB fill is 3x faster with populate, binary-trees is not faster (side by side 0.98-1.03x, 2-3x the system time), and the experiments study footprint in 4 KiB pages") \
  X(thp_prefault, INT, ALL, 4, 0, 64, "",                                           \
    "thp (madvise or populate): while a fill carves fresh 2 MiB chunks, a helper thread faults in up to this many chunks ahead of it with MADV_POPULATE_WRITE on another CPU, so the kernel's zeroing of huge pages can run beside the fill (at most the fresh pages the fill will carve; chunks it faulted in and the fill did not use are given back when it ends); 0 = off, the fill faults its chunks in itself. Default 4, measured (docs/performance.md, fourth round, item 27): a 192 MiB huge-page fill 0.87x (fastest) and 0.82x (median) the time without the helper at load < 1, 0.77x and 0.74x at load 1.5 (the helper taking the farthest chunks, the fill zeroing the near ones); no thread starts where the process may use one CPU") \
  X(page_release, BOOL, ALL, 1, 0, 1, "",                                           \
    "return empty pages to the OS; 0 = the seed's 'before' (kept forever)")   \
  X(warm_pages, INT, ALL, 64, 0, 1048576, "",                                       \
    "empty pages kept resident as a warm cache")                              \
  X(warm_demand_trims, INT, ALL, 8, 0, 16, "",                                      \
    "while allocating, also keep as many empty pages as were taken in the last N trim intervals (0 = warm_pages only, the seed's policy)") \
  X(release_per_sweep, INT, ALL, 1024, 1, 1048576, "",                              \
    "pages released per trim pass at most: a cycle's trim (and a manual heap's after frees) is one pass, so a drop of more goes back over the next cycles; hl_trim runs passes until only the warm cache is left")                                        \
  X(release_advice, ENUM, ALL, HL_ADVICE_DONTNEED, HL_ADVICE_DONTNEED, HL_ADVICE_FREE,  \
    HL_CHOICES(release_advice),                            \
    "primary advice: dontneed drops RSS now; free is lazy and stays charged")  \
  X(fallback_advice, ENUM, ALL, HL_FALLBACK_FREE, HL_FALLBACK_NONE, HL_FALLBACK_FREE, \
    HL_CHOICES(fallback_advice),                      \
    "advice used when the primary is refused; such pages are upgraded later") \
  X(upgrade_per_sweep, INT, ALL, 1024, 0, 1048576, "",                              \
    "primary-advice retries on fallback pages per trim (0 = never upgrade)")  \
  X(upgrade_budget_counts, ENUM, ALL, HL_BUDGET_ATTEMPTS, HL_BUDGET_ATTEMPTS, HL_BUDGET_SCANNED, \
    HL_CHOICES(upgrade_budget_counts),                  \
    "what the upgrade budget counts; scanned = the seed's stalling defect")   \
  X(reuse_attempts, INT, ALL, 4, 1, 4096, "",                                       \
    "released pages tried per page acquisition before a fresh page")          \
  X(reuse_failed_order, ENUM, ALL, HL_ORDER_FIFO, HL_ORDER_FIFO, HL_ORDER_LIFO,        \
    HL_CHOICES(reuse_failed_order),                            \
    "where a page that failed restore is parked; lifo = the seed's defect")   \
  X(dump_toggle, BOOL, ALL, 0, 0, 1, "",                                            \
    "pair release with MADV_DONTDUMP and reuse with MADV_DODUMP (bmalloc; splits VMAs)") \
  X(dump_unused, BOOL, ALL, 1, 0, 1, "",                                            \
    "core dumps hold the whole reservation and side tables (1: one VMA for the reservation's life, what the experiments measure); 0: MADV_DONTDUMP on the part no carved page uses, MADV_DODUMP as the heap grows (each mapping two VMAs): a core dump or gdb's gcore holds the heap's pages, not 32 GiB of zeros -- the default of libheaplab-malloc.so and the launchers") \
  X(syscall_retry_max, INT, ALL, 100, -1, 1000000000, "",                           \
    "EAGAIN retries per syscall; -1 = unbounded spin (the seed's livelock)")  \
  X(syscall_retry_backoff_us, INT, ALL, 1000, 0, 10000000, "",                      \
    "sleep between EAGAIN retries, microseconds")                             \
  X(sweep, ENUM, COLLECTED, HL_SWEEP_RETIRED, HL_SWEEP_RETIRED, HL_SWEEP_FULL, HL_CHOICES(sweep), \
                                         \
    "retired: sweep pages retired since the last cycle; full: every page")    \
  X(major_sweep, ENUM, COLLECTED, HL_MAJOR_AUTO, HL_MAJOR_AUTO, HL_MAJOR_ALWAYS,               \
    HL_CHOICES(major_sweep),                           \
    "when partial pages are swept too (auto: quiet, pressure or backstop)")   \
  X(quiet_bytes, BYTES, COLLECTED, 6291456, 0, 1099511627776, "",                         \
    "a cycle is quiet below min(trigger/4, quiet_bytes) allocated since the last") \
  X(quiet_counts_large, BOOL, COLLECTED, 1, 0, 1, "",                                     \
    "count large-path bytes in the quiet test; 0 = the seed's defect")        \
  X(major_backstop_cycles, INT, COLLECTED, 16, 0, 1048576, "",                            \
    "a major sweep at least this often (0 = no backstop)")                    \
  X(gc_trigger_bytes, BYTES, COLLECTED, 25165824, 65536, 1099511627776, "",               \
    "small-path bytes allocated between cycles (starting value when adaptive)") \
  X(gc_trigger_min_bytes, BYTES, COLLECTED, 4194304, 65536, 1099511627776, "",            \
    "lower bound of the adaptive trigger")                                    \
  X(gc_trigger_max_bytes, BYTES, COLLECTED, 1073741824, 65536, 1099511627776, "",         \
    "upper bound of the adaptive trigger")                                    \
  X(adaptive_trigger, BOOL, COLLECTED, 1, 0, 1, "",                                       \
    "double the trigger on high survival twice in a row, halve on low")       \
  X(gc_live_ratio, INT, COLLECTED, 200, 0, 1000, "",                                      \
    "percent of the bytes the last cycle marked added to the trigger (0 = off)") \
  X(gc_growth_ratio, INT, COLLECTED, 100, 0, 1000, "",                                    \
    "full-mark collector: the heap grows only by need -- the trigger is at most max(the bytes the heap holds free after the sweep, the trigger + this percent of the bytes marked), and a cycle that would leave less free sweeps the partial pages too (0 = off: gc_live_ratio alone, the seed's trigger)") \
  X(generational, BOOL, COLLECTED, 0, 0, 1, "",                                           \
    "collected mode (needs mode=collected), sticky mark bits: most cycles mark only what was allocated since the last one (slot stores go through the API: hl_obj_set)") \
  X(young_bytes, BYTES, COLLECTED, 33554432, 65536, 1099511627776, "",                    \
    "generational: the largest nursery, where a heap starts -- small-path bytes allocated between minor cycles (young_min_bytes: the smallest)")          \
  X(young_min_bytes, BYTES, COLLECTED, 4194304, 65536, 1099511627776, "",                 \
    "generational: the nursery adapts between this (at most young_bytes: a larger value is refused; the default follows a smaller young_bytes down) and young_bytes to young_survival_factor times the bytes recent minor cycles kept (a nursery the survivors fill a small part of stays in the cache; equal to young_bytes: a fixed nursery)") \
  X(young_survival_factor, INT, COLLECTED, 16, 1, 1000000, "",                             \
    "generational: the nursery is this many times the bytes recent minor cycles kept, between young_min_bytes and young_bytes") \
  X(full_growth_ratio, INT, COLLECTED, 25, 1, 1000, "",                                   \
    "generational: a full mark once promoted bytes reach this percent of the last full mark's live bytes (25: binary-trees at depth 20 peaks at 159 MiB where 50 held 208; docs/performance.md, fourth round, item 26); both modes: a full mark that found the live set grown by more than this percent tenures no page (tenure_full_marks)") \
  X(mark_threads, INT, COLLECTED, 0, 0, 8, "",                                            \
    "threads that mark (the cycle's own and helpers that trace beside it); 0 = the CPUs this process may run on, at most 8; 1 = marking on one thread") \
  X(conservative_interior, BOOL, COLLECTED, 1, 0, 1, "",                                  \
    "a word of a conservative root region keeps the object it points into (1) or only the object it points at the start of (0)") \
  X(tenure_full_marks, INT, COLLECTED, 16, 0, 1000000, "",                                \
    "collected heaps, both modes: a page at least 7/8 live after two full marks in a row is tenured (not while the live set grows by more than full_growth_ratio from one full mark to the next) -- later full marks keep its marks and do not trace it, a store into its objects remembers it -- until every Nth full mark, a caller's collection, a cycle for memory or one under memory pressure, which marks everything; tenured garbage lives until then (0 = no tenuring: every full mark traces the whole live set, the seeds' collector; generational, 16 with full_growth_ratio 25: tenured garbage lives until 400% of the live set was promoted, as 8 did with 50)") \
  X(large_trigger_bytes, BYTES, COLLECTED, 25165824, 4096, 1099511627776, "",             \
    "large-path bytes that request a cycle")                                  \
  X(large_pacing, BOOL, COLLECTED, 1, 0, 1, "",                                           \
    "make a large allocator wait for the cycle it requested; 0 = the seed's legacy path") \
  X(large_map_bytes, BYTES, COLLECTED, 131072, 0, 1099511627776, "",                      \
    "collected heaps: a large object of at least this many bytes (its 32-byte record included) is a mapping of its own, unmapped when it dies, whatever the process freed before -- glibc's malloc raises its mmap threshold (up to 32 MiB) each time a mapped block is freed, after which such objects came from its heap and stayed resident when they died (E1's textures on the Lua twin); 0 = every large object from the system malloc. A manual heap's large blocks are the system malloc's (realloc grows them in place)") \
  X(heap_limit_bytes, BYTES, ALL, 0, 0, 1099511627776, "",                          \
    "live bytes the heap may hold (0 = none): collected mode collects, then fails with ENOMEM (an object larger than the whole limit at once, without collecting); manual mode fails; pacing (background) waits for cycles below it") \
  X(pacing_max_wait_ms, INT, COLLECTED, 1000, 1, 600000, "",                              \
    "longest a paced allocation waits for one cycle (hl_interrupt, Ctrl-C, ends the wait sooner -- in a long call, one that came before the wait too: the allocation goes on unpaced)") \
  X(pacing_give_up_cycles, INT, COLLECTED, 4, 1, 1000, "",                                \
    "paced waits stop after this many cycles in a row that free nothing")     \
  X(collector, ENUM, COLLECTED, HL_COLLECTOR_SYNC, HL_COLLECTOR_SYNC, HL_COLLECTOR_BACKGROUND,  \
    HL_CHOICES(collector),                               \
    "collected mode: sync: cycles run in the allocating thread; background: a collector thread (needs mode=collected)") \
  X(min_cycle_interval_ms, INT, COLLECTED, 0, 0, 600000, "",                              \
    "background collector: least time between the collector thread's cycles; a cycle for memory (no slot or block left, or the live bytes at heap_limit_bytes: stat memory_cycles), collect() and the cycles of a thread holding the heap (hl_enter) run in the calling thread at once, whatever the interval (near heap_limit_bytes they come closer together than it)") \
  X(subpage_release, BOOL, ALL, 0, 0, 1, "",                                        \
    "also release the OS pages of partly live pages that hold no live slot (one advice per run, by the trim; restored before a slot in them is handed out); 0 = whole pages only") \
  X(compact, ENUM, COLLECTED, HL_COMPACT_NEVER, HL_COMPACT_NEVER, HL_COMPACT_ALWAYS, HL_CHOICES(compact), \
    "collected mode, full marks: evacuate the live objects of sparse pages into other pages of their class and release the emptied pages (sparse: pages below compact_live_pct; always: every page with room; never: objects never move)") \
  X(compact_live_pct, INT, COLLECTED, 25, 1, 100, "",                                     \
    "compact=sparse: a page is evacuated when less than this percent of its slots is live") \
  X(verify, BOOL, ALL, 0, 0, 1, "",                                                 \
    "poison freed slots and check heap invariants every cycle; manual mode: no thread cache, every free checked, freed blocks quarantined, a free block checked when handed out (docs/clients.md, Checks)") \
  X(events_capacity, INT, ALL, 4096, 16, 1048576, "",                               \
    "events kept in the ring buffer (older ones are dropped and counted)")    \
  X(tcache_blocks, INT, ALL, 1024, 0, 1024, "",                                     \
    "manual mode: blocks per size class cached per thread (0 = no cache)")    \
  X(tcache_bytes, BYTES, ALL, 65536, 0, 1073741824, "",                             \
    "manual mode: bytes per size class cached per thread, at least 16 blocks (0 = no limit)") \
  X(tcache_gc_events, INT, ALL, 4096, 0, 1073741824, "",                            \
    "manual mode: thread-cache GC -- every this many blocks that come into a thread's cache (its frees, and the blocks its refills take) the thread visits one size class of its cache (round robin); a class it did not use since the last visit gives back 3/4 of the blocks that stayed below its low-water mark and halves what it may cache (0 = no GC)") \
  X(record_refused_release, BOOL, ALL, 0, 0, 1, "",                                 \
    "control: 1 = the seed's defect, a refused release recorded as released") \
  X(init_page_state, BOOL, ALL, 1, 0, 1, "",                                        \
    "control: 0 = the seed's defect, release state not initialised on a fresh page") \
  X(restore_before_format, BOOL, ALL, 1, 0, 1, "",                                  \
    "control: 0 = the seed's defect, a reused page is formatted before it is restored")

typedef struct hl_options {
#define HL__OPT_FIELD(name, kind, heaps, def, lo, hi, choices, desc) int64_t name;
  HL_OPTIONS(HL__OPT_FIELD)
#undef HL__OPT_FIELD
} hl_options;


typedef struct hl_option_info {
  const char *name;
  int kind;            /* hl_option_kind */
  int collected_only;  /* 1: read by collected heaps only (HL_OPTIONS' heaps
                          column, COLLECTED); a manual heap ignores its
                          HEAPLAB_ variable.  (HL_ABI_VERSION 5) */
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
/* The name of choice `value` of enum option `index` ("lifo"), or NULL. */
const char *hl_option_choice(int index, int64_t value);
/* The option whose name is closest to `name` (a likely typo), or NULL. */
const char *hl_option_nearest(const char *name);
/* Whether heaplab reads the environment variable named `var` (the whole
 * name, "HEAPLAB_WARM_PAGES"): HL_ENV_OPTION for an option's
 * (HEAPLAB_<OPTION>, upper case), HL_ENV_TOOL for one its tools read (the
 * launchers', the preload's, the harness's: HEAPLAB_STATS, HEAPLAB_FAULT_<SITE>,
 * HEAPLAB_E1_FILL_MIB, an experiment's own HEAPLAB_X_<NAME> ...), HL_ENV_NONE
 * for any other name, NULL included -- a HEAPLAB_ one of those is what a heap
 * made from the environment warns about as a typo.  A front-end that passes
 * variables on (a sweep's --set and --env) refuses a typo with it before any
 * run instead of every run ignoring the value.  (HL_ABI_VERSION 6) */
typedef enum hl_env_kind { HL_ENV_NONE = 0, HL_ENV_OPTION = 1, HL_ENV_TOOL = 2 } hl_env_kind;
int hl_env_var_kind(const char *var);

/* Fill with the declared defaults (no environment).  HL_EINVAL for a NULL
 * opts. */
int hl_options_defaults(hl_options *opts);
/* Apply HEAPLAB_<NAME> environment overrides.  A bad value is an error naming
 * the variable and the allowed range (opts is then left as it was); err may
 * be NULL.  Warns on stderr of HEAPLAB_* variables that are no option.  On a
 * manual heap -- opts->mode manual before the call, or HEAPLAB_MODE=manual --
 * the variable of every collected-only option (hl_option_info.collected_only:
 * HEAPLAB_GENERATIONAL, HEAPLAB_GC_TRIGGER_BYTES, HEAPLAB_YOUNG_MIN_BYTES ...)
 * is ignored (its value still has to be one of the option's): they are for
 * the process's collected heaps, and hl_options_validate refuses some of them
 * on a manual one.  So set the mode, and the options set explicitly, before
 * this call: a cross-check of hl_options_validate an environment value fails
 * against them (young_min_bytes above young_bytes on a generational heap,
 * HEAPLAB_SUBPAGE_RELEASE=1 beside page_release=false ...) is refused here,
 * the message naming the variable ("environment HEAPLAB_YOUNG_MIN_BYTES=8m:
 * ..."); one of the caller's own values alone is left to hl_options_validate,
 * and a switch set explicitly is still refused there. */
int hl_options_from_env(hl_options *opts, char *err, size_t errlen);
/* The same, leaving alone the options named in skip[0..n) (the ones a caller
 * sets explicitly: an explicit value overrides the environment, so a bad
 * environment value of that option is not an error). */
int hl_options_from_env_except(hl_options *opts, const char *const *skip, size_t n,
                               char *err, size_t errlen);

/* The type of a value a binding hands over (hl_options_set_value). */
typedef enum hl_value_type {
  HL_VALUE_BOOL = 0,   /* ival: 0 or 1 */
  HL_VALUE_INT = 1,    /* ival */
  HL_VALUE_STRING = 2, /* sval, slen bytes ("64k", "true", "lifo", "-1") */
  HL_VALUE_OTHER = 3   /* a value of another type: sval says what ("a float 1.5"),
                          for the message */
} hl_value_type;

/* Set an option by name from a typed value: the one place an option value
 * is converted and checked, for every binding.  Errors: HL_EINVAL (opts or
 * name NULL), HL_EOPTION (unknown name; the message suggests the nearest),
 * HL_ETYPE (a value of the wrong
 * type: a number for an enum, a boolean for a count...), HL_EVALUE (out of
 * range, not a choice, not a number).  Messages name the option and what it
 * takes. */
int hl_options_set_value(hl_options *opts, const char *name, int type, int64_t ival,
                         const char *sval, size_t slen, char *err, size_t errlen);
/* Set an option by name from a string ("64k", "true", "lifo", "-1").  The
 * one grammar of every string value -- C, Python and Lua strings and the
 * HEAPLAB_<OPTION> variables: blanks around the value are ignored
 * (" 5 " is 5); an int or bytes option takes an optional sign, then
 * decimal digits (leading zeros are no octal: "010" is 10) or 0x and
 * hexadecimal digits ("0x10" is 16, "+5" is 5); a bytes option then an
 * optional k, m, g or t (binary: "64k" is 65536; "64KiB" and "64kb" too).
 * Nothing else: no exponent or fraction ("1e3", "1.5"), no blank inside
 * ("6 4"), no "_" separators.  A bool takes 1/0, true/false, on/off,
 * yes/no, an enum its choice names, both in any case. */
int hl_options_set(hl_options *opts, const char *name, const char *value,
                   char *err, size_t errlen);
/* Set an option by name from a number (enum options take the choice index). */
int hl_options_set_int(hl_options *opts, const char *name, int64_t value,
                       char *err, size_t errlen);
/* Read an option by name: HL_EOPTION for an unknown name, HL_EINVAL for a
 * NULL struct, name or out pointer (hl_heap_error(NULL) says which). */
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
  X(major_growth, "major sweeps chosen because the retired pages' sweep left less free than gc_growth_ratio asks (the heap would grow)") \
  X(minor_cycles, "generational: cycles that marked only objects allocated since the last cycle") \
  X(promoted_bytes, "generational: bytes minor cycles marked (promoted to the old generation)") \
  X(dirty_pages_scanned, "generational: pages a minor cycle scanned for stores into old objects") \
  X(whole_marks, "full marks that untenured every page first and marked everything (every tenure_full_marks-th, a caller's, for memory, under pressure; both modes)") \
  X(tenured_pages, "pages tenured now (full marks keep their marks and skip them; both modes, tenure_full_marks)")  \
  X(remembered_pages_scanned, "tenured pages a full mark traced for references to objects not tenured (both modes)") \
  X(verify_failures, "verification failures: a cycle's, an empty page found written when taken again, and (manual mode) a damaged free block found as it is handed out (verify=true; each a verify_failed event, hl_heap_error says why)") \
  X(mark_threads_used, "threads that took part in the last mark (1 when it ran on one)") \
  X(mark_steals, "parallel marks: packets of work a marker took that another had shared") \
  X(mark_helper_bytes, "parallel marks: bytes marked by helper threads (the rest by the cycle's thread)") \
  X(marked_objects, "objects the last mark marked") \
  X(marked_bytes, "bytes the last mark marked") \
  X(gc_trigger_bytes, "small-path trigger in force")                           \
  X(small_bytes_since_cycle, "small-path bytes allocated since the last cycle") \
  X(large_bytes_since_cycle, "large-path bytes allocated since the last cycle (counted as large_allocated_bytes)") \
  X(small_allocated_bytes, "small-path bytes allocated in all (manual mode: slots handed to the thread caches, which hold some not yet malloc'd)") \
  X(large_allocated_bytes, "large-path bytes allocated in all: each block's bytes when made (collected mode: header, slots and payload; manual mode: the size asked); a manual realloc of a large block to a large size adds only its growth, the new usable size less the old (slack included), and nothing when the block shrinks or stays where it is; a realloc between the small and the large path makes a new block, counted whole") \
  X(small_live_bytes, "small slot bytes in use (after the last sweep plus new; manual mode: blocks cached by threads count as in use until flushed)") \
  X(large_live_bytes, "large-path bytes in use: the blocks' sizes (collected mode: header, slots and payload; manual mode: the usable size, hl_usable_size's -- the size asked, or after a realloc that moved or resized the block what it gave, a growth's slack included: up to a quarter more than asked; a realloc that leaves the block where it is, shrinking it by less than half, keeps its size)") \
  X(large_objects, "large objects in use")                                     \
  X(objects_allocated, "objects allocated in all (manual mode: blocks handed to the thread caches and large blocks; manual_mallocs counts the calls)") \
  X(objects_freed, "objects freed (swept or explicitly freed; manual mode: blocks back from the thread caches and large blocks; manual_frees counts the calls)") \
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
  X(trim_backoffs, "trims skipped while trims back off after one gave up (EAGAIN that does not clear) or released nothing, every run refused") \
  X(trim_backoff_ns, "the current back-off after a trim gave up, nanoseconds (0: none)") \
  X(reuse_backoffs, "restores and populates skipped while they back off after one gave up (EAGAIN that does not clear): each a fresh page taken, or a page faulted in without the populate") \
  X(syscall_stall_ns, "time slept between EAGAIN retries, nanoseconds")      \
  X(syscalls, "system calls made through the retry helper")                    \
  X(syscall_retries, "EAGAIN retries")                                         \
  X(syscall_gave_up, "calls that gave up after syscall_retry_max retries")     \
  X(faults_fired, "injected faults fired")                                     \
  X(pacing_waits, "large allocations that waited for a cycle")                 \
  X(pacing_wait_ns, "time large allocations waited, nanoseconds")              \
  X(pacing_timeouts, "paced waits cut short by pacing_max_wait_ms")            \
  X(pacing_gave_up, "paced waits skipped after cycles that freed nothing")     \
  X(cycle_requests, "cycles requested by the byte counters")                   \
  X(memory_cycles, "cycles an allocation ran because it found no memory or the heap was at heap_limit_bytes") \
  X(collector_wakeups, "background collector wake-ups")                        \
  X(gc_ns, "time spent in cycles (mark + sweep), nanoseconds")                 \
  X(mark_ns, "of gc_ns: marking (roots, dirty pages, tracing), nanoseconds")  \
  X(minor_gc_ns, "of gc_ns: minor cycles (generational), nanoseconds")        \
  X(max_pause_ns, "longest cycle, nanoseconds")                                \
  X(events_dropped, "events overwritten before they were read")              \
  X(manual_mallocs, "manual mode allocations (read while other threads allocate and free: never less than an earlier read nor than manual_frees, never more than the calls made by the end of the read -- it may lag the calls in progress -- and exact once they are done)") \
  X(manual_frees, "manual mode frees (read while other threads free: never less than an earlier read, and each thread's count as it was during the read)") \
  X(tcache_refills, "manual mode thread-cache refills")                        \
  X(tcache_flushes, "manual mode thread-cache flushes")                        \
  X(tcache_gc_visits, "manual mode thread-cache GC: size classes visited (tcache_gc_events)") \
  X(tcache_gc_flushes, "of tcache_flushes, those by thread-cache GC visits (blocks unused since the class's last visit)") \
  X(tcache_gc_bytes, "bytes of cached blocks thread-cache GC gave back") \
  X(subpage_released_bytes, "bytes of OS pages released inside partly live pages now (subpage_release)") \
  X(subpage_fallback_bytes, "of subpage_released_bytes, released with the fallback advice (still charged until upgraded)") \
  X(subpage_pages, "pages holding released OS pages now (subpage_release)")   \
  X(subpage_runs, "runs of OS pages released inside partly live pages (one advice call each)") \
  X(subpage_rejected_runs, "runs whose release was refused (left in, retried by a later trim)") \
  X(subpage_upgraded_runs, "fallback runs upgraded to the primary advice")    \
  X(subpage_restores, "runs restored before a slot in them was handed out")  \
  X(subpage_restore_failed, "restores of runs that failed (the page takes no new object until a later trim)") \
  X(compactions, "cycles that evacuated at least one page (compact)")        \
  X(evacuated_pages, "pages emptied by evacuation")                           \
  X(evacuated_objects, "objects moved by evacuation")                         \
  X(evacuated_bytes, "slot bytes moved by evacuation")                        \
  X(pinned_objects, "live objects that stayed put on pages compaction would have evacuated: targets of conservative roots and objects holding a root region's words (a region registered in an object's payload); while the heap was held (hl_enter) or a fill ran, every live object of a page below the threshold") \
  X(compact_ns, "of gc_ns: choosing, evacuating and updating references, nanoseconds") \
  X(thp_disabled, "1 when the reservation was advised MADV_NOHUGEPAGE")         \
  X(thp_enabled, "1 when the reservation was advised MADV_HUGEPAGE (thp=madvise or populate) and the kernel's THP mode lets it have huge pages") \
  X(thp_errno, "thp: errno of the last huge-page call the kernel refused (MADV_HUGEPAGE at creation, MADV_POPULATE_WRITE of a chunk); EOPNOTSUPP when the kernel's THP mode is never; 0 = none") \
  X(thp_chunks_released, "thp: 2 MiB chunks released whole, one call over the chunk (a huge page given back without a split; a chunk released in part before, counted in thp_splits then, is counted here too when the rest goes)") \
  X(thp_splits, "thp: 2 MiB chunks that may have been one huge page and were released in part (the kernel splits the huge page: the process's RSS drops, the machine gets the memory when the kernel's deferred split runs)") \
  X(thp_subpage_splits, "thp: of thp_splits, those by subpage_release: OS pages released inside pages that stay live (4 KiB of a huge page splits it as 64 KiB does)") \
  X(thp_prefault_chunks, "thp_prefault: fresh 2 MiB chunks the helper thread faulted in ahead of a fill") \
  X(thp_prefault_waits, "thp_prefault: times a fill reached a chunk the helper was still faulting in and waited for it") \
  X(thp_prefault_wait_ns, "thp_prefault: time fills spent in those waits") \
  X(thp_prefault_unused, "thp_prefault: chunks the helper faulted in that the fill did not carve (it ended early, or reused freed pages), given back with MADV_DONTNEED when it ended") \
  X(thp_populated_chunks, "thp=populate: fresh 2 MiB chunks faulted in with one MADV_POPULATE_WRITE") \
  X(thp_populate_refused, "thp=populate: chunks whose MADV_POPULATE_WRITE the kernel refused (they fault in at first touch; thp_errno says why)")

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

/* X(name, "comma,separated,field,names") -- at most HL_EVENT_MAX_FIELDS.
 * cycle: reason says what asked for it -- 0 a caller (hl_collect); 1 the
 * small path's trigger; 2 the large path's (large_trigger_bytes); 3 pacing
 * (a large allocation near heap_limit_bytes with the background collector,
 * or a paced one in a thread that holds the heap, which runs the cycle
 * itself); 4 memory (an allocation found no slot or block, or the heap at
 * heap_limit_bytes: a major cycle before ENOMEM).  The background
 * collector's cycle reports its requests' reason (the small trigger's when
 * both triggers asked, as a sync cycle would).
 * large_unmap_pending: a collected heap's dead large objects of
 * large_map_bytes or more are unmapped; at vm.max_map_count the kernel
 * refuses to unmap one inside a VMA merged with its neighbours (ENOMEM: the
 * VMA would split).  Such a range's pages but its first (the record that
 * keeps it on the heap's pending list) go back with MADV_DONTNEED at once,
 * and the range stays mapped, pending, retried at each cycle's end (the
 * first pending range; the rest when it goes), by hl_trim (every one) and
 * by hl_heap_free.  Recorded once per batch of unmaps that changed the
 * list: refused (ranges newly refused, refused_bytes their mappings' bytes,
 * errno the first refusal's), unmapped (pending ranges a retry unmapped,
 * unmapped_bytes), and the list after it (pending, pending_bytes).  Their
 * bytes are not in large_live_bytes. */
#define HL_EVENTS(X)                                                           \
  X(heap_created, "reserved_bytes,page_size,thp_disabled,reserve_attempts")    \
  X(cycle, "major,duration_ns,small_bytes,large_bytes,swept_pages,freed_objects,live_bytes,trigger_bytes,reason,minor") \
  X(major_sweep, "reason,spliced_pages,small_bytes,large_bytes,quiet_limit")   \
  X(trim, "released,calls,rejected,fallback,upgraded,upgrade_attempts,duration_ns,free_after,gave_up") \
  X(restore_failed, "page,errno,order")                                        \
  X(syscall_gave_up, "site,errno,retries,page")                                \
  X(pacing_wait, "large_bytes,waited_ns,timed_out,gave_up")                   \
  X(trigger_adapted, "old_bytes,new_bytes,survival_pct")                      \
  X(subpage_trim, "pages,runs,released_bytes,rejected_runs,fallback_runs,upgraded_runs,duration_ns,gave_up") \
  X(compact, "pages,objects,bytes,pinned_objects,pinned_pages,duration_ns,blocked") \
  X(thp_split, "chunk_page,released_pages,pages_in_use,released_bytes")        \
  X(mark, "threads,steals,thread0_bytes,thread1_bytes,thread2_bytes,thread3_bytes,thread4_bytes,thread5_bytes,thread6_bytes,thread7_bytes") \
  X(nursery_adapted, "old_bytes,new_bytes,kept_pct")                          \
  X(large_unmap_pending, "refused,refused_bytes,errno,unmapped,unmapped_bytes,pending,pending_bytes") \
  X(verify_failed, "address,failures,in_cycle")

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
/* Field i of an event kind ("released"), or NULL past the last. */
const char *hl_event_field(int kind, int i);

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
  X(populate, "faulting in a page a bulk phase (fill) will write whole, or a fresh 2 MiB chunk (thp=populate; the thp_prefault helper's calls)") \
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
/* The least N hl_inject takes for a mode: 1 for every, 0 for first and
 * sticky, INT64_MIN for always, off and an unknown mode (any N; the most is
 * INT64_MAX for every mode).  What a binding names for an N beyond the 64-bit
 * integers, which never reaches hl_inject (as HEAPLAB_FAULT_<SITE> does). */
int64_t hl_fault_mode_min_arg(int mode);
/* errno by name ("EAGAIN", "ENOMEM", "EINVAL", "EIO", "ENOSPC", ... every
 * name of the platform's errno.h, aliases such as EWOULDBLOCK too), or by
 * the "E<n>" hl_errno_name gives a number without a name; -1 else. */
int hl_errno_index(const char *name);
/* The symbolic name of an errno ("ENOSPC" for 28), "E<n>" ("E200") for a
 * number in [1, 4095] without one (a fault may arm any errno in that range
 * by number), "E?" for one outside it.  Every name it gives reads back by
 * hl_errno_index.  Thread-safe; the string is static. */
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
  uint64_t anon_huge;      /* AnonHugePages: of anonymous, what transparent huge
                              pages back (Linux; 0 elsewhere) */
} hl_footprint;

/* HL_EINVAL (out NULL) or HL_ESYS (the OS's figures could not be read: no
 * file descriptor left, /proc not mounted), hl_heap_error(NULL) says which. */
int hl_footprint_get(hl_footprint *out);

/* A footprint sampler: a thread reading the process footprint every
 * interval_us (the interval it was opened with, for as long as it runs),
 * keeping the lowest and highest values (overall and since the last mark)
 * from every sample, and a time series for plots.  When the series fills,
 * every other stored sample is dropped (the first is kept) and from then on
 * one in twice as many of the thread's samples is stored (1, 2, 4... up to
 * one stored an hour), so a long phase still spans the whole buffer; the
 * samples taken by the caller's calls (the opening one, mark, reset,
 * summary) are always stored.  Only the series thins out: the figures keep
 * the full rate (a short peak long into a phase is in max_phys).  Each
 * sample reads /proc/self/smaps_rollup, whose cost grows with the memory
 * resident: about 0.6 ms of CPU with 100 MiB, so 15-25% of a core at 2 ms
 * for as long as the sampler runs (docs/harness.md).  Assertions on
 * asynchronous reclamation use the LOWEST value seen after a marked event,
 * never a reading at a chosen instant. */
typedef struct hl_sampler hl_sampler;

typedef struct hl_sample {
  uint64_t t_ns;           /* CLOCK_MONOTONIC, when the reading began (a sample after a
                            * mark, by this time, is in the mark's window) */
  uint64_t phys_footprint;
  uint64_t rss;
  uint64_t lazyfree;
} hl_sample;

typedef struct hl_sampler_summary {
  uint64_t samples;        /* taken since start (or reset) */
  uint64_t min_phys, max_phys;               /* since start (or reset) */
  uint64_t min_phys_after_mark, max_phys_after_mark; /* since the last mark */
  uint64_t min_rss, max_rss;
  uint64_t mark_ns;        /* time of the last mark, 0 if none */
  uint64_t interval_us;    /* the thread's interval, as opened (it never changes;
                            * the stored series' spacing is in its t_ns) */
  uint64_t stored;         /* samples in the series */
} hl_sampler_summary;

/* Start a sampler: interval_s in [0.0001, 10] seconds, capacity in [16,
 * 2^24] samples.  HL_EINVAL with the message in hl_heap_error(NULL) (and
 * *out NULL, as on every refusal of either call).  It
 * costs capacity * sizeof(hl_sample) bytes of series and a thread, about
 * HL_SAMPLER_THREAD_COST more (its stack's touched pages and the kernel's
 * task, rounded up): what a binding tells its language's collector, which
 * sees only a small handle.  In a child of fork() a sampler goes on from
 * the parent's figures and series (its thread starts again at the next
 * call): hl_sampler_reset starts the child's own phase. */
#define HL_SAMPLER_THREAD_COST ((uint64_t)64 << 10)
/* capacity's range (enums, not macros, as HL_COLLECT_MAX_CYCLES: the
 * bindings name it for a capacity beyond the 64-bit integers) */
enum { HL_SAMPLER_MIN_CAPACITY = 16, HL_SAMPLER_MAX_CAPACITY = 1 << 24 };
int hl_sampler_open(hl_sampler **out, double interval_s, int64_t capacity);
/* The same with the interval in microseconds (the first version's call). */
int hl_sampler_start(hl_sampler **out, uint32_t interval_us, size_t capacity);
/* Take a sample now and start the "after mark" window with it. */
int hl_sampler_mark(hl_sampler *s);
/* Take a sample now and start a new phase with it: the overall window
 * (min/max) and the count of samples restart from it, and the "after mark"
 * window ends (mark_ns and the after-mark figures 0 until the next mark).
 * The stored series is kept. */
int hl_sampler_reset(hl_sampler *s);
/* The figures since the start (or reset), with a sample taken now.  HL_ESYS
 * (hl_heap_error(NULL) names the file and the reason) when no sample was
 * taken at all because every read failed -- no file descriptor left, no
 * /proc: *out then holds zeros, which are no figures. */
int hl_sampler_summary_get(hl_sampler *s, hl_sampler_summary *out);
/* Copy stored samples [from, from+cap) of the series. */
int hl_sampler_read(hl_sampler *s, size_t from, hl_sample *buf, size_t cap, size_t *count);
/* Stop the thread and free the sampler.  NULL is ignored. */
void hl_sampler_stop(hl_sampler *s);

/* ------------------------------------------------------------------------ */
/* Interrupts                                                               */
/* ------------------------------------------------------------------------ */

/* The long calls -- hl_fill, hl_churn, hl_collect of several cycles,
 * hl_ref_checksum, hl_thin -- stop at their next safe point with HL_EINTR after
 * hl_interrupt() is called, leaving nothing half-done (a fill's objects
 * become garbage; no handle is made).  The safe points: each allocation of a
 * churn, each object of a fill of large objects, every 4096th of a fill of
 * small ones or of a checksum's or thin's walk, each cycle of a collect.  A
 * large allocation waiting on pacing (the background collector,
 * large_pacing) is no long call: hl_interrupt ends its wait within about
 * 20 ms and the allocation goes on unpaced, as after pacing_max_wait_ms -- it
 * succeeds or fails as it would have, never with HL_EINTR (a long call around
 * it stops at its next safe point; Python raises KeyboardInterrupt as the
 * allocation returns, Lua "interrupted!": its module attaches the handler
 * for the wait, hl_heap_set_wait_hook).  Inside a long call, a paced wait
 * that begins after an interrupt the call has not stopped at yet does not
 * wait at all: an interrupt ends every paced wait of the call it came in,
 * those before it began too.  Outside a long call (hl_alloc and the like) only a wait under
 * way when hl_interrupt is called ends: one that begins later waits as
 * usual.  hl_interrupt is async-signal-safe.
 * hl_interrupt_attach(signo) installs a handler for signo that calls it and
 * then the handler that was there before (CPython's, for SIGINT), so Ctrl-C
 * stops a long fill instead of waiting for it.  Called again: nothing while
 * its handler is in place; put in front again when another replaced it
 * (chaining that one: never one that chains to heaplab's itself).  HL_ESYS
 * if the handler cannot be installed, HL_ENOMEM if the one to chain cannot
 * be recorded (a few dozen bytes, once for each handler the host installs:
 * what heaplab's handler reads is never rewritten, so a signal on another
 * thread during an attach chains the old handler or the new, whole).  One
 * attach at a time (threads may attach at once).  The handler is process-wide; the library never removes
 * it (the Lua binding puts the host's handler back after each long call),
 * and once attached, the library stays loaded after a dlclose (the signal
 * could run unmapped code). */
void hl_interrupt(void);
int hl_interrupt_attach(int signo);

/* ------------------------------------------------------------------------ */
/* Heaps                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct hl_heap hl_heap;

/* Create a heap.  opts NULL = defaults plus HEAPLAB_* environment.  The fault
 * schedules HEAPLAB_FAULT_<SITE> (docs/clients.md) are not options: they are
 * read from the environment whatever opts is (the bindings, which pass opts,
 * rely on it), and so is HEAPLAB_COUNTERS_FILE (the conventions at the top:
 * the environment); hl_inject changes the schedules afterwards.  On failure *out is NULL
 * and the message is written to err (may be NULL) and is
 * hl_heap_error(NULL)'s. */
int hl_heap_new(const hl_options *opts, hl_heap **out, char *err, size_t errlen);
/* Close a heap: every object, handle and page is gone.  NULL is ignored.
 * Large objects' mappings the kernel will not unmap at vm.max_map_count
 * (event large_unmap_pending) are unmapped from the ends of their merged
 * VMAs inwards, which splits none; any left (a range between mappings not
 * the heap's in one VMA) are given back with MADV_DONTNEED, stay mapped,
 * and are said in one line on stderr. */
void hl_heap_free(hl_heap *heap);
/* Message of the calling thread's last failure when it was on this heap;
 * otherwise the heap's last failure from any thread ("" if none).  With
 * heap NULL: the calling thread's last failure of a call that takes no heap
 * (hl_heap_new, the option calls, the samplers, hl_footprint_get) or was
 * given a NULL one ("" if none).  How long each string stays: the
 * conventions at the top of this file. */
const char *hl_heap_error(const hl_heap *heap);
/* The heap's effective options: those it was made with, as it runs with
 * them -- reserve_bytes is the reservation it got (whole pages, 2 MiB chunks
 * with thp; halved while the kernel refused it, half the room left under
 * RLIMIT_AS: stat reserved_bytes), young_min_bytes at most young_bytes.
 * Kept as given: mark_threads 0 (the CPUs: stat mark_threads_used says how
 * many a mark used), thp when the kernel refused huge pages (stats
 * thp_enabled, thp_errno), and the options of a feature the heap does not
 * use, which it ignores (a description's "manual mode:", "generational:",
 * "background collector:"...: tcache_* on a collected heap, young_* without
 * generational, min_cycle_interval_ms with collector=sync). */
int hl_heap_options(const hl_heap *heap, hl_options *out);
/* A hook around each paced wait of the heap (the background collector,
 * large_pacing: hl_interrupt above), for a binding whose Ctrl-C handling is
 * not in place all the time: fn(heap, 1, arg) in the thread about to wait,
 * before it waits, and fn(heap, 0, arg) in the same thread when the wait
 * ends, however it ends -- each with the heap lock dropped, never from a
 * signal handler, and only where a wait really begins (an allocation that
 * is not paced calls nothing).  The Lua module puts heaplab's SIGINT handler
 * in front there (hl_interrupt_attach) and the host's back after: putting
 * it there around every h:alloc cost sigactions on each allocation, and
 * without it Ctrl-C waited for the wait's end, up to pacing_max_wait_ms.
 * fn must not call the heap, nor raise or longjmp.  fn NULL removes the
 * hook; a change takes the heap lock, and a wait under way ends with the
 * hook it began with.  HL_EINVAL for a NULL heap. */
typedef void (*hl_wait_hook)(hl_heap *heap, int begins, void *arg);
int hl_heap_set_wait_hook(hl_heap *heap, hl_wait_hook fn, void *arg);

int hl_stats_get(hl_heap *heap, hl_stats *out);
/* Copy up to cap events, oldest first; clear = consume them. */
int hl_events_read(hl_heap *heap, hl_event *buf, size_t cap, size_t *count,
                   int clear);
/* Events are numbered from 0 in the order recorded.  hl_events_peek copies
 * as hl_events_read does without consuming, and sets *first to the number of
 * buf[0]; hl_events_consume(heap, upto, &kept_from) consumes every event
 * numbered below upto still in the ring (one the full ring dropped meanwhile
 * is gone already; one recorded since is kept; an upto past the events
 * recorded so far is HL_EINVAL) and sets *kept_from (may be
 * NULL): every event numbered below it had been consumed by an earlier read
 * (hl_events_read with clear, or hl_events_consume).  A reader that may fail
 * after reading -- a binding building its result -- peeks, builds, consumes
 * first + count, and returns the events numbered from kept_from on: a
 * failure consumes nothing, and each event is returned by one read, even
 * when another read ran meanwhile (a finalizer, another thread). */
int hl_events_peek(hl_heap *heap, hl_event *buf, size_t cap, size_t *count,
                   uint64_t *first);
int hl_events_consume(hl_heap *heap, uint64_t upto, uint64_t *kept_from);
/* Bytes of the heap's reservation the kernel charges now (its Rss): pages
 * present and not the kernel's shared zero page (which a read of a page
 * never written maps, and no Rss counts), a huge page's 2 MiB whole.
 * Counted over its carved pages; with thp, to the end of the last carved
 * 2 MiB chunk (a huge page may back its uncarved rest) and over the chunks a
 * running prefault helper faults in.  Linux 6.7+: ioctl PAGEMAP_SCAN on
 * /proc/self/pagemap.  Where that is not there (an older kernel, no /proc),
 * when the call is refused (a seccomp filter's EPERM: that call only) and on
 * Darwin: mincore, which counts zero pages too -- an untouched page only
 * read, or the never-written subpages of a huge page split by a partial
 * release, are "resident" there: a heap whose carved pages were read, not
 * written, counts higher by their size. */
int hl_resident_bytes(hl_heap *heap, uint64_t *out);
/* VMAs of /proc/self/maps that overlap the heap's reservation: 1 for the
 * heap's life, unless dump_toggle splits it on purpose, or dump_unused=0
 * keeps its unused part out of core dumps (2: the part dumps hold and the
 * rest), or the program mlocks or mprotects part of its blocks. */
int hl_vma_count(hl_heap *heap, uint64_t *out);
/* The reservation's address range (either pointer may be NULL: not asked). */
int hl_heap_range(hl_heap *heap, uint64_t *base, uint64_t *bytes);
/* Check every invariant (pool accounting, states, free slots, the large
 * blocks against the counters, poison when verify is on, every object's
 * header against its slot or block).  HL_ECHECK with a message naming the
 * first violation.  Dead large objects whose munmap was refused (event
 * large_unmap_pending) are no violation: the check passes with them
 * pending, and fails when a pending range is not mapped, is a live block,
 * or the list disagrees with the heap's count of them. */
int hl_heap_check(hl_heap *heap);
/* Trim now: release every free page beyond the warm cache (and upgrade
 * fallback pages), in passes of release_per_sweep pages with the heap lock
 * dropped between them.  A cycle's own trim is one pass: a drop of more than
 * release_per_sweep pages goes back over the next cycles, or at once by
 * this call.  Stops early when a pass releases nothing (the kernel refused
 * every run) or gives up (EAGAIN that does not clear).  Then tries to unmap
 * every large object's mapping munmap refused before (event
 * large_unmap_pending). */
int hl_trim(hl_heap *heap);
/* Tell the heap the OS is under memory pressure: the next cycle sweeps
 * major.  A manual heap has no cycle: HL_EMODE, as hl_collect (hl_trim
 * gives its free pages back). */
int hl_memory_pressure(hl_heap *heap);

/* Arm a fault schedule at a site (HL_FAULT_off disarms).  err is an errno
 * in [1, 4095]; HL_FAULT_off records none (err 0, whatever err says: a
 * disarmed site reads as one never armed). */
int hl_inject(hl_heap *heap, int site, int mode, int64_t arg, int err);
/* The same by names, for bindings and the environment: site ("release"),
 * mode ("first"), N, and the errno by name ("EAGAIN", any name
 * hl_errno_index knows) or as a decimal number ("11"); err NULL = ENOMEM
 * (none for "off").  Errors name what was wrong and list the choices
 * (sites, modes, errno names); a NULL site or mode is HL_EINVAL naming it. */
int hl_inject_named(hl_heap *heap, const char *site, const char *mode, int64_t arg,
                    const char *err);
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
  uint64_t object;   /* object (header) address: where it is now, not an
                        identity -- compaction moves it (hl_ref_same,
                        hl_ref_identity) */
  int32_t large;     /* 1 when on the large path */
  int32_t pad;
} hl_object_info;

int hl_alloc(hl_heap *heap, uint64_t size, uint64_t refs, hl_ref *out);
int hl_ref_release(hl_heap *heap, hl_ref ref);
/* A second, independent root to the same object.  A handle whose object's
 * header was overwritten is HL_ECHECK (as hl_ref_info), *out then 0. */
int hl_ref_dup(hl_heap *heap, hl_ref ref, hl_ref *out);
int hl_ref_info(hl_heap *heap, hl_ref ref, hl_object_info *out);
/* A number that names ref's object for as long as it lives, whatever
 * compaction does to its address (a Python Ref's hash, a Lua o:id()): the
 * object's address when compact=never (and for a large object, which never
 * moves); otherwise a number of the process's above 2^60, given when first
 * asked and remembered through moves.  Two live objects of the process never
 * share one; one object never has two.  (A dead object's may be given again.)
 * A handle whose object's header was overwritten is HL_ECHECK (as
 * hl_ref_info), *out then 0. */
int hl_ref_identity(hl_heap *heap, hl_ref ref, uint64_t *out);
/* *out = 1 when handles a and b root the same object, else 0; both read
 * under one hold of the heap lock.  Two hl_ref_info calls compare two
 * moments: a cycle between them (another thread's, the background
 * collector's) may move the object (compaction), and their addresses then
 * differ.  A released handle, or another heap's, is an error (HL_ESTALE,
 * HL_EFOREIGN), a null or untagged one HL_EINVAL, one whose object's header
 * was overwritten HL_ECHECK (as hl_ref_info); *out is then 0. */
int hl_ref_same(hl_heap *heap, hl_ref a, hl_ref b, int *out);
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
/* stride in [1, HL_FILL_MAX_STRIDE] (an enum: what the bindings name for a
 * stride beyond the 64-bit integers, as HL_COLLECT_MAX_CYCLES) */
enum { HL_FILL_MAX_STRIDE = 1000000 };
/* Keep every `every`-th leaf of the graph under ref: a new root (*out, on
 * the large path) whose slots hold them.  The leaves are the objects with no
 * non-empty slot, in depth-first slot order from ref (a fill's objects, in
 * the order the fill made them; its index nodes are not leaves); every leaf
 * is counted once.  Nothing is dropped here: releasing ref afterwards drops
 * the other leaves and the graph's inner objects (E10, sparse survivors).
 * A ref whose object's header was overwritten is HL_ECHECK (as
 * hl_ref_info), *out then 0. */
int hl_thin(hl_heap *heap, hl_ref ref, uint64_t every, hl_ref *out);
/* every in [1, HL_THIN_MAX_EVERY] (an enum, as HL_FILL_MAX_STRIDE) */
enum { HL_THIN_MAX_EVERY = 1000000000 };
/* A checksum of the payloads of every object reachable from ref, and how
 * many objects it read (objects may be NULL: not asked).  A ref whose
 * object's header was overwritten is HL_ECHECK (as hl_ref_info), the
 * outputs then 0. */
int hl_ref_checksum(hl_heap *heap, hl_ref ref, uint64_t *sum, uint64_t *objects);
/* Copy bytes in or out of the payload, as memmove does: src (dst) may be
 * the payload itself (hl_ref_info's address, hl_obj_payload), so bytes move
 * within the object. */
int hl_ref_write(hl_heap *heap, hl_ref ref, uint64_t offset, const void *src,
                 uint64_t len);
int hl_ref_read(hl_heap *heap, hl_ref ref, uint64_t offset, void *dst,
                uint64_t len);

/* Synchronous collections: cycles in [1, HL_COLLECT_MAX_CYCLES] (else
 * HL_EINVAL, "collect: cycles N out of range [1, 1000000]").  major: -1 =
 * policy decides, 0 = no, 1 = force. */
/* (an enum, not a macro: the bindings see it -- the Python binding's cdef is
 * this header preprocessed -- and name the range of a count beyond the
 * 64-bit integers, which never reaches this call, as this call names it) */
enum { HL_COLLECT_MAX_CYCLES = 1000000 };
int hl_collect(hl_heap *heap, int64_t cycles, int major);

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
 * reachable object.
 *
 * Objects move only when the option compact is not `never` (the default):
 * then a full collection may evacuate an object to another page, and every
 * reference the heap knows of -- handles, slots, precise root regions -- is
 * updated.  A raw pointer in a C variable is not: it stays valid while this
 * thread holds the heap (hl_enter; nothing moves while a thread holds it,
 * cycles it triggers included), and otherwise only until the next call that
 * may collect (an allocation, hl_collect) -- re-read it from a handle, a slot
 * or a precise root region after that.  Objects a conservative root region
 * points into (interior pointers too) are pinned: they never move.
 *
 * hl_enter/hl_leave hold the heap for a stretch of calls from one thread:
 * calls in between skip the per-call lock, and cycles they trigger run
 * inline.  Calls may nest (on the same heap).  A thread holds one heap at a
 * time: hl_enter of another heap while it holds one returns HL_EINVAL and
 * holds nothing more (calls on that heap lock per call, as without it; its
 * hl_leave does nothing).  hl_leave of a heap this thread does not hold
 * does nothing.
 *
 * Holding a heap, a call on another heap waits while a third thread holds
 * that one: the order in which threads hold and call heaps is the
 * program's.  Two threads each holding one heap and calling the other's
 * (ABBA) wait for each other for ever; heaplab does not detect it.  fork()
 * waits until no other thread holds a heap (it takes every heap's lock, so
 * that the child inherits none held by a thread it does not have); a thread
 * that holds a heap and waits for another's lock, or makes or frees a heap,
 * goes on meanwhile.  So a thread that forks while it holds a heap must not
 * have another thread wait for that heap while holding one of its own: the
 * fork would wait for that one for ever.
 */
int hl_enter(hl_heap *heap);
void hl_leave(hl_heap *heap);

/* Allocate; NULL on failure (hl_heap_error says why). Slots start empty. */
void *hl_obj_new(hl_heap *heap, uint64_t size, uint64_t refs);
/* Allocate straight into slot `slot` of `parent` (so it is never unrooted).
 * parent is an object of `heap` (not checked): heaps collect apart, so an
 * object reachable only from another heap's object is garbage to its own
 * heap (a slot holds objects of its object's heap only; handles, which
 * belong to one heap, cannot say otherwise), and a generational heap's
 * barrier would read another heap's object as its own. */
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
 * every raw-object call it takes no lock: make raw stores with the heap held
 * (hl_enter) whenever a cycle could run beside them -- collector=background,
 * or another thread allocating from the same heap (its allocation may run a
 * cycle on the sync collector too).  value is NULL or an object of obj's
 * heap (what hl_obj_new returned) -- not a payload address (hl_obj_payload,
 * Python's Ref.address), not other memory.  A raw store, for speed: without
 * verify it is not checked (the marker skips a word that is no object, so
 * nothing is kept by it, and hl_ref_get refuses to make a handle to it,
 * HL_ECHECK); with verify=true a value that is no object of the heap is
 * refused -- not stored, hl_heap_error says why (the parent's heap is
 * looked up for a small parent only; the check takes the registry's lock,
 * then the parent heap's: a running cycle is waited for, and a thread that
 * holds another heap (hl_enter) stores across heaps in the program's one
 * order, as for any call that locks a second heap) -- and a cycle reports
 * a slot of a live object that holds no object (unless the heap has a root
 * region: a stale word of one, precise or conservative, may keep a dead
 * object whose slots name freed ones). */
void hl_obj_set(void *obj, uint64_t slot, void *value);

#ifndef HL_CDEF
/* Read access compiled into the caller, for hot loops.  The object layout
 * is part of the ABI: an 8-byte header {uint32_t refs; uint32_t size}, then
 * `refs` slots of void *, then the payload.  A header the program
 * overwrites (an overflow of the object before it, a write after free) is
 * undefined behaviour, as a corrupted chunk header is in any allocator: a
 * cycle reads its refs and traces that many slots.  Two safeguards: the
 * handle calls (hl_ref_info, hl_ref_read, hl_ref_write, hl_ref_get,
 * hl_ref_set) check that the header fits its slot (or large block) and
 * refuse with HL_ECHECK instead of reading past it; with verify=true
 * every cycle checks every header before its mark (HL_ECHECK naming the
 * object, its header, its slot size and the block before it, counted in
 * verify_failures) and its mark reads no further than the slot, and
 * hl_heap_check checks them too.  Without verify a cycle trusts them.  No checks: slot < refs is the
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
 * every word that points into an object keeps it alive (E7).  The base names
 * the region: a base already registered is refused (HL_EINVAL).  The memory
 * must outlive its registration (a region in an object's payload is kept in
 * place while registered, but is freed memory once that object dies).  Words are
 * read while a mark runs (another thread's cycle, collector=background):
 * store them with atomic stores, and hold the heap (hl_enter) while a word
 * moves within a region -- a mark between the copy and the clear could read
 * the old word after the clear and the new one before the copy. */
int hl_roots_add(hl_heap *heap, void *base, uint64_t words, int conservative);
/* Whether a region of `words` words fits the heap, before its memory is
 * allocated: HL_EINVAL (the message says so) when its bytes exceed the
 * heap's reservation (reserved_bytes, as reserve_bytes gave it) -- a word
 * keeps an object only by pointing into the reservation, so a root region
 * larger than it is a size mistaken (2^33 words for 2^13: 64 GiB asked of
 * calloc, each mark scanning it), not a root set.  hl_roots_add checks it
 * too; the bindings call it before they allocate a region's words. */
int hl_roots_fit(hl_heap *heap, uint64_t words);
int hl_roots_remove(hl_heap *heap, void *base);
/* Store count words at words[0..count) (a root region's memory): word i is
 * the address of refs[i]'s object when refs[i] is not 0 (values[i] is set
 * to it), else values[i].  All with the heap held -- no cycle runs between
 * reading an object's address and storing it (compaction could move the
 * object and leave the word at its old address), and no mark sees some of
 * the stores and not others (a word moved within the region) -- each an
 * atomic store.  A released ref: its error, *bad its index, nothing stored.
 * The bindings' region stores are this call. */
int hl_roots_store(hl_heap *heap, void **words, uint64_t *values, const hl_ref *refs,
                   uint64_t count, uint64_t *bad);

/* ------------------------------------------------------------------------ */
/* Manual mode                                                              */
/* ------------------------------------------------------------------------ */

/* malloc-like allocation on the same pages, pools and release machinery.
 * Thread-safe.  Blocks are 16-byte aligned; 0 bytes gives a unique block.
 *
 * verify=true (a debugging mode: no thread cache, every call under the heap
 * lock; docs/clients.md, "Checks") catches, and refuses with a message in
 * hl_heap_error: a double free (also a stale one after the block's address
 * was handed out again: a freed block stays in a quarantine of the last 256
 * blocks or 64 MiB, small and large, before it is reused), a free or realloc
 * of a freed, interior, foreign or uncarved pointer, a sized free whose size
 * is not the block's (a large block: half its size to its size).  It finds
 * a write into a free small block -- after free, or an overflow of the block
 * before it -- when the block is handed out again or leaves the quarantine
 * (verify_failures counts it; the error names the block, its class, the
 * offset; the block is handed out all the same) and in hl_heap_check.  It
 * does not find: a write into a freed large block, a write into a live
 * block's unused tail (a 40-byte block's last 8 bytes of its 48-byte slot),
 * an overflow into a live block, a read after free, a double free of a block
 * that left the quarantine and was handed out again.  Without verify every
 * free is trusted, as malloc's is. */
void *hl_malloc(hl_heap *heap, size_t size);
void *hl_calloc(hl_heap *heap, size_t count, size_t size);
/* Free with the size the block was allocated with (Lua passes it). */
void hl_free_sized(hl_heap *heap, void *ptr, size_t size);
/* Free when the caller does not know the size (CPython). */
void hl_free(hl_heap *heap, void *ptr);
/* old_size: the size ptr was allocated (or last resized) with, as for
 * hl_free_sized, or 0 when the caller does not know it (then the block's
 * own size is read).  new_size 0 frees ptr and returns NULL; ptr NULL is
 * hl_malloc(new_size). */
void *hl_realloc(hl_heap *heap, void *ptr, size_t old_size, size_t new_size);
/* Usable size of a block, 0 if ptr is not a block of this heap.  A block
 * freed into the thread's cache still reads as its class's size until the
 * cache gives it back (hl_thread_flush, a flush when the bin fills); with
 * verify=true a freed block reads 0 at once. */
size_t hl_usable_size(hl_heap *heap, const void *ptr);
/* Return the calling thread's cached blocks to the heap. */
void hl_thread_flush(hl_heap *heap);
/* Called when hl_malloc, hl_calloc or hl_realloc (new_size > 0) of this heap
 * returns NULL -- the heap refused the allocation, and hl_heap_error says
 * why -- with the bytes asked (calloc: count * size, saturated), in the
 * allocating thread, no lock held; the call returns NULL after it (a hook
 * may also end the process).  A client that must notice every refusal (a
 * launcher saying which option ran out) sets one instead of testing each
 * result, so that its allocator can be a plain tail call of hl_malloc.  fn
 * NULL removes it.  Set it before other threads allocate.  HL_EINVAL for a
 * NULL heap. */
typedef void (*hl_refusal_fn)(hl_heap *heap, size_t size, void *arg);
int hl_set_refusal_hook(hl_heap *heap, hl_refusal_fn fn, void *arg);

/* ------------------------------------------------------------------------ */
/* Misc                                                                     */
/* ------------------------------------------------------------------------ */

const char *hl_error_name(int code);
/* The project's version ("0.1.0"): HL_VERSION_STRING of the library's build. */
const char *hl_version(void);
/* The library's HL_ABI_VERSION: a program built with another one must not
 * use it (its structs have another layout). */
int hl_abi_version(void);

#ifndef HL_CDEF
#ifdef __cplusplus
}
#endif
#endif
#endif /* HEAPLAB_H */
