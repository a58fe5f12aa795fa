/* Every public call that takes a pointer refuses a NULL one it needs with an
 * error code (or NULL, for a call returning a pointer) and a message; the
 * calls that return nothing ignore it, as free(NULL) does (heaplab.h's
 * conventions).  hl_options_defaults(NULL) crashed (the embedding hunt,
 * session 28); this walks the whole header, one NULL at a time. */
#include "check.h"

/* rc is HL_EINVAL and where's message (hl_heap_error(where)) names `needle`.
 * A stale message is planted first, so a call that sets none is caught. */
static void plant(hl_heap *h) {
  hl_options o;
  hl_options_defaults(&o);
  (void)hl_options_set(&o, "stale_message_planted", "1", NULL, 0);
  if (h) (void)hl_collect(h, 0, 0); /* "cycles 0 out of range" */
}

#define REFUSED(where, needle, expr)                                           \
  do {                                                                         \
    plant(where);                                                              \
    int rc_ = (expr);                                                          \
    CHECK(rc_ == HL_EINVAL, "%s returned %s, expected EINVAL", #expr,          \
          hl_error_name(rc_));                                                 \
    CHECK(strstr(hl_heap_error(where), (needle)), "%s: message '%s', expected '%s'", \
          #expr, hl_heap_error(where), (needle));                              \
  } while (0)

#define NULL_RESULT(where, needle, expr)                                       \
  do {                                                                         \
    plant(where);                                                              \
    CHECK((expr) == NULL, "%s did not return NULL", #expr);                    \
    CHECK(strstr(hl_heap_error(where), (needle)), "%s: message '%s', expected '%s'", \
          #expr, hl_heap_error(where), (needle));                              \
  } while (0)

int main(void) {
  char err[256];
  hl_options o;
  /* the options */
  REFUSED(NULL, "hl_options_defaults", hl_options_defaults(NULL));
  OK(NULL, hl_options_defaults(&o));
  REFUSED(NULL, "NULL output", hl_option_info_get(0, NULL));
  REFUSED(NULL, "NULL options", hl_options_from_env(NULL, err, sizeof err));
  REFUSED(NULL, "NULL options", hl_options_from_env_except(NULL, NULL, 0, NULL, 0));
  REFUSED(NULL, "skip is NULL", hl_options_from_env_except(&o, NULL, 3, NULL, 0));
  REFUSED(NULL, "NULL options", hl_options_set_value(NULL, "mode", HL_VALUE_INT, 0, NULL, 0,
                                                     NULL, 0));
  REFUSED(NULL, "NULL options", hl_options_set(NULL, "mode", "manual", NULL, 0));
  REFUSED(NULL, "NULL options", hl_options_set_int(NULL, "mode", 1, NULL, 0));
  REFUSED(NULL, "NULL options", hl_options_validate(NULL, NULL, 0));
  int64_t v;
  CHECK(hl_options_get(NULL, "mode", &v) == HL_EINVAL, "options_get of NULL options");
  CHECK(hl_options_get(&o, "mode", NULL) == HL_EINVAL, "options_get into NULL");
  /* a NULL name is a NULL argument (HL_EINVAL naming it: it was HL_EOPTION
   * "unknown option '(null)'", the C API hunt, session 33); a NULL value
   * no value, not a crash */
  REFUSED(NULL, "NULL option name", hl_options_set(&o, NULL, "1", NULL, 0));
  CHECK(hl_options_set(&o, "mode", NULL, NULL, 0) == HL_ETYPE, "set of a NULL value");
  REFUSED(NULL, "NULL option name", hl_options_get(&o, NULL, &v));
  CHECK(hl_option_index(NULL) == -1 && hl_option_nearest(NULL) == NULL, "lookups of NULL");
  CHECK(hl_fault_site_index(NULL) == -1 && hl_fault_mode_index(NULL) == -1 &&
            hl_errno_index(NULL) == -1, "name lookups of NULL");

  /* the process-wide calls */
  REFUSED(NULL, "NULL output", hl_footprint_get(NULL));
  REFUSED(NULL, "NULL output", hl_sampler_open(NULL, 0.01, 64));
  REFUSED(NULL, "NULL output", hl_sampler_start(NULL, 10000, 64));
  hl_sampler *s = NULL;
  OK(NULL, hl_sampler_open(&s, 0.01, 64));
  hl_sampler_summary sum;
  hl_sample buf[4];
  size_t n;
  REFUSED(NULL, "sampler is NULL", hl_sampler_mark(NULL));
  REFUSED(NULL, "sampler is NULL", hl_sampler_reset(NULL));
  REFUSED(NULL, "sampler is NULL", hl_sampler_summary_get(NULL, &sum));
  REFUSED(NULL, "output is NULL", hl_sampler_summary_get(s, NULL));
  REFUSED(NULL, "sampler is NULL", hl_sampler_read(NULL, 0, buf, 4, &n));
  REFUSED(NULL, "buffer is NULL", hl_sampler_read(s, 0, NULL, 4, &n));
  REFUSED(NULL, "count is NULL", hl_sampler_read(s, 0, buf, 4, NULL));
  hl_sampler_stop(s);
  hl_sampler_stop(NULL);

  /* a heap: NULL out pointers */
  REFUSED(NULL, "NULL output", hl_heap_new(&o, NULL, NULL, 0));
  hl_heap *h = HEAP(NULL), *m = HEAP("mode=manual");
  hl_ref r;
  OK(h, hl_alloc(h, 64, 2, &r));
  REFUSED(h, "NULL output", hl_heap_options(h, NULL));
  REFUSED(h, "NULL output", hl_stats_get(h, NULL));
  REFUSED(h, "NULL count", hl_events_read(h, NULL, 0, NULL, 0));
  REFUSED(h, "NULL buffer", hl_events_read(h, NULL, 4, &n, 0));
  uint64_t first;
  hl_event one[1];
  REFUSED(h, "NULL first", hl_events_peek(h, one, 1, &n, NULL));
  REFUSED(h, "NULL count", hl_events_peek(h, one, 1, NULL, &first));
  OK(h, hl_events_consume(h, 0, NULL));
  REFUSED(h, "NULL output", hl_resident_bytes(h, NULL));
  REFUSED(h, "NULL output", hl_vma_count(h, NULL));
  OK(h, hl_heap_range(h, NULL, NULL));
  REFUSED(h, "inject: NULL site", hl_inject_named(h, NULL, "first", 1, NULL));
  REFUSED(h, "inject: NULL mode", hl_inject_named(h, "release", NULL, 1, NULL));
  REFUSED(h, "NULL output", hl_faults_get(h, NULL, 2, &n));
  REFUSED(h, "NULL output", hl_faults_get(h, NULL, 0, NULL));
  REFUSED(h, "NULL output", hl_alloc(h, 8, 0, NULL));
  REFUSED(h, "NULL output", hl_ref_dup(h, r, NULL));
  REFUSED(h, "NULL output", hl_ref_info(h, r, NULL));
  REFUSED(h, "NULL output", hl_ref_identity(h, r, NULL));
  REFUSED(h, "NULL output", hl_ref_same(h, r, r, NULL));
  REFUSED(h, "NULL output", hl_ref_get(h, r, 0, NULL));
  REFUSED(h, "NULL output", hl_fill(h, 1024, 16, 0, NULL));
  REFUSED(h, "NULL output", hl_fill_stride(h, 1024, 16, 0, 2, NULL));
  REFUSED(h, "NULL output", hl_thin(h, r, 1, NULL));
  REFUSED(h, "NULL output", hl_ref_checksum(h, r, NULL, NULL));
  REFUSED(h, "NULL source", hl_ref_write(h, r, 0, NULL, 4));
  REFUSED(h, "NULL destination", hl_ref_read(h, r, 0, NULL, 4));
  REFUSED(h, "NULL output", hl_churn(h, 0.01, 16, 1024, 0, NULL));
  REFUSED(h, "NULL region", hl_roots_add(h, NULL, 4, 0));
  REFUSED(h, "NULL words", hl_roots_store(h, NULL, NULL, NULL, 2, NULL));
  void *w[2];
  REFUSED(h, "NULL values", hl_roots_store(h, w, NULL, NULL, 2, NULL));
  CHECK(hl_roots_remove(h, NULL) != HL_OK, "removing a NULL region");
  NULL_RESULT(h, "parent is NULL", hl_obj_new_in(h, NULL, 0, 8, 0));
  /* the readers of a NULL object, and the calls that return nothing */
  CHECK(hl_obj_payload(NULL) == NULL && hl_obj_size(NULL) == 0 && hl_obj_refs(NULL) == 0 &&
            hl_obj_get(NULL, 0) == NULL, "NULL object readers");
  hl_obj_set(NULL, 0, NULL);
  hl_free(m, NULL);
  hl_free_sized(m, NULL, 8);
  CHECK(hl_usable_size(m, NULL) == 0, "usable size of NULL");

  /* a NULL heap: every call that takes one */
  hl_stats st;
  hl_event ev[2];
  hl_fault_state fs[2];
  hl_object_info info;
  hl_churn_result cr;
  uint64_t u, u2;
  REFUSED(NULL, "hl_heap_options: the heap is NULL", hl_heap_options(NULL, &o));
  REFUSED(NULL, "hl_heap_set_wait_hook: the heap is NULL", hl_heap_set_wait_hook(NULL, NULL, NULL));
  REFUSED(NULL, "the heap is NULL", hl_stats_get(NULL, &st));
  REFUSED(NULL, "the heap is NULL", hl_events_read(NULL, ev, 2, &n, 0));
  REFUSED(NULL, "the heap is NULL", hl_events_peek(NULL, ev, 2, &n, &u));
  REFUSED(NULL, "the heap is NULL", hl_events_consume(NULL, 1, &u));
  REFUSED(NULL, "the heap is NULL", hl_resident_bytes(NULL, &u));
  REFUSED(NULL, "the heap is NULL", hl_vma_count(NULL, &u));
  REFUSED(NULL, "the heap is NULL", hl_heap_range(NULL, &u, &u2));
  REFUSED(NULL, "the heap is NULL", hl_heap_check(NULL));
  REFUSED(NULL, "the heap is NULL", hl_trim(NULL));
  REFUSED(NULL, "the heap is NULL", hl_memory_pressure(NULL));
  REFUSED(NULL, "the heap is NULL", hl_inject(NULL, HL_SITE_release, HL_FAULT_first, 1, 12));
  REFUSED(NULL, "the heap is NULL", hl_inject_named(NULL, "release", "first", 1, NULL));
  REFUSED(NULL, "the heap is NULL", hl_faults_get(NULL, fs, 2, &n));
  REFUSED(NULL, "the heap is NULL", hl_alloc(NULL, 8, 0, &r));
  REFUSED(NULL, "the heap is NULL", hl_ref_release(NULL, r));
  REFUSED(NULL, "the heap is NULL", hl_ref_dup(NULL, r, &r));
  REFUSED(NULL, "the heap is NULL", hl_ref_info(NULL, r, &info));
  REFUSED(NULL, "the heap is NULL", hl_ref_identity(NULL, r, &u));
  REFUSED(NULL, "the heap is NULL", hl_ref_same(NULL, r, r, &(int){0}));
  REFUSED(NULL, "the heap is NULL", hl_ref_get(NULL, r, 0, &r));
  REFUSED(NULL, "the heap is NULL", hl_ref_set(NULL, r, 0, 0));
  REFUSED(NULL, "the heap is NULL", hl_fill(NULL, 1024, 16, 0, &r));
  REFUSED(NULL, "the heap is NULL", hl_fill_stride(NULL, 1024, 16, 0, 2, &r));
  REFUSED(NULL, "the heap is NULL", hl_thin(NULL, r, 1, &r));
  REFUSED(NULL, "the heap is NULL", hl_ref_checksum(NULL, r, &u, &u2));
  REFUSED(NULL, "the heap is NULL", hl_ref_write(NULL, r, 0, "x", 1));
  REFUSED(NULL, "the heap is NULL", hl_ref_read(NULL, r, 0, err, 1));
  REFUSED(NULL, "the heap is NULL", hl_collect(NULL, 1, 0));
  REFUSED(NULL, "the heap is NULL", hl_churn(NULL, 0.01, 16, 1024, 0, &cr));
  REFUSED(NULL, "the heap is NULL", hl_enter(NULL));
  hl_leave(NULL);
  NULL_RESULT(NULL, "the heap is NULL", hl_obj_new(NULL, 8, 0));
  NULL_RESULT(NULL, "the heap is NULL", hl_obj_new_in(NULL, NULL, 0, 8, 0));
  REFUSED(NULL, "the heap is NULL", hl_roots_add(NULL, w, 2, 0));
  REFUSED(NULL, "the heap is NULL", hl_roots_remove(NULL, w));
  REFUSED(NULL, "the heap is NULL", hl_roots_store(NULL, w, &u, &r, 1, &u2));
  NULL_RESULT(NULL, "the heap is NULL", hl_malloc(NULL, 8));
  NULL_RESULT(NULL, "the heap is NULL", hl_calloc(NULL, 1, 8));
  NULL_RESULT(NULL, "the heap is NULL", hl_realloc(NULL, NULL, 0, 8));
  REFUSED(NULL, "the heap is NULL", hl_set_refusal_hook(NULL, NULL, NULL));
  hl_free(NULL, w);
  hl_free_sized(NULL, w, 8);
  CHECK(hl_usable_size(NULL, w) == 0, "usable size on a NULL heap");
  hl_thread_flush(NULL);
  hl_heap_free(NULL);

  hl_ref_release(h, r);
  hl_heap_free(m);
  hl_heap_free(h);
  return 0;
}
