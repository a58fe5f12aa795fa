/*
 * dl_host.h -- the dl_tests' helpers (tests/meson.build): a program that
 * links no heaplab, dlopens the build's libheaplab.so (its path the test's
 * first argument) and calls it through dlsym, as a plugin host or a
 * language's module loader does.  Each scenario runs in a child process of
 * its own (what the library pins is pinned for the process's life);
 * argv[2], when given, names the one scenario to run.
 */
#ifndef HL_TEST_DL_HOST_H
#define HL_TEST_DL_HOST_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <sys/wait.h>

#include "check.h"

static const char *lib_path;
static void *lib;
static const char *only_scenario;

/* a heaplab function through dlsym, with the type heaplab.h declares */
#define F(name) ((__typeof__(&name))dl_sym(#name))
static inline void *dl_sym(const char *name) {
  void *p = dlsym(lib, name);
  CHECK(p, "dlsym %s: %s", name, dlerror());
  return p;
}

static inline void dl_load(void) {
  lib = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
  CHECK(lib, "dlopen %s: %s", lib_path, dlerror());
}

static inline void dl_unload(void) {
  CHECK(dlclose(lib) == 0, "dlclose: %s", dlerror());
  lib = NULL;
}

/* Is libheaplab mapped in this process? */
static inline bool dl_mapped(void) {
  const char *base = strrchr(lib_path, '/') ? strrchr(lib_path, '/') + 1 : lib_path;
  FILE *f = fopen("/proc/self/maps", "r");
  CHECK(f, "/proc/self/maps");
  char line[4096];
  bool found = false;
  while (!found && fgets(line, sizeof line, f)) found = strstr(line, base) != NULL;
  fclose(f);
  return found;
}

static inline void dl_args(int argc, char **argv) {
  CHECK(argc == 2 || argc == 3, "usage: %s path/to/libheaplab.so [scenario]", argv[0]);
  lib_path = argv[1];
  only_scenario = argc == 3 ? argv[2] : NULL;
}

static inline void dl_run(const char *name, void (*scenario)(void)) {
  if (only_scenario && strcmp(only_scenario, name)) return;
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0, "fork");
  if (pid == 0) {
    alarm(120);
    scenario();
    fflush(NULL);
    _exit(0);
  }
  int st;
  CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: the child %s %d", name,
        WIFSIGNALED(st) ? "was killed by signal" : "exited with",
        WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
  printf("%s: ok\n", name);
}

#endif
