/*
 * thin.c -- hl_thin: keep every Nth leaf of a graph (E10, sparse survivors).
 *
 * The leaves of the graph under a handle are the objects with no non-empty
 * slot, in depth-first slot order (a fill's objects, in the order the fill
 * made them: its index nodes are not leaves).  hl_thin makes a new root (on
 * the large path) whose slots hold leaves 0, N, 2N, ...; releasing the old
 * root afterwards leaves those as the only survivors, scattered over the
 * pages the graph filled -- the shape a burst leaves behind when one object
 * in N outlives it.
 *
 * Two walks of the same graph: one counts the leaves, then the new root is
 * allocated (a cycle may run there, and with compact on move objects: the
 * second walk starts from the handle again), and the second stores the kept
 * leaves into it.  The allocation may drop the heap lock (a background
 * collector's safepoint, pacing), and other threads may change the graph
 * meanwhile: the second walk never stores past the slots the first counted,
 * and when it found another number of leaves the whole is done again, up
 * to THIN_ATTEMPTS times -- then the root holds the leaves the last walk
 * found, as many as fit.  Slot values are followed only when they are live
 * objects, as the marker follows them.  Lock held.
 */
#include <stdlib.h>

#include "../internal.h"

enum { THIN_ATTEMPTS = 8 };

typedef struct frame {
  void *obj;
  uint32_t next; /* slot to look at next */
} frame;

/* A slot value the walk follows: a live object start, else NULL. */
static void *object_at(hl_heap *h, void *v) {
  if (!v) return NULL;
  return hl__resolve(h, v, false) == v ? v : NULL;
}

static bool is_leaf(hl_heap *h, void *obj) {
  void **slots = hl__slots(obj);
  uint32_t refs = ((hl_objhdr *)obj)->refs;
  for (uint32_t k = 0; k < refs; k++)
    if (object_at(h, slots[k])) return false;
  return true;
}

/* Objects seen by a walk: a bit per 16-byte granule of the carved pages
 * for small objects (1/128 of the heap: a set of pointers cost 16-32 bytes
 * an object, and what malloc kept of it stayed in the footprint after the
 * walk), a pointer set for large ones. */
typedef struct seen_set {
  uint64_t *bits;
  uint64_t granules;
  hl_ptrset large;
} seen_set;

/* 1 added, 0 already seen, -1 out of memory. */
static int seen_add(hl_heap *h, seen_set *s, void *obj) {
  if (!hl__in_heap(h, obj)) return hl__ptrset_add(&s->large, obj);
  uint64_t g = (uint64_t)((uint8_t *)obj - h->base) / HL_GRANULE;
  if (!s->bits) {
    s->granules = (uint64_t)h->high_water << h->page_shift >> 4;
    s->bits = hl__sys_calloc((s->granules + 63) / 64, sizeof(uint64_t));
    if (!s->bits) return -1;
  }
  uint64_t m = 1ULL << (g & 63);
  if (s->bits[g >> 6] & m) return 0;
  s->bits[g >> 6] |= m;
  return 1;
}

/* Walk the graph under root: count its leaves; with keep, store leaves 0,
 * every, 2*every ... into keep's slots (as many as it has).  HL_OK, HL_ENOMEM
 * or HL_EINTR.  (No allocation on heaplab's pages runs meanwhile: the carved
 * range is fixed.) */
static int walk(hl_heap *h, void *root, uint64_t every, void *keep, uint64_t *leaves) {
  uint64_t room = keep ? ((hl_objhdr *)keep)->refs : 0;
  seen_set seen = {0};
  frame *stack = NULL;
  uint64_t top = 0, cap = 0, n = 0, visited = 0, kept = 0;
  int rc = HL_OK;
  uint64_t mark = hl__call_mark();
  void *next = root;
  for (;;) {
    if (next) {
      int a = seen_add(h, &seen, next);
      if (a < 0) goto oom;
      if (a && (visited++ & 4095) == 4095 && hl__interrupted(mark)) {
        rc = hl__fail(h, HL_EINTR, "thin: interrupted after %llu objects",
                      (unsigned long long)visited);
        goto out;
      }
      /* every object's header, not only the root's (hl__handle_obj): an
       * overwritten one deeper in the graph says slots past its object,
       * and the walk read them (a crash) */
      if (a && hl_unlikely(!hl__hdr_fits(h, next))) {
        char msg[200];
        hl__hdr_describe(h, next, msg, sizeof msg);
        rc = hl__fail(h, HL_ECHECK, "thin: the graph reaches %s", msg);
        goto out;
      }
      if (a && is_leaf(h, next)) {
        if (n % every == 0 && kept < room) hl__store(h, keep, kept++, next);
        n++;
      } else if (a) {
        if (top == cap) {
          uint64_t nc = cap ? cap * 2 : 256;
          frame *g = hl__sys_realloc(stack, nc * sizeof *g);
          if (!g) goto oom;
          stack = g;
          cap = nc;
        }
        stack[top++] = (frame){next, 0};
      }
      next = NULL;
    }
    if (!top) break;
    frame *f = &stack[top - 1];
    if (f->next >= ((hl_objhdr *)f->obj)->refs) {
      top--;
      continue;
    }
    next = object_at(h, hl__slots(f->obj)[f->next++]);
  }
  *leaves = n;
  goto out;
oom:
  rc = hl__fail(h, HL_ENOMEM, "thin: out of memory");
out:
  hl__sys_free(stack);
  hl__sys_free(seen.bits);
  hl__ptrset_free(&seen.large);
  return rc;
}

int hl__thin(hl_heap *h, hl_ref ref, uint64_t every, hl_ref *out) {
  HL_ASSERT_LOCKED(h);
  void *root;
  int rc = hl__handle_obj(h, ref, &root);
  if (rc) return rc;
  uint64_t leaves = 0;
  if ((rc = walk(h, root, every, NULL, &leaves))) return rc;
  for (int attempt = 1;; attempt++) {
    uint64_t kept = (leaves + every - 1) / every;
    if (kept > HL_MAX_REFS)
      return hl__fail(h, HL_EINVAL, "thin: %llu leaves kept is more than an object's %llu slots",
                      (unsigned long long)kept, (unsigned long long)HL_MAX_REFS);
    void *keep = hl__obj_alloc(h, 0, kept, HL_ALLOC_LARGE, "thin");
    if (!keep) return HL_ENOMEM;
    hl_ref k = 0;
    if ((rc = hl__handle_new(h, keep, &k))) return rc;
    /* (a cycle may have moved the root; another thread released its handle) */
    if ((rc = hl__handle_obj(h, ref, &root))) {
      hl__handle_release(h, k);
      return rc;
    }
    uint64_t again = 0;
    if ((rc = walk(h, root, every, keep, &again))) {
      hl__handle_release(h, k);
      return rc;
    }
    if (again == leaves || attempt == THIN_ATTEMPTS) {
      *out = k;
      return HL_OK;
    }
    hl__handle_release(h, k); /* the graph changed while the lock was dropped */
    leaves = again;
  }
}
