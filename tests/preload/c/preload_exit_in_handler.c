/* A SIGALRM handler that calls _exit(3) -- the async-signal-safe way out --
 * while the program's thread is in a malloc/free loop: the handler often
 * interrupts an allocation holding the heap lock, or inside its thread
 * cache's fast path.  The preloaded library's _exit ran HEAPLAB_VERIFY's
 * check (which takes the heap lock) and, with HEAPLAB_STATS, a dlsym (whose
 * missing symbol's error string is malloc'ed) before its busy check: the
 * process hung for ever (6 of 6 runs under verify; 1 of 300 with a report,
 * the review of f384a21).  tests/preload/run.py exit_in_signal_handler runs
 * it many times with a timeout.
 *
 *   preload_exit_in_handler DELAY_US [loop|small|large|threaded|fork|new_threads|
 *                            mallopt|malloc_info|refused_sized|lock_held|
 *                            cached_large|setup_mallopt|setup_fork] [_exit|exit]
 * loop: sizes 16..5015 (the small and mid classes); small: 8..192 bytes in
 * a scattered order (the thread cache's fast paths); large: 20,000..219,999
 * bytes (past small_max: glibc's own malloc, outside the heap's lock) and
 * threaded: loop's sizes, each with a second thread (SIGALRM blocked, it
 * sleeps), so that glibc takes its arena's lock -- a handler that
 * interrupted glibc's malloc (large; threaded under HEAPLAB_ALLOCATOR=libc)
 * holds it, and a report allocating through glibc waited for it for ever.
 * fork: fork() in a loop beside a second thread, 128 MiB touched: glibc's
 * fork holds every arena's lock around the clone (under
 * HEAPLAB_ALLOCATOR=libc a handler there found no busy heap: the review of
 * session 34).
 * new_threads: threads made one after another, each allocating once (making
 * its thread cache) and ending, SIGALRM taken only by them, and every
 * pthread_mutex_lock of the process (this program's definition: the library
 * binds to it, -rdynamic) followed by 300 us of spinning -- the window in
 * which a thread making its cache holds the caches' registry lock and not
 * yet the heap's, from a few instructions to 300 us: the report made a
 * second cache there and waited for that lock for ever (1 of 2,000 runs of
 * small on a loaded machine, session 35).
 * mallopt, malloc_info: mallopt (with a malloc and a free), or malloc_info
 * over 20,000 free chunks in glibc's bins, in a loop beside a second
 * thread -- glibc's, which take its arena locks, reached the program past
 * the library's count of calls inside glibc: under HEAPLAB_ALLOCATOR=libc
 * the report waited for the lock its own thread held (18 and 14 of 20 runs,
 * h39exit, session 39).
 * refused_sized (HEAPLAB_VERIFY=1): free_sized of each block with a size it
 * does not hold, refused -- the core copies the refusal's message to the
 * heap under the heap's errlock, the heap's lock free -- then free; every
 * mutex lock 300 us slower, as in new_threads, so the handler often lands
 * with errlock held: the report, whose vma_count fails without /proc (a
 * failure: the message to the heap again), waited for that lock for ever
 * (5 of 30 runs, h39exit, session 39).
 * lock_held (HEAPLAB_VERIFY=1 HEAPLAB_TCACHE_BLOCKS=0: a free takes the
 * heap's lock and poisons the block): a second thread frees a block whose
 * page is unreadable, and its SIGSEGV handler holds it there, the heap's
 * lock held, for 100 ms; the main thread calls exit() meanwhile.  The report
 * at exit tries the lock for half a second: it must wait for it and write
 * the report (no alarm; the mutation audit, session 40).
 * cached_large: large's loop after 1,024 blocks of 16,000 bytes were made and
 * freed -- kept by the thread's cache under HEAPLAB_TCACHE_BYTES=0, their
 * 256 pages otherwise empty: the exit's flush gives them back and trims,
 * and the trim takes its lists from glibc -- with exit(), inside glibc's
 * malloc, its arena lock held (h41libc, session 41).
 * setup_mallopt, setup_fork: no malloc at all (the third argument sets no
 * heap up), one thread: mallopt in a loop (glibc's holds the main arena's
 * lock), or fork() in a loop (the library's fork handlers count the fork as
 * inside glibc's allocator; the children end by the exit_group system call,
 * past the library) -- a report asked, the heap is set up at exit, from
 * glibc: inside glibc's allocator it is refused ("busy"), never made there
 * (h41libc read it from the code; h42left, session 42).
 * _exit, exit: the heap is set up (a malloc and a free) before the alarm is
 * armed -- an alarm in the set-up says "being set up" and writes no report
 * -- and the handler calls that: exit(3) flushes the exiting thread's cache
 * before the report; _exit(3) does not. */
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int by_exit;
static void on_alarm(int sig) {
  (void)sig;
  if (by_exit) exit(3);
  _exit(3);
}

static volatile int slow_lock;
/* (glibc's own, by its other name: linked through its version, as dlsym
 * would call malloc before this program's main; elsewhere new_threads runs
 * without the slow locks) */
#if defined(__x86_64__)
#define GLIBC_BASE "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define GLIBC_BASE "GLIBC_2.17"
#endif
#ifdef GLIBC_BASE
int real_mutex_lock(pthread_mutex_t *m);
__asm__(".symver real_mutex_lock, __pthread_mutex_lock@" GLIBC_BASE);
int pthread_mutex_lock(pthread_mutex_t *m) {
  int r = real_mutex_lock(m);
  if (slow_lock) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < 300000);
  }
  return r;
}
#endif

/* SIGALRM blocked or unblocked in the calling thread (how: SIG_BLOCK, ...);
 * the mask before in *old when old is not NULL */
static void alarm_mask(int how, sigset_t *old) {
  sigset_t alarm;
  sigemptyset(&alarm);
  sigaddset(&alarm, SIGALRM);
  pthread_sigmask(how, &alarm, old);
}

static void *allocates_once(void *arg) {
  (void)arg;
  alarm_mask(SIG_UNBLOCK, NULL);
  char *volatile p = malloc(64);
  if (p) p[0] = 1;
  free(p);
  return NULL;
}

static void *asleep(void *arg) {
  (void)arg;
  for (;;) pause();
  return NULL;
}

/* lock_held: a block whose free faults, the heap's lock held -- its page
 * made unreadable, the handler holding the freeing thread there 100 ms
 * before it makes the page readable again and the free goes on */
static char *volatile held_block;
static sem_t in_free;
static void on_held(int sig) {
  (void)sig;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  sem_post(&in_free);
  struct timespec d = {0, 100 * 1000 * 1000};
  nanosleep(&d, NULL);
  mprotect((void *)((uintptr_t)held_block & ~(uintptr_t)(page - 1)), page,
           PROT_READ | PROT_WRITE);
}
static void *frees_held(void *arg) {
  (void)arg;
  free(held_block);
  return NULL;
}

int main(int argc, char **argv) {
  long delay = argc > 1 ? atol(argv[1]) : 20000;
  const char *mode = argc > 2 ? argv[2] : "loop";
  by_exit = argc > 3 && strcmp(argv[3], "exit") == 0;
  int cached = strcmp(mode, "cached_large") == 0;
  int small = strcmp(mode, "small") == 0, large = strcmp(mode, "large") == 0 || cached;
  int forks = strcmp(mode, "fork") == 0;
  int refused = strcmp(mode, "refused_sized") == 0;
  int info = strcmp(mode, "malloc_info") == 0, opt = strcmp(mode, "mallopt") == 0;
  if (large || forks || info || opt || strcmp(mode, "threaded") == 0) {
    sigset_t old;
    alarm_mask(SIG_BLOCK, &old);
    pthread_t t;
    if (pthread_create(&t, NULL, asleep, NULL) != 0) return 2;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
  }
  /* (large: the heap's event ring filled first -- 4 MiB of small blocks
   * freed and trimmed, a trim event each time -- so that an event trace,
   * HEAPLAB_TRACE_EVENTS, is past 16 KiB) */
  static char *volatile fill[4096];
  for (int i = 0; large && !cached && i < 120; i++) {
    for (int k = 0; k < 4096; k++) {
      fill[k] = malloc(1000);
      if (fill[k]) fill[k][0] = 1;
    }
    for (int k = 0; k < 4096; k++) free(fill[k]);
    malloc_trim(0);
  }
  /* (cached_large: 256 pages of 64 KiB whose every block sits in the
   * thread's cache) */
  for (int k = 0; cached && k < 1024; k++) {
    fill[k] = malloc(16000);
    if (fill[k]) fill[k][0] = 1;
  }
  for (int k = 0; cached && k < 1024; k++) free(fill[k]);
  /* (fork: 128 MiB touched first, so that each fork's copy of the page
   * tables -- the time glibc holds its arenas' locks -- is long) */
  char *big = forks ? malloc((size_t)128 << 20) : NULL;
  if (big) memset(big, 1, (size_t)128 << 20);
  /* (malloc_info: 20,000 free chunks between live ones in glibc's bins,
   * which malloc_info walks with the arena's lock held) */
  static char *volatile frag[40000];
  for (int k = 0; info && k < 40000; k++) frag[k] = malloc(200 + (k % 50) * 16);
  for (int k = 0; info && k < 40000; k += 2) free(frag[k]);
  /* (refused_sized: the library's free_sized -- glibc 2.36 has none) */
  void (*free_sized)(void *, size_t) =
      refused ? (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "free_sized") : NULL;
  if (refused && !free_sized) return 2;
  if (strcmp(mode, "lock_held") == 0) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    held_block = malloc(3000);
    if (!held_block || sem_init(&in_free, 0, 0) != 0) return 2;
    memset(held_block, 1, 3000);
    signal(SIGSEGV, on_held);
    if (mprotect((void *)((uintptr_t)held_block & ~(uintptr_t)(page - 1)), page, PROT_NONE))
      return 2;
    pthread_t t;
    if (pthread_create(&t, NULL, frees_held, NULL) != 0) return 2;
    while (sem_wait(&in_free) != 0) {
    }
    exit(3);
  }
  int setup = strncmp(mode, "setup_", 6) == 0;
  if (argc > 3 && !setup) { /* (volatile: a malloc freed at once is no call to the compiler) */
    char *volatile first = malloc(1);
    free(first);
  }
  signal(SIGALRM, on_alarm);
  struct itimerval it = {{0, 0}, {0, delay}};
  setitimer(ITIMER_REAL, &it, 0);
  if (strcmp(mode, "new_threads") == 0) {
    alarm_mask(SIG_BLOCK, NULL); /* (the threads take it) */
    slow_lock = 1;
    for (;;) {
      pthread_t t;
      if (pthread_create(&t, NULL, allocates_once, NULL) != 0) return 2;
      pthread_join(t, NULL);
    }
  }
  while (setup && strcmp(mode, "setup_fork") == 0) {
    pid_t c = fork();
    if (c == 0) syscall(SYS_exit_group, 0); /* (no report of the child's: not the library's _exit) */
    if (c > 0) waitpid(c, NULL, 0);
  }
  while (setup) mallopt(M_MMAP_THRESHOLD, 1 << 20);
  while (forks) {
    pid_t c = fork();
    if (c == 0) _exit(0);
    if (c > 0) waitpid(c, NULL, 0);
  }
  if (opt) { /* (glibc's: the main arena's lock held, its fast bins consolidated) */
    for (;;) {
      void *volatile p = malloc(100);
      mallopt(M_MMAP_THRESHOLD, 1 << 20);
      free(p);
    }
  }
  if (info) { /* (glibc's: each arena's lock held while it counts the chunks of its bins) */
    FILE *null = fopen("/dev/null", "w");
    if (!null) return 2;
    for (;;) malloc_info(0, null);
  }
  if (refused) {
    slow_lock = 1;
    for (;;) {
      char *volatile p = malloc(100);
      free_sized(p, 5000); /* (more than the block holds: refused under verify) */
      free(p);
    }
  }
  void *v[256] = {0};
  for (unsigned long i = 0;; i++) {
    unsigned k = small ? (unsigned)((i * 2654435761u) % 256) : (unsigned)(i % 64);
    free(v[k]);
    v[k] = malloc(small ? 8 + (i % 24) * 8
                  : large ? 20000 + (i * 7919) % 200000 : 16 + (i * 7919) % 5000);
  }
}
