/* No thread makes a heap before heaplab's fork handlers exist.  The first
 * heap registers them (pthread_atfork, once); a second thread making its
 * first heap meanwhile skipped the wait -- the "registering" flag was the
 * process's, there for the registering thread's own malloc in the preloaded
 * library -- and took the registry's lock with no handler there yet: a
 * fork() then left the child that lock held, and its first hl_heap_new
 * waited for ever (fork_while_heaps_come_and_go failed 1 run in ~35 on a
 * loaded machine, session 26; gdb: the child in registry_add's wrlock).
 *
 * Made certain here: this program's __register_atfork (what glibc's
 * pthread_atfork calls; libc_nonshared.a's wrapper binds to the
 * executable's) takes 200 ms before glibc's.  Thread A makes the first heap
 * and is held there; thread B starts then and makes its own: B's heap must
 * not be made before A's registration ends. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
/* Not under the sanitizers: their runtimes register fork handlers of their
 * own while they start, before dlsym works (TSan: a SIGSEGV before main). */
int main(void) { return 77; }
#else
static _Atomic int registering;   /* A is inside __register_atfork */
static _Atomic uint64_t registered_ns; /* when the last registration ended */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int __register_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void),
                      void *dso);
int __register_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void),
                      void *dso) {
  int (*real)(void (*)(void), void (*)(void), void (*)(void), void *) =
      (int (*)(void (*)(void), void (*)(void), void (*)(void), void *))dlsym(
          RTLD_NEXT, "__register_atfork");
  registering = 1;
  usleep(200000);
  int rc = real ? real(prepare, parent, child, dso) : -1;
  registered_ns = now_ns();
  return rc;
}

static void *make_one(void *arg) {
  hl_heap *h = HEAP("mode=manual", "reserve_bytes=64m");
  *(uint64_t *)arg = now_ns();
  hl_heap_free(h);
  return NULL;
}

int main(void) {
  uint64_t made_a = 0, made_b = 0;
  pthread_t a, b;
  CHECK(pthread_create(&a, NULL, make_one, &made_a) == 0, "thread a");
  while (!registering) usleep(1000);
  CHECK(pthread_create(&b, NULL, make_one, &made_b) == 0, "thread b");
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  CHECK(registered_ns != 0, "no fork handler was registered (heaplab's pthread_atfork)");
  printf("fork handlers registered at +0; heap A made at %+.1f ms, heap B at %+.1f ms\n",
         ((double)made_a - (double)registered_ns) / 1e6,
         ((double)made_b - (double)registered_ns) / 1e6);
  CHECK(made_b >= registered_ns, "a heap was made %.1f ms before heaplab's fork handlers "
        "existed: a fork() then would leave the child the registry's lock held",
        ((double)registered_ns - (double)made_b) / 1e6);
  return 0;
}
#endif
