/*
 * A thread made before the program dlopened twenty modules with
 * thread-local storage, which that thread never touched, allocates 40 MB in
 * blocks of 1,000 bytes: past HEAPLAB_RESERVE_BYTES=16m the heap has no
 * small page left, says so (hl__fail_no_page) and the block comes from the
 * large path (glibc's).
 *
 * The refusal's message is written under the heap's lock, into the core's
 * thread-local error buffers (telemetry.c), which the library reached
 * through __tls_get_addr (the general-dynamic model).  With the thread's
 * dynamic thread vector older than the process's TLS generation, glibc
 * brings it up to date there -- Debian's 2.36 to the newest generation --
 * and past its 14 spare slots grows it with realloc, the process's: this
 * library's, on the thread that held the heap's lock (gdb: _dl_resize_dtv
 * <- _dl_update_slotinfo <- update_get_addr <- __tls_get_addr <- hl__failv
 * <- malloc_small).  It waited for itself for ever (h43lock, session 43).
 * The library is built with TLS descriptors now (clients/preload/
 * meson.build): its thread-local variables, in the static TLS block, are
 * read without __tls_get_addr.  The alarm turns a hang into a failure.
 *
 * And the heap must have refused: a program that never reached the refusal
 * passed as well (a larger reservation, a smaller fill).  The blocks it
 * refused are glibc's (the large path: large_map_bytes), so glibc's own
 * count of bytes in use (its mallinfo2, looked up in libc.so.6: the
 * library's answers glibc's and its own) grows by them; at least 1,000
 * blocks' worth, where 40 MB against a 16 MiB reservation makes some 23 MB
 * (session 44: it passed with HEAPLAB_RESERVE_BYTES=64m too).
 *
 *   preload_heap_full_after_tls_dlopens DIR   (DIR/libpreload_tls_module_N.so, N = 1..20)
 */
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define MODULES 20

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "preload_heap_full_after_tls_dlopens: hung\n";
  (void)!write(2, msg, sizeof msg - 1);
  _exit(1);
}

static sem_t go;
static size_t made;
static void *fills_the_heap(void *arg) {
  (void)arg;
  free(malloc(64)); /* (its cache made) */
  sem_wait(&go);    /* the dlopens happen meanwhile */
  for (int i = 0; i < 40000; i++) {
    char *volatile p = malloc(1000);
    if (!p) break;
    p[0] = 1;
    made++;
  }
  return NULL;
}

/* glibc's bytes in use (its arenas and its mmapped blocks), or -1. */
static long long glibc_in_use(void) {
  void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
  struct mallinfo2 (*f)(void) = libc ? (struct mallinfo2 (*)(void))dlsym(libc, "mallinfo2") : NULL;
  if (libc) dlclose(libc);
  if (!f) return -1;
  struct mallinfo2 mi = f();
  return (long long)(mi.uordblks + mi.hblkhd);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  signal(SIGALRM, on_alarm);
  alarm(30);
  sem_init(&go, 0, 0);
  pthread_t t;
  if (pthread_create(&t, NULL, fills_the_heap, NULL) != 0) return 2;
  for (int i = 1; i <= MODULES; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/libpreload_tls_module_%d.so", argv[1], i);
    void *h = dlopen(path, RTLD_NOW);
    if (!h) {
      fprintf(stderr, "preload_heap_full_after_tls_dlopens: %s\n", dlerror());
      return 2;
    }
    char *(*touch)(void) = (char *(*)(void))dlsym(h, "tls_module_touch");
    if (!touch) return 2;
    touch(); /* (this thread's vector grows here; the other's is left behind) */
  }
  long long before = glibc_in_use();
  if (before < 0) {
    fprintf(stderr, "preload_heap_full_after_tls_dlopens: no mallinfo2 in libc.so.6\n");
    return 2;
  }
  sem_post(&go);
  pthread_join(t, NULL);
  long long refused = glibc_in_use() - before;
  printf("preload_heap_full_after_tls_dlopens: %zu blocks of 1,000 bytes; glibc's bytes in use "
         "grew by %lld (the blocks the heap refused)\n", made, refused);
  if (refused < 1000 * 1000) {
    fprintf(stderr, "preload_heap_full_after_tls_dlopens: the heap refused no more than %lld "
            "bytes: the refusal this test is about was not reached\n", refused);
    return 1;
  }
  return 0;
}
