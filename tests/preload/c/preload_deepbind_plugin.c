/* The plugin tests/preload/c/preload_deepbind.c opens with RTLD_DEEPBIND,
 * as PHP opens its extensions: its malloc family binds to libc.so.6's before
 * the global scope's.  Built twice (tests/preload/meson.build): lazy
 * binding, and -z now with full RELRO (its GOT read-only once loaded).
 * plugin_free_pointer is a data reference to free (a relocation outside the
 * PLT, in RELRO memory). */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

void (*const plugin_free_pointer)(void *) = free;

void plugin_free(void *p) { free(p); }
void *plugin_malloc(size_t n) { return malloc(n); }
void *plugin_calloc(size_t n, size_t size) { return calloc(n, size); }
void *plugin_realloc(void *p, size_t n) { return realloc(p, n); }
void *plugin_aligned(size_t align, size_t n) {
  void *p = NULL;
  return posix_memalign(&p, align, n) ? NULL : p;
}
size_t plugin_usable_size(void *p) { return malloc_usable_size(p); }
void plugin_free_through_pointer(void *p) { plugin_free_pointer(p); }
