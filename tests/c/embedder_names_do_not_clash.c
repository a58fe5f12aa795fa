/* A program linked statically against libheaplab may name its own functions
 * as it likes, outside heaplab's hl_ prefix: the archive defined 31 prim_*
 * functions (its OS layer), and a program with its own prim_now_ns failed to
 * link ("multiple definition of `prim_now_ns'": the embedding hunt, session
 * 28, /tmp/h28w/coll.c).  Linked here with the static library, as the other
 * C tests are; tests/c/archive_exports_only_hl_names.py checks every symbol. */
#include "check.h"

/* the embedder's own helpers, named as heaplab's OS layer's were */
uint64_t prim_now_ns(void) { return 42; }
int prim_call(int x) { return x + 1; }
size_t prim_os_page_size(void) { return 3; }
const char *prim_os_footprint_source = "mine";

int main(void) {
  hl_heap *h = HEAP(NULL);
  hl_ref r;
  OK(h, hl_alloc(h, 64, 1, &r));
  OK(h, hl_collect(h, 1, 1));           /* heaplab's clock, its page size, its syscalls */
  hl_footprint fp;
  OK(NULL, hl_footprint_get(&fp));
  CHECK(prim_now_ns() == 42 && prim_call(1) == 2 && prim_os_page_size() == 3 &&
            strcmp(prim_os_footprint_source, "mine") == 0, "the program's own functions");
  hl_heap_free(h);
  puts("ok");
  return 0;
}
