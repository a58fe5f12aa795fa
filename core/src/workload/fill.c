/*
 * fill.c -- the bulk phase (hl_fill, hl_fill_stride): ceil(total/size)
 * objects of `size` payload bytes, payload written, reachable from one root
 * through an index that lives on heaplab's own pages, so a dropped fill goes
 * back to the OS whole.  The root has one slot per page the objects landed
 * on (per object for large objects); each slot holds that page's index: a
 * small tree of small objects (up to 63 slots a node) whose leaves are the
 * objects.  Setting a root slot to empty drops that page's objects.
 *
 * Every object and index node is allocated through the allocation sequence
 * (gc/alloc.c), so a cycle may run at any allocation: whatever the fill has
 * made is rooted by then (the root's handle, the parking handle, the index).
 */
#include <string.h>

#include "../internal.h"

/* Replace the object of handle `ref` (a root) with a copy holding `cap`
 * slots.  Lock held. */
static void *regrow_root(hl_heap *h, hl_ref ref, uint64_t used, uint64_t cap) {
  void *n = hl__obj_alloc(h, 0, cap, HL_ALLOC_LARGE, "fill");
  if (!n) return NULL;
  void *old = NULL;
  hl__handle_get(h, ref, &old); /* (after the allocation: a cycle may have run) */
  memcpy(hl__slots(n), hl__slots(old), used * sizeof(void *));
  hl__handle_set(h, ref, n);
  return n;
}

/* The index of one page's objects: a small tree of small objects (fanout
 * up to 63 slots) so that everything a fill makes lives on heaplab's own
 * pages and goes back to the OS with them when dropped. */
typedef struct group_builder {
  void *node[8];
  uint64_t used[8], size[8];
  uint64_t span[8];   /* objects one slot covers at each level */
  int levels;
  uint64_t n, appended;
  uint64_t fanout;
} group_builder;

static void *new_node(hl_heap *h, group_builder *g, int level) {
  uint64_t remaining = g->n - g->appended;
  uint64_t slots = (remaining + g->span[level] - 1) / g->span[level];
  if (slots > g->fanout) slots = g->fanout;
  void *node = hl__obj_alloc(h, 0, slots, g->fanout > 63 ? HL_ALLOC_LARGE : 0, "fill");
  if (!node) return NULL;
  g->node[level] = node;
  g->used[level] = 0;
  g->size[level] = slots;
  return node;
}

/* Start the group for n objects; its root is stored in slot `slot` of
 * `parent` at once. */
static int group_start(hl_heap *h, group_builder *g, uint64_t n, void *parent, uint64_t slot) {
  memset(g->node, 0, sizeof g->node);
  memset(g->used, 0, sizeof g->used); /* (the fill's fast append reads them) */
  memset(g->size, 0, sizeof g->size);
  g->n = n;
  g->appended = 0;
  g->levels = 1;
  uint64_t cap = g->fanout;
  while (cap < n && g->levels < 8) {
    cap *= g->fanout;
    g->levels++;
  }
  uint64_t span = 1;
  for (int l = g->levels - 1; l >= 0; l--) {
    g->span[l] = span;
    span *= g->fanout;
  }
  if (!new_node(h, g, 0)) return HL_ENOMEM;
  hl__store(h, parent, slot, g->node[0]);
  return HL_OK;
}

/* Append obj (parked in a root by the caller while nodes are made). */
static int group_append(hl_heap *h, group_builder *g, void *obj) {
  int l = g->levels - 1;
  while (l > 0 && (!g->node[l] || g->used[l] == g->size[l])) l--;
  for (; l < g->levels - 1; l++) {
    /* room at level l: hang a new child below it */
    void *child = new_node(h, g, l + 1);
    if (!child) return HL_ENOMEM;
    hl__store(h, g->node[l], g->used[l]++, child);
  }
  hl__store(h, g->node[l], g->used[l]++, obj);
  g->appended++;
  return HL_OK;
}

int hl__fill(hl_heap *h, uint64_t total, uint64_t size, uint64_t refs, uint64_t stride,
             hl_ref *out) {
  HL_ASSERT_LOCKED(h);
  uint64_t each = size ? size : 1;
  uint64_t count = (total + each - 1) / each;
  int rc = HL_OK;
  bool large = hl__obj_bytes(size, refs) > h->small_max;
  uint64_t cap = 64, used = 0;
  hl_ref ref = 0, park = 0;
  bool pinned = false;
  group_builder g;
  memset(&g, 0, sizeof g);
  hl_prefault *pf = NULL;
  g.fanout = (h->small_max - sizeof(hl_objhdr)) / sizeof(void *);
  if (g.fanout > 63) g.fanout = 63;
  if (g.fanout < 8) g.fanout = 1024; /* tiny small_max: index nodes go large */
  void *root = hl__obj_alloc(h, 0, cap, HL_ALLOC_LARGE, "fill");
  if (!root || (rc = hl__handle_new(h, root, &ref)) || (rc = hl__handle_new(h, root, &park))) {
    rc = rc ? rc : HL_ENOMEM;
    goto out;
  }
  uint32_t group_page = HL_NIL;
  /* small objects fill every page they take: fault each in with one call */
  h->bulk = !large;
  /* thp_prefault: fresh chunks faulted in ahead of the fill on another CPU
   * (only when every object is kept: no page of it is reused meanwhile) */
  if (!large && stride == 1) pf = hl__prefault_start(h, count, hl__obj_bytes(size, refs));
  /* the index nodes being filled and the object being appended are raw
   * pointers across allocations: no cycle moves anything meanwhile */
  h->nomove++;
  pinned = true;
  uint64_t mark = hl__call_mark();
  uint64_t phase = stride - 1; /* k % stride, counted: the divide took a tenth of
                                * hl__fill's samples (perf, 192 MiB fill) */
  for (uint64_t k = 0; k < count; k++) {
    /* every large object (its allocation may wait on pacing: one atomic
     * load beside it is nothing), every 4096th small one.  (A fill of large
     * objects looked every 4096 too: after Ctrl-C each paced wait ran its
     * whole pacing_max_wait_ms -- the review of session 30's pacing changes.) */
    if ((large || (k & 4095) == 4095) && hl__interrupted(mark)) {
      /* what was made is garbage: its handles go below */
      rc = hl__fail(h, HL_EINTR, "fill: interrupted after %llu of %llu object%s",
                    (unsigned long long)k, (unsigned long long)count, hl__s(count));
      goto out;
    }
    void *obj = hl__obj_alloc_fast(h, size, refs);
    if (!obj) obj = hl__obj_alloc(h, size, refs, 0, "fill");
    if (!obj) {
      rc = HL_ENOMEM;
      goto out;
    }
    memset(hl__obj_payload(obj), (int)((k * 131 + 17) & 0xff), size);
    if (++phase < stride) continue; /* garbage from the start (k % stride != 0) */
    phase = 0;
    uint32_t page = large ? HL_NIL - 1 : hl__page_of(h, obj);
    if (page == group_page && !large && g.appended < g.n) {
      int leaf = g.levels - 1;
      if (g.used[leaf] < g.size[leaf]) {
        /* room in the page's leaf node (nearly every object): nothing is
         * allocated, so the object needs no parking */
        hl__store(h, g.node[leaf], g.used[leaf]++, obj);
        g.appended++;
        continue;
      }
    }
    hl__handle_set(h, park, obj); /* rooted while index nodes are allocated */
    if (large || page != group_page || g.appended == g.n) {
      /* a new group: the objects of one page (or one large object) */
      uint64_t n = 1;
      if (!large) {
        n = 1 + hl__page_free_slots(h, page);
        if (n > count - k) n = count - k;
        n = (n + stride - 1) / stride; /* kept objects this page can still get */
      }
      hl__handle_get(h, ref, &root);
      if (used == cap) {
        root = regrow_root(h, ref, used, cap * 2);
        if (!root) {
          rc = hl__fail(h, HL_ENOMEM, "fill: cannot grow the index");
          goto out;
        }
        cap *= 2;
      }
      if ((rc = group_start(h, &g, n, root, used))) goto out;
      used++;
      group_page = page;
    }
    if ((rc = group_append(h, &g, obj))) goto out;
  }
  if (used != cap && !regrow_root(h, ref, used, used)) {
    rc = hl__fail(h, HL_ENOMEM, "fill: cannot allocate the index");
    goto out;
  }
  *out = ref;
  ref = 0;
out:
  hl__prefault_stop(h, pf);
  if (pinned) h->nomove--;
  h->bulk = false;
  if (park) hl__handle_release(h, park);
  if (ref) hl__handle_release(h, ref);
  return rc;
}

