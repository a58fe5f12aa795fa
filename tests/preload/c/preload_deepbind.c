/* A plugin opened with dlopen(RTLD_DEEPBIND) -- PHP opens every extension so
 * -- frees the program's blocks and makes blocks the program frees, reallocs
 * and asks the usable size of.  Deep binding binds the plugin's malloc
 * family to libc.so.6's, past the preloaded library: `php -v` aborted in
 * pdo.so ("double free or corruption (out)": glibc's free of a heaplab
 * block); here the first plugin_free aborted.  The library binds those
 * references to its own functions after such a dlopen (heaplab_malloc.c,
 * "dlopen with RTLD_DEEPBIND").
 *
 *   test_preload_deepbind [--heaplab] LAZY_PLUGIN NOW_PLUGIN KEEPS_PLUGIN
 *
 * KEEPS_PLUGIN links an allocator of its own (preload_deepbind_own.c):
 * opened with RTLD_DEEPBIND after NOW_PLUGIN, it makes a block with its
 * malloc; NOW_PLUGIN opened again with RTLD_DEEPBIND (the objects from it
 * on are looked at again) must leave KEEPS_PLUGIN's free its own -- bound
 * to the library's, it sent that block to glibc ("free(): invalid
 * pointer").
 *
 * Also: a dlopen without RTLD_DEEPBIND of a bare name is searched in the
 * calling program's RUNPATH ($ORIGIN, where the plugins are) -- the library's
 * dlopen must reach glibc's with the program as its caller.  --heaplab: the
 * plugin's malloc(48) is the heap's (in the mapping of the program's
 * malloc(48), not glibc's [heap]). */
#include <dlfcn.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;
static int failures;
#define CHECK(cond, ...)                                                \
  do {                                                                  \
    if (!(cond)) {                                                      \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);              \
      fprintf(stderr, __VA_ARGS__);                                     \
      fputc('\n', stderr);                                              \
      if (++failures > 10) exit(1);                                     \
    }                                                                   \
  } while (0)

/* the start of the mapping holding p (0: none), and whether it is glibc's
 * [heap] */
static uintptr_t mapping_of(const void *p, int *is_brk) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[512];
  uintptr_t start = 0;
  *is_brk = 0;
  while (f && fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx", &lo, &hi) != 2) continue;
    if ((uintptr_t)p >= lo && (uintptr_t)p < hi) {
      start = lo;
      *is_brk = strstr(line, "[heap]") != NULL;
    }
  }
  if (f) fclose(f);
  return start;
}

static void *sym(void *h, const char *name) {
  void *f = dlsym(h, name);
  if (!f) {
    fprintf(stderr, "FAIL: %s: %s\n", name, dlerror());
    exit(1);
  }
  return f;
}

static void with_plugin(const char *path, int mode, int heaplab) {
  void *h = dlopen(path, mode | RTLD_DEEPBIND);
  if (!h) {
    fprintf(stderr, "FAIL: dlopen %s: %s\n", path, dlerror());
    exit(1);
  }
  void (*p_free)(void *) = (void (*)(void *))sym(h, "plugin_free");
  void *(*p_malloc)(size_t) = (void *(*)(size_t))sym(h, "plugin_malloc");
  void *(*p_calloc)(size_t, size_t) = (void *(*)(size_t, size_t))sym(h, "plugin_calloc");
  void *(*p_realloc)(void *, size_t) = (void *(*)(void *, size_t))sym(h, "plugin_realloc");
  void *(*p_aligned)(size_t, size_t) = (void *(*)(size_t, size_t))sym(h, "plugin_aligned");
  size_t (*p_usable)(void *) = (size_t(*)(void *))sym(h, "plugin_usable_size");
  void (*p_free_ptr)(void *) = (void (*)(void *))sym(h, "plugin_free_through_pointer");
  if (heaplab) {
    void *mine = malloc(48), *q = p_malloc(48);
    int brk, mine_brk;
    uintptr_t at = mapping_of(q, &brk), mine_at = mapping_of(mine, &mine_brk);
    CHECK(!mine_brk && !brk && at == mine_at, "%s: the plugin's malloc(48) = %p is not the "
          "heap's (in the mapping at %#lx%s; the program's %p at %#lx)", path, q,
          (unsigned long)at, brk ? ", [heap]" : "", mine, (unsigned long)mine_at);
    p_free(q);
    free(mine);
  }
  for (int i = 0; i < 3000; i++) {
    size_t n = 1 + (size_t)(i * 7919u) % (i % 10 == 0 ? 200000u : 2000u);
    char *p = malloc(n);
    memset(p, 'a', n);
    p_free(p); /* the program's block, the plugin's free */
    char *q = p_malloc(n);
    CHECK(q, "plugin_malloc(%zu)", n);
    memset(q, 'b', n);
    CHECK(malloc_usable_size(q) >= n, "usable size of the plugin's block");
    free(q); /* the plugin's block, the program's free */
    char *r = p_realloc(malloc(n), 2 * n);
    CHECK(r, "plugin_realloc");
    memset(r, 'c', 2 * n);
    free(r);
    char *s = realloc(p_malloc(n), n / 2 + 1);
    CHECK(s, "realloc of the plugin's block");
    p_free_ptr(s); /* free through the plugin's data reference */
    unsigned char *c = p_calloc(n, 1);
    CHECK(c, "plugin_calloc");
    for (size_t k = 0; k < n; k++)
      if (c[k]) {
        CHECK(0, "plugin_calloc(%zu) byte %zu is %d", n, k, c[k]);
        break;
      }
    free(c);
    void *a = p_aligned(64, n);
    CHECK(a && (uintptr_t)a % 64 == 0, "plugin_aligned(64, %zu) = %p", n, a);
    free(a);
    char *u = malloc(n);
    CHECK(p_usable(u) >= n, "the plugin's malloc_usable_size of the program's block (%zu < %zu)",
          p_usable(u), n);
    p_free(u);
  }
  dlclose(h);
}

int main(int argc, char **argv) {
  int heaplab = argc > 1 && !strcmp(argv[1], "--heaplab");
  if (argc != 4 + heaplab) {
    fprintf(stderr, "usage: %s [--heaplab] LAZY_PLUGIN NOW_PLUGIN KEEPS_PLUGIN\n", argv[0]);
    return 2;
  }
  /* a bare name, not RTLD_DEEPBIND: found through this program's RUNPATH
   * only (LD_LIBRARY_PATH would find it for anyone) */
  if (getenv("LD_LIBRARY_PATH")) {
    unsetenv("LD_LIBRARY_PATH");
    execve("/proc/self/exe", argv, environ);
    perror("execve");
    return 1;
  }
  const char *slash = strrchr(argv[1 + heaplab], '/');
  const char *bare = slash ? slash + 1 : argv[1 + heaplab];
  void *b = dlopen(bare, RTLD_NOW);
  CHECK(b, "dlopen(\"%s\") without a path, through the program's RUNPATH: %s", bare, dlerror());
  if (b) dlclose(b);
  /* a plugin's own allocator, bound before a later RTLD_DEEPBIND dlopen */
  void *now = dlopen(argv[2 + heaplab], RTLD_NOW);
  void *keeps = dlopen(argv[3 + heaplab], RTLD_NOW | RTLD_DEEPBIND);
  if (!now || !keeps) {
    fprintf(stderr, "FAIL: dlopen: %s\n", dlerror());
    return 1;
  }
  ((void (*)(void))sym(keeps, "keeps_make"))();
  void *again = dlopen(argv[2 + heaplab], RTLD_NOW | RTLD_DEEPBIND);
  CHECK(again, "dlopen again: %s", dlerror());
  ((void (*)(void))sym(keeps, "keeps_drop"))(); /* (traps unless its own free) */
  if (again) dlclose(again);
  dlclose(keeps);
  dlclose(now);
  with_plugin(argv[1 + heaplab], RTLD_LAZY, heaplab);
  with_plugin(argv[2 + heaplab], RTLD_NOW, heaplab);
  if (failures) return 1;
  printf("ok: two plugins opened with RTLD_DEEPBIND, 3000 rounds each; a plugin kept its allocator\n");
  return 0;
}
