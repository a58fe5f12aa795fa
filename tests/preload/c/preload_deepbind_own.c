/* An allocator of a plugin's own (tests/preload/c/preload_deepbind.c): a
 * bump arena whose free traps on a block it did not make.  The plugin that
 * links it, opened with RTLD_DEEPBIND, binds malloc and free here. */
#include <stddef.h>
#include <string.h>

static char arena[1 << 20];
static size_t top;

void *malloc(size_t n) {
  n = (n + 15) & ~(size_t)15;
  if (top + n > sizeof arena) return NULL;
  void *p = arena + top;
  top += n;
  return p;
}
void free(void *p) {
  if (p && ((char *)p < arena || (char *)p >= arena + sizeof arena)) __builtin_trap();
}
void *calloc(size_t n, size_t size) {
  void *p = malloc(n * size);
  if (p) memset(p, 0, n * size);
  return p;
}
void *realloc(void *p, size_t n) {
  void *q = malloc(n);
  if (q && p) memcpy(q, p, n);
  return q;
}
