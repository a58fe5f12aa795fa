/* What a program sets up before its first malloc -- in a constructor, as a
 * library does -- and what it may then expect of a malloc preloaded beneath
 * it, as of glibc's:
 *
 *  - pthread_atfork handlers that allocate: the prepare handler a large
 *    block, the parent's a large one, the child's a small one.  The heap's
 *    own handlers were registered at the first malloc, after these: heaplab's
 *    prepare ran first and took the heap lock, the program's child and
 *    parent handlers ran before heaplab's released it, and fork() hung.
 *  - 40 pthread keys: the thread-cache key's index is then past glibc's
 *    first 32, and registering a thread's cache allocates glibc's
 *    second-level key array -- through this malloc, in the middle of making
 *    that cache.  The cache was linked to the heap twice and to itself, and
 *    mallinfo2 (the heap's stats: a walk of its caches) and the exit report
 *    (HEAPLAB_STATS) looped for ever.
 *
 * Run by the preload suite with libheaplab-malloc.so preloaded and
 * HEAPLAB_STATS set (the report at exit walks the caches too), and on glibc
 * as the control.  A hang ends the test by SIGALRM. */
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NKEYS 40

static pthread_key_t keys[NKEYS];
static void *volatile prepared, *volatile in_parent, *volatile in_child;

static void prepare(void) { prepared = malloc(100000); }
static void parent(void) { in_parent = malloc(100000); }
static void child(void) { in_child = strdup("made again in the child"); }

__attribute__((constructor)) static void before_main(void) {
  for (int i = 0; i < NKEYS; i++)
    if (pthread_key_create(&keys[i], NULL)) {
      fprintf(stderr, "FAIL: pthread_key_create %d\n", i);
      exit(1);
    }
  pthread_atfork(prepare, parent, child);
}

static void *thread(void *arg) {
  /* a new thread's first malloc makes its cache: the key is set here too */
  char *p = malloc(64);
  if (!p) return NULL;
  strcpy(p, "thread");
  void *q = malloc(20000);
  free(q);
  free(p);
  return arg;
}

int main(void) {
  alarm(30);
  char *volatile first = malloc(100); /* the process's first malloc */
  if (!first) return 1;
  strcpy(first, "first");
  struct mallinfo2 mi = mallinfo2(); /* the stats: a walk of the heap's caches */
  if (mi.uordblks == 0 && mi.hblkhd == 0) {
    fprintf(stderr, "FAIL: mallinfo2 counts nothing in use\n");
    return 1;
  }
  for (int i = 0; i < 4; i++) {
    pthread_t t;
    if (pthread_create(&t, NULL, thread, (void *)1) || pthread_join(t, NULL)) {
      fprintf(stderr, "FAIL: thread %d\n", i);
      return 1;
    }
  }
  mi = mallinfo2();
  if (mi.uordblks == 0 && mi.hblkhd == 0) {
    fprintf(stderr, "FAIL: mallinfo2 counts nothing in use\n");
    return 1;
  }
  pid_t pid = fork();
  if (pid < 0) {
    perror("FAIL: fork");
    return 1;
  }
  if (pid == 0) {
    /* the child's handler allocated; the heap takes more */
    char *more = malloc(300);
    _exit(in_child && prepared && more && strcmp(in_child, "made again in the child") == 0 ? 0 : 3);
  }
  int st;
  if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fprintf(stderr, "FAIL: the child's heap (status %#x)\n", st);
    return 1;
  }
  if (!prepared || !in_parent) {
    fprintf(stderr, "FAIL: the handlers' mallocs returned NULL\n");
    return 1;
  }
  free(prepared);
  free(in_parent);
  free(first);
  malloc_trim(0);
  printf("ok: fork with allocating handlers, %d keys before the first malloc\n", NKEYS);
  return 0;
}
