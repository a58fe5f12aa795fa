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
 *   preload_malloc_in_signal_handler [malloc|fork]
 * fork: the handler calls fork() instead (async-signal-safe in POSIX before
 * 2008), the child _exits at once: the library's fork handler waited for
 * the heap's lock 5 ms, let go and started again -- for ever, the lock
 * being its own thread's.  It says so and aborts too.
 */
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

int main(int argc, char **argv) {
  forks = argc > 1 && strcmp(argv[1], "fork") == 0;
  page = (size_t)sysconf(_SC_PAGESIZE);
  signal(SIGALRM, on_alarm);
  alarm(20);
  block = malloc(3000);
  if (!block) return 2;
  memset(block, 1, 3000);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_segv;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, NULL);
  if (mprotect((void *)((uintptr_t)block & ~(uintptr_t)(page - 1)), page, PROT_NONE)) return 2;
  free(block); /* faults under the heap's lock */
  printf("preload_malloc_in_signal_handler: the %s in the handler returned\n",
         forks ? "fork" : "malloc");
  return 0;
}
