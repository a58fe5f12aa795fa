/*
 * A signal handler that calls malloc -- not async-signal-safe, a program's
 * bug, and a common one -- on a thread that holds the heap's lock: its
 * malloc waits for that lock, the thread for itself.  It hung for ever, in
 * silence (a futex wait of a process using no CPU); the preloaded library
 * now says so on stderr and aborts (hl__reentered) -- as any call under the
 * lock that allocates would (tests/preload/run.py malloc_in_signal_handler).
 *
 * The handler is made to run inside the lock: under HEAPLAB_VERIFY=1 and
 * HEAPLAB_TCACHE_BLOCKS=0 a free takes the heap's lock and poisons the
 * block, whose page the program made unreadable -- a SIGSEGV there, the
 * lock held (preload_exit_in_handler's lock_held does the same).  The
 * handler allocates, or forks; if that returns, it makes the page readable
 * again and the free goes on.  The alarm turns a hang into a failure.
 *
 *   preload_malloc_in_signal_handler [malloc|fork|thread_exit]
 * fork: the handler calls fork() instead (async-signal-safe in POSIX before
 * 2008), the child _exits at once: the library's fork handler waited for
 * the heap's lock 5 ms, let go and started again -- for ever, the lock
 * being its own thread's.  It says so and aborts too.
 * thread_exit (thread caches on, no verify; HEAPLAB_RESERVE_BYTES=16m): a
 * thread with its caches fills the heap, then mallocs once more -- the heap
 * refuses the small block under its lock, and the refusal's message takes
 * the heap's errlock by pthread_mutex_lock, this program's (-rdynamic), where
 * a SIGUSR1 to the thread runs a handler that ends the thread
 * (pthread_exit), the heap's lock held.  The thread's exit flushes its
 * caches (manual.c, tc_destructor), whose try of the heap's lock failed for
 * ever, the lock its own: it slept and tried again, the program's join
 * waiting (session 44).  It says so and aborts too.  (x86-64 and AArch64:
 * glibc's pthread_mutex_lock by its version; elsewhere it exits 77.)
 *
 *   preload_malloc_in_signal_handler first_cache [malloc|fork|thread_exit]
 * (thread caches on): a new thread's first malloc makes its cache, and
 * takes the caches' lock (manual.c, tc_global) by pthread_mutex_lock, this
 * program's, then tries the heap's by pthread_mutex_trylock, this
 * program's too: there, tc_global held, a SIGUSR2 to the thread runs a handler that
 * mallocs -- its cache half-made, not yet its heap's, so the handler's
 * malloc makes another and takes tc_global again -- or forks (the fork
 * handler takes tc_global first) or ends the thread (its exit's flush
 * takes tc_global).  Each waited for its own thread for ever, in silence
 * (the alarm; session 45).  It says so and aborts too (same 77).
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "preload_malloc_in_signal_handler: hung\n";
  (void)!write(2, msg, sizeof msg - 1);
  _exit(1);
}

static char *volatile block;
static int forks;
static size_t page;
static void on_segv(int sig) {
  (void)sig;
  if (forks) {
    pid_t c = fork();
    if (c == 0) _exit(0);
    if (c > 0) waitpid(c, NULL, 0);
  } else {
    char *volatile p = malloc(100);
    if (p) p[0] = 1;
    free(p);
  }
  mprotect((void *)((uintptr_t)block & ~(uintptr_t)(page - 1)), page, PROT_READ | PROT_WRITE);
}

/* thread_exit: the library's pthread_mutex_lock is this one (glibc's own by
 * its version, as preload_exit_in_handler.c links it: dlsym would malloc);
 * armed, it has the calling thread's handler end the thread there */
#if defined(__x86_64__)
#define GLIBC_BASE "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define GLIBC_BASE "GLIBC_2.17"
#endif
static _Atomic int exit_armed, cache_armed;
#ifdef GLIBC_BASE
int real_mutex_lock(pthread_mutex_t *m);
__asm__(".symver real_mutex_lock, __pthread_mutex_lock@" GLIBC_BASE);
int pthread_mutex_lock(pthread_mutex_t *m) {
  if (exit_armed && __atomic_exchange_n(&exit_armed, 0, __ATOMIC_SEQ_CST))
    pthread_kill(pthread_self(), SIGUSR1);
  int r = real_mutex_lock(m);
  /* first_cache: this is tc_global; the handler runs at the next try */
  if (cache_armed == 1) cache_armed = 2;
  return r;
}
/* first_cache: the try of the heap's lock that follows tc_global's taking
 * (manual.c, tc_global_and) -- tc_global held, and its mark set: not in
 * the few instructions between the taking and the mark, the guard's
 * window, where the handler still hangs (docs/clients.md) */
int real_mutex_trylock(pthread_mutex_t *m);
__asm__(".symver real_mutex_trylock, __pthread_mutex_trylock@" GLIBC_BASE);
int pthread_mutex_trylock(pthread_mutex_t *m) {
  if (cache_armed == 2 && __atomic_exchange_n(&cache_armed, 0, __ATOMIC_SEQ_CST))
    pthread_kill(pthread_self(), SIGUSR2);
  return real_mutex_trylock(m);
}
#endif
static void on_usr1(int sig) {
  (void)sig;
  pthread_exit(NULL);
}
static void *just_exits(void *arg) {
  pthread_exit(arg);
}
static void *fills_and_exits(void *arg) {
  (void)arg;
  /* its caches made and the 16 MiB reservation used up (40 MB asked) */
  for (int i = 0; i < 40000; i++) {
    char *volatile p = malloc(1000);
    if (p) p[0] = 1;
  }
  exit_armed = 1;
  char *volatile p = malloc(1000); /* refused under the heap's lock: its message */
  if (p) p[0] = 1;
  return (void *)1; /* (no lock taken there: no exit inside the heap) */
}
/* fn's handler of sig (no flags) */
static void handle(int sig, void (*fn)(int)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = fn;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, NULL);
}
/* fn on a thread of its own, joined (its value in *ret), after a first
 * thread's pthread_exit: glibc loads its unwinder, libgcc_s, at the first,
 * and that allocates -- done here, not inside the heap.  0, or 2 when a
 * thread could not be made. */
static int on_a_thread(void *(*fn)(void *), void **ret) {
  pthread_t t;
  if (pthread_create(&t, NULL, just_exits, NULL) != 0) return 2;
  pthread_join(t, NULL);
  if (pthread_create(&t, NULL, fn, NULL) != 0) return 2;
  pthread_join(t, ret);
  return 0;
}
static int thread_exit(void) {
  handle(SIGUSR1, on_usr1);
#ifndef GLIBC_BASE
  return 77;
#endif
  void *ret = NULL;
  if (on_a_thread(fills_and_exits, &ret)) return 2;
  printf("preload_malloc_in_signal_handler: the thread %s\n",
         ret ? "took no lock in its last malloc" : "ended inside the heap, and its exit returned");
  return ret ? 2 : 0;
}

/* first_cache: what the SIGUSR2 handler does on the thread holding tc_global */
static const char *cache_handler_does;
static void on_usr2(int sig) {
  (void)sig;
  if (strcmp(cache_handler_does, "fork") == 0) {
    pid_t c = fork();
    if (c == 0) _exit(0);
    if (c > 0) waitpid(c, NULL, 0);
  } else if (strcmp(cache_handler_does, "thread_exit") == 0) {
    pthread_exit(NULL);
  } else {
    char *volatile p = malloc(100);
    if (p) p[0] = 1;
    free(p);
  }
}
static void *first_malloc(void *arg) {
  (void)arg;
  cache_armed = 1;
  char *volatile p = malloc(100); /* its first: makes its cache */
  if (p) p[0] = 1;
  free(p);
  return (void *)1;
}
static int first_cache(const char *does) {
  cache_handler_does = does;
  handle(SIGUSR2, on_usr2);
#ifndef GLIBC_BASE
  return 77;
#endif
  void *ret = NULL;
  char *volatile p = malloc(100); /* (the main thread's cache made first) */
  free(p);
  if (on_a_thread(first_malloc, &ret)) return 2;
  printf("preload_malloc_in_signal_handler: the %s in a handler inside the caches' lock %s\n",
         does, ret ? "returned" : "ended the thread, and its exit returned");
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "first_cache") == 0) {
    signal(SIGALRM, on_alarm);
    alarm(20);
    return first_cache(argc > 2 ? argv[2] : "malloc");
  }
  if (argc > 1 && strcmp(argv[1], "thread_exit") == 0) {
    signal(SIGALRM, on_alarm);
    alarm(20);
    return thread_exit();
  }
  forks = argc > 1 && strcmp(argv[1], "fork") == 0;
  page = (size_t)sysconf(_SC_PAGESIZE);
  signal(SIGALRM, on_alarm);
  alarm(20);
  block = malloc(3000);
  if (!block) return 2;
  memset(block, 1, 3000);
  handle(SIGSEGV, on_segv);
  if (mprotect((void *)((uintptr_t)block & ~(uintptr_t)(page - 1)), page, PROT_NONE)) return 2;
  free(block); /* faults under the heap's lock */
  printf("preload_malloc_in_signal_handler: the %s in the handler returned\n",
         forks ? "fork" : "malloc");
  return 0;
}
