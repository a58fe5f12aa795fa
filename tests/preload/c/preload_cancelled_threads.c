/* A thread cancelled (deferred, pthread_cancel) while it is in the malloc
 * family: no call of glibc's malloc is a cancellation point, and a program
 * may cancel its threads whatever they do.  heaplab's waited on a condition
 * with its locks held -- malloc_trim for another thread's trim, fork()'s
 * prepare handler for a trim or a large realloc in flight -- and a thread
 * cancelled there unwound with the heap lock (in fork, every lock of the
 * registry and the caches) held: every later malloc, free and fork hung.
 *
 *   1. threads that malloc, free and malloc_trim in a loop, cancelled after
 *      a few ms; then the main thread allocates, trims and forks;
 *   2. a thread forking in a loop, cancelled, while two others free (trims)
 *      and grow large blocks with realloc.
 *
 * Run preloaded and on glibc (the control).  A hang ends the test by SIGALRM. */
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 60

static void pause_ms(double ms) {
  struct timespec ts = {0, (long)(ms * 1e6)};
  nanosleep(&ts, NULL);
}

static void fork_and_wait(void) {
  pid_t pid = fork();
  if (pid == 0) {
    void *p = malloc(300); /* the child's heap works */
    _exit(p ? 0 : 1);
  }
  int st;
  if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fprintf(stderr, "FAIL: fork\n");
    exit(1);
  }
}

static void *trimmer(void *arg) {
  void **b = arg;
  for (;;) {
    for (int i = 0; i < 2000; i++) b[i] = malloc(1000);
    for (int i = 0; i < 2000; i++) free(b[i]);
    malloc_trim(0);
    pthread_testcancel();
  }
  return NULL;
}

static volatile int stop;

static void *churn(void *arg) {
  long id = (long)arg;
  static void *b[2000];
  while (!stop) {
    if (id == 0) {
      for (int i = 0; i < 2000; i++) b[i] = malloc(1000);
      for (int i = 0; i < 2000; i++) free(b[i]);
    } else {
      void *p = NULL;
      for (size_t n = 20000; n < 4000000; n += n / 2) {
        void *q = realloc(p, n);
        if (!q) break;
        p = q;
      }
      free(p);
    }
  }
  return NULL;
}

static void *forker(void *arg) {
  (void)arg;
  for (;;) {
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    if (pid > 0) waitpid(pid, NULL, 0);
    pthread_testcancel();
  }
  return NULL;
}

int main(void) {
  alarm(60);
  static void *blocks[4][2000];
  for (int r = 0; r < ROUNDS; r++) {
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, trimmer, blocks[i]);
    pause_ms(3);
    for (int i = 0; i < 4; i++) pthread_cancel(t[i]);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    free(malloc(100));
    malloc_trim(0);
    fork_and_wait();
  }
  pthread_t c[2];
  for (long i = 0; i < 2; i++) pthread_create(&c[i], NULL, churn, (void *)i);
  for (int r = 0; r < 2 * ROUNDS; r++) {
    pthread_t f;
    pthread_create(&f, NULL, forker, NULL);
    pause_ms(1 + (r % 7) * 0.3);
    pthread_cancel(f);
    pthread_join(f, NULL);
    free(malloc(100));
  }
  stop = 1;
  for (int i = 0; i < 2; i++) pthread_join(c[i], NULL);
  fork_and_wait();
  struct mallinfo2 mi = mallinfo2();
  printf("ok: %d rounds of cancelled trims, %d of cancelled forks (%zu bytes in use)\n", ROUNDS,
         2 * ROUNDS, mi.uordblks);
  return 0;
}
