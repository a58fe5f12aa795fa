/*
 * owners.c -- C-level owners for the Python binding's objects; owners.h says
 * why.  Compiled into the CFFI extension (gen_cffi.py includes it).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

struct hlpy_anchor {
  pthread_mutex_t lock; /* guards obj against a release while it is freed */
  void *obj;            /* the heap or sampler; NULL once closed */
  int kind;             /* 0 heap, 1 sampler */
  _Atomic long refs;    /* the owner's, and one per root */
  hlpy_anchor *prev, *next; /* every anchor, for the fork child (anchors) */
  uint64_t serial;      /* bumped each time the anchor is retired (spares) */
};

/* fork(): a thread that held an anchor's lock (a Ref released beside the
 * fork, its handle being dropped in hl_ref_release) does not exist in the
 * child, which then waited forever at its next release or close.  The child
 * makes every anchor's lock anew: what that thread was doing is lost with it
 * (at worst one handle is never released in the child), and the heap itself
 * is consistent -- the library's own fork handlers hold its locks across the
 * fork.  The list's lock is a leaf (nothing else is taken under it), held
 * across the fork so that the child inherits a whole list. */
static pthread_mutex_t anchors_lock = PTHREAD_MUTEX_INITIALIZER;
static hlpy_anchor *anchors;
static pthread_once_t anchors_once = PTHREAD_ONCE_INIT;

/* An anchor whose last reference went is not freed: it is kept as a spare
 * (type-stable memory) and its serial bumped.  cffi runs the owner's
 * destructor in the finalize phase of a garbage collection, in no order with
 * the other finalizers of the same garbage: a __del__ of an object that held
 * the heap could call it after its C heap was freed (a plain gc.collect():
 * 'this one is manual' from freed memory, then 'corrupted double-linked
 * list').  The Python owner reads its object through hlpy_anchor_obj with
 * the serial it got, so such a call finds NULL (HeapClosed) in memory that
 * is still an anchor.  The spares are as many as the most anchors that
 * lived at once. */
static hlpy_anchor *spares;

static void anchors_prepare(void) { pthread_mutex_lock(&anchors_lock); }
static void anchors_parent(void) { pthread_mutex_unlock(&anchors_lock); }
static void anchors_child(void) {
  for (hlpy_anchor *a = anchors; a; a = a->next) pthread_mutex_init(&a->lock, NULL);
  for (hlpy_anchor *a = spares; a; a = a->next) pthread_mutex_init(&a->lock, NULL);
  pthread_mutex_unlock(&anchors_lock);
}
static void anchors_init(void) { pthread_atfork(anchors_prepare, anchors_parent, anchors_child); }

hlpy_anchor *hlpy_anchor_new(void *obj, int kind) {
  pthread_once(&anchors_once, anchors_init);
  pthread_mutex_lock(&anchors_lock);
  hlpy_anchor *a = spares;
  if (a) {
    spares = a->next;
  } else if ((a = calloc(1, sizeof *a))) {
    pthread_mutex_init(&a->lock, NULL);
  } else {
    pthread_mutex_unlock(&anchors_lock);
    return NULL;
  }
  __atomic_store_n(&a->obj, obj, __ATOMIC_RELAXED);
  a->kind = kind;
  atomic_store(&a->refs, 1);
  a->prev = NULL;
  a->next = anchors;
  if (anchors) anchors->prev = a;
  anchors = a;
  pthread_mutex_unlock(&anchors_lock);
  return a;
}

uint64_t hlpy_anchor_serial(hlpy_anchor *a) { return __atomic_load_n(&a->serial, __ATOMIC_RELAXED); }

void *hlpy_anchor_obj(hlpy_anchor *a, uint64_t serial) {
  if (__atomic_load_n(&a->serial, __ATOMIC_ACQUIRE) != serial) return NULL;
  return __atomic_load_n(&a->obj, __ATOMIC_RELAXED);
}

hl_heap **hlpy_anchor_heap_slot(hlpy_anchor *a) { return (hl_heap **)&a->obj; }
hl_sampler **hlpy_anchor_sampler_slot(hlpy_anchor *a) { return (hl_sampler **)&a->obj; }

/* A heap is freed with the lock held: until hl_heap_free has returned, its
 * collector may still be reading a root region, so a region removed beside
 * it must wait before its words are freed (hlpy_region_remove). */
static void anchor_close(hlpy_anchor *a, const uint64_t *serial) {
  pthread_mutex_lock(&a->lock);
  void *obj = NULL;
  if (!serial || __atomic_load_n(&a->serial, __ATOMIC_ACQUIRE) == *serial) {
    obj = a->obj;
    __atomic_store_n(&a->obj, NULL, __ATOMIC_RELAXED);
    if (obj && a->kind == 0) hl_heap_free(obj);
  }
  pthread_mutex_unlock(&a->lock);
  if (obj && a->kind != 0) hl_sampler_stop(obj);
}

/* The owner's close(): only while the anchor is still the owner's.  A
 * close() of an owner whose destructor had run (a finalizer of the same
 * garbage) closed the heap or sampler of whoever had the anchor since: the
 * spares are reused last-in first-out, by the next Heap() or Sampler(). */
void hlpy_anchor_close(hlpy_anchor *a, uint64_t serial) { anchor_close(a, &serial); }

static void unref(hlpy_anchor *a) {
  if (atomic_fetch_sub(&a->refs, 1) != 1) return;
  pthread_mutex_lock(&anchors_lock);
  if (a->prev) a->prev->next = a->next;
  else anchors = a->next;
  if (a->next) a->next->prev = a->prev;
  __atomic_store_n(&a->obj, NULL, __ATOMIC_RELAXED);
  __atomic_store_n(&a->serial, a->serial + 1, __ATOMIC_RELEASE);
  a->prev = NULL;
  a->next = spares; /* (its lock stays made: a spare is reused as it is) */
  spares = a;
  pthread_mutex_unlock(&anchors_lock);
}

void hlpy_anchor_drop(hlpy_anchor *a) {
  if (!a) return;
  anchor_close(a, NULL);
  unref(a);
}

/* One more reference to a live anchor of that serial, or false.  A
 * reference taken on a spare (refs 0) retired it a second time when it went:
 * the list of live anchors then ran into the spares, a spare pointed at
 * itself, and every later heap and sampler got that one anchor -- a sampler
 * read as a heap (SIGSEGV), one heap's close() freeing another's.  So never
 * from 0, and a reference that finds another serial (the spare reused by a
 * new owner) is given back at once. */
static bool ref_if_live(hlpy_anchor *a, uint64_t serial) {
  long n = atomic_load(&a->refs);
  do {
    if (n <= 0) return false;
  } while (!atomic_compare_exchange_weak(&a->refs, &n, n + 1));
  if (__atomic_load_n(&a->serial, __ATOMIC_ACQUIRE) == serial) return true;
  unref(a);
  return false;
}

int hlpy_root_init(hlpy_root *r, hlpy_anchor *a, uint64_t serial) {
  r->anchor = NULL;
  r->ref = 0;
  if (!ref_if_live(a, serial)) return HL_ECLOSED;
  r->anchor = a;
  return 0;
}

void hlpy_root_release(hlpy_root *r) {
  hlpy_anchor *a = r->anchor;
  if (!a) return;
  pthread_mutex_lock(&a->lock);
  hl_ref ref = r->ref;
  r->ref = 0;
  if (ref && a->obj) hl_ref_release(a->obj, ref);
  pthread_mutex_unlock(&a->lock);
}

void hlpy_root_done(hlpy_root *r) {
  hlpy_anchor *a = r->anchor;
  if (!a) return;
  hlpy_root_release(r);
  r->anchor = NULL;
  unref(a);
}

int hlpy_region_open(hl_heap *h, hlpy_region *r, hlpy_anchor *a, uint64_t n) {
  r->anchor = NULL;
  r->words = NULL;
  r->n = 0;
  /* (a region larger than the heap's reservation refused before its words
   * are allocated, in the core's words: 2^33 asked calloc for 64 GiB) */
  pthread_mutex_lock(&a->lock);
  int fit = a->obj == h ? hl_roots_fit(h, n) : HL_ECLOSED;
  pthread_mutex_unlock(&a->lock);
  if (fit) return fit;
  if (n > SIZE_MAX / sizeof(void *)) return HL_ENOMEM;
  void **w = calloc((size_t)n, sizeof(void *));
  if (!w) return HL_ENOMEM;
  pthread_mutex_lock(&a->lock);
  int rc = a->obj == h ? hl_roots_add(h, w, n, 1) : HL_ECLOSED;
  if (rc == HL_OK) {
    atomic_fetch_add(&a->refs, 1);
    r->anchor = a;
    r->words = w;
    r->n = n;
  }
  pthread_mutex_unlock(&a->lock);
  if (rc != HL_OK) free(w);
  return rc;
}

/* The lock held and the region usable: HL_OK, or why not. */
static int region_usable(hlpy_region *r, uint64_t start, uint64_t count) {
  if (!r->anchor->obj) return HL_ECLOSED;
  if (!r->words) return HL_ESTALE;
  if (start > r->n || count > r->n - start) return HL_ERANGE;
  return HL_OK;
}

/* hl_roots_store: the addresses of Refs read and every word stored with the
 * heap held (heaplab.h says why); the anchor's lock keeps the region and
 * its heap from going away meanwhile. */
int hlpy_region_store(hlpy_region *r, uint64_t start, uint64_t *values, const uint64_t *refs,
                      uint64_t count, uint64_t *bad) {
  *bad = UINT64_MAX;
  if (!r->anchor) return HL_ESTALE;
  pthread_mutex_lock(&r->anchor->lock);
  int rc = region_usable(r, start, count);
  if (rc == HL_OK) rc = hl_roots_store(r->anchor->obj, &r->words[start], values, refs, count, bad);
  pthread_mutex_unlock(&r->anchor->lock);
  return rc;
}

int hlpy_region_load(hlpy_region *r, uint64_t start, uint64_t *out, uint64_t count) {
  if (!r->anchor) return HL_ESTALE;
  pthread_mutex_lock(&r->anchor->lock);
  int rc = region_usable(r, start, count);
  if (rc == HL_OK)
    for (uint64_t i = 0; i < count; i++)
      out[i] = (uint64_t)(uintptr_t)__atomic_load_n(&r->words[start + i], __ATOMIC_RELAXED);
  pthread_mutex_unlock(&r->anchor->lock);
  return rc;
}

int hlpy_region_scrub(hlpy_region *r) {
  if (!r->anchor) return HL_ESTALE;
  pthread_mutex_lock(&r->anchor->lock);
  int rc = region_usable(r, 0, 0);
  if (rc == HL_OK)
    for (uint64_t i = 0; i < r->n; i++) __atomic_store_n(&r->words[i], NULL, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&r->anchor->lock);
  return rc;
}

void hlpy_region_remove(hlpy_region *r) {
  hlpy_anchor *a = r->anchor;
  if (!a) return;
  pthread_mutex_lock(&a->lock);
  void **w = r->words;
  r->words = NULL;
  if (w && a->obj) hl_roots_remove(a->obj, w);
  pthread_mutex_unlock(&a->lock);
  free(w);
}

void hlpy_region_done(hlpy_region *r) {
  hlpy_anchor *a = r->anchor;
  if (!a) return;
  hlpy_region_remove(r);
  r->anchor = NULL;
  unref(a);
}
