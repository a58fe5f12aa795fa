/* hl_heap_error(NULL) is the calling thread's last failure of a call that
 * had no heap, and stays so whatever calls on heaps -- failed, or reading
 * hl_heap_error(heap) -- come in between (heaplab.h's conventions).  It was
 * one slot with the heap messages: a failed hl_ref_release, or merely
 * reading hl_heap_error(h), replaced it, and hl_options_get's failures set
 * none at all (the embedding hunt, session 28, /tmp/h28w/err.c). */
#include <pthread.h>

#include "check.h"

#define NULL_SAYS(text)                                                        \
  CHECK(strstr(hl_heap_error(NULL), text), "hl_heap_error(NULL) is '%s', expected '%s'", \
        hl_heap_error(NULL), text)

static void *fail_elsewhere(void *arg) {
  /* another thread's heap-less failure: its own slot, not the caller's */
  hl_options o;
  hl_options_defaults(&o);
  int64_t v;
  CHECK(hl_options_get(&o, "other_threads_option", &v) == HL_EOPTION, "get");
  CHECK(hl_ref_release((hl_heap *)arg, 0x5555) != HL_OK, "release");
  return NULL;
}

int main(void) {
  hl_options o;
  hl_options_defaults(&o);
  int64_t v;
  /* hl_options_get's failures say why */
  CHECK(hl_options_get(&o, "nope", &v) == HL_EOPTION, "unknown name");
  NULL_SAYS("unknown option 'nope'");
  CHECK(hl_options_get(&o, "warm_pagez", &v) == HL_EOPTION, "typo");
  NULL_SAYS("did you mean 'warm_pages'");
  CHECK(hl_options_get(NULL, "mode", &v) == HL_EINVAL, "NULL opts");
  NULL_SAYS("hl_options_get: NULL options struct");
  CHECK(hl_options_get(&o, "mode", NULL) == HL_EINVAL, "NULL out");
  NULL_SAYS("hl_options_get: NULL output pointer");

  /* a failed hl_heap_new, then calls on a heap in between */
  hl_heap *h = HEAP(NULL), *x = NULL;
  hl_options bad = o;
  bad.page_size = 3;
  CHECK(hl_heap_new(&bad, &x, NULL, 0) == HL_EVALUE && !x, "heap_new");
  NULL_SAYS("option page_size: 3");
  char kept[256];
  const char *p = hl_heap_error(NULL);
  snprintf(kept, sizeof kept, "%s", p);
  CHECK(hl_ref_release(h, 0x1234) != HL_OK, "release of no handle");
  NULL_SAYS("option page_size: 3");                 /* a failure on a heap */
  CHECK(strstr(hl_heap_error(h), "0x1234") || strstr(hl_heap_error(h), "handle"),
        "h's message: '%s'", hl_heap_error(h));
  NULL_SAYS("option page_size: 3");                 /* reading h's message */
  CHECK(strcmp(p, kept) == 0, "the string read before changed: '%s'", p);
  hl_ref r;
  OK(h, hl_alloc(h, 16, 0, &r));                    /* successful heap calls */
  OK(h, hl_collect(h, 1, 1));
  CHECK(hl_collect(h, 0, 0) == HL_EINVAL, "collect 0");
  (void)hl_heap_error(h);
  NULL_SAYS("option page_size: 3");
  pthread_t t;
  CHECK(pthread_create(&t, NULL, fail_elsewhere, h) == 0, "thread");
  pthread_join(t, NULL);
  NULL_SAYS("option page_size: 3");                 /* another thread's failures */
  CHECK(strcmp(p, kept) == 0, "the string read before changed: '%s'", p);

  /* and the other way: a heap-less failure leaves h's message alone */
  CHECK(hl_ref_release(h, 0x4321) != HL_OK, "release");
  char hmsg[256];
  snprintf(hmsg, sizeof hmsg, "%s", hl_heap_error(h));
  const char *hp = hl_heap_error(h);
  CHECK(hl_options_get(&o, "nope", &v) == HL_EOPTION, "unknown name");
  CHECK(hl_options_set(&o, "page_size", "3", NULL, 0) == HL_EVALUE, "bad value");
  CHECK(strcmp(hp, hmsg) == 0, "h's string changed after heap-less failures: '%s'", hp);
  CHECK(strcmp(hl_heap_error(h), hmsg) == 0, "h's message: '%s'", hl_heap_error(h));
  NULL_SAYS("option page_size: '3' is out of range"); /* the set's */
  /* this thread's own failure on h, then a heap-less one: h's is still its own */
  CHECK(hl_ref_release(h, 0x7778) != HL_OK, "release");
  snprintf(hmsg, sizeof hmsg, "%s", hl_heap_error(h));
  CHECK(hl_ref_release(h, 0x7778) != HL_OK, "release");
  CHECK(hl_heap_new(&bad, &x, NULL, 0) == HL_EVALUE, "heap_new");
  CHECK(strcmp(hl_heap_error(h), hmsg) == 0, "h's message after a heap-less failure: '%s'",
        hl_heap_error(h));
  hl_heap_free(h);
  puts("ok");
  return 0;
}
