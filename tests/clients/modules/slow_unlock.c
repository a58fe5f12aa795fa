/* Preloaded into a launcher by the clients scenario exit_inside_errlock:
 * once the program sets slow_unlock_armed (ctypes, through the process's
 * global symbols), every pthread_mutex_unlock waits 300 us before it lets
 * the mutex go -- each mutex is held that much longer, so that an alarm
 * lands inside the heap's errlock often (as preload_exit_in_handler.c's
 * refused_sized slows its locks: h39exit, session 39).  Not armed: no
 * change. */
#ifndef _GNU_SOURCE /* (meson.build passes -D_GNU_SOURCE) */
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <time.h>

__attribute__((visibility("default"))) int slow_unlock_armed;

__attribute__((visibility("default"))) int pthread_mutex_unlock(pthread_mutex_t *m) {
  static int (*real)(pthread_mutex_t *);
  if (!real) real = (int (*)(pthread_mutex_t *))dlsym(RTLD_NEXT, "pthread_mutex_unlock");
  if (__atomic_load_n(&slow_unlock_armed, __ATOMIC_RELAXED)) {
    struct timespec d = {0, 300000};
    nanosleep(&d, NULL);
  }
  return real(m);
}
