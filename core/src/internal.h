/*
 * internal.h -- the heap's shared state and the spine every layer uses.
 * Not installed.  docs/design.md ("A map of the core") says which file owns
 * which concept and who calls whom.
 *
 * Layers (DESIGN.md section 1), each a folder of core/src:
 *   prim/       OS calls, the retry helper, fault injection, probes
 *   pages/      the reservation, out-of-page descriptors and side tables, pools
 *   small/      BiBOP size classes, allocation inside a page, sweeping a page
 *   large/      the large ("legacy") path
 *   gc/         the allocation sequence, marking, the cycle and its trigger,
 *               the write barrier, handles and root regions, the collector thread
 *   release/    trim, fallback and upgrade; page reuse and restore
 *   manual/     explicit-free mode with per-thread caches
 *   check/      the whole-heap invariant checker
 *   workload/   the lab's bulk phases: fill, checksum, churn
 *   telemetry/  options, stats, events, errors, the footprint sampler
 *   util/       a pointer set
 * and at the top, heap.c (the front door: every public entry, its argument
 * checks, its lock) and registry.c (the process-wide list of heaps: the
 * write barrier's lookup and fork()).
 *
 * The spine, used by every path of both modes:
 *   the heap lock      hl__lock / hl__unlock and friends, below, with
 *                      HL_ASSERT_LOCKED in the functions that need it
 *   the accounting     hl__charge / hl__discharge (hl_counters, private):
 *                      the triggers and pacing read these, never hl_stats
 *   the allocation     hl__obj_alloc (gc/alloc.c): safepoint, pacing,
 *                      collect when due, take a slot or a large block, charge
 */
#ifndef HL_INTERNAL_H
#define HL_INTERNAL_H

#include <errno.h>
#include <pthread.h>
#if defined(__has_include)
#if __has_include(<sys/single_threaded.h>)
#include <sys/single_threaded.h>
#define HL_HAVE_SINGLE_THREADED 1
#endif
#endif
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "heaplab.h"
#include "prim/prim.h"

/* ---- the system allocator ----
 * Every byte the core takes from the C library -- the large path's blocks
 * (large/large.c), the heap struct, its events, size_to_cls, handles, the
 * large set, scratch, the thread caches, the registry -- goes
 * through these four.  Normal builds call malloc & co.  The preload library
 * (libheaplab-malloc.so, clients/preload/, built with HL_PRELOAD) *is* malloc,
 * so there they call glibc's own allocator by its exported __libc_* names:
 * no dlsym, no recursion into heaplab, and the memory the dynamic loader and
 * heaplab's own set-up need never comes from the heap being set up.  (There
 * the large set's table and the trims' scratch are mappings of their own
 * instead: util/ptrset.c, release/release.c say why.) */
/* ThreadSanitizer does not intercept glibc's __libc_* allocator, which the
 * preloaded library calls (below), so it sees neither its arena locks nor
 * its reuse of memory: a block one thread gave back and another was handed
 * looked like a race on whatever the second wrote into it -- a large
 * block's record (large.c), and once in CI a thread's cache index
 * (manual.c) written over a large block another thread had read and freed.
 * These say what glibc's locks do -- every block handed out comes after the
 * blocks handed back -- in each of the __libc_* wrappers, so every call is
 * covered; nothing without ThreadSanitizer, nothing outside the preloaded
 * library (TSan intercepts the plain malloc & co). */
#if defined(__SANITIZE_THREAD__)
#define HL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HL_TSAN 1
#endif
#endif
#ifdef HL_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
extern char hl__sys_order;
static inline void hl__sys_handed_back(void) { __tsan_release(&hl__sys_order); }
static inline void hl__sys_handed_out(void) { __tsan_acquire(&hl__sys_order); }
#else
static inline void hl__sys_handed_back(void) {}
static inline void hl__sys_handed_out(void) {}
#endif

#include <stdlib.h>
#ifdef HL_PRELOAD
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);
/* How deep this thread is in glibc's allocator (every __libc_* call of the
 * preloaded library and of this core built for it, but its malloc family's
 * on the system allocator, where nothing reads it): above 0, it may hold an arena's
 * lock, and a signal handler that interrupted it and ends the process must
 * not call glibc's allocator.  The report made then calls none (since
 * session 40; written there); what still would -- the heap's set-up at exit
 * of a program that never allocated, exit()'s flush of the thread's cache,
 * whose trim takes its lists from glibc -- reads this first (clients/
 * preload/heaplab_malloc.c, write_reports_once).  Defined there. */
extern _Thread_local __attribute__((tls_model("initial-exec"))) int hl__in_libc_malloc;
/* A call into glibc's allocator, counted in hl__in_libc_malloc: IN_LIBC(e)
 * is e's value, IN_LIBC_VOID(s) runs s.  The only way this core and the
 * preloaded library reach __libc_* (and glibc's malloc_trim, mallinfo2,
 * malloc_stats, which take its arenas' locks too). */
#define IN_LIBC(call)                   \
  __extension__({                       \
    hl__in_libc_malloc++;               \
    __typeof__(call) hl_in_libc_ = (call); \
    hl__in_libc_malloc--;               \
    hl_in_libc_;                        \
  })
#define IN_LIBC_VOID(call) \
  do {                     \
    hl__in_libc_malloc++;  \
    call;                  \
    hl__in_libc_malloc--;  \
  } while (0)
static inline void *hl__sys_malloc(size_t n) {
  void *p = IN_LIBC(__libc_malloc(n));
  hl__sys_handed_out();
  return p;
}
static inline void *hl__sys_calloc(size_t n, size_t size) {
  void *p = IN_LIBC(__libc_calloc(n, size));
  hl__sys_handed_out();
  return p;
}
static inline void *hl__sys_realloc(void *p, size_t n) {
  hl__sys_handed_back(); /* (after the caller's last use of p) */
  void *r = IN_LIBC(__libc_realloc(p, n));
  hl__sys_handed_out();
  return r;
}
static inline void hl__sys_free(void *p) {
  hl__sys_handed_back();
  IN_LIBC_VOID(__libc_free(p));
}
#else
#define hl__sys_malloc malloc
#define hl__sys_calloc calloc
#define hl__sys_realloc realloc
#define hl__sys_free free
#endif


#define HL_NIL UINT32_MAX
#define HL_MAX_CLASSES 96
#define HL_GRANULE 16
/* the allocation bits of a page of the largest page_size (1 MiB: the
 * option's declared maximum, which hl_options_validate enforces; the test
 * option_values_are_checked_once checks that the two agree) in 16-byte
 * slots, in 64-bit words */
#define HL_PAGE_SIZE_MAX ((size_t)1 << 20)
#define HL_ABITS_MAX_WORDS (HL_PAGE_SIZE_MAX / HL_GRANULE / 64)

#if defined(__GNUC__)
#define hl_likely(x) __builtin_expect(!!(x), 1)
#define hl_unlikely(x) __builtin_expect(!!(x), 0)
#define NOINLINE __attribute__((noinline))
#else
#define hl_likely(x) (x)
#define hl_unlikely(x) (x)
#define NOINLINE
#endif

/* The set bits of x.  Inline: built for any x86-64 (no -mpopcnt),
 * __builtin_popcountll is a call to libgcc's __popcountdi2, 1.2% of
 * binary-trees' instructions (its marks and sweeps; docs/performance.md,
 * item 25). */
static inline uint32_t hl__popcount64(uint64_t x) {
#if defined(__POPCNT__)
  return (uint32_t)__builtin_popcountll(x);
#else
  x = x - ((x >> 1) & 0x5555555555555555ULL);
  x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
  x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
  return (uint32_t)((x * 0x0101010101010101ULL) >> 56);
#endif
}

/* ---- assertions ----
 * -Dasserts=true (Meson) defines HL_ASSERTS: internal invariants, the lock
 * ones first, are checked and a failure prints one line and aborts (the
 * failure path allocates nothing).  Off, they compile to nothing. */
#ifdef HL_ASSERTS
__attribute__((noreturn, cold)) void hl__assert_fail(const char *cond, const char *file,
                                                      int line, const char *func);
#define HL_ASSERT(cond)                                                        \
  ((cond) ? (void)0 : hl__assert_fail(#cond, __FILE__, __LINE__, __func__))
#else
#define HL_ASSERT(cond) ((void)0)
#endif

/* ---- page states: every carved page is in exactly one ---- */
typedef enum page_state {
  PS_UNUSED = 0,   /* beyond the high-water mark; not a page yet */
  PS_OWNED,        /* the allocation page of its size class */
  PS_RETIRED,      /* filled since the last sweep, waiting for one */
  PS_PARTIAL,      /* swept, holds live objects */
  PS_FREE,         /* empty and resident (warm cache, trim backlog) */
  PS_RELEASED,     /* given back to the OS */
  PS_REUSE_FAILED, /* released, restore failed, parked for a later retry */
  PS_IN_FLIGHT,    /* unlinked under the lock, being advised outside it */
  PS_COUNT
} page_state;

/* How a released page was released. */
enum { RK_NONE = 0, RK_PRIMARY = 1, RK_FALLBACK = 2 };

/* Page flags. */
enum {
  PF_DUMP_OFF = 1,   /* MADV_DONTDUMP applied (dump_toggle) */
  PF_SPLICED = 2,    /* swept by a major sweep this cycle */
  PF_AVAIL = 4,      /* PARTIAL page on its class's avail list (has room) */
  PF_REFS = 8,       /* an object with reference slots was allocated here since
                        format: the marker reads no header on pages without */
  PF_PARKED = 16,    /* upgrade candidate taken from the reuse-failed pool */
  PF_DIRTY = 32      /* generational: a slot of an object here was stored to
                        since the last cycle (the write barrier's card) */
};

/* Sub-page release (release/subpage.c), per page in h->sub_flags. */
enum {
  SUB_BUSY = 1,   /* a trim is advising some of its OS pages outside the lock:
                     off the avail lists, it takes no new object */
  SUB_FAILED = 2, /* restoring one of its OS pages failed: off the avail
                     lists until the next trim tries again */
  SUB_CLEAN = 4   /* scanned since its last free: no OS page left to release */
};
/* OS pages per heap page at most: 1 MiB pages of 4 KiB OS pages. */
#define HL_SUB_WORDS 4
/* thp: what the kernel may back a 2 MiB chunk of the reservation with, per
 * chunk in h->chunk (release.c keeps it). */
enum {
  CH_EMPTY = 0,  /* never touched, or every page of it released: no huge page */
  CH_HUGE = 1,   /* a page was formatted since: the kernel may have backed the
                    chunk with one huge page */
  CH_SPLIT = 2   /* part of it was released since: 4 KiB pages */
};

/* Tenuring (generational; gc/mark.c), per page in h->tenure. */
enum {
  TN_TENURED = 1,  /* full marks keep the page's marks and do not trace it */
  TN_DENSE = 2,    /* at least 7/8 live after the last full mark */
  TN_REMEMBER = 4  /* tenured, and may refer to an object not tenured: full
                      marks trace its marked objects */
};

/* A page descriptor: lives in a side table, never inside the page, so a
 * released page can give back every one of its OS pages. */
typedef struct hl_page {
  uint32_t next, prev;  /* pool links (page numbers) */
  uint8_t state;        /* page_state */
  uint8_t cls;          /* size class while formatted */
  uint8_t release;      /* RK_* */
  uint8_t flags;        /* PF_* */
  uint32_t nslots;
  uint32_t bump;        /* slots [0, bump) have been handed out */
  uint32_t used;        /* slots holding an object (live or not yet swept) */
  uint32_t cursor;      /* allocation-bitmap word where the search for a free
                           slot starts: none below it (small.c) */
  uint32_t nfree;       /* free slots below bump (zero allocation bits) */
} hl_page;

/* The allocation run of a size class (small.c): a run of free slots of one
 * word of its owned page's allocation bitmap, reserved for the fast path,
 * handed out by bumping `cur`.  While reserved, the run's slots have their
 * allocation bits set and count as used on the page and as allocated in the
 * counters; hl__aword_flush gives back the ones not taken.  On a page with
 * PF_REFS an object with slots may be taken from the run on the fast path
 * (which clears its slot: hl__slot_zero). */
typedef struct hl_aword {
  uint8_t *cur;   /* the next slot */
  uint8_t *end;   /* the run's end: [cur, end) not handed out yet */
  uint64_t sz;    /* the class's slot size */
  uint64_t refs_max; /* UINT64_MAX when PF_REFS is set on the page, else 0:
                        the most slots a fast-path object taken from the run
                        may have */
  uint32_t page;  /* the owned page */
} hl_aword;

typedef struct hl_list {
  uint32_t head, tail;
  uint64_t count;
} hl_list;

/* ---- objects ----
 * Every object starts with this header; the reference slots follow it, then
 * the payload.  Large objects put an hl_large before the header. */
typedef struct hl_objhdr {
  uint32_t refs;
  uint32_t size; /* payload bytes; HL_SIZE_LARGE for large objects; the top
                    bit is HL_HDR_OLD */
} hl_objhdr;
#define HL_SIZE_LARGE UINT32_MAX
/* Generational: the marker sets this bit of a small object's size field when
 * it traces the object (gc/mark.c), so "may be old" is one test of the
 * header the store is about to write next to, instead of a page lookup and
 * a mark-bit read.  It is never cleared while the object lives (a superset of
 * "marked now": the barrier's slow path reads the mark bit), and a new
 * object's header is written without it.  Large objects have it always (the
 * size field is HL_SIZE_LARGE), so their stores take the slow path.  Small
 * payloads are below 2^31 bytes, so the bit is free. */
#define HL_HDR_OLD 0x80000000u
static inline uint32_t hl__hdr_size(const hl_objhdr *hd) {
  return hd->size == HL_SIZE_LARGE ? HL_SIZE_LARGE : hd->size & ~HL_HDR_OLD;
}

/* A back-off (release.c): after a call that gave up, the calls nobody asked
 * for wait -- 100 ms, doubling to 10 s -- until next_ns; one that does not
 * give up ends the wait (ns 0).  The trims', the restores', the populates'
 * and the retries of what a refused call left, each its own. */
typedef struct hl_backoff {
  uint64_t ns;      /* the current wait, 0 when none */
  uint64_t next_ns; /* no call (but an asked-for one) before this */
} hl_backoff;

typedef struct hl_large {
  struct hl_large *prev, *next;
  uint64_t size;   /* bytes of the block after this record */
  uint8_t mark;
  uint8_t dirty;   /* generational: a slot was stored to since the last cycle */
  uint16_t flags;  /* HL_LARGE_MAPPED */
  uint32_t lead;   /* bytes between the system block and this record: an
                      aligned block (hl__large_sys_alloc); 0 otherwise */
} hl_large;          /* 32 bytes: keeps the block after it 16-byte aligned */
/* a mapping of its own (large_map_bytes), not a system malloc block: freed
 * with munmap, the record at its start (lead 0) */
#define HL_LARGE_MAPPED 1u
/* a mapped block that is dead but still mapped: munmap was refused (the map
 * limit), its pages but the record's given back; on h->unmap_pending */
#define HL_LARGE_PENDING 2u

/* ---- util/ptrset.c: an open-addressing set of pointers ---- */
typedef struct hl_ptrset {
  void **slots;
  uint64_t cap, count;
  uint64_t held; /* entries taken out that will be put back (hl__ptrset_hold) */
} hl_ptrset;
/* 1 added, 0 already present, -1 out of memory. */
int hl__ptrset_add(hl_ptrset *s, void *p);
bool hl__ptrset_contains(const hl_ptrset *s, const void *p);
void hl__ptrset_remove(hl_ptrset *s, const void *p);
/* Take p out and put it (or its replacement) back later: the put back
 * cannot fail for want of room. */
void hl__ptrset_hold(hl_ptrset *s, const void *p);
void hl__ptrset_unhold(hl_ptrset *s, void *p);
void hl__ptrset_free(hl_ptrset *s);

/* ---- handles (gc/roots.c; their encoding is private to it) ---- */
typedef struct hl_handle {
  void *obj;       /* NULL when free */
  uint32_t gen;
  uint32_t next_free;
} hl_handle;

typedef struct hl_root_region {
  void **base;
  uint64_t words;
  int conservative;
} hl_root_region;

/* ---- the accounting ----
 * Which path a block was taken from: a size class (small) or the large path. */
enum { HL_SMALL = 0, HL_LARGE = 1 };

/* The byte and object counters the policy runs on (the triggers, the quiet
 * test, pacing, the heap limit).  Private: hl_stats_get copies them into the
 * public stats, which nothing in the core reads.  Written only by
 * hl__charge, hl__discharge and hl__charge_cycle below. */
typedef struct hl_counters {
  uint64_t since_cycle[2]; /* bytes allocated since the last cycle, per path */
  uint64_t allocated[2];   /* bytes allocated in all */
  uint64_t live[2];        /* bytes in use (small: slot bytes) */
  uint64_t objects_allocated, objects_freed;
  uint64_t large_objects;  /* large blocks in use */
} hl_counters;

/* ---- thread cache (manual mode) ---- */
typedef struct hl_tcache hl_tcache;

/* ---- the heap ---- */
/* the mappings of pages.c's regions: the reservation and at most ten tables */
#define HL_REGIONS 11

struct hl_heap {
  hl_options opt;
  uint64_t serial;          /* unique per heap in this process */
  hl_refusal_fn on_refusal; /* hl_set_refusal_hook (heap.c) */
  void *on_refusal_arg;
  uint16_t tag;             /* handle tag */

  pthread_mutex_t lock;     /* the heap lock: pools, objects, handles */
  _Atomic(const void *) owner; /* the thread holding the lock (set in asserts
                                  builds only; always here, so that a test
                                  built without them sees the same layout) */
  pthread_cond_t cycle_done;
  pthread_cond_t collector_cv;
  bool in_cycle;            /* a cycle or trim is running (lock may be dropped) */
  bool bulk;                /* a bulk phase (fill) is running: it writes whole pages */
  bool closing;

  prim_ctx prim;

  /* reservation and side tables */
  uint8_t *base;
  uint64_t reserved;        /* bytes */
  uint32_t npages_max;
  uint32_t high_water;      /* pages carved so far */
  uint8_t *carved_end;      /* base + high_water pages: hl__in_heap's bound */
  unsigned page_shift;
  uint64_t page_size;
  hl_page *pages;           /* descriptors */
  uint64_t *bits;           /* the mark bits of page p: bits + p * bits_stride */
  uint64_t *abits;          /* its allocation bits: abits + p * bits_stride */
  uint32_t bitmap_words;    /* words of one page's bitmap */
  uint32_t bits_stride;     /* words from one page's bitmap to the next's.
                               A collected heap interleaves a page's marks
                               and allocation bits (2 * bitmap_words: a
                               mark reads both, one table apart they cost
                               ~30% of the 192 MiB pause); a manual heap,
                               which never marks, keeps them in two tables
                               (bitmap_words: its marks are never touched,
                               512 bytes a page not resident) */
  size_t meta_bytes[5];     /* sizes of the side-table reservations */
  uint8_t *tenure;          /* per page: TN_* (generational tenuring, gc/mark.c) */
  uint8_t *chunk;           /* thp: per 2 MiB chunk, CH_* (release.c); NULL without */
  unsigned chunk_shift;     /* thp: log2 of the pages in a chunk */
  size_t chunk_bytes;       /* thp: size of the chunk table's reservation */
  uint32_t thp_ready_chunk; /* thp: the fresh chunk faulted in whole (reuse.c) */
  uint32_t thp_tail_chunk;  /* thp: the last chunk, whose uncarved rest a refused call
                               left resident: later trims try again (release.c) */
  uint32_t thp_unused_lo, thp_unused_hi; /* thp_prefault: chunks [lo, hi) the helper faulted
                               in and no page used, whose give-back was refused: later
                               trims try again (release.c); lo == hi: none */
  bool populate_off;        /* MADV_POPULATE_WRITE refused for good (hl__refused_for_good): no
                               bulk phase's page, thp chunk or prefault helper asks again */
  struct hl_prefault *prefault; /* thp_prefault: the bulk phase's helper, or NULL */

  /* sub-page release (release/subpage.c; NULL tables unless subpage_release):
   * which OS pages of a page are released while the page holds live slots */
  uint64_t *sub_bits;       /* per page: sub_words "out" bits (OS page j released),
                               then sub_words "fallback" bits (released with the
                               fallback advice: still charged, upgraded later) */
  uint8_t *sub_flags;       /* per page: SUB_* */
  uint32_t sub_words;       /* words of one of those bitmaps */
  uint32_t os_per_page;     /* OS pages per page */
  unsigned os_shift;        /* log2 of the OS page size */
  uint64_t sub_pages;       /* pages with an out bit: 0 = the allocation word
                               checks nothing (no cost when nothing is out) */
  uint64_t sub_out, sub_fallback; /* OS pages out now; of them on the fallback advice */
  uint64_t sub_held;        /* pages with SUB_BUSY or SUB_FAILED */
  uint64_t sub_freed;       /* manual mode: slot bytes freed since the last trim */
  bool sub_rescan;          /* a page may have an OS page to release since the last
                               scan: the trim scans only then */

  /* compaction (gc/evacuate.c) */
  struct hl_ident *idents;  /* object -> identity asked for (hl_ref_identity), */
  uint64_t idents_cap, idents_count; /* open addressing; forwarded on moves */
  uint32_t nomove;          /* > 0: an internal path keeps raw object pointers
                               across an allocation (a fill, hl_obj_new_in): no
                               cycle moves anything meanwhile */

  /* size classes */
  uint32_t nclasses;
  uint32_t cls_size[HL_MAX_CLASSES];
  uint64_t cls_recip[HL_MAX_CLASSES]; /* slot index = off * recip >> HL_RECIP_SHIFT */
  uint8_t *size_to_cls;     /* index (size + 15) / 16 */
  hl_aword **aword_of;      /* index (bytes + 15) / 16, bytes up to 8 + 9 * small_max:
                               the class's run, or aword_none above small_max */
  uint64_t small_max;       /* (64 bits: the fast paths compare it with a size in memory) */

  /* pools */
  uint32_t owned[HL_MAX_CLASSES];
  hl_aword aword[HL_MAX_CLASSES]; /* per class: free slots reserved on its owned page */
  hl_aword aword_none;      /* always empty: the fast path's objects above small_max */
  hl_list retired;
  hl_list partial_avail[HL_MAX_CLASSES];
  /* Manual mode: which pages are on partial_avail[c], one bit a page, so a
   * refill finds the class's lowest-addressed page with free slots (small.c,
   * hl__take_refill).  Word c of row r holds pages [64r, 64r + 64) of class
   * c: the rows of the carved pages are contiguous, one word per class each
   * (a heap of 1,000 pages touches 16 rows).  No bit of class c lies below
   * row avail_lo[c].  NULL in a collected heap. */
  uint64_t *avail_bm;
  size_t avail_bytes;
  uint32_t avail_lo[HL_MAX_CLASSES];
#ifdef HL_PRELOAD
  /* libheaplab-malloc.so: a page's allocation bits take one bit per slot
   * and no more -- ceil(nslots / 64) words from a pool (the second half of
   * the side table), not a page's worth for 16-byte slots: 512 bytes a page
   * (508 KiB at bench-preload server's peak) against 8-256.  Free regions of
   * k words on list abits_free[k] (a region's first word links the next);
   * the pool's unused part from abits_bump on (word offsets from h->bits).
   * When the pool has no room, a page takes its fixed bits in the first
   * half (h->bits + p * bitmap_words), which a manual heap's marks never
   * use.  A region is 1 to HL_ABITS_MAX_WORDS words: the bits of a page
   * of 16-byte slots at the largest page_size (it had 65 lists, for 64 KiB
   * pages: a bigger page_size indexed past them, over the fields below --
   * HEAPLAB_PAGE_SIZE=1m crashed every program at once). */
  uint32_t *abits_at;       /* per page: its bits at h->bits + abits_at[p], HL_NIL
                               before its first format */
  size_t abits_at_bytes;
  uint32_t abits_free[HL_ABITS_MAX_WORDS + 1];
  uint64_t abits_bump;
  /* the program's mlockall(MCL_FUTURE) (clients/preload: the library's
   * mlockall): each page carved from now on is locked as the kernel locks a
   * new mapping -- HL_LOCK_PAGES, or HL_LOCK_ONFAULT with MCL_ONFAULT; 0
   * none.  A page the kernel will not lock (RLIMIT_MEMLOCK) is not carved,
   * as a mapping it will not lock is not made; lock_err says why. */
  uint8_t lock_carved;
  int lock_err;
#endif
  /* dump_unused=0 (pages.c): the pages whose part of each mapping -- the
   * reservation and each side table, HL_REGIONS at most -- is advised
   * MADV_DODUMP, and the bytes of each so advised */
  uint64_t dump_pages;
  size_t dumped[HL_REGIONS];
  hl_list partial_full;
  hl_list free_pool;
  hl_list released_pool;
  hl_list reuse_failed;
  int last_restore_err;     /* errno of the last restore that failed (0: none):
                               named when no page is left (hl__fail_no_page) */
  uint64_t state_count[PS_COUNT];
  uint64_t fallback_count;  /* released or reuse-failed pages on the fallback advice */

  /* large path */
  hl_large *large_head;
  hl_ptrset large_set;      /* the large objects' blocks: validates a pointer */
  bool large_set_refused;   /* the last hl__large_alloc made its block, and the set could
                               not grow to take it (the block given back): its message */
  uint32_t large_moving;    /* blocks detached for a system realloc outside the lock (manual
                               realloc), out of the list and the set, still counted; fork
                               waits for none to be (registry.c) */
  uint64_t large_moving_bytes; /* what they are charged meanwhile */
  /* dead mapped blocks whose munmap the kernel refused (ENOMEM at
   * vm.max_map_count: unmapping a range inside a merged VMA splits it),
   * chained by next: their pages but the record's given back with
   * MADV_DONTNEED, the ranges retried at each cycle's end (the first only),
   * by hl_trim (all) and at hl_heap_free (large.c) */
  hl_large *unmap_pending;
  uint64_t unmap_pending_n, unmap_pending_bytes; /* every pending range, listed or taken */
  bool unmap_retrying;      /* the list is taken for a retry (in_cycle set) */
  uint64_t sys_map_threshold; /* the system allocator maps a block this big or bigger (the
                                 preload library fixes glibc's; 0: not known) */

  /* roots */
  hl_handle *handles;
  uint32_t handles_cap, handles_free, handles_live;
  uint64_t handles_retired; /* slots retired before their generation wrapped */
  hl_root_region *regions;
  uint32_t nregions, regions_cap;

  /* the accounting the policy reads (hl__charge, hl__discharge) */
  hl_counters ctr;

  /* gc state */
  void **mark_stack;         /* the marking thread's stack: a reservation made with
                                the collected heap (gc/mark.c) */
  uint64_t mark_cap;         /* its entries */
  uint64_t marked_bytes;     /* bytes the mark in progress has marked */
  uint64_t marked_objects;   /* objects the mark in progress has marked */
  uint64_t mark_moved;       /* the last mark: stack entries its markers moved
                                within their stacks (gc/mark.c: linear in the
                                objects marked; a test reads it) */
  uint32_t mark_threads;     /* threads a mark may use (mark_threads, resolved) */
  uint64_t trigger;          /* adaptive small-path trigger */
  uint64_t alloc_limit;      /* small-path bytes since the last cycle at which an
                                allocation leaves the fast path (0: a cycle is due) */
  uint64_t limit_pending;    /* heap_limit_bytes: bytes of the allocations past
                                the limit test and not charged yet (their
                                block's mmap or page fault runs with the lock
                                dropped: gc/alloc.c; a manual refill's blocks
                                not taken yet: manual.c); in the limit's tests,
                                never in the live bytes */
  uint64_t last_live_bytes;  /* small + large bytes the last cycle found live (marked, and kept on tenured pages) */
  uint64_t growth_free;      /* gc_growth_ratio: small-path bytes the heap held free
                                (slots and empty resident pages) after the last full
                                cycle; UINT64_MAX before the first */
  int high_survival_streak;
  uint64_t cycles_since_major;
  bool pressure;
  /* generational mode: marks survive minor cycles (sticky) */
  uint64_t last_full_live;   /* bytes the last full mark found live */
  uint64_t promoted_since_full; /* bytes minor cycles marked since then */
  uint64_t young;            /* the nursery in force (young_min_bytes..young_bytes) */
  uint64_t young_kept;       /* bytes recent minor cycles kept (halved each one) */
  uint64_t tenured_pages;    /* pages tenured now */
  uint64_t tenured_bytes;    /* bytes of the objects on tenured pages */
  uint64_t full_marks_since_whole;
  uint64_t cycles_completed;
  uint64_t verify_addr;      /* verify: the address the last failed check named (0:
                                none), for the verify_failed event (hl__verify_failed) */
  uint32_t pacing_dry_cycles; /* cycles in a row that freed nothing large */
  hl_wait_hook wait_hook;     /* hl_heap_set_wait_hook: around each paced wait */
  void *wait_hook_arg;

  /* background collector */
  pthread_t collector;
  bool collector_running;
  bool collector_stop;           /* under req_lock */
  pthread_mutex_t req_lock;      /* the collector sleeps on this, not the heap lock */
  _Atomic bool cycle_requested;
  _Atomic unsigned cycle_reasons; /* 1 << REASON_* of the requests the next
                                     cycle answers (cleared with cycle_requested) */
  _Atomic bool collector_waiting;
  _Atomic uint64_t last_cycle_end_ns;

  /* the warm cache's demand window (release.c) */
  uint64_t taken_since_trim;      /* pages acquired since the last trim */
  uint64_t demand[16];            /* pages acquired in each of the last intervals */

  /* after a call gave up, the calls that follow wait (hl_backoff): later
   * trims (release.c); restores -- acquisitions take fresh pages -- and
   * populates (reuse.c); the retries of thp_tail_chunk and
   * thp_unused_lo/hi (release.c) */
  hl_backoff trim_backoff, restore_backoff, populate_backoff, leftover_backoff;

  /* release scratch (sized release_per_sweep + upgrade_per_sweep) */
  uint32_t *scratch;
  uint64_t scratch_cap;

  /* manual mode */
  hl_tcache *tcaches;        /* caches of live threads (under lock) */
  uint64_t manual_trim_threshold;
  uint32_t manual_run;       /* slots a refill still wants: the most a run
                                reserved for it may hold (0 = RUN_MAX) */
  uint64_t manual_mallocs_shown; /* the last manual_mallocs the stats gave (under
                                the lock): the next is never less
                                (hl__manual_stats) */
  struct hl_quarantine *quarantine; /* verify: freed blocks held back (manual.c) */

  /* telemetry: counters only ever added to (hl_stats' event counts; the
   * byte and page gauges come from where they live, when asked for) */
  hl_stats tally;
  hl_event *events;
  uint64_t ev_cap, ev_head, ev_count;
  uint64_t ev_first; /* the number of the ring's oldest event (events are
                        numbered from 0 as recorded; those consumed or
                        dropped have left) */
  uint64_t ev_taken; /* every event numbered below it was consumed by a
                        read (not dropped by a full ring) */

  /* last error of this heap (any thread), and its number in the process's
   * sequence of failures (telemetry.c; 0: none yet) */
  pthread_mutex_t errlock;
  char errmsg[256];
  uint64_t errseq;

  /* the fault sites hl_heap_new armed from HEAPLAB_FAULT_<SITE> (bit per
   * hl_fault_site), for the messages of the failures they cause */
  uint32_t env_faults;
};

/* ---- error reporting (telemetry/telemetry.c) ---- */
int hl__fail(const hl_heap *h, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int hl__failv(const hl_heap *h, int code, const char *fmt, va_list ap);
/* This thread's failures and hl_heap_error wait for a heap's errlock at most
 * HL_ERRLOCK_EXIT_WAIT_NS (on), and after one such wait gave up not at all,
 * keeping the message in the thread only; or wait as long as it takes
 * (off): the preloaded library's report at exit, which may run in a signal
 * handler that interrupted this very thread holding errlock (telemetry.c). */
void hl__errors_at_exit(bool on);
#define HL_ERRLOCK_EXIT_WAIT_NS 500000000ull
/* "s" unless n is 1: a count's noun in a message, "%" PRIu64 " slot%s", n,
 * hl__s(n) -- "1 slot", "2 slots" (messages said "1 slots", "1 bytes"). */
static inline const char *hl__s(uint64_t n) { return n == 1 ? "" : "s"; }
/* hl__g(v) -- a double for a message's %g: a NaN as "nan" whatever its sign
 * bit (printf says "-nan" for Lua's 0/0: "churn: duration_s -nan out of
 * range" read as a negative number; the Lua hunt of session 36). */
static inline double hl__g(double v) { return v != v ? __builtin_fabs(v) : v; }
/* A failure outside any heap: into err (may be NULL) and, as hl__fail(NULL)
 * does, the thread's hl_heap_error(NULL). */
void hl__fmt_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The cross-check between options (telemetry/options.c's table, which
 * hl_options_validate runs) that refuses o and whose message err carries
 * -- as validate says it, or inside from_env's "environment HEAPLAB_<NAME>=<value>:
 * ..." -- as its index in the table; -1 when no check that refuses o says
 * err.  For the fuzzer (fuzz_options), which asks it rather than stating
 * the conditions again. */
int hl__options_refused_by(const hl_options *o, const char *err);
/* When a fault the environment armed (HEAPLAB_FAULT_<SITE>) has fired on h:
 * "an injected fault: HEAPLAB_FAULT_RESERVE=always fired 10 times ..." into
 * buf, and true; else false (heap.c).  site -1: any site; else that site or
 * "any". */
bool hl__injected_faults(const hl_heap *h, int site, char *buf, size_t len);

/* ---- the heap lock ----
 * Both modes lock through these.  hl_enter marks a heap as held by this
 * thread (hl__held): hl__lock then takes nothing and the calls run under the
 * lock the thread already holds.  With -Dasserts=true the holder is recorded
 * and HL_ASSERT_LOCKED(h) checks it; the cond waits and the syscalls run
 * outside the lock keep the record right. */
extern char hl__not_held;
#define HL_NOT_HELD ((hl_heap *)(void *)&hl__not_held)
/* (initial-exec, as the thread caches' pointer: the raw objects' fast path
 * reads it, and the general model's __tls_get_addr call made the compiler
 * save six registers around that path even where the linker removed it) */
extern _Thread_local __attribute__((tls_model("initial-exec"))) hl_heap *hl__held; /* HL_NOT_HELD when none, never NULL */
extern _Thread_local uint32_t hl__held_depth;
/* The preloaded library's guard: this thread holds the heap's lock (its
 * one heap's; set and cleared where the holder is recorded, below).  A
 * call of the malloc family that would take the lock again -- made from
 * inside the heap by a C library call under the lock that allocates
 * (glibc's qsort did, session 42), or by a signal handler that interrupted
 * the heap -- waited for its own thread for ever, in silence (and a fork()
 * there retried its fork handler's wait for ever); it says so and aborts
 * (hl__reentered: clients/preload/heaplab_malloc.c, where the flag is
 * defined).  A store at each lock and unlock and a test before
 * each lock, on the slow paths only: the thread caches' fast paths take no
 * lock. */
#ifdef HL_PRELOAD
extern _Thread_local __attribute__((tls_model("initial-exec"))) bool hl__lock_holder;
__attribute__((noreturn, cold)) void hl__reentered(const char *what, const char *lock);
#define HL__LOCK_HOLDER(v) (hl__lock_holder = (v))
/* The guard's test before taking a lock whose mark (a thread-local flag:
 * this thread holds it) is `mark`: the thread caches' lock has one too
 * (manual.c, tc_global).  Nothing in the other builds, where the marks do
 * not exist. */
#define HL__REENTRY_CHECK(mark, what, lock) (hl_unlikely(mark) ? hl__reentered(what, lock) : (void)0)
#else
#define HL__LOCK_HOLDER(v) ((void)0)
#define HL__REENTRY_CHECK(mark, what, lock) ((void)(what), (void)(lock))
#endif
static inline void hl__reentry_check(const char *what) {
  HL__REENTRY_CHECK(hl__lock_holder, what, "the heap's lock");
}
#ifdef HL_ASSERTS
extern _Thread_local char hl__thread_token; /* its address names the thread */
static inline void hl__owner_set(hl_heap *h) {
  atomic_store_explicit(&h->owner, (const void *)&hl__thread_token, memory_order_relaxed);
  HL__LOCK_HOLDER(true);
}
static inline void hl__owner_clear(hl_heap *h) {
  atomic_store_explicit(&h->owner, (const void *)0, memory_order_relaxed);
  HL__LOCK_HOLDER(false);
}
static inline bool hl__lock_owned(hl_heap *h) {
  return atomic_load_explicit(&h->owner, memory_order_relaxed) == (const void *)&hl__thread_token;
}
#define HL_ASSERT_LOCKED(h) HL_ASSERT(hl__lock_owned(h))
/* (unless the thread holds the heap with hl_enter) */
#define HL_ASSERT_UNLOCKED(h) HL_ASSERT(hl__held == (h) || !hl__lock_owned(h))
#else
static inline void hl__owner_set(hl_heap *h) {
  (void)h;
  HL__LOCK_HOLDER(true);
}
static inline void hl__owner_clear(hl_heap *h) {
  (void)h;
  HL__LOCK_HOLDER(false);
}
#define HL_ASSERT_LOCKED(h) ((void)0)
#define HL_ASSERT_UNLOCKED(h) ((void)0)
#endif

/* Take the mutex whatever hl__held says (hl_enter, the collector thread,
 * the fork handlers).  It spins a little before it sleeps: what the lock
 * guards are refills, flushes and page moves of a few hundred instructions,
 * and a thread that found it taken went to sleep in futex and was woken by
 * a syscall of the holder's -- 30% of the preloaded library's time with 4
 * threads freeing what 4 others allocate (bench-preload xthreads;
 * docs/performance.md item 35).  Not glibc's adaptive mutex, which does the
 * same: its lock is an atomic compare-and-swap even in a process with one
 * thread, where a plain mutex's is a plain store (glibc knows the process
 * is single-threaded) -- 3 ns more on every realloc of a large block
 * (heaplab-manual-bench realloc, 18.5 -> 21.5 ns). */
void hl__lock_contended(pthread_mutex_t *m);
static inline void hl__lock_raw(hl_heap *h) {
  hl__reentry_check("a call of the malloc family");
#if HL_HAVE_SINGLE_THREADED
  if (__libc_single_threaded) pthread_mutex_lock(&h->lock);
  else
#endif
  if (pthread_mutex_trylock(&h->lock) != 0) hl__lock_contended(&h->lock);
  hl__owner_set(h);
}
static inline void hl__unlock_raw(hl_heap *h) {
  hl__owner_clear(h);
  pthread_mutex_unlock(&h->lock);
}
/* The lock for one call: true when this call took it (pass it to hl__unlock). */
static inline bool hl__lock(hl_heap *h) {
  if (hl__held == h) return false;
  hl__lock_raw(h);
  return true;
}
static inline void hl__unlock(hl_heap *h, bool locked) {
  if (locked) hl__unlock_raw(h);
}
/* Wait on a condition of the heap (lock held; returns with it held).  Not a
 * cancellation point (prim_cond_wait): a thread cancelled in it unwound
 * holding the heap lock -- with the preloaded library, a thread cancelled in
 * malloc_trim or fork() hung the process. */
static inline void hl__wait(hl_heap *h, pthread_cond_t *cv) {
  HL_ASSERT_LOCKED(h);
  hl__owner_clear(h);
  prim_cond_wait(cv, &h->lock);
  hl__owner_set(h);
}
static inline int hl__wait_ns(hl_heap *h, pthread_cond_t *cv, uint64_t ns) {
  HL_ASSERT_LOCKED(h);
  hl__owner_clear(h);
  int rc = prim_cond_wait_ns(cv, &h->lock, ns);
  hl__owner_set(h);
  return rc;
}
/* May this call drop the heap lock around a syscall?  Not when the thread
 * holds the heap with hl_enter: its raw pointers would be exposed to a cycle. */
static inline bool hl__may_drop_lock(const hl_heap *h) { return hl__held != h; }
/* Drop the lock for a syscall when allowed; true when it was dropped. */
static inline bool hl__drop_lock(hl_heap *h) {
  HL_ASSERT_LOCKED(h);
  if (!hl__may_drop_lock(h)) return false;
  hl__unlock_raw(h);
  return true;
}
static inline void hl__retake_lock(hl_heap *h, bool dropped) {
  if (dropped) hl__lock_raw(h);
}

/* ---- the accounting (the one charge point) ----
 * hl__charge: blocks handed out (bytes and objects, signed: a reservation
 * given back is a negative charge).  Small blocks are charged when their
 * allocation word is reserved (small.c), large ones by the large path
 * (large.c), in both modes.  hl__discharge: blocks freed, by a sweep or an
 * explicit free.  hl__charge_cycle: the bytes a trigger counts, per object
 * (the small path's are charged by the allocation sequence one object at a
 * time, so a cycle starts at the same byte whatever the word reservations). */
static inline void hl__charge_cycle(hl_heap *h, int path, uint64_t bytes) {
  h->ctr.since_cycle[path] += bytes;
}
static inline void hl__charge(hl_heap *h, int path, int64_t bytes, int64_t objects) {
  h->ctr.allocated[path] += (uint64_t)bytes;
  h->ctr.live[path] += (uint64_t)bytes;
  h->ctr.objects_allocated += (uint64_t)objects;
  if (path == HL_LARGE) {
    h->ctr.since_cycle[HL_LARGE] += (uint64_t)bytes;
    h->ctr.large_objects += (uint64_t)objects;
  }
}
static inline void hl__discharge(hl_heap *h, int path, uint64_t bytes, uint64_t objects) {
  h->ctr.live[path] -= bytes;
  h->ctr.objects_freed += objects;
  if (path == HL_LARGE) h->ctr.large_objects -= objects;
}
/* A large block resized in place (manual realloc): live by the difference,
 * allocated and since_cycle by the growth. */
static inline void hl__charge_resize(hl_heap *h, uint64_t old_bytes, uint64_t new_bytes) {
  h->ctr.live[HL_LARGE] = h->ctr.live[HL_LARGE] - old_bytes + new_bytes;
  if (new_bytes > old_bytes) {
    h->ctr.allocated[HL_LARGE] += new_bytes - old_bytes;
    h->ctr.since_cycle[HL_LARGE] += new_bytes - old_bytes;
  }
}
static inline uint64_t hl__live_bytes(const hl_heap *h) {
  return h->ctr.live[HL_SMALL] + h->ctr.live[HL_LARGE];
}
/* What heap_limit_bytes is tested against: the live bytes and those of the
 * allocations other threads have had through the test and not charged yet
 * (hl_heap.limit_pending).  Lock held. */
static inline uint64_t hl__limit_held(const hl_heap *h) {
  return hl__live_bytes(h) + h->limit_pending;
}
/* heap_limit_bytes, both modes: an allocation of `held` bytes (a small
 * object its class's whole slot) larger than the whole limit fails at once,
 * before any cycle, pacing wait or system call: ENOMEM set, true.  One
 * message for both modes (fuzz_heap's oracle and the clients' scenarios read
 * it).  gc/alloc.c. */
bool hl__past_whole_limit(hl_heap *h, uint64_t held, const char *what);
/* heap_limit_bytes, both modes: hold `bytes` (< 0: give them back) in
 * limit_pending, from an allocation's limit test until its bytes are charged
 * or it failed -- across any drop of the lock between the two.  Lock held;
 * gc/alloc.c. */
void hl__limit_hold(hl_heap *h, int64_t bytes);
/* heap_limit_bytes, both modes: ENOMEM "what: heap_limit_bytes N reached: L
 * bytes live<live_when>[ and P being allocated by other threads], M more
 * asked" (M: held).  One message: fuzz_heap's oracle and the clients'
 * scenarios read it.  Lock held; returns HL_ENOMEM. */
int hl__fail_limit_reached(hl_heap *h, const char *what, const char *live_when, uint64_t held);

/* ---- interrupts (heap.c) ----
 * hl_interrupt counts; a long call remembers the count when it starts and
 * stops at a safe point once it has moved. */
extern _Atomic uint64_t hl__interrupts;
static inline uint64_t hl__interrupt_mark(void) {
  return atomic_load_explicit(&hl__interrupts, memory_order_relaxed);
}
static inline bool hl__interrupted(uint64_t mark) {
  return atomic_load_explicit(&hl__interrupts, memory_order_relaxed) != mark;
}
/* The mark of the long call this thread is in (hl_fill, hl_churn,
 * hl_ref_checksum, hl_thin, hl_collect), for the paced waits inside it: an
 * interrupt that came before a wait began -- between two, or while the fill
 * allocated -- ends it too.  (Each wait took a mark of its own: Ctrl-C between
 * two waits was missed, and each later one ran its whole pacing_max_wait_ms
 * -- the review of session 30's pacing changes.)  A long call inside another
 * (a finalizer's, say) keeps the outer one's mark. */
typedef struct {
  uint64_t mark;
  bool set;
} hl_long_call;
extern _Thread_local hl_long_call hl__long_call;
/* A long call begins (its mark taken now, unless it is inside another);
 * returns what hl__long_call_end puts back. */
static inline hl_long_call hl__long_call_begin(void) {
  hl_long_call was = hl__long_call;
  if (!was.set) hl__long_call = (hl_long_call){hl__interrupt_mark(), true};
  return was;
}
static inline void hl__long_call_end(hl_long_call was) { hl__long_call = was; }
/* The mark a safe point or a paced wait tests: the long call's, or (an
 * allocation outside one) one taken now. */
static inline uint64_t hl__call_mark(void) {
  return hl__long_call.set ? hl__long_call.mark : hl__interrupt_mark();
}

/* ---- telemetry ---- */
void hl__event(hl_heap *h, int kind, int nfields, ...);
/* "EAGAIN, ENOMEM, ..." (the errno names heaplab knows), for messages. */
void hl__errno_list(char *buf, size_t len);
/* The public stats, assembled from the tally and the state that owns each
 * gauge.  Lock held. */
void hl__stats_fill(hl_heap *h, hl_stats *out);

/* ---- pages/pages.c ---- */
int hl__pages_init(hl_heap *h, char *err, size_t errlen);
void hl__pages_destroy(hl_heap *h);
void hl__list_push_head(hl_heap *h, hl_list *l, uint32_t p);
void hl__list_push_tail(hl_heap *h, hl_list *l, uint32_t p);
void hl__list_remove(hl_heap *h, hl_list *l, uint32_t p);
hl_list *hl__list_of(hl_heap *h, uint32_t p);
void hl__page_to_state(hl_heap *h, uint32_t p, int state, bool at_head);
void hl__page_format(hl_heap *h, uint32_t p, uint32_t cls);
void hl__page_unformat(hl_heap *h, uint32_t p);
/* fork() child: the pages left in flight by calls of threads that stayed in
 * the parent (all empty: a page is formatted and owned before its lock is
 * dropped again) go back to the released pools when they carry a release
 * kind (a restore was under way), else to the free pool.  Lock held. */
void hl__pages_orphaned(hl_heap *h);
/* Carve the next page of the reservation (in flight, unformatted), or HL_NIL. */
uint32_t hl__page_carve(hl_heap *h);
#ifdef HL_PRELOAD
enum { HL_LOCK_PAGES = 1, HL_LOCK_ONFAULT = 2 };
/* The heap's own address ranges -- the reservation past the carved pages
 * and every side table -- into lo/hi (at most max; returns how many): what
 * a program's mlockall must not fault in.  Lock held. */
size_t hl__pages_unused_ranges(hl_heap *h, uintptr_t *lo, uintptr_t *hi, size_t max);
#endif
/* Manual mode: the lowest-addressed page on partial_avail[cls], or HL_NIL. */
uint32_t hl__avail_lowest(hl_heap *h, uint32_t cls);

static inline uint8_t *hl__page_addr(const hl_heap *h, uint32_t p) {
  return h->base + ((uint64_t)p << h->page_shift);
}
static inline bool hl__in_heap(const hl_heap *h, const void *ptr) {
  return (const uint8_t *)ptr >= h->base && (const uint8_t *)ptr < h->carved_end;
}
static inline bool hl__in_reservation(const hl_heap *h, const void *ptr) {
  return (uintptr_t)ptr - (uintptr_t)h->base < h->reserved;
}
static inline uint32_t hl__page_of(const hl_heap *h, const void *ptr) {
  return (uint32_t)(((const uint8_t *)ptr - h->base) >> h->page_shift);
}
static inline uint64_t *hl__marks(const hl_heap *h, uint32_t p) {
  return h->bits + (uint64_t)p * h->bits_stride;
}
static inline uint64_t *hl__allocs(const hl_heap *h, uint32_t p) {
#ifdef HL_PRELOAD
  return h->bits + h->abits_at[p];
#else
  return h->abits + (uint64_t)p * h->bits_stride;
#endif
}
/* thp: the OS pages of the side-table bits that hold only chunk c's pages'
 * bits (all of them with 64 KiB pages: 32 x 1 KiB, 8 OS pages); len 0 when
 * no OS page does.  Faulted in with the chunk (reuse.c, prefault.c). */
static inline void hl__chunk_bits(const hl_heap *h, uint32_t c, uint8_t **addr, size_t *len) {
  size_t os = hl__prim_os_page_size();
  /* (a collected heap's marks and allocation bits are one run; a manual
   * heap's marks are never touched) */
  uint32_t p = c << h->chunk_shift;
#ifdef HL_PRELOAD
  /* (a page's allocation bits are where the pool put them) */
  (void)p;
  (void)os;
  *addr = NULL;
  *len = 0;
  return;
#endif
  uintptr_t lo = (uintptr_t)(h->opt.mode == HL_MODE_MANUAL ? hl__allocs(h, p) : hl__marks(h, p));
  uintptr_t hi = lo + ((size_t)1 << h->chunk_shift) * h->bits_stride * sizeof(uint64_t);
  lo = (lo + os - 1) / os * os;
  hi = hi / os * os;
  *addr = (uint8_t *)lo;
  *len = hi > lo ? hi - lo : 0;
}
static inline bool hl__bit(const uint64_t *bm, uint32_t i) {
  return (bm[i >> 6] >> (i & 63)) & 1;
}
static inline void hl__bit_set(uint64_t *bm, uint32_t i) {
  bm[i >> 6] |= (uint64_t)1 << (i & 63);
}
static inline void hl__bit_clear(uint64_t *bm, uint32_t i) {
  bm[i >> 6] &= ~((uint64_t)1 << (i & 63));
}
/* States whose pages are given back to the OS (fallback pages counted there). */
static inline bool hl__released_state(int state) {
  return state == PS_RELEASED || state == PS_REUSE_FAILED;
}
static inline bool hl__formatted(int state) {
  return state == PS_OWNED || state == PS_RETIRED || state == PS_PARTIAL;
}
/* Empty pages are the last room: the reservation is carved to its end and
 * no more empty or released pages are left than one per size class.  (An
 * allocation then fills its class's partial pages before it takes one.) */
static inline bool hl__pages_scarce(const hl_heap *h) {
  uint64_t room = (uint64_t)(h->npages_max - h->high_water) + h->free_pool.count +
                  h->released_pool.count;
  return room <= h->nclasses;
}

/* ---- check/check.c ---- */
/* Every invariant of pages, pools and counts; HL_ECHECK and the first
 * violation in msg.  Lock held. */
int hl__check_locked(hl_heap *h, char *msg, size_t len);
/* Collected mode: every object's header fits where it lives (hl__hdr_fits),
 * and no object on a page without PF_REFS has slots; HL_ECHECK and the first
 * bad header in msg (hl__hdr_describe).  Lock held.  verify runs it before
 * every mark (gc/cycle.c): a header overwritten by an overflow would have
 * the marker read past the object. */
int hl__check_headers(hl_heap *h, char *msg, size_t len);
/* What is wrong with obj's header, for a message: "object 0x...: header
 * refs R size S does not fit its 48-byte slot (overwritten? an overflow of
 * the object at 0x...?)". */
void hl__hdr_describe(hl_heap *h, const void *obj, char *msg, size_t len);

/* ---- small/small.c ---- */
void hl__classes_init(hl_heap *h);
static inline uint32_t hl__class_of(const hl_heap *h, uint64_t bytes) {
  return h->size_to_cls[(bytes + HL_GRANULE - 1) / HL_GRANULE];
}
/* Take one slot of class cls when its allocation word is empty: reserve the
 * owned page's next word, or take a new owned page; NULL when no page can be
 * had.  Lock held. */
void *hl__take_refill(hl_heap *h, uint32_t cls);

/* Take one slot of class cls (lock held); NULL when memory cannot be had.
 *
 * Free slots are found in the allocation bitmap, not in a list threaded
 * through them: a sweep frees by clearing bits and never writes into a dead
 * slot, and an allocation does not read the slot it takes -- with a list,
 * each reuse was two cache misses on memory a trigger's worth old (the
 * sweep's write of the link, the allocation's read of it).
 *
 * The common case is inline and touches only the class's allocation run:
 * the next slot is `cur`, bumped by the slot size.  The bitmap, the page's
 * counts and the counters (all but the trigger's, charged per object by the
 * allocation sequence) were set and charged for the whole run when it was
 * reserved (hl__take_refill).  A write prefetch runs HL_ALLOC_PREFETCH bytes
 * ahead, where the allocations after this one go. */
#define HL_ALLOC_PREFETCH 2048
static inline void *hl__small_take(hl_heap *h, uint32_t cls) {
  hl_aword *a = &h->aword[cls];
  uint8_t *slot = a->cur;
  /* (integers: an empty run's cur is NULL, and NULL + sz is undefined) */
  if (hl_unlikely((uintptr_t)a->end - (uintptr_t)slot < a->sz)) return hl__take_refill(h, cls);
  a->cur = slot + a->sz;
  __builtin_prefetch(slot + HL_ALLOC_PREFETCH, 1, 3);
  return slot;
}
/* An object with slots is about to be taken from class cls's run on a page
 * without PF_REFS: flag the page.  Lock held. */
void hl__aword_refs(hl_heap *h, uint32_t cls);
/* Give the reserved slots not taken back to their pages and the counters:
 * before anything reads the page counts or the counters (a cycle, the stats,
 * the check).  Lock held. */
void hl__aword_flush(hl_heap *h);
/* Free slots page p still has, reserved ones included. */
uint32_t hl__page_free_slots(const hl_heap *h, uint32_t p);
/* Give a slot back to its page (manual mode); false when it is not a live
 * slot (double free, foreign pointer).  Lock held. */
bool hl__small_give_checked(hl_heap *h, void *slot);
/* Sweep one formatted page: free unmarked objects; returns bytes live. */
uint64_t hl__sweep_page(hl_heap *h, uint32_t p, uint64_t *freed_objects);
void hl__poison(void *p, size_t n);
bool hl__poison_intact(const void *p, size_t n);
/* verify, manual mode: seal a slot its owner freed, keeping its bytes past
 * the first 16 (small.c); a free slot is intact when its seal or its
 * poison is. */
void hl__seal_freed(void *slot, size_t n);
bool hl__free_slot_intact(const void *slot, size_t n);
/* verify: where a free slot that is not intact was written: n when it is
 * intact; else the first byte that is not poison (*exact), or -- a sealed
 * slot whose tag holds but whose hash does not -- 8, the first byte the hash
 * covers (*exact false: somewhere at or past it). */
size_t hl__free_slot_damage(const void *slot, size_t n, bool *exact);
/* verify, collected mode: an empty page (the free pool, or one about to be
 * formatted again) holds poison only -- or zeros, one OS page at a time: a
 * fresh page, a released one (MADV_FREE gives back either the old bytes or
 * zeros).  The offset of the first byte written since, or UINT64_MAX.
 * skip_out: the OS pages released by subpage_release are not read (reading
 * one would fault it in). */
uint64_t hl__free_page_written(const hl_heap *h, uint32_t p, bool skip_out);
/* A failure verify found outside a cycle's checks or inside them: counted
 * in verify_failures, the heap's error "verify: msg", a verify_failed event
 * (its address: addr, else the one the failed check noted in verify_addr);
 * returns HL_ECHECK.  A failure in a background or allocation's cycle has
 * no caller: the event and hl_heap_error are how it is seen. */
int hl__verify_failed(hl_heap *h, uint64_t addr, const char *msg);
/* verify: the message for a written byte at offset off of empty page p. */
void hl__free_page_describe(hl_heap *h, uint32_t p, uint64_t off, const char *what,
                            char *msg, size_t len);
/* Resolve an address to the start of a live small object, or NULL. */
void *hl__small_resolve(const hl_heap *h, const void *addr, bool interior);

/* ---- large/large.c ----
 * The large path charges and discharges its own bytes (hl__charge).  A
 * manual heap calls the system allocator outside the heap lock: the block is
 * made (hl__large_sys_alloc) and then adopted, resized detached, freed
 * after its unlink. */
void *hl__large_alloc(hl_heap *h, uint64_t block_bytes, bool zero);
/* A system block for a block of block_bytes aligned to align (a power of
 * two; larger than 16: over-allocated, and the record keeps the lead), then
 * linked into the heap (lock held). */
void *hl__large_sys_alloc(uint64_t block_bytes, size_t align, bool zero);
void *hl__large_adopt(hl_heap *h, void *raw, uint64_t block_bytes, size_t align);
/* Unlink a block and discharge it, keeping its memory: returns the system
 * block, for hl__sys_free later (after the lock, or the preloaded library's
 * quarantine under verify), or chain the record for
 * hl__large_release_chain.  Lock held. */
void *hl__large_unlink(hl_heap *h, hl_large *l);
/* What a release of mapped blocks did: the ranges munmap refused (chained
 * in `kept`, to go on the pending list) and the pending ones a retry
 * unmapped. */
typedef struct hl_unmap_tally {
  hl_large *kept;           /* refused now, or retried and refused again */
  uint64_t refused, refused_bytes;   /* refused for the first time */
  uint64_t unmapped, unmapped_bytes; /* pending ranges a retry unmapped */
  uint64_t retried;         /* pending ranges taken for the retry */
  int err;                  /* errno of the first refusal */
} hl_unmap_tally;
/* Free unlinked records chained by their next field (the collector's dead
 * blocks, after the lock); the mapped blocks munmap refuses go to t->kept,
 * their pages given back.  No lock. */
void hl__large_release_chain(hl_large *l, hl_unmap_tally *t);
/* The pending list, taken for hl__large_retry (NULL when empty or already
 * taken).  Lock held, in_cycle set. */
hl_large *hl__large_pending_take(hl_heap *h);
/* munmap the taken ranges again: every one (all), or until one is refused
 * (the rest kept untried).  No lock. */
void hl__large_retry(hl_large *pending, bool all, hl_unmap_tally *t);
/* The kept ranges (back) on the pending list, its counts, and the event
 * large_unmap_pending when anything changed.  Lock held. */
void hl__large_unmap_done(hl_heap *h, hl_unmap_tally *t);
/* A retry of every pending range with the lock dropped (hl_trim).  Lock
 * held, in_cycle set. */
void hl__large_retry_pending(hl_heap *h);
/* A block out of the list and the set, its bytes still charged, for a
 * resize outside the lock: hl__large_detach (lock held), then
 * hl__large_sys_realloc (no lock), then hl__large_attach with what it
 * returned, or l itself when it failed (lock held; cannot fail). */
void hl__large_detach(hl_heap *h, hl_large *l);
/* free() of a system block outside the lock (hl__large_unlink's, or one
 * hl__large_sys_alloc made that was not adopted). */
void hl__large_sys_free(void *raw);
hl_large *hl__large_sys_realloc(hl_large *l, uint64_t block_bytes);
void *hl__large_attach(hl_heap *h, hl_large *l, uint64_t block_bytes);
bool hl__large_contains(const hl_heap *h, const void *block);
void hl__large_destroy_all(hl_heap *h);
static inline hl_large *hl__large_of(const void *block) {
  return (hl_large *)((uint8_t *)block - sizeof(hl_large));
}

/* ---- objects ---- */
static inline void **hl__slots(void *obj) {
  return (void **)((uint8_t *)obj + sizeof(hl_objhdr));
}
/* Bytes of an object of `size` payload bytes and `refs` slots. */
static inline uint64_t hl__obj_bytes(uint64_t size, uint64_t refs) {
  return sizeof(hl_objhdr) + refs * sizeof(void *) + size;
}
static inline uint64_t hl__obj_size(const void *obj) {
  const hl_objhdr *hd = (const hl_objhdr *)obj;
  if (hd->size == HL_SIZE_LARGE)
    return hl__large_of(obj)->size - hl__obj_bytes(0, hd->refs);
  return hd->size & ~HL_HDR_OLD;
}
static inline uint8_t *hl__obj_payload(void *obj) {
  return (uint8_t *)obj + hl__obj_bytes(0, ((hl_objhdr *)obj)->refs);
}
/* The bytes obj's header may claim: its slot (a small object: its class's
 * size) or its block (a large one: its record's size). */
static inline uint64_t hl__obj_room(const hl_heap *h, const void *obj) {
  if (hl__in_reservation(h, obj)) return h->cls_size[h->pages[hl__page_of(h, obj)].cls];
  return hl__large_of(obj)->size;
}
/* Whether obj's header fits where it lives: a small object's header, its
 * slots and its payload within its slot (and not the large marker), a large
 * object's header (the large marker) and its slots within its block.  A
 * header that does not was overwritten (an overflow of the block before it,
 * a write after free): every reader of refs or size would read past the
 * object.  Two loads and a compare: the handle calls check it (heap.c). */
static inline bool hl__hdr_fits(const hl_heap *h, const void *obj) {
  const hl_objhdr *hd = (const hl_objhdr *)obj;
  if (hl__in_reservation(h, obj)) {
    if (hd->size == HL_SIZE_LARGE) return false;
    return hl__obj_bytes(hd->size & ~HL_HDR_OLD, hd->refs) <=
           h->cls_size[h->pages[hl__page_of(h, obj)].cls];
  }
  return hd->size == HL_SIZE_LARGE && hl__obj_bytes(0, hd->refs) <= hl__large_of(obj)->size;
}
/* The slots of obj a reader may follow: its refs when its header fits, else
 * every word after the header within its slot or block (each validated as
 * any slot value is, a superset: nothing it refers to is lost).  verify's
 * mark and checks use it (gc/mark.c). */
static inline uint64_t hl__refs_bounded(const hl_heap *h, const void *obj) {
  if (hl_likely(hl__hdr_fits(h, obj))) return ((const hl_objhdr *)obj)->refs;
  uint64_t room = hl__obj_room(h, obj);
  return room > sizeof(hl_objhdr) ? (room - sizeof(hl_objhdr)) / sizeof(void *) : 0;
}
/* The slot index of page offset off in class cls: a multiply by a
 * reciprocal instead of a divide (a fifth of the mark loop was the divide).
 * Exact here: classes are multiples of 16, offsets are below 2^20
 * (page_size <= 1 MiB), so the error off/2^40 stays below 1/size (checked
 * for every class size and offset by the C tests). */
#define HL_RECIP_SHIFT 40
static inline uint32_t hl__slot_index(const hl_heap *h, uint64_t off, uint32_t cls) {
  return (uint32_t)((off * h->cls_recip[cls]) >> HL_RECIP_SHIFT);
}

/* ---- gc/alloc.c: the allocation sequence ----
 * hl__obj_alloc is the one sequence every allocating entry of the collected
 * mode takes (hl_alloc, hl_obj_new, hl_obj_new_in, fill, churn, the fill's
 * index): safepoint, pacing, collect when due, take a slot or a large block
 * (charged), initialise the header and empty slots.  NULL and the heap's
 * error, its message naming the call `what` ("fill: heap_limit_bytes ...
 * reached"), when memory cannot be had.  Lock held; it may drop it (pacing, a
 * cycle's trim), so everything the caller needs must be rooted.
 * HL_ALLOC_LARGE puts the object on the large path whatever its size. */
enum { HL_ALLOC_LARGE = 1 };
void *hl__obj_alloc(hl_heap *h, uint64_t size, uint64_t refs, unsigned flags, const char *what);

/* The object initialisation: the header (one store), the slots cleared (a
 * few inline: the call to memset cost as much as the rest of a small
 * allocation). */
#define HL_FEW_REFS 4
static inline void hl__obj_header(void *obj, uint32_t size_field, uint64_t refs) {
  hl_objhdr hd = {(uint32_t)refs, size_field};
  memcpy(obj, &hd, sizeof hd);
}
/* An object with slots has its whole slot cleared when it is taken -- the
 * slots for the collector, the payload so that a new object never shows a
 * dead one's bytes -- with 16-byte stores (slot sizes are multiples of 16,
 * 16-aligned); the header is written after.  (Runs were zeroed whole when
 * reserved, up to 8 KiB in one burst of stores: binary-trees spent 11.5% of
 * its samples there, the stores waiting on the lines they missed, where
 * clearing each object as it is taken overlaps the misses with the
 * mutator's work -- docs/performance.md, item 32.) */
typedef uint64_t hl__v16 __attribute__((vector_size(16)));
static inline __attribute__((always_inline)) void hl__slot_zero(uint8_t *obj, uint8_t *end,
                                                              uint64_t sz) {
  const hl__v16 z = {0, 0};
  /* the first and the last 16 bytes (the same ones in a 16-byte slot; all
   * of a 32-byte one, a binary-trees node), then what lies between; end =
   * obj + sz, which the fast path has at hand */
  memcpy(obj, &z, sizeof z);
  memcpy(end - 16, &z, sizeof z);
  if (hl_likely(sz <= 32)) return;
  for (uint8_t *p = obj + 16; p < end - 16; p += 16) {
    __asm__("" : "+r"(p)); /* (else the compiler makes the loop a call to memset) */
    memcpy(p, &z, sizeof z);
  }
}
static inline void hl__obj_init(void *obj, uint32_t size_field, uint64_t refs) {
  hl__obj_header(obj, size_field, refs);
  void **slots = hl__slots(obj);
  switch (refs) {
  case 4: slots[3] = NULL; /* fallthrough */
  case 3: slots[2] = NULL; /* fallthrough */
  case 2: slots[1] = NULL; /* fallthrough */
  case 1: slots[0] = NULL; /* fallthrough */
  case 0: break;
  default: memset(slots, 0, refs * sizeof(void *));
  }
}
/* The fast path: a new small object from its class's allocation run, or
 * NULL with nothing done.  A run ends where the small trigger would (its
 * slots were charged to it when it was reserved: small.c), so taking a slot
 * needs no compare with the trigger, and a run is closed when alloc_limit
 * drops below what is charged (hl__alloc_limit_update: the large trigger
 * due, a heap limit near).  An object with slots needs a page with
 * PF_REFS (the marker pushes only objects of such pages) and its slot
 * cleared, then the header is written.  held: the calling
 * thread holds the heap (hl_enter), so no background collector can be
 * waiting at a safepoint for it.  Lock held (or the heap held). */
static inline __attribute__((always_inline)) void *hl__obj_alloc_fast_t(hl_heap *h, uint64_t size,
                                                                     uint64_t refs,
                                                                     const bool held) {
  /* (size and refs at most small_max: bytes stays inside aword_of) */
  if (hl_unlikely((size | refs) > h->small_max)) return NULL;
  hl_aword *a = h->aword_of[(hl__obj_bytes(size, refs) + HL_GRANULE - 1) / HL_GRANULE];
  if (hl_unlikely(refs > a->refs_max)) return NULL;
  if (!held && atomic_load_explicit(&h->collector_waiting, memory_order_relaxed)) return NULL;
  uint8_t *obj = a->cur;
  uint64_t sz = a->sz;
  /* (integers: an empty run's cur and end are NULL; a run ends inside the
   * reservation, so cur + sz cannot wrap) */
  uintptr_t next = (uintptr_t)obj + sz;
  if (hl_unlikely(next > (uintptr_t)a->end)) return NULL;
  a->cur = (uint8_t *)next;
  if (refs) hl__slot_zero(obj, (uint8_t *)next, sz);
  ((hl_objhdr *)obj)->refs = (uint32_t)refs;
  ((hl_objhdr *)obj)->size = (uint32_t)size;
  return obj;
}
static inline void *hl__obj_alloc_fast(hl_heap *h, uint64_t size, uint64_t refs) {
  return hl__obj_alloc_fast_t(h, size, refs, false);
}
/* Checks of an allocation's arguments and mode: HL_OK or the error, its
 * message naming the call `what` ("alloc", "fill", "churn", "hl_obj_new"). */
int hl__check_alloc_args(hl_heap *h, const char *what, uint64_t size, uint64_t refs);

/* ---- gc/barrier.c: the write barrier ----
 * Every store of a reference into a slot goes through hl__store.
 * Generational mode: when the object is old (marked), its page (or large
 * block) is marked dirty, and the next minor cycle traces the marked objects
 * on that page again, so an old object never hides a young one.  A store
 * into a young object needs nothing: a cycle that marks it traces it.  Lock
 * held (hl__store_any: no heap known). */
void hl__store_old(hl_heap *h, void *obj);
/* Whether the heap's full marks tenure dense pages (gc/mark.c): a collected
 * heap, either mode, with tenure_full_marks > 0.  Its stores into objects
 * that carry HL_HDR_OLD take the barrier's slow path. */
static inline bool hl__tenures(const hl_heap *h) {
  return h->opt.mode == HL_MODE_COLLECTED && h->opt.tenure_full_marks > 0;
}
/* Whether stores into old objects must reach the barrier's slow path. */
/* (a collected heap's only: hl_options_validate, which every heap passes,
 * refuses generational on a manual one) */
static inline bool hl__barrier_on(const hl_heap *h) { return h->opt.generational || hl__tenures(h); }

static inline void hl__store(hl_heap *h, void *obj, uint64_t slot, void *value) {
  hl__slots(obj)[slot] = value;
  /* obj never traced by a generational mark: young (the common case,
   * inline; a heap that is not generational never sets the bit) */
  if (!value || !(((hl_objhdr *)obj)->size & HL_HDR_OLD)) return;
  hl__store_old(h, obj); /* barrier.c: reads the mark bit, dirties the page */
}
void hl__store_any(void *obj, uint64_t slot, void *value);

/* ---- registry.c: the process-wide list of heaps ---- */
int hl__registry_add(hl_heap *h);
/* Register the fork handlers now (hl__registry_add does, once).  Handlers
 * registered later run their prepare before these and their parent and
 * child handlers after them, the heaps unlocked: the preloaded library
 * calls this from its constructor, so that a program's handlers, registered
 * before its first malloc, may allocate (as they may on glibc, which locks
 * its malloc after every prepare handler). */
void hl__registry_fork_handlers(void);
/* The samplers' locks for fork (telemetry/sampler.c), taken and released by
 * the registry's handlers after every heap's (a sampler registers them). */
void hl__sampler_fork_prepare(void);
void hl__sampler_fork_parent(void);
void hl__sampler_fork_child(void);
void hl__registry_remove(hl_heap *h);
/* The heap whose reservation holds addr, with the registry read-locked
 * until hl__registry_unlock; NULL (still locked) when none. */
hl_heap *hl__registry_find_locked(const void *addr);
void hl__registry_unlock(void);
/* How many heaps whose barrier is on exist (generational or tenuring:
 * hl__barrier_on; hl_obj_set's fast test). */
uint32_t hl__registry_barriers(void);
/* How many of them are generational (a store into a large object matters
 * only to those: a large object is never tenured). */
uint32_t hl__registry_generational(void);
/* How many heaps have verify on (hl_obj_set checks its value then): read
 * inline, a call was a third of hl_obj_set's time. */
extern _Atomic uint32_t hl__verify_heaps;
static inline uint32_t hl__registry_verifying(void) {
  return atomic_load_explicit(&hl__verify_heaps, memory_order_relaxed);
}
/* Keep the shared object holding heaplab's code (the Lua module, the Python
 * extension) mapped for the rest of the process: called before every thread
 * heaplab starts that may outlive what loaded the code (registry.c). */
void hl__pin_code(void);

/* ---- gc/markers.c: the helper threads of parallel marking ---- */
#define HL_MARK_THREADS_MAX 8
/* Run fn(arg, i) for i = 1..n on n helper threads (at most
 * HL_MARK_THREADS_MAX - 1); returns how many were started, 0 when none can
 * be had (another heap's mark has them, or no thread could be made).  Each
 * such run is followed by hl__markers_wait, which returns once every fn has
 * returned. */
unsigned hl__markers_run(unsigned n, void (*fn)(void *, unsigned), void *arg);
void hl__markers_wait(void);
/* Once per process, when a heap is made: the fork() handler. */
void hl__markers_init(void);
/* Has this process ever started a helper (which pinned the code)? */
bool hl__markers_ever_started(void);

/* ---- gc/mark.c ---- */
/* Resolve any address to a live object (small or large), or NULL. */
void *hl__resolve(hl_heap *h, const void *addr, bool interior);
/* Mark from the roots (minor: trace the dirty pages first and stop at
 * marked objects; full: trace the remembered tenured pages first); returns
 * the bytes marked. */
uint64_t hl__mark(hl_heap *h, bool minor);
/* The parallel mark's helper stacks and packets: one mapping per process,
 * reserved once (mark.c).  False when it could not be, or when making_a_heap
 * found too little address space under a limit (then marks do not try). */
bool hl__mark_arena_reserve(bool making_a_heap);
/* The last heap is gone (registry.c, its write lock held): unmap the arena
 * unless a helper was ever started. */
void hl__mark_arena_release(void);
/* The marking thread's stack: reserved when a collected heap is made
 * (HL_ENOMEM when no reservation could be had), released with the heap. */
int hl__mark_stack_reserve(hl_heap *h);
void hl__mark_stack_release(hl_heap *h);
/* Clear the marks of every page not tenured, and of large objects. */
void hl__marks_clear(hl_heap *h);
/* verify: every reference a marked object holds leads to a marked object
 * (HL_ECHECK and why in msg); after a failure hl__mark_repair traces from
 * every marked object so that the sweep frees nothing live. */
int hl__check_marks_closed(hl_heap *h, char *msg, size_t len);
void hl__mark_repair(hl_heap *h);
/* Tenuring (generational): untenure every page before a whole mark; after
 * a full mark's sweep, tenure the pages dense now and at the last one (with
 * tenure false, a live set still growing: only note the dense ones). */
void hl__untenure_all(hl_heap *h);
void hl__tenure_pages(hl_heap *h, bool tenure);

/* ---- gc/cycle.c ---- */
/* Why a cycle ran (the cycle event's reason field; heaplab.h documents the
 * codes).  A background cycle reports its requesters' (cycle_reasons). */
enum { REASON_EXPLICIT = 0, REASON_SMALL = 1, REASON_LARGE = 2, REASON_PACING = 3,
       REASON_MEMORY = 4 /* an allocation found no memory, or the heap at its limit */ };
enum { MAJOR_NONE = 0, MAJOR_QUIET = 1, MAJOR_PRESSURE = 2, MAJOR_BACKSTOP = 3,
       MAJOR_FORCED = 4, MAJOR_FULL_MARK = 5, MAJOR_GROWTH = 6 };
/* One cycle (major: -1 = policy, 0 = no, 1 = force).  Lock held. */
int hl__cycle(hl_heap *h, int major, int reason);
/* When a trigger is due, run (or request) the cycle.  Lock held. */
void hl__maybe_collect(hl_heap *h);
/* Set alloc_limit, where the allocation runs stop (after every cycle and
 * every large allocation); gives back the runs' untaken slots when it drops
 * below what they were charged.  Lock held. */
void hl__alloc_limit_update(hl_heap *h);
uint64_t hl__trigger_in_force(const hl_heap *h);

/* ---- gc/collector.c ---- */
int hl__collector_start(hl_heap *h);
void hl__collector_stop(hl_heap *h);
/* Ask the collector thread for a cycle, for `reason` (REASON_*; the cycle
 * event reports it).  Lock held. */
void hl__request_cycle(hl_heap *h, int reason);
/* Step aside while the collector waits for the lock.  Lock held. */
void hl__safepoint(hl_heap *h);
/* Before a large allocation of `bytes`: wait for the cycle the large path
 * requested (large_pacing, background collector).  Lock held. */
void hl__pace(hl_heap *h, uint64_t bytes);

/* ---- gc/roots.c: handles ---- */
int hl__handle_new(hl_heap *h, void *obj, hl_ref *out);
int hl__handle_get(hl_heap *h, hl_ref ref, void **obj);
/* hl__handle_get with the object's header checked (hl__hdr_fits): HL_ECHECK,
 * *obj NULL, when it was overwritten.  What every handle call that reads its
 * object goes through (heap.c). */
int hl__handle_obj(hl_heap *h, hl_ref ref, void **obj);
/* Point a live handle at another object (a root's object replaced). */
void hl__handle_set(hl_heap *h, hl_ref ref, void *obj);
int hl__handle_release(hl_heap *h, hl_ref ref);
/* Visit every handle's object (the marker). */
#define HL_HANDLES_FOR_EACH(h, obj)                                            \
  for (uint32_t hl__i = 0; hl__i < (h)->handles_cap; hl__i++)                   \
    if (((obj) = (h)->handles[hl__i].obj) != NULL)
int hl__roots_add(hl_heap *h, void *base, uint64_t words, int conservative);
int hl__roots_remove(hl_heap *h, void *base);
void hl__handles_destroy(hl_heap *h);

/* ---- release/release.c and release/reuse.c ---- */
/* The first call of a trim that gave up after its bounded retries: it ends
 * the trim's calls, and the syscall_gave_up event reports it (release.c,
 * subpage.c). */
typedef struct hl_gave_up {
  bool any;
  int site, err;
  uint64_t retries, page;
} hl_gave_up;
void hl__gave_up_note(hl_gave_up *g, int site, prim_result r, uint64_t page);
void hl__gave_up_event(hl_heap *h, const hl_gave_up *g);
/* Trim: lock held and h->in_cycle set by the caller; drops the lock around
 * the syscalls when allowed.  forced: asked for (hl_trim, hl_collect), so
 * not skipped while trims back off after one gave up. */
void hl__trim_locked(hl_heap *h, bool forced);
/* A trim outside a cycle (hl_trim; manual mode when frees leave enough empty
 * pages: hl__trim_maybe).  Lock held. */
void hl__trim_now(hl_heap *h);
void hl__trim_maybe(hl_heap *h);
/* Free the trims' scratch (h->scratch: a mapping of its own in the
 * preloaded library, release.c's scratch_room). */
void hl__release_scratch_free(hl_heap *h);
/* Take an empty page for class cls: warm, else released (restored before it
 * is formatted), else fresh.  In flight and formatted, or HL_NIL.  May drop
 * the lock around a restore.  Lock held. */
uint32_t hl__acquire_page(hl_heap *h, uint32_t cls);
/* ---- release/prefault.c: thp_prefault ----
 * A bulk phase about to write `count` objects of `bytes` (slot size) starts
 * a helper thread that faults fresh 2 MiB chunks in ahead of it (when thp is
 * on, the option asks for it, there is a second CPU and the phase will carve
 * at least two chunks); h->prefault is set while it runs.  Returns it, or
 * NULL when none was started.  Lock held. */
typedef struct hl_prefault hl_prefault;
hl_prefault *hl__prefault_start(hl_heap *h, uint64_t count, uint64_t bytes);
/* The first page of fresh chunk c is carved: true when the helper has
 * faulted c in (waiting for it, the heap lock dropped, if it is at it);
 * false when c is the caller's to fault in.  Lock held. */
bool hl__prefault_take(hl_heap *h, uint32_t c);
/* The helper's choice (a pure function, tested on its own): of the chunks
 * [first, end) whose states are state[0 .. end - first), the farthest one
 * still HL_PF_FREE above the allocation's chunk `cursor` and at most `ahead`
 * beyond it; HL_PF_NONE when there is none. */
enum { HL_PF_FREE, HL_PF_BUSY, HL_PF_DONE, HL_PF_OWN };
#define HL_PF_NONE UINT32_MAX
uint32_t hl__prefault_pick(const uint8_t *state, uint32_t first, uint32_t end, uint32_t cursor,
                           uint32_t ahead);
/* The phase ends: the helper is stopped and joined, its counts go into the
 * stats, and chunks it faulted in that no page was carved from are given
 * back.  Nothing when pf is NULL.  Lock held. */
void hl__prefault_stop(hl_heap *h, hl_prefault *pf);
/* Bytes from the reservation's base to the end of the chunks the running
 * helper may fault in (0 when none runs): they may be resident.  Lock held. */
uint64_t hl__prefault_reach(const hl_heap *h);
/* A trim: give back the helper's unused chunks a refused call left (lock
 * held); true when refused again. */
bool hl__prefault_retry(hl_heap *h);
/* One step of a back-off (release.c): after a call that gave up, the wait
 * is 100 ms, doubling to 10 s, from now; after one that did not, none. */
void hl__backoff_step(hl_backoff *b, bool gave_up);
/* Is a back-off's wait still on? */
static inline bool hl__backoff_waiting(const hl_backoff *b) {
  return b->ns && hl__prim_now_ns() < b->next_ns;
}
/* MADV_POPULATE_WRITE refused for good: a kernel before 5.14 (EINVAL), or one
 * that forbids it (ENOSYS, EPERM); ENOMEM and the like are asked again. */
static inline bool hl__refused_for_good(int err) {
  return err == EINVAL || err == ENOSYS || err == EPERM;
}
/* thp: chunk c had `released_pages` whole pages, or `released_bytes` of OS
 * pages inside pages that stay (sub-page release), released by a trim.  A
 * chunk that may have been one huge page (CH_HUGE) is split: thp_splits
 * (and thp_subpage_splits for the latter), event thp_split; a chunk with
 * every page released is CH_EMPTY.  Lock held. */
void hl__chunk_released_in_part(hl_heap *h, uint32_t c, uint64_t released_pages,
                                uint64_t released_bytes, bool subpage);

/* ---- release/subpage.c: sub-page release ----
 * (its side tables are mapped by pages.c; NULL when the option is off) */
static inline uint64_t *hl__sub_out(const hl_heap *h, uint32_t p) {
  return h->sub_bits + (uint64_t)p * 2 * h->sub_words;
}
static inline uint64_t *hl__sub_fb(const hl_heap *h, uint32_t p) {
  return h->sub_bits + ((uint64_t)p * 2 + 1) * h->sub_words;
}
static inline bool hl__sub_any(const hl_heap *h, uint32_t p) {
  const uint64_t *o = hl__sub_out(h, p);
  for (uint32_t i = 0; i < h->sub_words; i++)
    if (o[i]) return true;
  return false;
}
/* A page a trim is advising, or whose restore failed: takes no new object. */
static inline bool hl__sub_unavail(const hl_heap *h, uint32_t p) {
  return h->sub_held && (h->sub_flags[p] & (SUB_BUSY | SUB_FAILED));
}
/* A slot of page p was freed: it may have emptied an OS page. */
static inline void hl__sub_dirty(hl_heap *h, uint32_t p) {
  if (h->sub_flags) {
    h->sub_flags[p] &= (uint8_t)~SUB_CLEAN;
    h->sub_rescan = true;
  }
}
/* Restore the released OS pages of page p that bytes [lo, hi) of it
 * overlap, before a slot there is handed out (restore on reuse).  Under the
 * lock (Linux: no system call; the restore site still runs).  False when a
 * restore failed: the page is SUB_FAILED then, and the caller takes no slot
 * from it. */
bool hl__sub_restore(hl_heap *h, uint32_t p, uint64_t lo, uint64_t hi);
/* An allocation found no page: HL_ENOMEM with a message saying why -- the
 * reservation used up, or released pages left that could not be restored
 * (the errno).  Lock held. */
void hl__fail_no_page(hl_heap *h, const char *what);
/* Page p was released whole (or carved afresh): forget its sub-page state. */
void hl__sub_forget(hl_heap *h, uint32_t p);
/* Page p leaves the partial state while SUB_FAILED (a sweep emptied it). */
void hl__sub_leave_partial(hl_heap *h, uint32_t p);
/* The sub-page part of a trim (release.c, after the whole pages): release
 * the free OS pages of partial pages, at most release_budget pages of them,
 * and upgrade fallback runs on at most upgrade_budget pages; retry the
 * restores that failed.  Lock held, h->in_cycle set; drops the lock around
 * the advice like the whole-page trim.  -1 when it advised nothing, 1 when
 * a call gave up, 0 otherwise. */
int hl__subpage_trim(hl_heap *h, uint64_t release_budget, uint64_t upgrade_budget);

/* ---- gc/evacuate.c: evacuating compaction ----
 * After a full mark's sweep (compact != never): the live objects of sparse
 * pages are copied to other pages of their class, every reference the heap
 * knows of is updated, the emptied pages go to the free pool (the trim
 * releases them).  Nothing moves while a thread holds the heap or h->nomove
 * is set; conservative roots pin what they point into.  HL_OK, or HL_ECHECK
 * when verify finds a reference left pointing into an evacuated page.  Lock
 * held, inside a cycle. */
int hl__evacuate(hl_heap *h);
/* The identity of a live object (hl_ref_identity); HL_ENOMEM when it cannot
 * be remembered.  Lock held. */
int hl__identity(hl_heap *h, void *obj, uint64_t *out);
void hl__identities_free(hl_heap *h);

/* ---- workload/ ---- */
int hl__fill(hl_heap *h, uint64_t total, uint64_t size, uint64_t refs, uint64_t stride,
             hl_ref *out);
int hl__checksum(hl_heap *h, hl_ref ref, uint64_t *sum, uint64_t *objects);
int hl__thin(hl_heap *h, hl_ref ref, uint64_t every, hl_ref *out);
int hl__churn(hl_heap *h, double duration_s, uint64_t size, uint64_t live_bytes, double rate,
              hl_churn_result *out);

/* ---- manual/manual.c (the thread caches' fast paths: manual/manual.h) ----
 * The slow paths behind hl_malloc and friends; heap.c has checked the heap
 * and its mode.  Called without the lock (or with the heap held). */
void *hl__manual_malloc(hl_heap *h, size_t size);
void *hl__manual_calloc_small(hl_heap *h, size_t size);
/* hl_malloc without the refusal hook: the core's own allocations that may
 * fall back to another path (realloc's move, memalign) (heap.c) */
void *hl__malloc(hl_heap *h, size_t size);
/* A zeroed large block (calloc above small_max: nothing written when the
 * memory is fresh). */
void *hl__manual_calloc_large(hl_heap *h, size_t size);
/* The preloaded library's: a small block, or a large one when the small
 * path has no page left (manual.c). */
void *hl__manual_malloc_any(hl_heap *h, size_t size);
/* A block aligned to align, a power of two (the preload library's memalign). */
void *hl__manual_memalign(hl_heap *h, size_t align, size_t size);
/* ptr in the reservation (a small block) or not (a large one) */
bool hl__manual_free_small(hl_heap *h, void *ptr); /* false: refused (not a live block) */
void hl__manual_free_large(hl_heap *h, void *ptr);
void *hl__manual_realloc(hl_heap *h, void *ptr, size_t old_size, size_t new_size);
/* ptr outside the reservation: h's large block resized (one lock), or
 * *foreign set and NULL when it is not h's (the preload library's realloc). */
void *hl__manual_realloc_outside(hl_heap *h, void *ptr, size_t new_size, bool *foreign);
/* A large block of old bytes resized to new_size (past small_max): it stays
 * as it is when it shrinks by less than half (or grows within what it has);
 * otherwise it gets hl__manual_large_want's size -- a quarter more than old
 * when it grows by less, within the system allocator's mapping threshold
 * and heap_limit_bytes -- which the resize (or the preload library's move
 * under verify) may fall back from to new_size.  Lock held. */
static inline bool hl__large_stays(uint64_t old, size_t new_size) {
  return new_size <= old && new_size >= old / 2;
}
size_t hl__manual_large_want(hl_heap *h, uint64_t old, size_t new_size);
size_t hl__manual_usable_size(hl_heap *h, const void *ptr);
/* The live large block ptr lies in (its system block: the record, the
 * lead, the bytes), or NULL: a walk of the list.  Lock held. */
const hl_large *hl__manual_inside_large(const hl_heap *h, const void *ptr);
/* verify: ptr is a block freed and still in the quarantine.  Lock held. */
bool hl__manual_quarantined(const hl_heap *h, const void *ptr);
/* verify: a large block of h freed (lock held): unlinked and into the
 * quarantine; without verify unlinked, and its system block returned for
 * hl__large_sys_free after the lock (NULL under verify).  *damaged: a block
 * that left the quarantine was found damaged (the heap's error says so). */
void *hl__manual_large_freed(hl_heap *h, hl_large *l, bool *damaged);
/* verify: every block in the quarantine still holds its seal; HL_ECHECK and
 * the first damaged one in msg.  Lock held. */
int hl__manual_quarantine_check(hl_heap *h, char *msg, size_t len);
bool hl__manual_free_sized_ok(hl_heap *h, void *ptr, size_t size);
bool hl__manual_free_aligned_sized_ok(hl_heap *h, void *ptr, size_t align, size_t size);
void hl__manual_thread_flush(hl_heap *h);
/* This thread's calls to every manual heap bypass its caches (on) or use
 * them again (off): the preloaded library's report at exit. */
void hl__manual_caches_bypassed(bool on);
void hl__manual_destroy(hl_heap *h);
void hl__manual_stats(hl_heap *h, hl_stats *st);
/* fork(): the thread caches' global lock, taken before every heap's. */
void hl__manual_fork_prepare(void);
void hl__manual_fork_done(void);

#endif
