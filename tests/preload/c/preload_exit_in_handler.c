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
 *   preload_exit_in_handler DELAY_US [loop|small]
 * loop: sizes 16..5015 (the small and mid classes); small: 8..192 bytes in
 * a scattered order (the thread cache's fast paths). */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static void on_alarm(int sig) {
  (void)sig;
  _exit(3);
}

int main(int argc, char **argv) {
  long delay = argc > 1 ? atol(argv[1]) : 20000;
  int small = argc > 2 && strcmp(argv[2], "small") == 0;
  signal(SIGALRM, on_alarm);
  struct itimerval it = {{0, 0}, {0, delay}};
  setitimer(ITIMER_REAL, &it, 0);
  void *v[256] = {0};
  for (unsigned long i = 0;; i++) {
    unsigned k = small ? (unsigned)((i * 2654435761u) % 256) : (unsigned)(i % 64);
    free(v[k]);
    v[k] = malloc(small ? 8 + (i % 24) * 8 : 16 + (i * 7919) % 5000);
  }
}
