/*
 * heap.c -- the public API: creating and closing heaps, handles, bulk phases,
 * collections, stats, probes and fault injection.  Argument checking happens
 * here, once; the layers below trust their callers.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

_Thread_local hl_heap *hl__held;
_Thread_local uint32_t hl__held_depth;

static _Atomic uint64_t heap_serial;

#define CHECK_HEAP(h)                                                          \
  do {                                                                         \
    if (!(h)) return HL_EINVAL;                                                \
  } while (0)

/* ---- fault schedules from the environment ----
 * HEAPLAB_FAULT_<SITE>=mode[:N][:ERRNO], e.g. HEAPLAB_FAULT_RESTORE=always:EIO,
 * HEAPLAB_FAULT_RELEASE=first:2000:ENOMEM.  The errno defaults to ENOMEM. */
static int faults_from_env(hl_heap *h, char *err, size_t errlen) {
  for (int s = 0; s < HL_SITE_COUNT; s++) {
    char var[64] = "HEAPLAB_FAULT_";
    size_t n = strlen(var);
    for (const char *p = hl_fault_site_name(s); *p; p++) var[n++] = (char)toupper((unsigned char)*p);
    var[n] = 0;
    const char *v = getenv(var);
    if (!v || !*v) continue;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", v);
    char *save = NULL;
    char *mode_s = strtok_r(buf, ":", &save);
    char *a = strtok_r(NULL, ":", &save);
    char *b = strtok_r(NULL, ":", &save);
    int mode = hl_fault_mode_index(mode_s);
    int64_t arg = 0;
    int e = ENOMEM;
    if (mode < 0) {
      hl__fmt_err(err, errlen, "environment %s=%s: unknown mode '%s' (off, first, always, every, sticky)",
                  var, v, mode_s ? mode_s : "");
      return HL_EVALUE;
    }
    /* the optional number, then the optional errno, in either order */
    char *parts[2] = {a, b};
    for (int i = 0; i < 2; i++) {
      if (!parts[i]) continue;
      if (isdigit((unsigned char)parts[i][0])) {
        arg = strtoll(parts[i], NULL, 10);
      } else if ((e = hl_errno_index(parts[i])) < 0) {
        hl__fmt_err(err, errlen, "environment %s=%s: unknown errno '%s'", var, v, parts[i]);
        return HL_EVALUE;
      }
    }
    int rc = hl_inject(h, s, mode, arg, e);
    if (rc) {
      hl__fmt_err(err, errlen, "environment %s=%s: %s", var, v, h->errmsg);
      return rc;
    }
  }
  return HL_OK;
}

int hl_heap_new(const hl_options *opts, hl_heap **out, char *err, size_t errlen) {
  if (!out) {
    hl__fmt_err(err, errlen, "hl_heap_new: NULL output pointer");
    return HL_EINVAL;
  }
  *out = NULL;
  hl_options o;
  if (opts) {
    o = *opts;
  } else {
    hl_options_defaults(&o);
    int rc = hl_options_from_env(&o, err, errlen);
    if (rc) return rc;
  }
  int rc = hl_options_validate(&o, err, errlen);
  if (rc) return rc;
  hl_heap *h = calloc(1, sizeof *h);
  if (!h) {
    hl__fmt_err(err, errlen, "hl_heap_new: out of memory");
    return HL_ENOMEM;
  }
  h->opt = o;
  h->serial = atomic_fetch_add(&heap_serial, 1) + 1;
  h->tag = (uint16_t)(h->serial & 0xffff) ? (uint16_t)(h->serial & 0xffff) : 1;
  pthread_mutex_init(&h->lock, NULL);
  pthread_mutex_init(&h->errlock, NULL);
  pthread_mutex_init(&h->req_lock, NULL);
  pthread_cond_init(&h->cycle_done, NULL);
  pthread_cond_init(&h->collector_cv, NULL);
  h->handles_free = HL_NIL;
  prim_ctx_init(&h->prim, o.syscall_retry_max, o.syscall_retry_backoff_us);
  h->ev_cap = (uint64_t)o.events_capacity;
  h->events = calloc(h->ev_cap, sizeof(hl_event));
  if (!h->events) {
    hl__fmt_err(err, errlen, "hl_heap_new: out of memory for %" PRIu64 " events", h->ev_cap);
    rc = HL_ENOMEM;
    goto fail;
  }
  if ((rc = faults_from_env(h, err, errlen))) goto fail;
  hl__classes_init(h);
  if (!h->size_to_cls) {
    hl__fmt_err(err, errlen, "hl_heap_new: out of memory");
    rc = HL_ENOMEM;
    goto fail;
  }
  if ((rc = hl__pages_init(h, err, errlen))) goto fail;
  if (o.mode == HL_MODE_COLLECTED && (rc = hl__registry_add(h))) {
    hl__fmt_err(err, errlen, "hl_heap_new: out of memory");
    goto fail;
  }
  h->trigger = (uint64_t)o.gc_trigger_bytes;
  h->st.gc_trigger_bytes = h->trigger;
  hl__alloc_limit_update(h);
  h->manual_trim_threshold = (uint64_t)(o.warm_pages / 4 > 16 ? o.warm_pages / 4 : 16);
  if (o.mode == HL_MODE_COLLECTED && o.collector == HL_COLLECTOR_BACKGROUND &&
      (rc = hl__collector_start(h))) {
    hl__fmt_err(err, errlen, "hl_heap_new: cannot start the collector thread (%s)", strerror(rc));
    rc = HL_ESYS;
    goto fail;
  }
  *out = h;
  return HL_OK;
fail:
  hl__registry_remove(h);
  hl__pages_destroy(h);
  free(h->size_to_cls);
  free(h->events);
  pthread_mutex_destroy(&h->lock);
  pthread_mutex_destroy(&h->errlock);
  pthread_mutex_destroy(&h->req_lock);
  pthread_cond_destroy(&h->cycle_done);
  pthread_cond_destroy(&h->collector_cv);
  free(h);
  return rc;
}

void hl_heap_free(hl_heap *h) {
  if (!h) return;
  hl__collector_stop(h);
  if (hl__held == h) {
    hl__held = NULL;
    hl__held_depth = 0;
    pthread_mutex_unlock(&h->lock);
  }
  pthread_mutex_lock(&h->lock);
  while (h->in_cycle) pthread_cond_wait(&h->cycle_done, &h->lock);
  h->closing = true;
  pthread_mutex_unlock(&h->lock);
  hl__registry_remove(h);
  hl__manual_destroy(h);
  hl__large_destroy_all(h);
  hl__handles_destroy(h);
  hl__pages_destroy(h);
  prim_ctx_destroy(&h->prim);
  free(h->size_to_cls);
  free(h->events);
  free(h->mark_stack);
  free(h->scratch);
  pthread_mutex_destroy(&h->lock);
  pthread_mutex_destroy(&h->errlock);
  pthread_mutex_destroy(&h->req_lock);
  pthread_cond_destroy(&h->cycle_done);
  pthread_cond_destroy(&h->collector_cv);
  free(h);
}

int hl_heap_options(const hl_heap *h, hl_options *out) {
  CHECK_HEAP(h);
  if (!out) return hl__fail(h, HL_EINVAL, "hl_heap_options: NULL output");
  *out = h->opt;
  return HL_OK;
}

/* ---- handles ---- */

int hl_alloc(hl_heap *h, uint64_t size, uint64_t refs, hl_ref *out) {
  CHECK_HEAP(h);
  if (!out) return hl__fail(h, HL_EINVAL, "alloc: NULL output");
  *out = 0;
  int rc = hl__check_alloc_args(h, size, refs);
  if (rc) return rc;
  bool locked = hl__lock(h);
  uint64_t bytes = sizeof(hl_objhdr) + refs * sizeof(void *) + size;
  if (bytes > h->small_max) hl__large_paced(h, bytes);
  hl__maybe_collect(h);
  void *obj = hl__obj_alloc(h, size, refs, false);
  rc = obj ? hl__handle_new(h, obj, out) : HL_ENOMEM;
  hl__unlock(h, locked);
  return rc;
}

int hl_ref_release(hl_heap *h, hl_ref ref) {
  CHECK_HEAP(h);
  bool locked = hl__lock(h);
  int rc = hl__handle_release(h, ref);
  hl__unlock(h, locked);
  return rc;
}

int hl_ref_dup(hl_heap *h, hl_ref ref, hl_ref *out) {
  CHECK_HEAP(h);
  if (!out) return hl__fail(h, HL_EINVAL, "dup: NULL output");
  bool locked = hl__lock(h);
  void *obj;
  int rc = hl__handle_get(h, ref, &obj);
  if (!rc) rc = hl__handle_new(h, obj, out);
  hl__unlock(h, locked);
  return rc;
}

static void info_of(void *obj, hl_object_info *out) {
  hl_objhdr *hd = obj;
  out->refs = hd->refs;
  out->size = hl__obj_size(obj);
  out->address = (uint64_t)(uintptr_t)hl__obj_payload(obj);
  out->object = (uint64_t)(uintptr_t)obj;
  out->large = hd->size == HL_SIZE_LARGE;
  out->pad = 0;
}

int hl_ref_info(hl_heap *h, hl_ref ref, hl_object_info *out) {
  CHECK_HEAP(h);
  if (!out) return hl__fail(h, HL_EINVAL, "info: NULL output");
  bool locked = hl__lock(h);
  void *obj;
  int rc = hl__handle_get(h, ref, &obj);
  if (!rc) info_of(obj, out);
  hl__unlock(h, locked);
  return rc;
}

static int slot_check(hl_heap *h, void *obj, uint64_t slot, const char *what) {
  uint32_t refs = ((hl_objhdr *)obj)->refs;
  if (slot >= refs)
    return hl__fail(h, HL_ERANGE, "%s: slot %" PRIu64 " out of range for an object with %" PRIu32
                    " slots", what, slot, refs);
  return HL_OK;
}

int hl_ref_get(hl_heap *h, hl_ref ref, uint64_t slot, hl_ref *out) {
  CHECK_HEAP(h);
  if (!out) return hl__fail(h, HL_EINVAL, "get: NULL output");
  *out = 0;
  bool locked = hl__lock(h);
  void *obj;
  int rc = hl__handle_get(h, ref, &obj);
  if (!rc) rc = slot_check(h, obj, slot, "get");
  if (!rc) {
    void *v = hl__slots(obj)[slot];
    if (v) rc = hl__handle_new(h, v, out);
  }
  hl__unlock(h, locked);
  return rc;
}

int hl_ref_set(hl_heap *h, hl_ref ref, uint64_t slot, hl_ref value) {
  CHECK_HEAP(h);
  bool locked = hl__lock(h);
  void *obj, *v = NULL;
  int rc = hl__handle_get(h, ref, &obj);
  if (!rc) rc = slot_check(h, obj, slot, "set");
  if (!rc && value) rc = hl__handle_get(h, value, &v);
  if (!rc) hl__store(h, obj, slot, v);
  hl__unlock(h, locked);
  return rc;
}

static int payload_check(hl_heap *h, void *obj, uint64_t off, uint64_t len, const char *what) {
  uint64_t size = hl__obj_size(obj);
  if (off > size || len > size - off)
    return hl__fail(h, HL_ERANGE, "%s: bytes [%" PRIu64 ", %" PRIu64 ") outside a %" PRIu64
                    "-byte payload", what, off, off + len, size);
  return HL_OK;
}

int hl_ref_write(hl_heap *h, hl_ref ref, uint64_t off, const void *src, uint64_t len) {
  CHECK_HEAP(h);
  if (!src && len) return hl__fail(h, HL_EINVAL, "write: NULL source");
  bool locked = hl__lock(h);
  void *obj;
  int rc = hl__handle_get(h, ref, &obj);
  if (!rc) rc = payload_check(h, obj, off, len, "write");
  if (!rc && len) memcpy(hl__obj_payload(obj) + off, src, len);
  hl__unlock(h, locked);
  return rc;
}

int hl_ref_read(hl_heap *h, hl_ref ref, uint64_t off, void *dst, uint64_t len) {
  CHECK_HEAP(h);
  if (!dst && len) return hl__fail(h, HL_EINVAL, "read: NULL destination");
  bool locked = hl__lock(h);
  void *obj;
  int rc = hl__handle_get(h, ref, &obj);
  if (!rc) rc = payload_check(h, obj, off, len, "read");
  if (!rc && len) memcpy(dst, hl__obj_payload(obj) + off, len);
  hl__unlock(h, locked);
  return rc;
}

/* ---- bulk fill ---- */

/* Replace the object of handle `ref` (a root) with a copy holding `cap`
 * slots.  Lock held. */
static void *regrow_root(hl_heap *h, hl_ref ref, void *old, uint64_t used, uint64_t cap) {
  void *n = hl__obj_alloc(h, 0, cap, true);
  if (!n) return NULL;
  memcpy(hl__slots(n), hl__slots(old), used * sizeof(void *));
  uint32_t i = (uint32_t)(ref & 0xffffffffu) - 1;
  h->handles[i].obj = n;
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
  void *node = hl__obj_alloc(h, 0, slots, g->fanout > 63);
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

int hl_fill(hl_heap *h, uint64_t total, uint64_t size, uint64_t refs, hl_ref *out) {
  return hl_fill_stride(h, total, size, refs, 1, out);
}

int hl_fill_stride(hl_heap *h, uint64_t total, uint64_t size, uint64_t refs, uint64_t stride,
                   hl_ref *out) {
  CHECK_HEAP(h);
  if (!out) return hl__fail(h, HL_EINVAL, "fill: NULL output");
  if (stride < 1 || stride > 1000000)
    return hl__fail(h, HL_EINVAL, "fill: stride %" PRIu64 " out of range [1, 1000000]", stride);
  *out = 0;
  int rc = hl__check_alloc_args(h, size, refs);
  if (rc) return rc;
  if (total > HL_MAX_SIZE)
    return hl__fail(h, HL_EINVAL, "fill: total_bytes %" PRIu64 " exceeds the maximum %" PRIu64,
                    total, HL_MAX_SIZE);
  uint64_t each = size ? size : 1;
  uint64_t count = (total + each - 1) / each;
  if (count > ((uint64_t)1 << 31))
    return hl__fail(h, HL_EINVAL, "fill: %" PRIu64 " objects is more than 2^31", count);
  /* fill touches every byte: more than the machine has would end in the OOM
   * killer, not in an error the caller can handle */
  uint64_t machine = prim_os_memory_bytes();
  if (total > machine)
    return hl__fail(h, HL_EINVAL,
                    "fill: total_bytes %" PRIu64 " exceeds this machine's memory (%" PRIu64
                    " bytes of RAM and swap)", total, machine);
  bool locked = hl__lock(h);
  uint64_t bytes = sizeof(hl_objhdr) + refs * sizeof(void *) + size;
  bool large = bytes > h->small_max;
  uint64_t cap = 64, used = 0;
  hl_ref ref = 0, park = 0;
  group_builder g;
  g.fanout = (h->small_max - sizeof(hl_objhdr)) / sizeof(void *);
  if (g.fanout > 63) g.fanout = 63;
  if (g.fanout < 8) g.fanout = 1024; /* tiny small_max: index nodes go large */
  hl__maybe_collect(h);
  void *root = hl__obj_alloc(h, 0, cap, true);
  if (!root || (rc = hl__handle_new(h, root, &ref)) || (rc = hl__handle_new(h, root, &park))) {
    rc = rc ? rc : HL_ENOMEM;
    goto out;
  }
  uint32_t group_page = HL_NIL;
  uint32_t ri = (uint32_t)(ref & 0xffffffffu) - 1, pi = (uint32_t)(park & 0xffffffffu) - 1;
  /* small objects fill every page they take: fault each in with one call */
  h->bulk = !large;
  for (uint64_t k = 0; k < count; k++) {
    if (large) hl__large_paced(h, bytes);
    void *obj = hl__obj_new(h, size, refs);
    if (!obj) {
      rc = HL_ENOMEM;
      goto out;
    }
    memset(hl__obj_payload(obj), (int)((k * 131 + 17) & 0xff), size);
    if (k % stride) continue; /* garbage from the start */
    h->handles[pi].obj = obj; /* rooted while index nodes are allocated */
    uint32_t page = large ? HL_NIL - 1 : hl__page_of(h, obj);
    if (large || page != group_page || g.appended == g.n) {
      /* a new group: the objects of one page (or one large object) */
      uint64_t n = 1;
      if (!large) {
        n = 1 + hl__page_free_slots(h, page);
        if (n > count - k) n = count - k;
        n = (n + stride - 1) / stride; /* kept objects this page can still get */
      }
      root = h->handles[ri].obj;
      if (used == cap) {
        root = regrow_root(h, ref, root, used, cap * 2);
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
  root = h->handles[ri].obj;
  if (used != cap && !regrow_root(h, ref, root, used, used)) {
    rc = hl__fail(h, HL_ENOMEM, "fill: cannot allocate the index");
    goto out;
  }
  *out = ref;
  ref = 0;
out:
  h->bulk = false;
  if (park) hl__handle_release(h, park);
  if (ref) hl__handle_release(h, ref);
  hl__unlock(h, locked);
  return rc;
}

/* ---- checksum over everything reachable ---- */

typedef struct ptrset {
  void **slots;
  uint64_t cap, count;
} ptrset;

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

static int ptrset_add(ptrset *s, void *p) { /* 1 added, 0 present, -1 oom */
  if ((s->count + 1) * 2 > s->cap) {
    uint64_t cap = s->cap ? s->cap * 2 : 4096;
    void **n = calloc(cap, sizeof(void *));
    if (!n) return -1;
    for (uint64_t i = 0; i < s->cap; i++) {
      if (!s->slots[i]) continue;
      uint64_t j = mix((uintptr_t)s->slots[i]) & (cap - 1);
      while (n[j]) j = (j + 1) & (cap - 1);
      n[j] = s->slots[i];
    }
    free(s->slots);
    s->slots = n;
    s->cap = cap;
  }
  uint64_t j = mix((uintptr_t)p) & (s->cap - 1);
  while (s->slots[j]) {
    if (s->slots[j] == p) return 0;
    j = (j + 1) & (s->cap - 1);
  }
  s->slots[j] = p;
  s->count++;
  return 1;
}

/* Order-independent: the sum of per-object hashes of (size, refs, payload). */
static uint64_t object_hash(void *obj) {
  uint64_t size = hl__obj_size(obj);
  const uint8_t *p = hl__obj_payload(obj);
  uint64_t x = mix(size * 0x9E3779B97F4A7C15ULL ^ ((hl_objhdr *)obj)->refs);
  uint64_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    x = (x ^ w) * 0x100000001b3ULL;
  }
  for (; i < size; i++) x = (x ^ p[i]) * 0x100000001b3ULL;
  return mix(x);
}

int hl_ref_checksum(hl_heap *h, hl_ref ref, uint64_t *sum, uint64_t *objects) {
  CHECK_HEAP(h);
  if (!sum) return hl__fail(h, HL_EINVAL, "checksum: NULL output");
  bool locked = hl__lock(h);
  void *root;
  int rc = hl__handle_get(h, ref, &root);
  ptrset seen = {0};
  void **stack = NULL;
  uint64_t top = 0, cap = 0, n = 0, total = 0;
  if (rc) goto out;
  if (ptrset_add(&seen, root) < 0) goto oom;
  cap = 1024;
  stack = malloc(cap * sizeof(void *));
  if (!stack) goto oom;
  stack[top++] = root;
  while (top) {
    void *obj = stack[--top];
    total += object_hash(obj);
    n++;
    uint32_t refs = ((hl_objhdr *)obj)->refs;
    for (uint32_t i = 0; i < refs; i++) {
      void *v = hl__slots(obj)[i];
      if (!v) continue;
      int a = ptrset_add(&seen, v);
      if (a < 0) goto oom;
      if (!a) continue;
      if (top == cap) {
        void **ns = realloc(stack, cap * 2 * sizeof(void *));
        if (!ns) goto oom;
        stack = ns;
        cap *= 2;
      }
      stack[top++] = v;
    }
  }
  *sum = total;
  if (objects) *objects = n;
  goto out;
oom:
  rc = hl__fail(h, HL_ENOMEM, "checksum: out of memory");
out:
  free(stack);
  free(seen.slots);
  hl__unlock(h, locked);
  return rc;
}

/* ---- collections, probes ---- */

int hl_collect(hl_heap *h, int cycles, int major) {
  CHECK_HEAP(h);
  if (h->opt.mode != HL_MODE_COLLECTED)
    return hl__fail(h, HL_EMODE, "collect: a manual heap has no collector (use hl_trim)");
  if (cycles < 1 || cycles > 1000000)
    return hl__fail(h, HL_EINVAL, "collect: cycles %d out of range [1, 1000000]", cycles);
  if (major < -1 || major > 1)
    return hl__fail(h, HL_EINVAL, "collect: major %d is not -1 (policy), 0 or 1", major);
  bool locked = hl__lock(h);
  int rc = HL_OK;
  for (int i = 0; i < cycles && !rc; i++) rc = hl__cycle(h, major, REASON_EXPLICIT);
  hl__unlock(h, locked);
  return rc;
}

int hl_stats_get(hl_heap *h, hl_stats *out) {
  CHECK_HEAP(h);
  if (!out) return hl__fail(h, HL_EINVAL, "stats: NULL output");
  bool locked = hl__lock(h);
  hl__stats_fill(h, out);
  hl__unlock(h, locked);
  return HL_OK;
}

void hl__stats_fill(hl_heap *h, hl_stats *st) {
  hl__aword_flush(h); /* the counts of reserved slots not handed out */
  *st = h->st;
  st->total_pages = h->high_water;
  st->owned_pages = h->state_count[PS_OWNED];
  st->retired_pool_pages = h->state_count[PS_RETIRED];
  st->partial_pool_pages = h->state_count[PS_PARTIAL];
  st->free_pool_pages = h->state_count[PS_FREE];
  st->released_pool_pages = h->state_count[PS_RELEASED];
  st->reuse_failed_pool_pages = h->state_count[PS_REUSE_FAILED];
  st->in_flight_pages = h->state_count[PS_IN_FLIGHT];
  st->fallback_pool_pages = h->fallback_count;
  st->handles = h->handles_live;
  st->syscalls = atomic_load(&h->prim.syscalls);
  st->syscall_retries = atomic_load(&h->prim.retries);
  st->syscall_gave_up = atomic_load(&h->prim.gave_up);
  st->faults_fired = atomic_load(&h->prim.fired);
  st->gc_trigger_bytes = hl__trigger_in_force(h);
  hl__manual_stats(h, st);
}

int hl_heap_range(hl_heap *h, uint64_t *base, uint64_t *bytes) {
  CHECK_HEAP(h);
  if (base) *base = (uint64_t)(uintptr_t)h->base;
  if (bytes) *bytes = h->reserved;
  return HL_OK;
}

int hl_resident_bytes(hl_heap *h, uint64_t *out) {
  CHECK_HEAP(h);
  if (!out) return hl__fail(h, HL_EINVAL, "resident_bytes: NULL output");
  bool locked = hl__lock(h);
  uint64_t len = (uint64_t)h->high_water << h->page_shift;
  hl__unlock(h, locked);
  int e = len ? prim_os_resident(h->base, len, out) : 0;
  if (!len) *out = 0;
  if (e) return hl__fail(h, HL_ESYS, "resident_bytes: mincore failed (%s)", strerror(e));
  return HL_OK;
}

int hl_vma_count(hl_heap *h, uint64_t *out) {
  CHECK_HEAP(h);
  if (!out) return hl__fail(h, HL_EINVAL, "vma_count: NULL output");
  int e = prim_os_vma_count((uintptr_t)h->base, (uintptr_t)h->base + h->reserved, out);
  if (e) return hl__fail(h, HL_ESYS, "vma_count: cannot read the memory map (%s)", strerror(e));
  return HL_OK;
}

int hl_heap_check(hl_heap *h) {
  CHECK_HEAP(h);
  bool locked = hl__lock(h);
  char msg[256];
  int rc = hl__check_locked(h, msg, sizeof msg);
  hl__unlock(h, locked);
  if (rc) return hl__fail(h, rc, "check: %s", msg);
  return HL_OK;
}

int hl_trim(hl_heap *h) {
  CHECK_HEAP(h);
  bool locked = hl__lock(h);
  while (h->in_cycle) pthread_cond_wait(&h->cycle_done, &h->lock);
  h->in_cycle = true;
  hl__trim_locked(h);
  h->in_cycle = false;
  pthread_cond_broadcast(&h->cycle_done);
  hl__unlock(h, locked);
  return HL_OK;
}

int hl_memory_pressure(hl_heap *h) {
  CHECK_HEAP(h);
  bool locked = hl__lock(h);
  h->pressure = true;
  hl__unlock(h, locked);
  return HL_OK;
}

/* ---- fault injection ---- */

int hl_inject(hl_heap *h, int site, int mode, int64_t arg, int err) {
  CHECK_HEAP(h);
  if (site < 0 || site >= HL_SITE_COUNT)
    return hl__fail(h, HL_EINVAL, "inject: site %d out of range [0, %d)", site, HL_SITE_COUNT);
  if (mode < 0 || mode >= HL_FAULT_MODE_COUNT)
    return hl__fail(h, HL_EINVAL, "inject: mode %d out of range [0, %d)", mode,
                    HL_FAULT_MODE_COUNT);
  if ((mode == HL_FAULT_first || mode == HL_FAULT_sticky) && arg < 0)
    return hl__fail(h, HL_EINVAL, "inject: %s needs N >= 0, got %" PRId64,
                    hl_fault_mode_name(mode), arg);
  if (mode == HL_FAULT_every && arg < 1)
    return hl__fail(h, HL_EINVAL, "inject: every needs N >= 1, got %" PRId64, arg);
  if (mode != HL_FAULT_off && (err <= 0 || err > 4095))
    return hl__fail(h, HL_EINVAL, "inject: errno %d is not a positive errno value", err);
  prim_arm(&h->prim, site, mode, arg, err);
  return HL_OK;
}

int hl_faults_get(hl_heap *h, hl_fault_state *buf, size_t cap, size_t *count) {
  CHECK_HEAP(h);
  if (!count || (!buf && cap)) return hl__fail(h, HL_EINVAL, "faults: NULL output");
  size_t n = cap < HL_SITE_COUNT ? cap : HL_SITE_COUNT;
  for (size_t i = 0; i < n; i++) {
    prim_fault *f = &h->prim.faults[i];
    buf[i] = (hl_fault_state){(int32_t)i, f->mode, f->arg, f->err, 0, atomic_load(&f->calls),
                              atomic_load(&f->fired)};
  }
  *count = n;
  return HL_OK;
}

/* heaplab.h's inline accessors assume this layout */
_Static_assert(sizeof(hl_objhdr) == HL_OBJ_HEADER_BYTES && offsetof(hl_objhdr, refs) == 0,
               "object header layout is part of the ABI");

uint64_t hl_max_refs(void) { return HL_MAX_REFS; }
uint64_t hl_max_size(void) { return HL_MAX_SIZE; }

/* ---- raw objects ---- */

void hl_enter(hl_heap *h) {
  if (!h) return;
  if (hl__held == h) {
    hl__held_depth++;
    return;
  }
  pthread_mutex_lock(&h->lock);
  hl__held = h;
  hl__held_depth = 1;
}

void hl_leave(hl_heap *h) {
  if (!h || hl__held != h) return;
  if (--hl__held_depth) return;
  hl__held = NULL;
  pthread_mutex_unlock(&h->lock);
}

void *hl_obj_payload(const void *obj) { return obj ? hl__obj_payload((void *)obj) : NULL; }
uint64_t hl_obj_size(const void *obj) { return obj ? hl__obj_size(obj) : 0; }
uint64_t hl_obj_refs(const void *obj) { return obj ? ((const hl_objhdr *)obj)->refs : 0; }
void *hl_obj_get(const void *obj, uint64_t slot) {
  if (!obj || slot >= ((const hl_objhdr *)obj)->refs) return NULL;
  return hl__slots((void *)obj)[slot];
}
void hl_obj_set(void *obj, uint64_t slot, void *value) {
  if (!obj || slot >= ((hl_objhdr *)obj)->refs) return;
  hl__store_any(obj, slot, value);
}
