/*
 * preload_threads.c -- 8 threads on the preloaded malloc: 4 producers
 * allocate blocks of every size class and some large ones, write a pattern
 * and hand them to 4 consumers through a queue; the consumers check the
 * pattern, realloc some, and free them (every free is cross-thread).  While
 * they run, the main thread forks: the child (one thread, inheriting a heap
 * whose other threads vanished mid-call) allocates, frees, starts threads of
 * its own and exits 0.  Then 50 threads exit whose pthread_key destructor
 * allocates and frees after the library's gave their cache back, and a
 * posix_spawn'd copy of this program (the library comes along in
 * LD_PRELOAD) runs a short workload.
 *
 * Built twice: against the preloaded library (LD_PRELOAD, suite preload) and
 * with -DPREFIXED against hlp_malloc & co. linked in, under ThreadSanitizer
 * (suite threads), whose own malloc must stay the process's.
 * Exit 0 = everything checked out.
 */
#include <errno.h>
#include <pthread.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef PREFIXED
void *hlp_malloc(size_t);
void hlp_free(void *);
void *hlp_realloc(void *, size_t);
void *hlp_calloc(size_t, size_t);
#define MALLOC hlp_malloc
#define FREE hlp_free
#define REALLOC hlp_realloc
#define CALLOC hlp_calloc
#else
static void *(*volatile MALLOC)(size_t) = malloc;
static void (*volatile FREE)(void *) = free;
static void *(*volatile REALLOC)(void *, size_t) = realloc;
static void *(*volatile CALLOC)(size_t, size_t) = calloc;
#endif

extern char **environ;

#define PRODUCERS 4
#define CONSUMERS 4
#define PER_PRODUCER 60000
#define QCAP 1024

typedef struct block {
  size_t size;
  uint32_t seed;
} block; /* at the start of every block: its size and pattern seed */

static void *queue[QCAP];
static int qhead, qtail, qcount, producers_left = PRODUCERS;
static pthread_mutex_t qlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t qnonempty = PTHREAD_COND_INITIALIZER, qnonfull = PTHREAD_COND_INITIALIZER;
static _Atomic long bad_blocks, consumed;

static size_t pick_size(uint32_t *r) {
  *r = *r * 1103515245u + 12345u;
  uint32_t x = *r >> 8;
  if (x % 97 == 0) return 20000 + x % 300000; /* large path */
  if (x % 7 == 0) return 600 + x % 16000;     /* big classes */
  return sizeof(block) + x % 500;             /* the busy small classes */
}

static void stamp(unsigned char *p, size_t size, uint32_t seed) {
  block b = {size, seed};
  memcpy(p, &b, sizeof b);
  for (size_t i = sizeof b; i < size; i += 61) p[i] = (unsigned char)(seed + i);
  p[size - 1] = (unsigned char)(seed ^ 0x5a);
}

static int intact(const unsigned char *p) {
  block b;
  memcpy(&b, p, sizeof b);
  for (size_t i = sizeof b; i < b.size; i += 61)
    if (i != b.size - 1 && p[i] != (unsigned char)(b.seed + i)) return 0;
  return p[b.size - 1] == (unsigned char)(b.seed ^ 0x5a);
}

static void *producer(void *arg) {
  uint32_t r = (uint32_t)(uintptr_t)arg * 7919u + 1;
  void *local[64] = {0};
  for (int i = 0; i < PER_PRODUCER; i++) {
    size_t n = pick_size(&r);
    unsigned char *p = MALLOC(n);
    if (!p) {
      bad_blocks++;
      continue;
    }
    stamp(p, n, r);
    /* some churn of its own: same-thread frees too */
    int k = (int)(r % 64);
    FREE(local[k]);
    local[k] = MALLOC(1 + r % 300);
    pthread_mutex_lock(&qlock);
    while (qcount == QCAP) pthread_cond_wait(&qnonfull, &qlock);
    queue[qtail] = p;
    qtail = (qtail + 1) % QCAP;
    qcount++;
    pthread_cond_signal(&qnonempty);
    pthread_mutex_unlock(&qlock);
  }
  for (int k = 0; k < 64; k++) FREE(local[k]);
  pthread_mutex_lock(&qlock);
  producers_left--;
  pthread_cond_broadcast(&qnonempty);
  pthread_mutex_unlock(&qlock);
  return NULL;
}

static void *consumer(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&qlock);
    while (qcount == 0 && producers_left > 0) pthread_cond_wait(&qnonempty, &qlock);
    if (qcount == 0) {
      pthread_mutex_unlock(&qlock);
      return NULL;
    }
    unsigned char *p = queue[qhead];
    qhead = (qhead + 1) % QCAP;
    qcount--;
    pthread_cond_signal(&qnonfull);
    pthread_mutex_unlock(&qlock);
    if (!intact(p)) bad_blocks++;
    block b;
    memcpy(&b, p, sizeof b);
    if (b.seed % 5 == 0) { /* grow it across threads: contents kept */
      unsigned char *q = REALLOC(p, b.size * 2 + 1);
      if (!q || !intact(q)) bad_blocks++;
      else p = q;
    }
    FREE(p);
    consumed++;
  }
}

/* a short workload with a thread of its own: the fork child and the spawned copy */
static void *small_worker(void *arg) {
  (void)arg;
  for (int i = 0; i < 20000; i++) {
    char *p = MALLOC((size_t)(i % 1000) + 1);
    memset(p, i, (size_t)(i % 1000) + 1);
    FREE(p);
  }
  return NULL;
}

/* Thread exit: a pthread_key destructor of the program's runs after the
 * library's (its key is newer), once the thread's cache has gone home;
 * what it frees and allocates then goes to the heap under the lock. */
static pthread_key_t late_key;
static _Atomic long late_frees;
static void late_destructor(void *block) {
  char *p = MALLOC(300);
  memset(p, 7, 300);
  FREE(p);
  FREE(block);
  late_frees++;
}

static void *exiting_thread(void *arg) {
  (void)arg;
  for (int i = 0; i < 2000; i++) FREE(MALLOC((size_t)(i % 500) + 1));
  pthread_setspecific(late_key, MALLOC(100));
  return NULL;
}

static int short_workload(int with_thread) {
  void *ps[2000];
  for (int i = 0; i < 2000; i++) {
    ps[i] = CALLOC(1, (size_t)(i * 37 % 20000) + 1);
    if (!ps[i]) return 1;
  }
  for (int i = 0; i < 2000; i++) FREE(ps[i]);
  if (!with_thread) return 0;
  pthread_t t;
  if (pthread_create(&t, NULL, small_worker, NULL)) return 1;
  pthread_join(t, NULL);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--child") == 0) return short_workload(1);
  pthread_t th[PRODUCERS + CONSUMERS];
  for (int i = 0; i < PRODUCERS; i++)
    pthread_create(&th[i], NULL, producer, (void *)(uintptr_t)(i + 1));
  for (int i = 0; i < CONSUMERS; i++) pthread_create(&th[PRODUCERS + i], NULL, consumer, NULL);

  /* fork while the 8 threads allocate and free */
  int forks_ok = 0;
  for (int f = 0; f < 5; f++) {
    usleep(20000);
    pid_t pid = fork();
#ifdef PREFIXED
    /* ThreadSanitizer cannot follow a thread started in the child of a
     * threaded parent ("dup thread with used id": the new thread reuses a
     * vanished one's id); the child allocates and frees on its one thread */
    if (pid == 0) _exit(short_workload(0));
#else
    if (pid == 0) _exit(short_workload(1));
#endif
    int st = 0;
    if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0)
      forks_ok++;
    else
      fprintf(stderr, "FAIL: fork child %d: status %d\n", f, st);
  }
  for (int i = 0; i < PRODUCERS + CONSUMERS; i++) pthread_join(th[i], NULL);

  /* 50 threads whose key destructor frees and allocates after their cache went */
  pthread_key_create(&late_key, late_destructor);
  for (int i = 0; i < 50; i++) {
    pthread_t t;
    if (pthread_create(&t, NULL, exiting_thread, NULL) == 0) pthread_join(t, NULL);
  }

  /* posix_spawn: a fresh copy of this program, on the library again */
  int spawned_ok = 0;
#ifndef PREFIXED
  pid_t sp;
  char *args[] = {argv[0], "--child", NULL};
  int st = 0;
  if (posix_spawn(&sp, argv[0], NULL, NULL, args, environ) == 0 && waitpid(sp, &st, 0) == sp &&
      WIFEXITED(st) && WEXITSTATUS(st) == 0)
    spawned_ok = 1;
  else
    fprintf(stderr, "FAIL: posix_spawn'd child: status %d\n", st);
#else
  spawned_ok = 1;
#endif
  long expect = (long)PRODUCERS * PER_PRODUCER;
  int ok = bad_blocks == 0 && consumed == expect && forks_ok == 5 && spawned_ok &&
           late_frees == 50;
  printf("%s: %ld blocks across threads (%ld expected), %ld bad; %d/5 fork children; spawn %s; "
         "%ld/50 late frees at thread exit\n",
         ok ? "ok" : "FAIL", (long)consumed, expect, (long)bad_blocks, forks_ok,
         spawned_ok ? "ok" : "failed", (long)late_frees);
  return ok ? 0 : 1;
}
