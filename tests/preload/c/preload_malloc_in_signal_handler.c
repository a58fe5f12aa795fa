/*
 * A SIGPROF handler that calls malloc and free -- not async-signal-safe, a
 * program's bug, and a common one -- while the program's thread is in a
 * malloc/free loop on a heap without thread caches (HEAPLAB_TCACHE_BLOCKS=0:
 * every call takes the heap's lock).  The handler soon lands while its
 * thread holds the heap's lock, and its malloc waits for that lock: the
 * thread waits for itself.  It hung there for ever, in silence (a futex wait
 * of a process using no CPU); the preloaded library now says so on stderr
 * and aborts (hl__reentered) -- as any call under the lock that allocates
 * would (tests/preload/run.py malloc_in_signal_handler).  The alarm turns a
 * hang into a failure; a loop that ran 5 s without one such landing says so.
 *
 *   preload_malloc_in_signal_handler [malloc|fork]
 * fork: the handler calls fork() instead (async-signal-safe in POSIX before
 * 2008), the child _exits at once: the library's fork handler waits for the
 * heap's lock 5 ms, lets go and starts again -- for ever, the lock being
 * its own thread's.  It says so and aborts too.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "preload_malloc_in_signal_handler: hung\n";
  (void)!write(2, msg, sizeof msg - 1);
  _exit(1);
}

static volatile unsigned long handled;
static int forks;
static void on_prof(int sig) {
  (void)sig;
  if (forks) {
    pid_t c = fork();
    if (c == 0) _exit(0);
    if (c > 0) waitpid(c, NULL, 0);
  } else {
    char *volatile p = malloc(100 + handled % 4000);
    if (p) p[0] = 1;
    free(p);
  }
  handled++;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  forks = argc > 1 && strcmp(argv[1], "fork") == 0;
  signal(SIGALRM, on_alarm);
  alarm(20);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_prof;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGPROF, &sa, NULL);
  struct itimerval it = {{0, 200}, {0, 200}}; /* every 200 us of the process's CPU time */
  setitimer(ITIMER_PROF, &it, NULL);
  static char *volatile v[64];
  double end = now() + 5;
  unsigned long i = 0;
  while (now() < end) {
    for (int k = 0; k < 64; k++, i++) {
      v[k] = malloc(16 + i % 5000);
      if (v[k]) v[k][0] = 1;
    }
    for (int k = 0; k < 64; k++) free(v[k]);
  }
  printf("preload_malloc_in_signal_handler: %lu %s in handlers, none inside the heap's lock\n",
         (unsigned long)handled, forks ? "forks" : "mallocs");
  return 0;
}
