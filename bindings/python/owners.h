/*
 * owners.h -- C-level owners for the Python binding's objects (owners.c).
 *
 * A Python finalizer (__del__) runs Python code, where a KeyboardInterrupt
 * can land -- and Python drops exceptions raised in __del__, so a Ctrl-C
 * that landed while a Ref was finalized was swallowed.  So the heap and the
 * roots are owned by C: cffi calls these destructors from its deallocation,
 * in C, and no Python code runs there.
 *
 *   hlpy_anchor  owns a heap or a sampler: freed by hlpy_anchor_close
 *                (close() once no call is in flight) or, if the Python
 *                object dies open, by its cffi destructor (hlpy_anchor_drop;
 *                in a garbage collection, possibly before a finalizer of the
 *                same garbage calls it: hlpy_anchor_obj then says so)
 *   hlpy_root    a handle of a heap, owned by a Ref: the handle is released
 *                when the Ref dies, unless the heap was closed first
 *   hlpy_region  a conservative root region of a heap, owned by a
 *                ConservativeRegion: C memory registered with hl_roots_add,
 *                unregistered and freed by remove() or when the Python
 *                object dies (only freed if the heap was closed first)
 *
 * A root is made empty before the call that makes its handle, and that call
 * writes the handle into it (hlpy_root_slot): no moment exists where the
 * handle is made but owned by nobody.
 */
typedef struct hlpy_anchor hlpy_anchor;

typedef struct hlpy_root {
  hlpy_anchor *anchor; /* NULL until hlpy_root_init */
  hl_ref ref;          /* 0: none */
} hlpy_root;

/* An anchor of a heap (kind 0) or a sampler (kind 1): one reference, the
 * owner's.  NULL when out of memory. */
hlpy_anchor *hlpy_anchor_new(void *obj, int kind);
/* Where hl_heap_new / hl_sampler_open write the object (an anchor made with
 * obj NULL): the object is owned from the moment it exists. */
hl_heap **hlpy_anchor_heap_slot(hlpy_anchor *a);
hl_sampler **hlpy_anchor_sampler_slot(hlpy_anchor *a);
/* The anchor's serial now: what hlpy_anchor_obj is given later. */
uint64_t hlpy_anchor_serial(hlpy_anchor *a);
/* The object, or NULL once closed -- also when the owner's destructor ran
 * (a garbage collection's finalize phase) and the anchor went to the
 * spares, reused or not: an anchor's memory is never freed (owners.c). */
void *hlpy_anchor_obj(hlpy_anchor *a, uint64_t serial);
/* Free the object now (idempotent) if the anchor still has that serial (the
 * owner's destructor has not run); later roots' releases do nothing. */
void hlpy_anchor_close(hlpy_anchor *a, uint64_t serial);
/* The owner's reference goes (its cffi destructor): close, drop. */
void hlpy_anchor_drop(hlpy_anchor *a);

/* Attach an empty root (from ffi.new) to its heap's anchor, the one of
 * that serial: 0, or HL_ECLOSED (the root stays empty) when the owner's
 * destructor ran -- a finalizer of the same garbage making a Ref -- and the
 * anchor is a spare, reused or not. */
int hlpy_root_init(hlpy_root *r, hlpy_anchor *a, uint64_t serial);
/* Release the root's handle if its heap is open, and forget it (a Ref's
 * release(), and its cffi destructor). */
void hlpy_root_release(hlpy_root *r);
/* The cffi destructor: release, then drop the anchor. */
void hlpy_root_done(hlpy_root *r);

typedef struct hlpy_region {
  hlpy_anchor *anchor; /* NULL until hlpy_region_open */
  void **words;        /* NULL once removed */
  uint64_t n;
} hlpy_region;

/* Make n zeroed words and register them with heap h (the anchor's) as a
 * conservative region.  HL_OK, HL_ENOMEM when the words cannot be had, or
 * hl_roots_add's code (hl_heap_error says why). */
int hlpy_region_open(hl_heap *h, hlpy_region *r, hlpy_anchor *a, uint64_t n);
/* Word access: HL_OK, HL_ECLOSED when the heap was closed, HL_ESTALE when
 * the region was removed, HL_ERANGE when [start, start + count) is not in
 * the region.  A store is hl_roots_store: word i is values[i], or the
 * address of handle refs[i]'s object when that is not 0, read with the heap
 * held; every word a relaxed atomic store (a background collector may be
 * reading the region); nothing stored when a handle fails -- its code, *bad
 * its index (UINT64_MAX when the failure was not a handle's). */
int hlpy_region_store(hlpy_region *r, uint64_t start, uint64_t *values, const uint64_t *refs,
                      uint64_t count, uint64_t *bad);
int hlpy_region_load(hlpy_region *r, uint64_t start, uint64_t *out, uint64_t count);
/* Zero every word. */
int hlpy_region_scrub(hlpy_region *r);
/* Unregister (if the heap is open) and free the words; idempotent. */
void hlpy_region_remove(hlpy_region *r);
/* The cffi destructor: remove, then drop the anchor. */
void hlpy_region_done(hlpy_region *r);
