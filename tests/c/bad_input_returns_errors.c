/* Bad input returns an error code and a message naming what was wrong;
 * nothing crashes, nothing live is freed. */
#include <signal.h>

#include <sys/resource.h>

#include "check.h"

#define SAYS(text) CHECK(strstr(hl_heap_error(NULL), text), "hl_heap_error(NULL): '%s'", \
                         hl_heap_error(NULL))

/* The C API hunt (session 26): calls that failed with no message, or a
 * crash.  Each failure leaves a message where the header says it does; a
 * stale one is planted first. */
static void every_failure_says_why(void) {
  char err[256];
  hl_options o;
  hl_options_defaults(&o);
  /* a NULL skip list with n > 0 crashed when the environment set an option */
  setenv("HEAPLAB_WARM_PAGES", "8", 1);
  CHECK(hl_options_from_env_except(&o, NULL, 2, err, sizeof err) == HL_EINVAL &&
            strstr(err, "skip is NULL"), "NULL skip: %s", err);
  unsetenv("HEAPLAB_WARM_PAGES");
  /* an option call with err NULL: the message was lost */
  CHECK(hl_options_set(&o, "no_such_option", "1", NULL, 0) == HL_EOPTION, "unknown option");
  SAYS("no_such_option");
  CHECK(hl_option_info_get(0, NULL) == HL_EINVAL, "option info into NULL");
  SAYS("hl_option_info_get: NULL output pointer");
  hl_option_info info;
  CHECK(hl_option_info_get(-1, &info) == HL_ERANGE, "option info -1");
  SAYS("index -1 out of range");
  /* hl_footprint_get had no message at all */
  CHECK(hl_footprint_get(NULL) == HL_EINVAL, "footprint into NULL");
  SAYS("hl_footprint_get: NULL output pointer");
  struct rlimit fds;
  CHECK(getrlimit(RLIMIT_NOFILE, &fds) == 0, "getrlimit");
  struct rlimit none = {3, fds.rlim_max};
  CHECK(setrlimit(RLIMIT_NOFILE, &none) == 0, "setrlimit");
  hl_footprint fp;
  int rc = hl_footprint_get(&fp);
  setrlimit(RLIMIT_NOFILE, &fds);
  CHECK(rc == HL_ESYS, "footprint with no fd left: %s", hl_error_name(rc));
  SAYS("could not be read");
  /* raw calls given a NULL heap or parent kept an older message */
  CHECK(hl_obj_new(NULL, 8, 0) == NULL, "obj_new on NULL");
  SAYS("hl_obj_new: the heap is NULL");
  CHECK(hl_malloc(NULL, 8) == NULL, "malloc on NULL");
  SAYS("hl_malloc: the heap is NULL");
  CHECK(hl_calloc(NULL, 1, 8) == NULL && strstr(hl_heap_error(NULL), "hl_calloc"), "calloc");
  CHECK(hl_realloc(NULL, NULL, 0, 8) == NULL && strstr(hl_heap_error(NULL), "hl_realloc"),
        "realloc");
  hl_heap *h = HEAP(NULL), *g = HEAP(NULL);
  CHECK(hl_collect(h, 0, 0) != HL_OK, "collect 0 cycles"); /* the stale message */
  hl_enter(h);
  CHECK(hl_obj_new_in(h, NULL, 0, 8, 0) == NULL, "obj_new_in with no parent");
  hl_leave(h);
  CHECK(strstr(hl_heap_error(h), "the parent is NULL"), "'%s'", hl_heap_error(h));
  /* a number no heap's handle (tag 0) was named another heap's */
  hl_object_info oi;
  CHECK(hl_ref_info(h, 1, &oi) == HL_EINVAL && strstr(hl_heap_error(h), "is not a handle"),
        "handle 1: '%s'", hl_heap_error(h));
  hl_ref gr;
  OK(g, hl_alloc(g, 8, 0, &gr));
  CHECK(hl_ref_info(h, gr, &oi) == HL_EFOREIGN && strstr(hl_heap_error(h), "another heap"),
        "g's handle: '%s'", hl_heap_error(h));
  /* hl_roots_store with another heap held stored without its heap held */
  void *word = NULL;
  uint64_t value;
  hl_ref hr;
  OK(h, hl_alloc(h, 8, 0, &hr));
  hl_enter(g);
  rc = hl_roots_store(h, &word, &value, &hr, 1, NULL);
  hl_leave(g);
  CHECK(rc == HL_EINVAL && word == NULL && strstr(hl_heap_error(h), "another heap"),
        "roots_store with g held: %s, '%s'", hl_error_name(rc), hl_heap_error(h));
  OK(h, hl_roots_store(h, &word, &value, &hr, 1, NULL));
  CHECK(word != NULL, "roots_store stored nothing");
  hl_heap_free(g);
  hl_heap_free(h);
}

int main(void) {
  every_failure_says_why();
  /* the limits as functions are the macros: the bindings read them there and
   * refuse past them (h41fapi) */
  CHECK(hl_max_refs() == HL_MAX_REFS && hl_max_size() == HL_MAX_SIZE,
        "hl_max_refs %" PRIu64 ", hl_max_size %" PRIu64, hl_max_refs(), hl_max_size());
  char err[256];
  hl_options o;
  hl_options_defaults(&o);
  /* options */
  CHECK(hl_options_set(&o, "no_such_option", "1", err, sizeof err) == HL_EOPTION &&
            strstr(err, "no_such_option"), "unknown option: %s", err);
  /* a NULL name is a NULL argument (HL_EINVAL), not the unknown option
   * '(null)' (HL_EOPTION) -- the C API hunt, session 33 */
  CHECK(hl_options_set(&o, NULL, "1", err, sizeof err) == HL_EINVAL &&
            strstr(err, "NULL option name"), "NULL name: %s", err);
  CHECK(hl_options_set_int(&o, NULL, 1, err, sizeof err) == HL_EINVAL &&
            strstr(err, "NULL option name"), "NULL name (int): %s", err);
  CHECK(hl_options_set_value(&o, NULL, HL_VALUE_INT, 1, NULL, 0, err, sizeof err) == HL_EINVAL &&
            strstr(err, "NULL option name"), "NULL name (value): %s", err);
  int64_t got = 7;
  CHECK(hl_options_get(&o, NULL, &got) == HL_EINVAL && got == 0, "get NULL name");
  SAYS("NULL option name");
  {
    hl_options ho;
    hl_options_defaults(&ho);
    ho.reserve_bytes = 64u << 20;
    hl_heap *ih = NULL;
    CHECK(hl_heap_new(&ho, &ih, err, sizeof err) == HL_OK, "%s", err);
    FAILS(ih, HL_EINVAL, "NULL site", hl_inject_named(ih, NULL, "first", 1, NULL));
    FAILS(ih, HL_EINVAL, "NULL mode", hl_inject_named(ih, "release", NULL, 1, NULL));
    hl_heap_free(ih);
  }
  CHECK(hl_options_set(&o, "warm_pages", "-5", err, sizeof err) == HL_EVALUE &&
            strstr(err, "warm_pages") && strstr(err, "[0, 1048576]"), "range: %s", err);
  CHECK(hl_options_set(&o, "page_release", "maybe", err, sizeof err) == HL_EVALUE &&
            strstr(err, "page_release"), "bool: %s", err);
  CHECK(hl_options_set(&o, "reuse_failed_order", "random", err, sizeof err) == HL_EVALUE &&
            strstr(err, "fifo|lifo"), "enum: %s", err);
  CHECK(hl_options_set(&o, "page_size", "64x", err, sizeof err) == HL_EVALUE, "suffix: %s", err);
  CHECK(hl_options_set_int(&o, "syscall_retry_max", -2, err, sizeof err) == HL_EVALUE &&
            strstr(err, "syscall_retry_max"), "int: %s", err);
  hl_options bad = o;
  bad.page_size = 65536 + 4096;
  hl_heap *h = NULL;
  CHECK(hl_heap_new(&bad, &h, err, sizeof err) == HL_EVALUE && !h && strstr(err, "power of two"),
        "page_size: %s", err);
  bad = o;
  bad.small_max = 8192;
  bad.page_size = 16384;
  CHECK(hl_heap_new(&bad, &h, err, sizeof err) == HL_EVALUE && strstr(err, "small_max"),
        "small_max: %s", err);
  bad = o;
  bad.gc_trigger_min_bytes = (int64_t)1 << 30;
  bad.gc_trigger_max_bytes = (int64_t)1 << 20;
  CHECK(hl_heap_new(&bad, &h, err, sizeof err) == HL_EVALUE && strstr(err, "gc_trigger_min_bytes"),
        "trigger bounds: %s", err);
  CHECK(hl_heap_new(&o, NULL, err, sizeof err) == HL_EINVAL, "NULL out");
  /* with err NULL the message is hl_heap_error(NULL)'s, as heaplab.h's
   * conventions say (it was "": only the caller's buffer had it) */
  bad = o;
  bad.page_size = 65536 + 4096;
  CHECK(hl_heap_new(&bad, &h, NULL, 0) == HL_EVALUE && !h &&
            strstr(hl_heap_error(NULL), "power of two"),
        "hl_heap_error(NULL) after hl_heap_new: '%s'", hl_heap_error(NULL));
  /* a caller's buffer longer than the thread's gets the whole message (it
   * was cut at 255 characters, before the part saying what was wrong) */
  {
    /* (a cross-check naming two variables whose values are long: each is
     * shown as its first 60 bytes and its length -- blanks around a value
     * are allowed) */
    char on[152], off[152], longerr[1024];
    memset(on, ' ', sizeof on - 2), on[sizeof on - 2] = '1', on[sizeof on - 1] = 0;
    memset(off, ' ', sizeof off - 1), off[0] = '0', off[sizeof off - 1] = 0;
    setenv("HEAPLAB_SUBPAGE_RELEASE", on, 1);
    setenv("HEAPLAB_PAGE_RELEASE", off, 1);
    CHECK(hl_heap_new(NULL, &h, longerr, sizeof longerr) == HL_EVALUE && !h &&
              strstr(longerr, "turns off; HEAPLAB_PAGE_RELEASE=0") &&
              strcmp(longerr + strlen(longerr) - 16, "... (151 bytes))") == 0 &&
              strlen(longerr) > 300,
          "a long message: '%s'", longerr);
    unsetenv("HEAPLAB_SUBPAGE_RELEASE");
    unsetenv("HEAPLAB_PAGE_RELEASE");
  }
  CHECK(hl_heap_new(&o, NULL, NULL, 0) == HL_EINVAL &&
            strstr(hl_heap_error(NULL), "hl_heap_new: NULL output pointer"),
        "hl_heap_error(NULL) after a NULL out: '%s'", hl_heap_error(NULL));

  h = HEAP("verify=true");
  hl_heap *other = HEAP("page_release=false");
  hl_ref keep, r, foreign;
  OK(h, hl_alloc(h, 64, 2, &keep));
  char pattern[64];
  memset(pattern, 0x5a, sizeof pattern);
  OK(h, hl_ref_write(h, keep, 0, pattern, sizeof pattern));
  OK(other, hl_alloc(other, 8, 1, &foreign));

  FAILS(h, HL_EINVAL, "size", hl_alloc(h, HL_MAX_SIZE + 1, 0, &r));
  FAILS(h, HL_EINVAL, "refs", hl_alloc(h, 8, HL_MAX_REFS + 1, &r));
  FAILS(h, HL_EINVAL, "NULL", hl_alloc(h, 8, 0, NULL));
  FAILS(h, HL_ERANGE, "slot 2", hl_ref_get(h, keep, 2, &r));
  FAILS(h, HL_ERANGE, "slot 99", hl_ref_set(h, keep, 99, 0));
  FAILS(h, HL_EFOREIGN, "another heap", hl_ref_set(h, keep, 0, foreign));
  FAILS(h, HL_EFOREIGN, "another heap", hl_ref_info(h, foreign, &(hl_object_info){0}));
  FAILS(h, HL_EINVAL, "null", hl_ref_info(h, 0, &(hl_object_info){0}));
  FAILS(h, HL_ESTALE, "unknown", hl_ref_release(h, keep + 12345));
  OK(h, hl_alloc(h, 8, 0, &r));
  OK(h, hl_ref_release(h, r));
  FAILS(h, HL_ESTALE, "released", hl_ref_release(h, r));
  FAILS(h, HL_ESTALE, "released", hl_ref_set(h, keep, 0, r));
  FAILS(h, HL_ESTALE, "released", hl_ref_get(h, r, 0, &r));
  FAILS(h, HL_ERANGE, "outside", hl_ref_write(h, keep, 60, pattern, 8));
  FAILS(h, HL_ERANGE, "outside", hl_ref_read(h, keep, UINT64_MAX, pattern, 2));
  /* a count of one in the singular: "1 bytes", "1 slots" before (session 32) */
  {
    hl_ref one;
    OK(h, hl_alloc(h, 16, 1, &one));
    FAILS(h, HL_ERANGE, "outside", hl_ref_read(h, one, 16, pattern, 1));
    CHECK(!strcmp(hl_heap_error(h), "read: 1 byte at offset 16 outside a 16-byte payload"),
          "message '%s'", hl_heap_error(h));
    FAILS(h, HL_ERANGE, "outside", hl_ref_write(h, one, 0, pattern, 17));
    CHECK(!strcmp(hl_heap_error(h), "write: 17 bytes at offset 0 outside a 16-byte payload"),
          "message '%s'", hl_heap_error(h));
    FAILS(h, HL_ERANGE, "slot 1", hl_ref_get(h, one, 1, &r));
    CHECK(!strcmp(hl_heap_error(h), "get: slot 1 out of range for an object with 1 slot"),
          "message '%s'", hl_heap_error(h));
    OK(h, hl_ref_release(h, one));
  }
  FAILS(h, HL_EINVAL, "cycles", hl_collect(h, 0, -1));
  FAILS(h, HL_EINVAL, "major", hl_collect(h, 1, 7));
  FAILS(h, HL_EINVAL, "total_bytes", hl_fill(h, HL_MAX_SIZE + 1, 8, 0, &r));
  FAILS(h, HL_EINVAL, "2^31", hl_fill(h, (uint64_t)1 << 40, 0, 0, &r));
  FAILS(h, HL_EINVAL, "machine's memory", hl_fill(h, (uint64_t)1 << 40, 1u << 30, 0, &r));
  FAILS(h, HL_ENOMEM, "refused", hl_alloc(h, HL_MAX_SIZE, 0, &r)); /* cannot be satisfied */
  FAILS(h, HL_EINVAL, "site", hl_inject(h, 99, HL_FAULT_always, 0, 5));
  FAILS(h, HL_EINVAL, "mode", hl_inject(h, HL_SITE_release, 42, 0, 5));
  FAILS(h, HL_EINVAL, "every needs", hl_inject(h, HL_SITE_release, HL_FAULT_every, 0, 5));
  FAILS(h, HL_EINVAL, "errno", hl_inject(h, HL_SITE_release, HL_FAULT_always, 0, 0));
  FAILS(h, HL_EMODE, "manual", hl_malloc(h, 8) ? HL_OK : HL_EMODE);
  FAILS(h, HL_EINVAL, "duration", hl_churn(h, -1, 64, 1024, 0, &(hl_churn_result){0}));
  FAILS(h, HL_EINVAL, "live_bytes", hl_churn(h, 0.01, 64, 8, 0, &(hl_churn_result){0}));
  FAILS(h, HL_EINVAL, "not a registered", hl_roots_remove(h, pattern));
  FAILS(h, HL_EINVAL, "thin: NULL output", hl_thin(h, keep, 2, NULL));
  FAILS(h, HL_EINVAL, "thin: every 0 out of range", hl_thin(h, keep, 0, &r));
  FAILS(h, HL_EINVAL, "thin: every 1000000001 out of range", hl_thin(h, keep, 1000000001, &r));
  void *raw = hl_obj_new(h, 8, 2);
  CHECK(raw, "hl_obj_new: %s", hl_heap_error(h));
  FAILS(h, HL_ERANGE, "obj_new_in: slot 2 out of range",
        hl_obj_new_in(h, raw, 2, 8, 0) ? HL_OK : HL_ERANGE);
  CHECK(hl_obj_new(h, HL_MAX_SIZE + 1, 0) == NULL, "raw alloc of a huge size");
  CHECK(hl_obj_new_in(h, NULL, 0, 8, 0) == NULL, "raw alloc into NULL");
  CHECK(hl_alloc(NULL, 8, 0, &r) == HL_EINVAL, "NULL heap");
  CHECK(hl_collect(NULL, 1, -1) == HL_EINVAL, "NULL heap collect");
  hl_heap_free(NULL);

  hl_heap *m = HEAP("mode=manual", "tcache_blocks=0"); /* (a malloc leaves its word reserved) */
  FAILS(m, HL_EMODE, "collected", hl_alloc(m, 8, 0, &r));
  FAILS(m, HL_EMODE, "manual heap", hl_collect(m, 1, -1));
  /* each refusal names the call that was refused, not the allocation inside it */
  FAILS(m, HL_EMODE, "alloc: objects need a collected heap", hl_alloc(m, 8, 0, &r));
  FAILS(m, HL_EMODE, "fill: objects need a collected heap", hl_fill(m, 1 << 20, 64, 0, &r));
  hl_churn_result cr;
  FAILS(m, HL_EMODE, "churn: objects need a collected heap", hl_churn(m, 0.01, 64, 4096, 0, &cr));
  FAILS(m, HL_EMODE, "hl_obj_new: objects need a collected heap",
        hl_obj_new(m, 8, 1) ? HL_OK : HL_EMODE);
  FAILS(m, HL_EMODE, "thin: needs a collected heap", hl_thin(m, 1, 2, &r));
  /* the raw-object calls too, held (their fast path) or not, with blocks of
   * the same size class reserved by a malloc */
  void *blk = hl_malloc(m, 24);
  CHECK(blk, "malloc: %s", hl_heap_error(m));
  uint64_t fake_parent[4] = {2}; /* a header with two slots */
  for (int held = 0; held < 2; held++) {
    if (held) hl_enter(m);
    FAILS(m, HL_EMODE, "collected", hl_obj_new(m, 8, 1) ? HL_OK : HL_EMODE);
    FAILS(m, HL_EMODE, "collected", hl_obj_new(m, 16, 0) ? HL_OK : HL_EMODE);
    FAILS(m, HL_EMODE, "collected", hl_obj_new_in(m, fake_parent, 0, 8, 1) ? HL_OK : HL_EMODE);
    if (held) hl_leave(m);
  }
  CHECK(fake_parent[1] == 0, "a refused hl_obj_new_in stored into its parent");
  hl_free(m, blk);
  hl_heap_free(m);

  /* the object that was live through all of it is intact */
  OK(h, hl_collect(h, 2, 1));
  char back[64];
  OK(h, hl_ref_read(h, keep, 0, back, sizeof back));
  CHECK(memcmp(back, pattern, sizeof back) == 0, "live payload changed");
  check_invariants(h);
  hl_heap_free(h);
  hl_heap_free(other);

  /* a fault variable whose site name is longer than any: refused, named */
  char var[160] = "HEAPLAB_FAULT_";
  memset(var + strlen(var), 'X', 100);
  setenv(var, "always", 1);
  char lerr[256];
  hl_heap *none = NULL;
  int lrc = hl_heap_new(NULL, &none, lerr, sizeof lerr);
  CHECK(lrc == HL_EVALUE && !none && strstr(lerr, "no fault site has so long a name") &&
            strstr(lerr, "HEAPLAB_FAULT_XXX"),
        "a 100-letter fault site: %s (%s)", hl_error_name(lrc), lerr);
  unsetenv(var);

  /* failures outside any heap name themselves in hl_heap_error(NULL): a NULL
   * heap or sampler, a bad signal (they left the thread's earlier message
   * there: "sampler: interval_s 99 out of range" after hl_sampler_mark(NULL)) */
  hl_sampler *sp = NULL;
  CHECK(hl_sampler_open(&sp, 99, 64) == HL_EINVAL, "interval 99");
#define FAILS_NULL(code, needle, expr)                                                        \
  do {                                                                                        \
    int rc_ = (expr);                                                                         \
    CHECK(rc_ == (code) && strstr(hl_heap_error(NULL), needle), "%s: %s, message '%s'", #expr, \
          hl_error_name(rc_), hl_heap_error(NULL));                                           \
  } while (0)
  FAILS_NULL(HL_EINVAL, "hl_sampler_mark: the sampler is NULL", hl_sampler_mark(NULL));
  FAILS_NULL(HL_EINVAL, "hl_sampler_reset: the sampler is NULL", hl_sampler_reset(NULL));
  FAILS_NULL(HL_EINVAL, "hl_sampler_summary_get: the sampler is NULL",
             hl_sampler_summary_get(NULL, NULL));
  size_t cnt;
  FAILS_NULL(HL_EINVAL, "hl_sampler_read: the sampler is NULL", hl_sampler_read(NULL, 0, NULL, 0, &cnt));
  /* "how many?" (no buffer) and a start past the end: 0 samples, no memcpy
   * from NULL nor a pointer past the series (UBSan stopped both) */
  {
    hl_sampler *live = NULL;
    CHECK(hl_sampler_open(&live, 0.01, 64) == HL_OK, "sampler: %s", hl_heap_error(NULL));
    cnt = 99;
    CHECK(hl_sampler_read(live, 0, NULL, 0, &cnt) == HL_OK && cnt == 0, "read(NULL, 0): %zu", cnt);
    hl_sample one[4];
    cnt = 99;
    CHECK(hl_sampler_read(live, SIZE_MAX, one, 4, &cnt) == HL_OK && cnt == 0,
          "read from SIZE_MAX: %zu", cnt);
    hl_sampler_stop(live);
  }
  FAILS_NULL(HL_EINVAL, "hl_collect: the heap is NULL", hl_collect(NULL, 1, -1));
  FAILS_NULL(HL_EINVAL, "hl_interrupt_attach: 65 is no signal", hl_interrupt_attach(65));
  FAILS_NULL(HL_ESYS, "hl_interrupt_attach: signal 9: sigaction", hl_interrupt_attach(SIGKILL));
  /* a value said as given: 10.000001 was "10", SIZE_MAX was INT64_MAX */
  FAILS_NULL(HL_EINVAL, "interval_s 10.000001 out of range", hl_sampler_open(&sp, 10.000001, 64));
  /* and every refusal sets the output to NULL, hl_sampler_start's own
   * (capacity above 2^24) as hl_sampler_open's (it kept what was there) */
  sp = (hl_sampler *)&cnt;
  FAILS_NULL(HL_EINVAL, "capacity 18446744073709551615 out of range",
             hl_sampler_start(&sp, 1000, SIZE_MAX));
  CHECK(sp == NULL, "hl_sampler_start refused: output %p, not NULL", (void *)sp);
  sp = (hl_sampler *)&cnt;
  FAILS_NULL(HL_EINVAL, "interval_s 10.000001", hl_sampler_open(&sp, 10.000001, 64));
  CHECK(sp == NULL, "hl_sampler_open refused: output %p, not NULL", (void *)sp);

  /* which argument was NULL; an option set to NULL has no value (it was
   * "(null) is out of range") */
  hl_heap *mh = HEAP("mode=manual", "heap_limit_bytes=1m", "small_max=4096");
  hl_event evs[4];
  FAILS(mh, HL_EINVAL, "NULL count", hl_events_read(mh, evs, 4, NULL, 0));
  hl_options opts;
  hl_options_defaults(&opts);
  char oerr[256];
  CHECK(hl_options_set(&opts, "verify", NULL, oerr, sizeof oerr) == HL_ETYPE &&
            strstr(oerr, "no value") && !strstr(oerr, "(null)"),
        "verify=NULL: %s", oerr);

  /* a refused calloc says calloc, small or large (a small one said malloc) */
  CHECK(hl_calloc(mh, 4, 4) != NULL, "calloc");
  void *held = hl_malloc(mh, 1046000); /* 2.5 KiB left */
  CHECK(held, "malloc");
  CHECK(hl_calloc(mh, 1, 4000) == NULL && strstr(hl_heap_error(mh), "calloc: heap_limit_bytes"),
        "small calloc past the limit: %s", hl_heap_error(mh));
  CHECK(hl_calloc(mh, 2, 100000) == NULL && strstr(hl_heap_error(mh), "calloc: heap_limit_bytes"),
        "large calloc past the limit: %s", hl_heap_error(mh));
  hl_free(mh, held);
  hl_heap_free(mh);
  hl_heap *coll = HEAP("mode=collected");
  CHECK(hl_calloc(coll, 4, 4) == NULL && strstr(hl_heap_error(coll), "calloc: "),
        "calloc on a collected heap: %s", hl_heap_error(coll));
  /* an object is no block: usable size 0, as for any pointer that is none */
  hl_ref obj;
  hl_object_info oi;
  OK(coll, hl_alloc(coll, 100, 0, &obj));
  OK(coll, hl_ref_info(coll, obj, &oi));
  CHECK(hl_usable_size(coll, (void *)(uintptr_t)oi.object) == 0 &&
            hl_usable_size(coll, (void *)(uintptr_t)oi.address) == 0,
        "usable size of a collected heap's object: %zu",
        hl_usable_size(coll, (void *)(uintptr_t)oi.object));
  hl_heap_free(coll);

  /* no page because every released page's restore fails (injected EIO, as a
   * Darwin MADV_FREE_REUSE failure): the refusal says so, and the errno --
   * it said "the reservation ... is exhausted (reserve_bytes)", pointing at
   * an option that was not the cause (a fuzzing helper's finding) */
  hl_heap *rh = HEAP("mode=collected", "page_size=65536", "reserve_bytes=1m", "warm_pages=0");
  hl_ref rf;
  OK(rh, hl_fill(rh, 300 << 10, 64, 0, &rf));
  OK(rh, hl_ref_release(rh, rf));
  OK(rh, hl_collect(rh, 2, 1));
  OK(rh, hl_trim(rh));
  CHECK(stats_of(rh).released_pool_pages > 0, "no page was released");
  OK(rh, hl_inject_named(rh, "restore", "always", 0, "EIO"));
  int rrc = HL_OK;
  for (int i = 0; i < 100000 && rrc == HL_OK; i++) { /* kept: the fresh pages fill up first */
    hl_ref one;
    rrc = hl_alloc(rh, 64, 0, &one);
  }
  CHECK(rrc == HL_ENOMEM && strstr(hl_heap_error(rh), "their restores fail") &&
            strstr(hl_heap_error(rh), "Input/output error") && !strstr(hl_heap_error(rh), "reserve_bytes"),
        "allocation with every restore failing: %s: %s", hl_error_name(rrc), hl_heap_error(rh));
  hl_heap_free(rh);
  return 0;
}
