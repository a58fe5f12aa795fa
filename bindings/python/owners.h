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
 *                object dies open, by the last reference to the anchor
 *   hlpy_root    a handle of a heap, owned by a Ref: the handle is released
 *                when the Ref dies, unless the heap was closed first
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
/* Free the object now (idempotent); later roots' releases do nothing. */
void hlpy_anchor_close(hlpy_anchor *a);
/* The owner's reference goes (its cffi destructor): close, drop. */
void hlpy_anchor_drop(hlpy_anchor *a);

/* Attach an empty root (from ffi.new) to its heap's anchor. */
void hlpy_root_init(hlpy_root *r, hlpy_anchor *a);
/* Release the root's handle if its heap is open, and forget it (a Ref's
 * release(), and its cffi destructor). */
void hlpy_root_release(hlpy_root *r);
/* The cffi destructor: release, then drop the anchor. */
void hlpy_root_done(hlpy_root *r);
