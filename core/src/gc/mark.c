/*
 * mark.c -- precise marking through reference slots: the mark stack and its
 * drain (headers prefetched through a small FIFO), validating every slot
 * value against the allocation bits or the large set before following it,
 * the overflow rescan that never loses an object, the generational mode's
 * dirty-page scan and tenuring (with its remembered set), and the verify
 * check that no marked object refers to an unmarked one.
 *
 * What a cycle marks and when is gc/cycle.c; this file is how.  Everything
 * here runs under the heap lock, inside a cycle; with mark_threads > 1 the
 * helper threads of gc/markers.c trace beside the thread running it (the
 * parallel part is drain_par and what it calls, below).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../internal.h"

void *hl__resolve(hl_heap *h, const void *addr, bool interior) {
  if ((const uint8_t *)addr >= h->base && (const uint8_t *)addr < h->base + h->reserved)
    return hl__small_resolve(h, addr, interior);
  /* a large object resolves from its start only, interior or not */
  if (hl__large_contains(h, addr)) return (void *)addr;
  return NULL;
}

/* ---- markers ----
 * A marker is one thread's part of a mark: its stack of objects marked but
 * not yet traced, and what it marked.  A mark starts with one (the thread
 * running the cycle), which pushes what the roots refer to; with
 * mark_threads > 1 and enough to do, helper threads (gc/markers.c) join it.
 *
 * Parallel marking: each marker traces from its own stack.  A marker that
 * runs dry says so (the job's `hungry` count) and waits on the job's pool;
 * a marker that sees more markers hungry than packets in the pool (`pooled`)
 * moves the older half of its stack -- nearer the roots, so the larger
 * subgraphs -- into a packet in the pool.
 * A marker taking a packet another put there counts a steal.  The mark ends
 * when every marker is waiting and the pool is empty: no work is left
 * anywhere, since work only exists on stacks and in the pool.  A mark bit
 * is set with an atomic fetch-or, so of the markers that race for one
 * object exactly one wins it, counts its bytes and traces it (the test
 * parallel_mark_marks_each_object_once).  Nothing else the marker writes is
 * shared: page descriptors, the large set and the handles are only read
 * while a mark runs, and an object's header is written (HL_HDR_OLD) only by
 * the marker tracing it. */

#define PREFETCH_DEPTH 16
/* A packet is one OS page (4 KiB here): 16 bytes of links and counts and
 * 510 entries. */
#define PACKET_MAX 510
/* A mark wakes the helpers once it has marked this many objects on its own:
 * a small heap (most tests, the first cycles of everything) is marked before
 * a helper could have woken up. */
#define PARALLEL_AFTER_OBJECTS 4096

typedef struct packet {
  struct packet *next;
  unsigned from;     /* the marker that shared it */
  uint32_t n;
  void *items[PACKET_MAX];
} packet;
_Static_assert(sizeof(packet) == 4096, "a packet is one 4 KiB page");

struct markjob;
typedef struct marker {
  hl_heap *h;
  struct markjob *job; /* NULL while marking alone */
  void **stack;
  /* the entries are stack[bottom, top): pops take from the top, share from
   * the bottom (the oldest), so that sharing a packet costs the packet --
   * it moved the whole rest of the stack down, a mark of one object with
   * 2^24 slots took 15-24 s with two markers against 0.7 s with one (the
   * scale hunt, session 28).  Both go back to 0 when the stack empties, and
   * a push that finds the end with room at the bottom compacts. */
  uint64_t bottom, top, cap;
  uint64_t moved;      /* entries memmoved within the stack (compactions) */
  uint64_t bytes, objects;
  uint64_t budget;     /* marking alone: stop after this many objects */
  uint64_t steals;
  unsigned index;      /* 0: the thread running the cycle */
  bool overflow;       /* a push failed: rescan_marked finds what it lost */
  bool old_bit;        /* generational: set HL_HDR_OLD in headers traced */
  bool bounded;        /* verify: a header that does not fit its slot (an
                          overflow wrote it) is traced as every word of the
                          slot (hl__refs_bounded), never past it */
} marker;

typedef struct markjob {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  packet *pool;        /* shared work */
  unsigned participants, idle;
  bool done;
  _Atomic unsigned hungry; /* markers waiting for work (read without mu) */
  _Atomic unsigned pooled; /* packets in the pool (written under mu, read
                              without it) */
  hl_heap *h;
  bool old_bit, bounded;
  /* each helper's results, written before it returns */
  uint64_t bytes[HL_MARK_THREADS_MAX], objects[HL_MARK_THREADS_MAX];
  uint64_t steals[HL_MARK_THREADS_MAX];
  uint64_t moved[HL_MARK_THREADS_MAX];
  bool overflow[HL_MARK_THREADS_MAX];
} markjob;

/* What a parallel mark allocates -- the helpers' stacks and the packets --
 * never comes from malloc: a helper thread calling malloc gets a glibc arena
 * of its own (64 MiB of address space, its first pages resident: a
 * per-thread cost in the very footprint the experiments measure).  Nor does
 * a mark map anything: both live in one mapping per process, the mark
 * arena, reserved (untouched, MAP_NORESERVE) when the first heap with
 * mark_threads > 1 is made, and only touched by marks (unmapped with the
 * last heap while no helper was ever started: hl__mark_arena_release).  A
 * mapping made during a mark at vm.max_map_count is the one the kernel still
 * lets through (mmap refuses only once the count is past the limit), and then
 * the count is past it: brk refuses to grow the heap too, and the main
 * thread's next malloc that needs more memory fails -- E6's checksum after
 * a parallel mark at the limit, ENOMEM in 2 runs of 8, when a helper's stack
 * or a packet was mapped then (docs/experiments/e6.md).
 *
 * Each helper's stack is a fixed part of the arena (HELPER_STACK_WORDS;
 * pushing past it is an overflow, which the rescan recovers); the packets
 * are carved from the rest, at most ARENA_PACKETS, and kept from mark to
 * mark on the spare list.  One mark at a time has the helpers
 * (gc/markers.c), so the job's mutex guards the spare list and the carving. */
#define HELPER_STACK_WORDS ((uint64_t)1 << 22) /* 32 MiB of address space each */
#define ARENA_PACKETS 1024                     /* 4 MiB: 522,240 entries shared */
#define ARENA_STACKS_BYTES ((size_t)(HL_MARK_THREADS_MAX - 1) * HELPER_STACK_WORDS * sizeof(void *))
#define ARENA_BYTES (ARENA_STACKS_BYTES + (size_t)ARENA_PACKETS * sizeof(packet))

static uint8_t *arena;        /* NULL until reserved */
static pthread_mutex_t arena_mu = PTHREAD_MUTEX_INITIALIZER;
static packet *spare_packets; /* (the running job's mu) */
static uint32_t packets_carved;

static bool arena_declined; /* for lack of room, when a heap was made (arena_mu) */

bool hl__mark_arena_reserve(bool making_a_heap) {
  pthread_mutex_lock(&arena_mu);
  /* Under RLIMIT_AS / RLIMIT_DATA the arena's 228 MiB of address space is
   * taken only from plenty (a quarter of what is left): the program's own
   * allocations need the room more than a second marker does, and without
   * the arena marks run alone (docs/design.md, *Reservations*).  Decided as
   * a heap is made: a mark does not read /proc again to decline again (11
   * us a mark under a limit: the review, session 27) */
  if (!arena && making_a_heap) {
    const char *limited;
    uint64_t limit;
    arena_declined = hl__prim_os_address_room(&limited, &limit) / 4 < ARENA_BYTES;
  }
  if (!arena && arena_declined) {
    pthread_mutex_unlock(&arena_mu);
    return false;
  }
  if (!arena) {
    void *p = mmap(NULL, ARENA_BYTES, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) {
#ifdef MADV_NOHUGEPAGE
      /* (a stack's first touch must not fault a 2 MiB page in) */
      madvise(p, ARENA_BYTES, MADV_NOHUGEPAGE);
#endif
      /* scratch, its contents dead after each mark: not in core dumps
       * (written to once, the whole 228 MiB would be: zeros in a gcore) */
      hl__prim_os_advise(p, ARENA_BYTES, PRIM_DONTDUMP);
      __atomic_store_n(&arena, (uint8_t *)p, __ATOMIC_RELEASE);
    }
  }
  bool ok = arena != NULL;
  pthread_mutex_unlock(&arena_mu);
  return ok;
}

/* Nothing of a library outlives its last heap (registry.c): a program that
 * dlopened libheaplab, made and freed a heap with mark_threads > 1 and
 * dlclosed it kept the 228 MiB reservation, unreachable -- each such cycle
 * another (20 cycles, 4.5 GiB of address space).  Called with the registry's
 * write lock held and no heap in it: no mark runs (every heap that marks is
 * registered first, freed only once its cycles ended), and none can start
 * until a heap is registered again.  Kept once a helper was ever started:
 * the helpers pinned the code, and the pages they touched are the next
 * mark's too.  Never touched without helpers, it costs nothing to map again. */
void hl__mark_arena_release(void) {
  if (hl__markers_ever_started()) return;
  pthread_mutex_lock(&arena_mu);
  if (arena) {
    munmap(arena, ARENA_BYTES);
    __atomic_store_n(&arena, (uint8_t *)NULL, __ATOMIC_RELEASE);
    spare_packets = NULL;
    packets_carved = 0;
  }
  pthread_mutex_unlock(&arena_mu);
}

/* Helper index's stack (1 .. HL_MARK_THREADS_MAX - 1). */
static void **helper_stack(unsigned index) {
  return (void **)(arena + (size_t)(index - 1) * HELPER_STACK_WORDS * sizeof(void *));
}

/* A packet for share: a spare one, else the next of the arena; NULL when
 * all are in use (the marker keeps its work).  Job's mu held. */
static packet *packet_take(void) {
  packet *pk = spare_packets;
  if (pk) spare_packets = pk->next;
  else if (packets_carved < ARENA_PACKETS)
    pk = (packet *)(arena + ARENA_STACKS_BYTES) + packets_carved++;
  return pk;
}

/* ---- the marking thread's stack ----
 * The thread running a cycle marks from its heap's own stack: a mapping of
 * MAIN_STACK_WORDS reserved (MAP_NORESERVE, untouched) when the collected
 * heap is made, so that a mark never maps anything, with one marker or
 * several -- the helpers' stacks and packets are the mark arena's, above.
 * It was a malloc block grown by realloc as a mark needed it: 512 KiB at the
 * first push, above glibc's mmap threshold, so a heap's first mark at
 * vm.max_map_count mapped it (the count then past the limit, the program's
 * next malloc of any size that needed memory failed) and a later growth
 * failed and fell back to the rescan (tests/c/mark_at_the_map_limit_maps_
 * nothing.c: 0.9-1.2 s instead of 5-13 ms).  Touching the reservation costs what
 * the block did, the pages a mark's deepest stack reached; pushing past it
 * is an overflow, which rescan_marked recovers, as for a helper. */
#define MAIN_STACK_WORDS ((uint64_t)1 << 25) /* 256 MiB of address space */
#define MAIN_STACK_MIN_WORDS ((uint64_t)1 << 17)

int hl__mark_stack_reserve(hl_heap *h) {
  /* halved while refused (strict overcommit charges even MAP_NORESERVE);
   * under RLIMIT_AS / RLIMIT_DATA at most an eighth of the room left: the
   * step-down took the first size that fit -- all of it -- and the
   * program's own next allocation failed (an overflow costs a rescan) */
  const char *limited;
  uint64_t limit, room = hl__prim_os_address_room(&limited, &limit), words = MAIN_STACK_WORDS;
  while (limited && words > MAIN_STACK_MIN_WORDS && words * sizeof(void *) > room / 8) words /= 2;
  for (; words >= MAIN_STACK_MIN_WORDS; words /= 2) {
    void *p;
    if (hl__prim_os_reserve(words * sizeof(void *), 0, &p) != 0) continue;
    /* (a stack's first touch must not fault a 2 MiB page in; scratch, as
     * the arena's stacks: not in core dumps) */
    hl__prim_os_advise(p, words * sizeof(void *), PRIM_NOHUGEPAGE);
    hl__prim_os_advise(p, words * sizeof(void *), PRIM_DONTDUMP);
    h->mark_stack = p;
    h->mark_cap = words;
    return HL_OK;
  }
  return HL_ENOMEM;
}

void hl__mark_stack_release(hl_heap *h) {
  if (h->mark_stack) hl__prim_os_unreserve(h->mark_stack, h->mark_cap * sizeof(void *));
  h->mark_stack = NULL;
  h->mark_cap = 0;
}

/* Objects are pushed marked but unread: the header is first read by drain,
 * after a prefetch (tracing a heap bigger than the cache is a cache miss per
 * object, half the mark time when the header was read here).  A full stack
 * -- every marker's is a fixed reservation -- is an overflow: the object
 * stays marked, untraced, and rescan_marked finds it. */
static NOINLINE bool compact(marker *m);
static inline void push(marker *m, void *obj) {
  if (hl_unlikely(m->top == m->cap) && !compact(m)) {
    m->overflow = true;
    return;
  }
  m->stack[m->top++] = obj;
}

/* A full stack with room at its bottom (packets shared from there): its
 * entries moved down, once per stackful at most -- every entry moved was
 * pushed since the last compaction.  False when there is no room. */
static NOINLINE bool compact(marker *m) {
  if (!m->bottom) return false;
  uint64_t n = m->top - m->bottom;
  memmove(m->stack, m->stack + m->bottom, n * sizeof(void *));
  m->moved += n;
  m->bottom = 0;
  m->top = n;
  return true;
}

/* Set bit i of a mark bitmap; false when it was set already.  One marker
 * only: a parallel mark sets its bits in batches (mark_slot_batched, below). */
static inline bool set_mark(uint64_t *bm, uint32_t i) {
  uint64_t *w = &bm[i >> 6];
  uint64_t bit = (uint64_t)1 << (i & 63);
  if (*w & bit) return false;
  *w |= bit;
  return true;
}

static inline void mark_large_t(marker *m, void *obj, const bool par) {
  hl_large *l = hl__large_of(obj);
  if (!par) {
    if (l->mark) return;
    l->mark = 1;
  } else if (__atomic_load_n(&l->mark, __ATOMIC_RELAXED) ||
             __atomic_exchange_n(&l->mark, 1, __ATOMIC_RELAXED)) {
    return;
  }
  m->bytes += l->size;
  m->objects++;
  push(m, obj);
}

/* Mark what a slot or root word v refers to.  A word may hold anything a
 * client stored, so a small object is validated -- formatted page, below the
 * bump, allocation bit, and (precise) the exact start -- in the same page
 * lookup that marks it (hl__resolve's checks, without a second lookup). */
static inline __attribute__((always_inline)) void mark_value_t(marker *m, void *v,
                                                               bool interior) {
  if (!v) return;
  hl_heap *h = m->h;
  const uint8_t *a = v;
  if (hl__in_heap(h, a)) {
    uint32_t p = hl__page_of(h, a);
    const hl_page *d = &h->pages[p];
    if (!hl__formatted(d->state)) return;
    uint8_t *base = hl__page_addr(h, p);
    uint64_t off = (uint64_t)(a - base);
    uint32_t idx = hl__slot_index(h, off, d->cls);
    if (idx >= d->bump) return;
    uint32_t sz = h->cls_size[d->cls];
    uint64_t start = (uint64_t)idx * sz;
    if (!interior && start != off) return;
    if (!hl__bit(hl__allocs(h, p), idx)) return;
    if (!set_mark(hl__marks(h, p), idx)) return;
    m->bytes += sz;
    m->objects++;
    /* Pages of objects without slots (a fill's payloads) are marked without
     * a push: no header read, the miss per object the marker otherwise pays. */
    if (d->flags & PF_REFS) push(m, base + start);
    return;
  }
  if (a >= h->base && a < h->base + h->reserved) return; /* reserved, not carved */
  if (hl__large_contains(h, a)) mark_large_t(m, v, false);
}

/* ---- batched marks (parallel marking) ----
 * A parallel mark sets its bits with an atomic read-modify-write, and on
 * x86 each one costs about as much as the rest of marking a leaf object
 * (which is a page lookup and two bitmap reads; no header is read): with one
 * fetch-or per object, two markers together were barely faster than one
 * alone.  But the slots of one object mostly refer to neighbours -- a fill's
 * index node to the next 63 objects of its page, a tree node to the two made
 * after it -- whose bits share a bitmap word.  So tracing an object collects
 * the bits it would set word by word and sets each word's with one fetch-or;
 * the bits that were clear before it are the objects this marker won, and
 * it counts and pushes exactly those. */
typedef struct markbatch {
  uint64_t *w;    /* the bitmap word collected, NULL: none */
  uint64_t bits;
  uint32_t p;     /* its page */
  uint32_t word;  /* its index in the page's bitmap */
} markbatch;

static inline void batch_flush(marker *m, markbatch *b) {
  if (!b->w) return;
  uint64_t *w = b->w;
  b->w = NULL;
  uint64_t want = b->bits & ~__atomic_load_n(w, __ATOMIC_RELAXED);
  if (!want) return;
  uint64_t won = want & ~__atomic_fetch_or(w, want, __ATOMIC_RELAXED);
  if (!won) return;
  hl_heap *h = m->h;
  const hl_page *d = &h->pages[b->p];
  uint32_t sz = h->cls_size[d->cls];
  uint64_t n = 0;
  if (!(d->flags & PF_REFS)) {
    n = hl__popcount64(won);
  } else {
    /* (counted as pushed: a tree node wins one or two) */
    uint8_t *base = hl__page_addr(h, b->p) + (uint64_t)b->word * 64 * sz;
    do {
      uint32_t i = (uint32_t)__builtin_ctzll(won);
      won &= won - 1;
      n++;
      push(m, base + (uint64_t)i * sz);
    } while (won);
  }
  m->bytes += n * sz;
  m->objects += n;
}

/* mark_value_t for a slot of an object traced in a parallel mark: the same
 * checks, the bit collected in b. */
static inline __attribute__((always_inline)) void mark_slot_batched(marker *m, markbatch *b,
                                                                    void *v) {
  if (!v) return;
  hl_heap *h = m->h;
  const uint8_t *a = v;
  if (!hl__in_heap(h, a)) {
    if (a >= h->base && a < h->base + h->reserved) return; /* reserved, not carved */
    if (hl__large_contains(h, a)) mark_large_t(m, v, true);
    return;
  }
  uint32_t p = hl__page_of(h, a);
  const hl_page *d = &h->pages[p];
  if (!hl__formatted(d->state)) return;
  uint64_t off = (uint64_t)(a - hl__page_addr(h, p));
  uint32_t idx = hl__slot_index(h, off, d->cls);
  if (idx >= d->bump) return;
  if ((uint64_t)idx * h->cls_size[d->cls] != off) return;
  if (!hl__bit(hl__allocs(h, p), idx)) return;
  uint64_t *w = &hl__marks(h, p)[idx >> 6];
  if (w != b->w) {
    batch_flush(m, b);
    b->w = w;
    b->bits = 0;
    b->p = p;
    b->word = idx >> 6;
  }
  b->bits |= (uint64_t)1 << (idx & 63);
}

/* Trace one marked object: mark what its slots refer to.  Generational: its
 * header gets HL_HDR_OLD, so the write barrier looks at it from now on. */
static inline __attribute__((always_inline)) void trace_t(marker *m, void *obj, const bool par,
                                                         const bool bounded) {
  hl_objhdr *hd = obj;
  /* (verify, before the old bit is written into a header that may not be
   * one: checked first) */
  uint64_t refs = bounded ? hl__refs_bounded(m->h, obj) : hd->refs;
  if (m->old_bit && !(hd->size & HL_HDR_OLD)) hd->size |= HL_HDR_OLD;
  void **slots = hl__slots(obj);
  if (!par) {
    for (uint64_t i = 0; i < refs; i++) mark_value_t(m, slots[i], false);
    return;
  }
  markbatch b = {0};
  for (uint64_t i = 0; i < refs; i++) mark_slot_batched(m, &b, slots[i]);
  batch_flush(m, &b);
}

static void share(marker *m);

/* trace_t outside the drain (the rescan, the dirty and remembered pages),
 * alone: bounded under verify. */
static inline void trace_serial(marker *m, void *obj) {
  if (hl_unlikely(m->bounded)) trace_t(m, obj, false, true);
  else trace_t(m, obj, false, false);
}

/* Trace everything pushed.  Popped objects wait in a small FIFO after a
 * prefetch, so their headers arrive while earlier objects are scanned.
 * Marking alone, it stops early when the marker's budget is reached (the
 * FIFO goes back on the stack); in a job it shares work with hungry
 * markers. */
static inline __attribute__((always_inline)) void drain_t(marker *m, const bool par,
                                                         const bool bounded) {
  void *fifo[PREFETCH_DEPTH];
  unsigned head = 0, n = 0;
  for (;;) {
    while (n < PREFETCH_DEPTH && m->top > m->bottom) {
      void *o = m->stack[--m->top];
      if (m->top == m->bottom) m->top = m->bottom = 0;
      __builtin_prefetch(o);
      fifo[(head + n++) % PREFETCH_DEPTH] = o;
    }
    if (!n) return;
    void *obj = fifo[head];
    head = (head + 1) % PREFETCH_DEPTH;
    n--;
    trace_t(m, obj, par, bounded);
    if (par) {
      /* Share only while the hungry outnumber the packets waiting for them:
       * a woken marker takes a while to take its packet, and sharing on
       * every object until then moved one object a call (binary-trees at
       * depth 20: 1.88 M calls of two lock round trips and a signal, for
       * 1.91 M objects and 4,374 steals). */
      if (m->top - m->bottom >= 2 && atomic_load_explicit(&m->job->hungry, memory_order_relaxed) >
                             atomic_load_explicit(&m->job->pooled, memory_order_relaxed))
        share(m);
    } else if (hl_unlikely(m->objects >= m->budget)) {
      while (n) { /* (marked, not traced: back where they came from) */
        push(m, fifo[head]);
        head = (head + 1) % PREFETCH_DEPTH;
        n--;
      }
      return;
    }
  }
}

/* (verify's bounded drains are copies of their own: the others test nothing
 * more per object) */
static NOINLINE void drain_serial_b(marker *m) { drain_t(m, false, true); }
static NOINLINE void drain_par_b(marker *m) { drain_t(m, true, true); }
static NOINLINE void drain_serial_u(marker *m) { drain_t(m, false, false); }
static NOINLINE void drain_par_u(marker *m) { drain_t(m, true, false); }
static void drain_serial(marker *m) {
  if (hl_unlikely(m->bounded)) drain_serial_b(m);
  else drain_serial_u(m);
}
static void drain_par(marker *m) {
  if (hl_unlikely(m->bounded)) drain_par_b(m);
  else drain_par_u(m);
}
static void mark_value(marker *m, void *v, bool interior) { mark_value_t(m, v, interior); }

/* Move the older half of m's stack (at most a packet) to the pool: from its
 * bottom, nothing else moves. */
static NOINLINE void share(marker *m) {
  markjob *j = m->job;
  uint64_t k = (m->top - m->bottom) / 2;
  if (k > PACKET_MAX) k = PACKET_MAX;
  pthread_mutex_lock(&j->mu);
  packet *pk = packet_take();
  pthread_mutex_unlock(&j->mu);
  if (!pk) return;
  memcpy(pk->items, m->stack + m->bottom, k * sizeof(void *));
  m->bottom += k;
  pk->n = (uint32_t)k;
  pk->from = m->index;
  pthread_mutex_lock(&j->mu);
  pk->next = j->pool;
  j->pool = pk;
  atomic_fetch_add_explicit(&j->pooled, 1, memory_order_relaxed);
  pthread_cond_signal(&j->cv);
  pthread_mutex_unlock(&j->mu);
}

/* m ran dry: take a packet from the pool, or wait for one; false when the
 * mark is over (every marker waiting, the pool empty). */
static bool get_work(marker *m) {
  markjob *j = m->job;
  pthread_mutex_lock(&j->mu);
  for (;;) {
    packet *pk = j->pool;
    if (pk) {
      j->pool = pk->next;
      atomic_fetch_sub_explicit(&j->pooled, 1, memory_order_relaxed);
      pthread_mutex_unlock(&j->mu);
      if (m->cap < pk->n) {
        m->overflow = true; /* marked, not traced: the rescan finds them */
      } else {
        memcpy(m->stack, pk->items, pk->n * sizeof(void *));
        m->bottom = 0;
        m->top = pk->n;
      }
      if (pk->from != m->index) m->steals++;
      pthread_mutex_lock(&j->mu);
      pk->next = spare_packets;
      spare_packets = pk;
      pthread_mutex_unlock(&j->mu);
      return true;
    }
    if (j->done) break;
    j->idle++;
    if (j->idle == j->participants) {
      j->done = true;
      pthread_cond_broadcast(&j->cv);
      j->idle--;
      break;
    }
    atomic_fetch_add_explicit(&j->hungry, 1, memory_order_relaxed);
    prim_cond_wait(&j->cv, &j->mu);
    atomic_fetch_sub_explicit(&j->hungry, 1, memory_order_relaxed);
    j->idle--;
  }
  pthread_mutex_unlock(&j->mu);
  return false;
}

static void mark_loop(marker *m) {
  do drain_par(m);
  while (get_work(m));
}

/* A helper thread's part (gc/markers.c runs it). */
static void helper_mark(void *arg, unsigned index) {
  markjob *j = arg;
  pthread_mutex_lock(&j->mu);
  bool late = j->done;
  if (!late) j->participants++;
  pthread_mutex_unlock(&j->mu);
  if (late) return;
  marker m = {.h = j->h, .job = j, .stack = helper_stack(index), .cap = HELPER_STACK_WORDS,
              .budget = UINT64_MAX, .index = index, .old_bit = j->old_bit,
              .bounded = j->bounded};
  mark_loop(&m);
  j->bytes[index] = m.bytes;
  j->objects[index] = m.objects;
  j->steals[index] = m.steals;
  j->moved[index] = m.moved;
  j->overflow[index] = m.overflow;
}

/* Trace what m0's stack holds with the helpers, m0 taking part.  False
 * when none could join (another heap's mark has them): m0 then finishes
 * alone. */
static bool mark_parallel(marker *m0, unsigned threads) {
  hl_heap *h = m0->h;
  markjob j = {.participants = 1, .h = h, .old_bit = m0->old_bit, .bounded = m0->bounded};
  pthread_mutex_init(&j.mu, NULL);
  pthread_cond_init(&j.cv, NULL);
  m0->job = &j;
  /* (reserved when the heap was made; tried again if that failed) */
  unsigned n = hl__mark_arena_reserve(false) ? hl__markers_run(threads - 1, helper_mark, &j) : 0;
  if (n) {
    mark_loop(m0);
    hl__markers_wait();
  }
  m0->job = NULL;
  pthread_cond_destroy(&j.cv);
  pthread_mutex_destroy(&j.mu);
  if (!n) return false;
  int64_t ev[HL_MARK_THREADS_MAX] = {(int64_t)m0->bytes};
  uint64_t steals = m0->steals, used = 1;
  for (unsigned i = 1; i <= n; i++) {
    m0->bytes += j.bytes[i];
    m0->objects += j.objects[i];
    steals += j.steals[i];
    m0->moved += j.moved[i];
    m0->overflow |= j.overflow[i];
    h->tally.mark_helper_bytes += j.bytes[i];
    ev[i] = (int64_t)j.bytes[i];
    used += j.objects[i] != 0 || j.steals[i] != 0;
  }
  h->tally.mark_steals += steals;
  h->tally.mark_threads_used = used;
  hl__event(h, HL_EV_mark, 10, (int64_t)used, (int64_t)steals, ev[0], ev[1], ev[2], ev[3],
            ev[4], ev[5], ev[6], ev[7]);
  return true;
}

/* After a mark stack overflow: trace from every marked object again until
 * nothing new is found.  Slow, but never loses a live object. */
static void rescan_marked(marker *m) {
  hl_heap *h = m->h;
  while (m->overflow) {
    m->overflow = false;
    for (uint32_t p = 0; p < h->high_water; p++) {
      hl_page *d = &h->pages[p];
      if (!hl__formatted(d->state)) continue;
      uint32_t sz = h->cls_size[d->cls];
      for (uint32_t i = 0; i < d->bump; i++) {
        if (!hl__bit(hl__marks(h, p), i)) continue;
        trace_serial(m, hl__page_addr(h, p) + (uint64_t)i * sz);
        drain_serial(m);
      }
    }
    for (hl_large *l = h->large_head; l; l = l->next) {
      if (!l->mark) continue;
      trace_serial(m, l + 1);
      drain_serial(m);
    }
  }
}

/* The marked objects of formatted page p, in address order:
 *   marked_iter it = marked_begin(h, p);
 *   for (void *obj; (obj = marked_next(&it));) ...
 * (a word's marks are read when the iteration reaches it) */
typedef struct marked_iter {
  const uint64_t *mb, *ab;
  uint8_t *base;
  uint32_t sz, w, words;
  uint64_t bits;
} marked_iter;

static inline marked_iter marked_begin(const hl_heap *h, uint32_t p) {
  const hl_page *d = &h->pages[p];
  marked_iter it = {hl__marks(h, p), hl__allocs(h, p), hl__page_addr(h, p),
                    h->cls_size[d->cls], 0, (d->bump + 63) / 64, 0};
  if (it.words) it.bits = it.mb[0] & it.ab[0];
  return it;
}

static inline void *marked_next(marked_iter *it) {
  while (!it->bits) {
    if (++it->w >= it->words) return NULL;
    it->bits = it->mb[it->w] & it->ab[it->w];
  }
  uint32_t i = it->w * 64 + (uint32_t)__builtin_ctzll(it->bits);
  it->bits &= it->bits - 1;
  return it->base + (uint64_t)i * it->sz;
}

/* Trace the slots of every marked object of formatted page p (pushing what
 * they refer to; the caller drains). */
static void trace_marked_on(marker *m, uint32_t p) {
  marked_iter it = marked_begin(m->h, p);
  for (void *obj; (obj = marked_next(&it));) trace_serial(m, obj);
}

/* Generational, minor cycle: the old (marked) objects on pages the write
 * barrier dirtied may hold the only reference to a young object; trace them
 * again.  Their dirt is consumed: afterwards what they refer to is marked. */
static void mark_dirty(marker *m) {
  hl_heap *h = m->h;
  for (uint32_t p = 0; p < h->high_water; p++) {
    hl_page *d = &h->pages[p];
    if (!(d->flags & PF_DIRTY)) continue;
    d->flags &= (uint8_t)~PF_DIRTY;
    if (!hl__formatted(d->state) || !(d->flags & PF_REFS)) continue;
    h->tally.dirty_pages_scanned++;
    trace_marked_on(m, p);
  }
  for (hl_large *l = h->large_head; l; l = l->next) {
    if (!l->dirty) continue;
    l->dirty = 0;
    if (l->mark) trace_serial(m, l + 1);
  }
}

/* ---- tenuring (both modes of a collected heap) ----
 * A full mark clears the marks of every page and traces the whole live set
 * again -- binary-trees' long-lived tree, 2 M objects, 25 times.  A page that
 * is at least 7/8 live after two full marks in a row is tenured: later full
 * marks keep its marks (its objects stay live) and do not trace it, until a
 * whole mark (every tenure_full_marks-th full mark, an explicit collection,
 * pressure) untenures every page and marks everything.  A tenured page takes
 * no new objects.  Its objects' references to objects that are not tenured
 * are the full mark's remembered set: a page that may hold one (found when
 * it is tenured, or a store into it through the write barrier since) is
 * TN_REMEMBER, and a full mark traces its marked objects. */

/* Whether a marked object of page p refers to an object not tenured. */
static bool refers_untenured(hl_heap *h, uint32_t p) {
  if (!(h->pages[p].flags & PF_REFS)) return false;
  marked_iter it = marked_begin(h, p);
  for (void *obj; (obj = marked_next(&it));) {
    void **slots = hl__slots(obj);
    uint64_t refs = h->opt.verify ? hl__refs_bounded(h, obj) : ((hl_objhdr *)obj)->refs;
    for (uint64_t k = 0; k < refs; k++) {
      void *v = slots[k];
      /* a word on a tenured page refers to nothing untenured, whether or
       * not it resolves: most slots of a tenured page, decided without the
       * resolve (binary-trees at depth 20: 2.5% of its instructions were
       * this loop) */
      if (!v || (hl__in_heap(h, v) && (h->tenure[hl__page_of(h, v)] & TN_TENURED))) continue;
      /* any other word may: an untenured small object or a large one, and
       * a word that names no object now -- the free slot of one freed since
       * (a dead object brought back by a stale conservative word keeps it)
       * -- names one once an object is allocated there, and no mark would
       * trace this page to mark it (tests/c/tenured_page_with_a_stale_slot_
       * is_remembered.c; the verifier saw a marked object refer to an
       * unmarked one) */
      return true;
    }
  }
  return false;
}

static void mark_remembered(marker *m) {
  hl_heap *h = m->h;
  if (!h->tenured_pages) return;
  for (uint32_t p = 0; p < h->high_water; p++) {
    if ((h->tenure[p] & (TN_TENURED | TN_REMEMBER)) != (TN_TENURED | TN_REMEMBER)) continue;
    h->tally.remembered_pages_scanned++;
    trace_marked_on(m, p);
  }
}

/* Before a whole mark: every page is untenured (its marks are cleared with
 * the others'). */
void hl__untenure_all(hl_heap *h) {
  HL_ASSERT_LOCKED(h);
  if (h->tenured_pages)
    for (uint32_t p = 0; p < h->high_water; p++) {
      if (!(h->tenure[p] & TN_TENURED)) continue;
      h->tenure[p] &= (uint8_t)~(TN_TENURED | TN_REMEMBER);
      /* back on its avail list when it has room (tenuring took it off): left
       * off, its holes waited for a major sweep, after collect() too
       * (tests/c/collect_gives_tenured_holes_back.c).  (Only partial pages
       * are tenured, and nothing moves a tenured one; checked all the same.) */
      if (h->pages[p].state == PS_PARTIAL) hl__page_to_state(h, p, PS_PARTIAL, false);
    }
  h->tenured_pages = 0;
  h->tenured_bytes = 0;
}

/* After a full mark's sweep: tenure the pages dense now and at the last full
 * mark (tenure = false, the live set still growing: only note which pages are
 * dense now); drop TN_REMEMBER from tenured pages that no longer need it.  Two
 * passes: the pages are tenured first, then every tenured page that may
 * refer to an untenured object (newly tenured, or remembered) is scanned
 * once against the final set -- a page scanned as it was tenured counted
 * its references to pages tenured later in the same pass as untenured, was
 * remembered, and was scanned again after the next full mark. */
void hl__tenure_pages(hl_heap *h, bool tenure) {
  HL_ASSERT_LOCKED(h);
  for (uint32_t p = 0; p < h->high_water; p++) {
    hl_page *d = &h->pages[p];
    uint8_t *tn = &h->tenure[p];
    if (*tn & TN_TENURED) continue;
    uint32_t live = 0;
    if (d->state == PS_PARTIAL) {
      const uint64_t *mb = hl__marks(h, p), *ab = hl__allocs(h, p);
      for (uint32_t w = 0; w < (d->bump + 63) / 64; w++)
        live += hl__popcount64(mb[w] & ab[w]);
    }
    /* dense: 7/8 live, and swept (no dead object still allocated); only a
     * partial page: a page in flight (carved by a fill that dropped the
     * lock to fault it in, not formatted yet) read as "0 live of 0 slots",
     * and two full marks in that window tenured it -- its count stayed
     * when the format cleared its byte
     * (tests/c/tenuring_skips_pages_in_flight.c) */
    bool dense = d->state == PS_PARTIAL && live == d->used &&
                 (uint64_t)live * 8 >= (uint64_t)d->nslots * 7;
    if (!dense) {
      *tn &= (uint8_t)~TN_DENSE;
    } else if (!(*tn & TN_DENSE) || !tenure) {
      *tn |= TN_DENSE;
    } else {
      *tn |= TN_TENURED | TN_REMEMBER; /* (until the scan below says otherwise) */
      /* the barrier's test is the header's bit: a generational mark set it
       * on every object it traced; a heap that is not generational sets it
       * on its tenured objects (a page untenured later keeps the bits: a
       * store into one of them takes the slow path and finds no tenure) */
      if (!h->opt.generational) {
        marked_iter it = marked_begin(h, p);
        for (void *obj; (obj = marked_next(&it));) ((hl_objhdr *)obj)->size |= HL_HDR_OLD;
      }
      h->tenured_pages++;
      h->tenured_bytes += (uint64_t)live * h->cls_size[d->cls];
      if (d->flags & PF_AVAIL) hl__page_to_state(h, p, PS_PARTIAL, false); /* off the avail list */
    }
  }
  if (!h->tenured_pages) return;
  for (uint32_t p = 0; p < h->high_water; p++) {
    uint8_t *tn = &h->tenure[p];
    if ((*tn & (TN_TENURED | TN_REMEMBER)) == (TN_TENURED | TN_REMEMBER) && !refers_untenured(h, p))
      *tn &= (uint8_t)~TN_REMEMBER;
  }
}

/* The marker of the thread running the cycle: the heap's stack. */
static marker main_marker(hl_heap *h) {
  return (marker){.h = h, .stack = h->mark_stack, .cap = h->mark_cap, .budget = UINT64_MAX,
                  .old_bit = h->opt.generational != 0, .bounded = h->opt.verify != 0};
}

/* ---- root regions ----
 * A word of a conservative region keeps the object it points into
 * (conservative_interior) or the object it points at the start of.  Small
 * objects resolve through their page (mark_value_t); large objects are
 * blocks of the system allocator outside the reservation, found by their
 * start in the large set -- and for an interior word by a binary search in
 * the blocks sorted by address, made once per mark, only when a region
 * needs it.  A region's words are read with relaxed atomic loads: with
 * collector=background the mark runs on the collector's thread while the
 * client may be writing the region (a conservative scan of a stack that is
 * in use), and a word written during the mark is seen or not, never torn. */
/* The index: {start, size} pairs in ascending order of start, borrowed from
 * the top of the marking thread's stack reservation for the regions' scan.
 * Not malloc: a mark maps nothing (above), and an index of 10,000 blocks is
 * 160 KiB, past glibc's mmap threshold.  While it lives the marker's
 * capacity is that much smaller (a push past it overflows into the rescan);
 * it takes at most half of what is free. */
typedef struct large_block {
  uintptr_t start;
  uint64_t size;
} large_block;

typedef struct large_index {
  large_block *b;
  uint64_t n;
} large_index;

/* Heapsort by start: no memory of its own (qsort may malloc a buffer). */
static void sift_down(large_block *b, uint64_t i, uint64_t n) {
  for (;;) {
    uint64_t c = 2 * i + 1;
    if (c >= n) return;
    if (c + 1 < n && b[c + 1].start > b[c].start) c++;
    if (b[i].start >= b[c].start) return;
    large_block t = b[i];
    b[i] = b[c];
    b[c] = t;
    i = c;
  }
}

static void sort_blocks(large_block *b, uint64_t n) {
  for (uint64_t i = n / 2; i-- > 0;) sift_down(b, i, n);
  for (uint64_t end = n; end-- > 1;) {
    large_block t = b[0];
    b[0] = b[end];
    b[end] = t;
    sift_down(b, 0, end);
  }
}

/* false when m's stack has no room for it (the caller then walks the list). */
static bool large_index_build(marker *m, large_index *ix) {
  hl_heap *h = m->h;
  uint64_t n = 0;
  for (hl_large *l = h->large_head; l; l = l->next) n++;
  *ix = (large_index){0};
  if (!n) return true;
  uint64_t words = n * (sizeof(large_block) / sizeof(void *));
  if (words > (m->cap - m->top) / 2) return false; /* (bottom 0: before any drain) */
  m->cap -= words;
  ix->b = (large_block *)(m->stack + m->cap);
  ix->n = n;
  n = 0;
  for (hl_large *l = h->large_head; l; l = l->next)
    ix->b[n++] = (large_block){(uintptr_t)(l + 1), l->size};
  sort_blocks(ix->b, n);
  return true;
}

/* Give the index's words back to the stack. */
static void large_index_drop(marker *m, const large_index *ix) {
  m->cap += ix->n * (sizeof(large_block) / sizeof(void *));
}

/* The start of the large block holding address a, or NULL. */
static void *large_containing(hl_heap *h, const large_index *ix, bool indexed, uintptr_t a) {
  if (!indexed) { /* (the index could not be made: the list, slowly) */
    for (hl_large *l = h->large_head; l; l = l->next)
      if (a - (uintptr_t)(l + 1) < l->size) return l + 1;
    return NULL;
  }
  uint64_t lo = 0, hi = ix->n; /* the last start <= a */
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (ix->b[mid].start <= a) lo = mid + 1;
    else hi = mid;
  }
  if (!lo) return NULL;
  lo--;
  return a - ix->b[lo].start < ix->b[lo].size ? (void *)ix->b[lo].start : NULL;
}

static void mark_regions(marker *m) {
  hl_heap *h = m->h;
  large_index ix = {0};
  bool indexed = false, built = false;
  for (uint32_t r = 0; r < h->nregions; r++) {
    hl_root_region *rg = &h->regions[r];
    bool interior = rg->conservative && h->opt.conservative_interior;
    if (!interior) {
      for (uint64_t w = 0; w < rg->words; w++)
        mark_value(m, __atomic_load_n(&rg->base[w], __ATOMIC_RELAXED), false);
      continue;
    }
    if (!built && h->large_head) {
      indexed = large_index_build(m, &ix);
      built = true;
    }
    for (uint64_t w = 0; w < rg->words; w++) {
      void *v = __atomic_load_n(&rg->base[w], __ATOMIC_RELAXED);
      if (!v) continue;
      if (!hl__in_reservation(h, v) && h->large_head) {
        void *b = large_containing(h, &ix, indexed, (uintptr_t)v);
        if (b) mark_value(m, b, false);
        continue;
      }
      mark_value(m, v, true);
    }
  }
  large_index_drop(m, &ix);
}

uint64_t hl__mark(hl_heap *h, bool minor) {
  HL_ASSERT_LOCKED(h);
  marker m = main_marker(h);
  h->tally.mark_threads_used = 1;
  /* the roots push what they refer to; the tracing comes after */
  if (minor) mark_dirty(&m);
  else mark_remembered(&m);
  void *obj;
  HL_HANDLES_FOR_EACH(h, obj) mark_value(&m, obj, false);
  mark_regions(&m);
  if (h->mark_threads > 1) {
    m.budget = PARALLEL_AFTER_OBJECTS;
    drain_serial(&m);
    m.budget = UINT64_MAX;
    if (m.top > m.bottom) mark_parallel(&m, h->mark_threads);
  }
  drain_serial(&m);
  rescan_marked(&m);
  h->marked_bytes = m.bytes;
  h->marked_objects = m.objects;
  h->mark_moved = m.moved;
  return m.bytes;
}

/* A full mark starts from clear marks; the barrier's dirt is moot then.
 * Tenured pages keep theirs. */
static void clear_marks_of_list(hl_heap *h, hl_list *l) {
  for (uint32_t p = l->head; p != HL_NIL; p = h->pages[p].next) {
    if (h->tenure[p] & TN_TENURED) continue;
    memset(hl__marks(h, p), 0, (h->pages[p].nslots + 63) / 64 * sizeof(uint64_t));
    h->pages[p].flags &= (uint8_t)~PF_DIRTY;
  }
}

void hl__marks_clear(hl_heap *h) {
  HL_ASSERT_LOCKED(h);
  clear_marks_of_list(h, &h->retired);
  clear_marks_of_list(h, &h->partial_full);
  for (uint32_t c = 0; c < h->nclasses; c++) clear_marks_of_list(h, &h->partial_avail[c]);
  for (hl_large *l = h->large_head; l; l = l->next) l->mark = l->dirty = 0;
}

/* Verify, between mark and sweep: every reference held by a marked object
 * leads to a marked object.  In a minor cycle marked (old) objects are not
 * traced, so a reference from one to an unmarked object -- a store that
 * missed the write barrier -- is a live object this sweep would free.  A
 * slot value that is not an object start (a payload address, malloc's
 * memory: written past hl_obj_set's own check, which refuses them) is
 * reported too -- the marker skips it, and a handle made to it read garbage
 * as a header -- unless the heap has a root region: a dead object a stale
 * word of one brought back may hold a freed object's address, and the two
 * cannot be told apart.  Any region, precise too: any value is allowed in
 * any region, and a precise word that names a dead object not yet swept
 * keeps it as a conservative one does (a region removed and added again
 * with its old words; only conservative ones counted here before, and a
 * heap of precise regions had a verify failure every cycle:
 * tests/c/a_stale_precise_word_is_no_verify_failure.c). */
static int slots_marked(hl_heap *h, void *obj, bool stale_ok, char *msg, size_t len) {
  void **slots = hl__slots(obj);
  uint64_t refs = hl__refs_bounded(h, obj); /* (verify's: the header may be bad) */
  for (uint64_t k = 0; k < refs; k++) {
    void *v = hl__resolve(h, slots[k], false);
    if (!v) {
      if (slots[k] && !stale_ok) {
        h->verify_addr = (uint64_t)(uintptr_t)obj;
        snprintf(msg, len, "marked object %p slot %" PRIu64 " holds %p, not an object (a "
                 "payload address? hl_obj_payload and Ref.address are payloads)", obj, k,
                 slots[k]);
        return HL_ECHECK;
      }
      continue;
    }
    bool marked;
    if (hl__in_heap(h, v)) {
      uint32_t q = hl__page_of(h, v);
      uint64_t off = (uint64_t)((uint8_t *)v - hl__page_addr(h, q));
      marked = hl__bit(hl__marks(h, q), hl__slot_index(h, off, h->pages[q].cls));
    } else {
      marked = hl__large_of(v)->mark;
    }
    if (!marked) {
      h->verify_addr = (uint64_t)(uintptr_t)obj;
      snprintf(msg, len, "marked object %p slot %" PRIu64 " refers to unmarked object %p (a store "
               "without the write barrier?)", obj, k, v);
      return HL_ECHECK;
    }
  }
  return HL_OK;
}

int hl__check_marks_closed(hl_heap *h, char *msg, size_t len) {
  HL_ASSERT_LOCKED(h);
  bool stale_ok = h->nregions > 0;
  for (uint32_t p = 0; p < h->high_water; p++) {
    hl_page *d = &h->pages[p];
    if (!hl__formatted(d->state) || !(d->flags & PF_REFS)) continue;
    marked_iter it = marked_begin(h, p);
    for (void *obj; (obj = marked_next(&it));)
      if (slots_marked(h, obj, stale_ok, msg, len)) return HL_ECHECK;
  }
  for (hl_large *l = h->large_head; l; l = l->next)
    if (l->mark && slots_marked(h, l + 1, stale_ok, msg, len)) return HL_ECHECK;
  return HL_OK;
}

/* One full cycle.  Lock held; returns with it held. */

/* After a failed check: trace from every marked object before sweeping, so
 * that nothing live is freed. */
void hl__mark_repair(hl_heap *h) {
  HL_ASSERT_LOCKED(h);
  marker m = main_marker(h);
  m.overflow = true;
  rescan_marked(&m);
  h->marked_bytes += m.bytes;
  h->marked_objects += m.objects;
}
