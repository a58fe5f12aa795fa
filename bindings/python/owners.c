/*
 * owners.c -- C-level owners for the Python binding's objects; owners.h says
 * why.  Compiled into the CFFI extension (gen_cffi.py includes it).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

struct hlpy_anchor {
  pthread_mutex_t lock; /* guards obj against a release while it is freed */
  void *obj;            /* the heap or sampler; NULL once closed */
  int kind;             /* 0 heap, 1 sampler */
  _Atomic long refs;    /* the owner's, and one per root */
};

hlpy_anchor *hlpy_anchor_new(void *obj, int kind) {
  hlpy_anchor *a = calloc(1, sizeof *a);
  if (!a) return NULL;
  pthread_mutex_init(&a->lock, NULL);
  a->obj = obj;
  a->kind = kind;
  atomic_store(&a->refs, 1);
  return a;
}

hl_heap **hlpy_anchor_heap_slot(hlpy_anchor *a) { return (hl_heap **)&a->obj; }
hl_sampler **hlpy_anchor_sampler_slot(hlpy_anchor *a) { return (hl_sampler **)&a->obj; }

void hlpy_anchor_close(hlpy_anchor *a) {
  pthread_mutex_lock(&a->lock);
  void *obj = a->obj;
  a->obj = NULL;
  pthread_mutex_unlock(&a->lock);
  if (!obj) return;
  if (a->kind == 0) hl_heap_free(obj);
  else hl_sampler_stop(obj);
}

static void unref(hlpy_anchor *a) {
  if (atomic_fetch_sub(&a->refs, 1) != 1) return;
  pthread_mutex_destroy(&a->lock);
  free(a);
}

void hlpy_anchor_drop(hlpy_anchor *a) {
  if (!a) return;
  hlpy_anchor_close(a);
  unref(a);
}

void hlpy_root_init(hlpy_root *r, hlpy_anchor *a) {
  atomic_fetch_add(&a->refs, 1);
  r->anchor = a;
  r->ref = 0;
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
