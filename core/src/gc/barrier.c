/*
 * barrier.c -- the write barrier's out-of-line part (the inline part is
 * hl__store in internal.h), and the barrier for a caller that names no heap
 * (hl_obj_set), which finds the object's heap in the process-wide registry
 * (registry.c).
 */
#include "../internal.h"

/* obj's header says it may be old (HL_HDR_OLD: a generational mark traced
 * it, or a tenuring full mark tenured its page), or it is large.  In a
 * generational heap, when obj is old now (marked), its page or block is
 * dirtied; in either mode a tenured page is remembered (its objects are the
 * roots a full mark that skips tenured pages traces).  Lock held. */
void hl__store_old(hl_heap *h, void *obj) {
  if (!hl__barrier_on(h)) return; /* (a large object of another heap kind) */
  if (hl__in_heap(h, obj)) {
    uint32_t p = hl__page_of(h, obj);
    if (h->tenure[p] & TN_TENURED) h->tenure[p] |= TN_REMEMBER;
    if (!h->opt.generational) return;
    hl_page *d = &h->pages[p];
    uint64_t off = (uint64_t)((uint8_t *)obj - hl__page_addr(h, p));
    if (hl__bit(hl__marks(h, p), hl__slot_index(h, off, d->cls))) d->flags |= PF_DIRTY;
  } else if (h->opt.generational) {
    hl_large *l = hl__large_of(obj);
    if (l->mark) l->dirty = 1;
  }
}

/* hl_obj_set(obj, slot, value) names no heap, yet in generational mode the
 * store must dirty the object's page in its heap's side table (remember its
 * tenured page, in either mode).  The object is looked up only while some
 * heap with the barrier on exists -- for a large object, some generational
 * heap: large objects are never tenured -- otherwise this is a plain store.
 * An object in no registered reservation is a large object: its block
 * record has the dirty flag (harmless for a heap that is not generational). */
void hl__store_any(void *obj, uint64_t slot, void *value) {
  hl__slots(obj)[slot] = value;
  /* never traced by a generational mark nor tenured (large objects always
   * look old) */
  uint32_t size = ((hl_objhdr *)obj)->size;
  if (!value || !(size & HL_HDR_OLD)) return;
  if (!(size == HL_SIZE_LARGE ? hl__registry_generational() : hl__registry_barriers())) return;
  hl_heap *h = hl__registry_find_locked(obj);
  if (!h) hl__large_of(obj)->dirty = 1;
  else if (hl__barrier_on(h)) hl__store(h, obj, slot, value);
  hl__registry_unlock();
}
