/* hl_set_refusal_hook: called once for each hl_malloc, hl_calloc and
 * hl_realloc (new_size > 0) that returns NULL, with the bytes asked and
 * hl_heap_error set; never for a success or realloc's size-0 free; not
 * twice for a realloc whose move is refused (its hl_malloc is the core's
 * quiet one); removed with NULL.  The launchers' allocators are tail calls
 * of hl_malloc because of it (clients/heaplab_python.c). */
#include "check.h"

static struct {
  int calls;
  size_t size;
  hl_heap *heap;
  void *arg;
  char why[256];
} seen;

static void hook(hl_heap *h, size_t size, void *arg) {
  seen.calls++;
  seen.size = size;
  seen.heap = h;
  seen.arg = arg;
  snprintf(seen.why, sizeof seen.why, "%s", hl_heap_error(h));
}

#define REFUSED(h, what, asked, call)                                                  \
  do {                                                                                 \
    int before = seen.calls;                                                           \
    void *r_ = (call);                                                                 \
    CHECK(r_ == NULL, "%s: not refused", what);                                        \
    CHECK(seen.calls == before + 1, "%s: the hook ran %d times", what, seen.calls - before); \
    CHECK(seen.size == (size_t)(asked), "%s: the hook saw %zu bytes, not %zu", what,  \
          seen.size, (size_t)(asked));                                                 \
    CHECK(seen.heap == (h) && seen.arg == &seen, "%s: wrong heap or arg", what);       \
    CHECK(seen.why[0], "%s: hl_heap_error is empty in the hook", what);                \
  } while (0)

int main(void) {
  hl_heap *h = HEAP("mode=manual", "heap_limit_bytes=1m");
  CHECK(hl_set_refusal_hook(NULL, hook, NULL) == HL_EINVAL, "a NULL heap took a hook");
  OK(h, hl_set_refusal_hook(h, hook, &seen));

  void *p = hl_malloc(h, 100);
  void *q = hl_calloc(h, 10, 10);
  CHECK(p && q && seen.calls == 0, "successes ran the hook %d times", seen.calls);
  memset(p, 7, 100);

  REFUSED(h, "malloc", 2u << 20, hl_malloc(h, 2u << 20));
  CHECK(strstr(seen.why, "heap_limit_bytes"), "malloc's reason: %s", seen.why);
  REFUSED(h, "calloc", 2u << 20, hl_calloc(h, 1, 2u << 20));
  REFUSED(h, "calloc overflow", SIZE_MAX, hl_calloc(h, SIZE_MAX / 2, 4));
  REFUSED(h, "realloc", 4u << 20, hl_realloc(h, p, 100, 4u << 20));
  unsigned char *b = p;
  CHECK(b[0] == 7 && b[99] == 7, "a refused realloc lost the block");
  REFUSED(h, "realloc of NULL", 3u << 20, hl_realloc(h, NULL, 0, 3u << 20));

  int before = seen.calls;
  CHECK(hl_realloc(h, q, 100, 0) == NULL, "realloc to 0 returned a block");
  CHECK(seen.calls == before, "realloc's size-0 free ran the hook");

  OK(h, hl_set_refusal_hook(h, NULL, &seen));
  CHECK(hl_malloc(h, 2u << 20) == NULL && seen.calls == before, "a removed hook ran");
  hl_free(h, p);
  hl_heap_free(h);

  /* a collected heap refuses every manual call: the hook says so too */
  hl_heap *g = HEAP("mode=collected");
  OK(g, hl_set_refusal_hook(g, hook, &seen));
  REFUSED(g, "malloc on a collected heap", 64, hl_malloc(g, 64));
  CHECK(strstr(seen.why, "mode=manual"), "the collected heap's reason: %s", seen.why);
  hl_heap_free(g);
  return 0;
}
