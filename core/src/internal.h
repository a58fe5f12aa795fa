/*
 * internal.h -- the heap's shared state.  Not installed.
 *
 * Layers (DESIGN.md section 1), each a folder of core/src:
 *   prim/       OS calls, the retry helper, fault injection, probes
 *   pages/      the reservation, out-of-page descriptors and side tables, pools
 *   small/      BiBOP size classes, allocation inside a page, sweeping a page
 *   large/      the large ("legacy") path
 *   gc/         handles and root regions, mark, cycle policy, collector thread
 *   release/    trim, fallback and upgrade, restore on reuse
 *   manual/     explicit-free mode with per-thread caches
 *   telemetry/  options, stats, events, errors
 */
#ifndef HL_INTERNAL_H
#define HL_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "heaplab.h"
#include "prim/prim.h"

#define HL_NIL UINT32_MAX
#define HL_MAX_CLASSES 96
#define HL_GRANULE 16

#if defined(__GNUC__)
#define hl_likely(x) __builtin_expect(!!(x), 1)
#define hl_unlikely(x) __builtin_expect(!!(x), 0)
#define NOINLINE __attribute__((noinline))
#else
#define hl_likely(x) (x)
#define hl_unlikely(x) (x)
#define NOINLINE
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
  PF_DIRTY = 32,     /* generational: a slot of an object here was stored to
                        since the last cycle (the write barrier's card) */
  PF_OLD = 64        /* an object here was marked since the page's last full
                        mark or format: only then can a store need the barrier */
};

/* Tenuring (generational; gc.c), per page in h->tenure. */
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

/* The allocation word of a size class (small.c): the free slots of one word
 * of its owned page's allocation bitmap, reserved for the fast path.  While
 * reserved they count as used on the page and as allocated in the stats;
 * hl__aword_flush gives back the ones not taken. */
typedef struct hl_aword {
  uint64_t free;  /* reserved slots not taken yet: bit i is slot base + i * sz */
  uint64_t *ab;   /* that word of the page's allocation bitmap */
  uint8_t *base;  /* the word's slot 0 */
  uint32_t sz;    /* the class's slot size */
  uint32_t page;  /* the owned page */
  bool refs;      /* PF_REFS is set on the page */
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
  uint32_t size; /* payload bytes; HL_SIZE_LARGE for large objects */
} hl_objhdr;
#define HL_SIZE_LARGE UINT32_MAX

typedef struct hl_large {
  struct hl_large *prev, *next;
  uint64_t size;   /* bytes of the block after this record */
  uint32_t mark;
  uint32_t dirty;  /* generational: a slot was stored to since the last cycle */
} hl_large;          /* 32 bytes: keeps the block after it 16-byte aligned */

/* ---- handles ---- */
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

/* ---- thread cache (manual mode) ---- */
typedef struct hl_tcache hl_tcache;

/* ---- the heap ---- */
struct hl_heap {
  hl_options opt;
  uint64_t serial;          /* unique per heap in this process */
  uint16_t tag;             /* handle tag */

  pthread_mutex_t lock;     /* the heap lock: pools, objects, handles */
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
  uint64_t *bits;           /* per page: bitmap_words of mark bits, then
                               bitmap_words of allocation bits */
  uint32_t bitmap_words;
  size_t meta_bytes[3];     /* sizes of the side-table reservations */
  uint8_t *tenure;          /* per page: TN_* (generational tenuring, gc.c) */

  /* size classes */
  uint32_t nclasses;
  uint32_t cls_size[HL_MAX_CLASSES];
  uint64_t cls_recip[HL_MAX_CLASSES]; /* slot index = off * recip >> HL_RECIP_SHIFT */
  uint8_t *size_to_cls;     /* index (size + 15) / 16 */
  uint32_t small_max;

  /* pools */
  uint32_t owned[HL_MAX_CLASSES];
  hl_aword aword[HL_MAX_CLASSES]; /* per class: free slots reserved on its owned page */
  hl_list retired;
  hl_list partial_avail[HL_MAX_CLASSES];
  hl_list partial_full;
  hl_list free_pool;
  hl_list released_pool;
  hl_list reuse_failed;
  uint64_t state_count[PS_COUNT];
  uint64_t fallback_count;  /* released or reuse-failed pages on the fallback advice */

  /* large path */
  hl_large *large_head;
  void **large_set;         /* open-addressing set of large objects */
  uint64_t large_set_cap, large_set_count;

  /* roots */
  hl_handle *handles;
  uint32_t handles_cap, handles_free, handles_live;
  hl_root_region *regions;
  uint32_t nregions, regions_cap;

  /* gc state */
  void **mark_stack;
  uint64_t mark_top, mark_cap;
  bool mark_overflow;
  uint64_t trigger;          /* adaptive small-path trigger */
  uint64_t alloc_limit;      /* small-path bytes since the last cycle at which an
                                allocation leaves the fast path (0: a cycle is due) */
  uint64_t last_live_bytes;  /* small + large bytes the last cycle marked */
  int high_survival_streak;
  uint64_t cycles_since_major;
  bool pressure;
  /* generational mode (gc.c): marks survive minor cycles (sticky) */
  uint64_t last_full_live;   /* bytes the last full mark found live */
  uint64_t promoted_since_full; /* bytes minor cycles marked since then */
  uint64_t tenured_bytes;    /* bytes of the objects on tenured pages */
  uint64_t full_marks_since_whole;
  uint64_t cycles_completed;
  uint32_t pacing_dry_cycles; /* cycles in a row that freed nothing large */

  /* background collector */
  pthread_t collector;
  bool collector_running;
  bool collector_stop;           /* under req_lock */
  pthread_mutex_t req_lock;      /* the collector sleeps on this, not the heap lock */
  _Atomic bool cycle_requested;
  _Atomic bool collector_waiting;
  _Atomic uint64_t last_cycle_end_ns;

  /* the warm cache's demand window (release.c) */
  uint64_t taken_since_trim;      /* pages acquired since the last trim */
  uint64_t demand[16];            /* pages acquired in each of the last intervals */

  /* release scratch (sized release_per_sweep + upgrade_per_sweep) */
  uint32_t *scratch;
  uint64_t scratch_cap;

  /* manual mode */
  hl_tcache *tcaches;        /* caches of live threads (under lock) */
  uint64_t manual_trim_threshold;

  /* telemetry */
  hl_stats st;
  hl_event *events;
  uint64_t ev_cap, ev_head, ev_count;

  /* last error of this heap (any thread) */
  pthread_mutex_t errlock;
  char errmsg[256];
};

/* ---- error reporting (telemetry/errors.c) ---- */
int hl__fail(const hl_heap *h, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int hl__failv(const hl_heap *h, int code, const char *fmt, va_list ap);
void hl__fmt_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- locking ----
 * hl_enter marks a heap as held by this thread; per-call locking is skipped. */
extern _Thread_local hl_heap *hl__held;
extern _Thread_local uint32_t hl__held_depth;
static inline bool hl__lock(hl_heap *h) {
  if (hl__held == h) return false;
  pthread_mutex_lock(&h->lock);
  return true;
}
static inline void hl__unlock(hl_heap *h, bool locked) {
  if (locked) pthread_mutex_unlock(&h->lock);
}
/* May this call drop the heap lock around a syscall?  Not when the thread
 * holds the heap with hl_enter: its raw pointers would be exposed to a cycle. */
static inline bool hl__may_drop_lock(const hl_heap *h) { return hl__held != h; }

/* ---- telemetry ---- */
void hl__event(hl_heap *h, int kind, int nfields, ...);
void hl__stats_fill(hl_heap *h, hl_stats *out);

/* ---- pages/pages.c ---- */
int hl__pages_init(hl_heap *h, char *err, size_t errlen);
void hl__pages_destroy(hl_heap *h);
void hl__list_push_head(hl_heap *h, hl_list *l, uint32_t p);
void hl__list_push_tail(hl_heap *h, hl_list *l, uint32_t p);
void hl__list_remove(hl_heap *h, hl_list *l, uint32_t p);
uint32_t hl__list_pop_head(hl_heap *h, hl_list *l);
uint32_t hl__list_pop_tail(hl_heap *h, hl_list *l);
void hl__set_state(hl_heap *h, uint32_t p, int state);
hl_list *hl__list_of(hl_heap *h, uint32_t p);
void hl__page_to_state(hl_heap *h, uint32_t p, int state, bool at_head);
void hl__page_format(hl_heap *h, uint32_t p, uint32_t cls, bool fresh);
void hl__page_unformat(hl_heap *h, uint32_t p);
uint32_t hl__acquire_page(hl_heap *h, uint32_t cls);
int hl__check_locked(hl_heap *h, char *msg, size_t len);

static inline uint8_t *hl__page_addr(const hl_heap *h, uint32_t p) {
  return h->base + ((uint64_t)p << h->page_shift);
}
static inline bool hl__in_heap(const hl_heap *h, const void *ptr) {
  return (const uint8_t *)ptr >= h->base && (const uint8_t *)ptr < h->carved_end;
}
static inline uint32_t hl__page_of(const hl_heap *h, const void *ptr) {
  return (uint32_t)(((const uint8_t *)ptr - h->base) >> h->page_shift);
}
static inline uint64_t *hl__marks(const hl_heap *h, uint32_t p) {
  return h->bits + (uint64_t)p * 2 * h->bitmap_words;
}
static inline uint64_t *hl__allocs(const hl_heap *h, uint32_t p) {
  return h->bits + ((uint64_t)p * 2 + 1) * h->bitmap_words;
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

/* ---- small/small.c ---- */
void hl__classes_init(hl_heap *h);
static inline uint32_t hl__class_of(const hl_heap *h, uint64_t bytes) {
  return h->size_to_cls[(bytes + HL_GRANULE - 1) / HL_GRANULE];
}
/* Take one slot of class cls when its allocation word is empty: reserve the
 * owned page's next word, or take a new owned page; NULL when no page can be
 * had. */
void *hl__take_refill(hl_heap *h, uint32_t cls);

/* Take one slot of class cls (lock held); NULL when memory cannot be had.
 *
 * Free slots are found in the allocation bitmap, not in a list threaded
 * through them: a sweep frees by clearing bits and never writes into a dead
 * slot, and an allocation does not read the slot it takes -- with a list,
 * each reuse was two cache misses on memory a trigger's worth old (the
 * sweep's write of the link, the allocation's read of it).
 *
 * The common case is inline and touches only the class's allocation word:
 * the lowest reserved slot is taken by clearing its bit there and setting it
 * in the bitmap.  The page's counts and the stats (all but the trigger's
 * count, charged per object by the caller so that a cycle starts at the same
 * byte as without the word) were charged for the whole word when it was
 * reserved (hl__take_refill).  A write prefetch runs
 * HL_ALLOC_PREFETCH bytes ahead, where the allocations after this one go. */
#define HL_ALLOC_PREFETCH 2048
static inline void *hl__aword_take(hl_aword *a, uint64_t m /* a->free, not 0 */) {
  a->free = m & (m - 1);
  *a->ab |= m & -m;
  uint8_t *slot = a->base + (uint64_t)__builtin_ctzll(m) * a->sz;
  __builtin_prefetch(slot + HL_ALLOC_PREFETCH, 1, 3);
  return slot;
}
static inline void *hl__small_take(hl_heap *h, uint32_t cls) {
  hl_aword *a = &h->aword[cls];
  uint64_t m = a->free;
  if (hl_unlikely(!m)) return hl__take_refill(h, cls);
  return hl__aword_take(a, m);
}
/* Give the reserved slots not taken back to their pages and the stats:
 * before anything reads the page counts or the stats (a cycle, the stats,
 * the check).  Lock held. */
void hl__aword_flush(hl_heap *h);
/* Free slots page p still has, reserved ones included. */
uint32_t hl__page_free_slots(const hl_heap *h, uint32_t p);
/* Give a slot back to its page (manual mode); false when it is not a live
 * slot (double free, foreign pointer). */
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
/* Resolve an address to the start of a live small object, or NULL. */
void *hl__small_resolve(const hl_heap *h, const void *addr, bool interior);

/* ---- large/large.c ---- */
void *hl__large_alloc(hl_heap *h, uint64_t block_bytes);
void hl__large_free(hl_heap *h, hl_large *l);
void *hl__large_realloc(hl_heap *h, hl_large *l, uint64_t block_bytes);
bool hl__large_contains(const hl_heap *h, const void *block);
void hl__large_destroy_all(hl_heap *h);
static inline hl_large *hl__large_of(const void *block) {
  return (hl_large *)((uint8_t *)block - sizeof(hl_large));
}

/* ---- gc ---- */
void *hl__obj_alloc(hl_heap *h, uint64_t size, uint64_t refs, bool force_large);
int hl__check_alloc_args(hl_heap *h, uint64_t size, uint64_t refs);
static inline void **hl__slots(void *obj) {
  return (void **)((uint8_t *)obj + sizeof(hl_objhdr));
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

/* The write barrier: every store of a reference into a slot goes through
 * here.  Generational mode: when the object is old (marked), its page (or
 * large block) is marked dirty, and the next minor cycle traces the marked
 * objects on that page again, so an old object never hides a young one.
 * A store into a young object needs nothing: a cycle that marks it traces
 * it.  Lock held. */
void hl__store_old(hl_heap *h, void *obj);
static inline void hl__store(hl_heap *h, void *obj, uint64_t slot, void *value) {
  hl__slots(obj)[slot] = value;
  if (!h->opt.generational || !value) return;
  /* nothing marked on the page: obj is young (the common case, inline) */
  if (hl__in_heap(h, obj) && !(h->pages[hl__page_of(h, obj)].flags & PF_OLD)) return;
  hl__store_old(h, obj); /* gc.c: reads the mark bit, dirties the page */
}
/* The same for a caller without the heap (hl_obj_set); gc.c. */
void hl__store_any(void *obj, uint64_t slot, void *value);
int hl__registry_add(hl_heap *h);
void hl__registry_remove(hl_heap *h);
static inline uint64_t hl__obj_size(const void *obj) {
  const hl_objhdr *hd = (const hl_objhdr *)obj;
  if (hd->size == HL_SIZE_LARGE)
    return hl__large_of(obj)->size - sizeof(hl_objhdr) - (uint64_t)hd->refs * sizeof(void *);
  return hd->size;
}
static inline uint8_t *hl__obj_payload(void *obj) {
  return (uint8_t *)obj + sizeof(hl_objhdr) + ((hl_objhdr *)obj)->refs * sizeof(void *);
}
/* Resolve any address to a live object (small or large), or NULL. */
void *hl__resolve(hl_heap *h, const void *addr, bool interior);
int hl__cycle(hl_heap *h, int major, int reason);
void hl__maybe_collect(hl_heap *h);
/* hl__maybe_collect + hl__obj_alloc (not forced large) in one call. */
void hl__alloc_limit_update(hl_heap *h);
void *hl__obj_new(hl_heap *h, uint64_t size, uint64_t refs);
uint64_t hl__trigger_in_force(const hl_heap *h);
void hl__large_paced(hl_heap *h, uint64_t bytes);
int hl__collector_start(hl_heap *h);
void hl__collector_stop(hl_heap *h);
void hl__request_cycle(hl_heap *h);
void hl__safepoint(hl_heap *h);
/* handles */
int hl__handle_new(hl_heap *h, void *obj, hl_ref *out);
int hl__handle_get(hl_heap *h, hl_ref ref, void **obj);
int hl__handle_release(hl_heap *h, hl_ref ref);
void hl__handles_destroy(hl_heap *h);

enum { REASON_EXPLICIT = 0, REASON_SMALL = 1, REASON_LARGE = 2, REASON_PACING = 3 };
enum { MAJOR_NONE = 0, MAJOR_QUIET = 1, MAJOR_PRESSURE = 2, MAJOR_BACKSTOP = 3,
       MAJOR_FORCED = 4, MAJOR_FULL_MARK = 5 };

/* ---- release/release.c ---- */
/* Runs with the lock held and h->in_cycle set; drops the lock around syscalls
 * when allowed. */
void hl__trim_locked(hl_heap *h);
int hl__restore_page(hl_heap *h, uint32_t p);
void hl__trim_maybe(hl_heap *h);

/* ---- manual/manual.c ---- */
void hl__manual_destroy(hl_heap *h);
void hl__manual_stats(hl_heap *h, hl_stats *st);

#endif
