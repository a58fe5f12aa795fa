/* A program with a malloc of its own (a bump allocator in the executable,
 * which exports malloc & co. because libc refers to them): it comes first
 * in symbol lookup, before a preloaded library, so libheaplab-malloc.so's
 * malloc is never called.  The library wrote a blank report at exit (0
 * mallocs, as if nothing were allocated); it says so on stderr and writes
 * none (tests/preload/run.py, own_malloc). */
#include <stddef.h>
#include <string.h>
#include <stdio.h>
#include <errno.h>
static char arena[64 << 20];
static size_t top;
void *malloc(size_t n) {
  n = (n + 15) & ~(size_t)15;
  if (top + n > sizeof arena) { errno = ENOMEM; return NULL; }
  void *p = arena + top; top += n; return p;
}
void free(void *p) { (void)p; }
void *calloc(size_t a, size_t b) { void *p = malloc(a * b); if (p) memset(p, 0, a * b); return p; }
void *realloc(void *p, size_t n) { void *q = malloc(n); if (q && p) memcpy(q, p, n); return q; }
int main(void) {
  for (int i = 0; i < 1000; i++) {
    char *s = malloc(100);
    if (!s) return 1;
    snprintf(s, 100, "%d", i);
  }
  printf("bump %zu\n", top);
  return 0;
}
