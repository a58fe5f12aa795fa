/* The preloaded library's HEAPLAB_STATS report where a program ends in ways
 * real programs do (found by the preload hunt, twenty-second session); run
 * by tests/preload/run.py's report_edges, which checks the reports:
 *
 *   min_stack      a thread with a PTHREAD_STACK_MIN (16 KiB) stack calls
 *                  exit(3): the report was written on that stack and
 *                  overflowed it (SIGSEGV; glibc exits 3).
 *   fork_in_report another thread's fork() while the report is being
 *                  written (here: from inside it, as the writer opens
 *                  /proc/.../status -- this program's open() is the one the
 *                  library calls), the child flushing its stdio: the
 *                  report's buffered bytes went into the parent's file a
 *                  second time (not JSON).
 *   pthread_exit   the main thread calls pthread_exit; the last thread
 *                  starts this program again (posix_spawn, mode child) and
 *                  ends the process: the report said footprint 0, no VMA, no
 *                  executable (/proc/self unreadable), and the exec'd
 *                  child, not knowing its parent preloaded, wrote its report
 *                  over the parent's.  Prints the child's pid.
 *   vfork_first    the process's first malloc is a vfork child's, which
 *                  then exits: the heap set up there is the parent's (their
 *                  memory is one), and the parent wrote path.<pid> as if it
 *                  were a fork child; it must write path.
 *   child          allocates and exits.
 *   chdir_first    chdir("sub") before the first malloc: a relative path
 *                  was taken from the directory at the first malloc, and the
 *                  report went into sub (the preload hunt, session 25).
 *   no_malloc      never allocates: no report was written at all.
 *   signal_exit    a SIGALRM handler calls exit(0) while main churns
 *                  malloc/free of 1..40,000 bytes (a program whose SIGINT
 *                  handler calls exit): the library's exit took the heap
 *                  lock the interrupted allocation held -- 3-6 runs in 20
 *                  hung, with no report even asked for.  argv[2]: the
 *                  timer in microseconds.
 *   large_frees    100 blocks of 100,000 bytes malloc'd and freed: the
 *                  report's manual_frees counts them (it did not: the
 *                  mutation hunt, session 25).
 *   sleep_first    sleeps 0.3 s and exits without a malloc: the report's
 *                  elapsed_s counted from the heap's set-up (here at exit)
 *                  and said 0.0001 s (the harness hunt, session 29).
 *   whole_or_old   HEAPLAB_STATS names a file holding OLD_REPORT; at every
 *                  write(2) of the exit's report (this program's write is
 *                  the one the library calls) the file at that path is read
 *                  and must still be OLD_REPORT: a reader -- or a second
 *                  process writing the same path -- never meets a report
 *                  half written.  It was truncated at the open and written
 *                  in place: two processes sharing a path left one's tail
 *                  spliced into the other's (6 of 60 not JSON: the harness
 *                  hunt, session 29).  Exits 9 (_exit, on the first write
 *                  that sees otherwise), after saying what it read.
 *   two_exits      argv[2] threads (main among them) meet at a barrier and
 *                  all call exit() at once: in glibc 2.36 a thread that
 *                  calls exit() while another runs the last exit handler
 *                  (_dl_fini, where the report is written) finds the list
 *                  empty and ends the process -- no report in 72 runs of
 *                  200 with two threads, and a .tmp file left (the preload
 *                  hunt, session 32).
 *                  argv[3] "return": main returns (glibc's own exit(),
 *                  which does not come through the library's) as the
 *                  others call exit(); "errx": every thread ends with
 *                  errx(0), whose exit() is glibc's own (not the
 *                  library's: only its handler waits).  Once the threads have met, every
 *                  getpid() takes 2 ms (below).
 *   exit_in_destructor  a destructor of the program (run by _dl_fini before
 *                  the library's) calls exit(3): the library's wait for the
 *                  report's writer waited for the thread it ran on, for
 *                  ever (the review of that wait, session 32)
 *   fork_in_destructor  a destructor forks, the child calls exit(0), the
 *                  parent waits for it: the child waited for ever for a
 *                  writer in its parent, the parent in waitpid
 *   exit_during_setup  main's first malloc sets the heap up; held there
 *                  (this program's getpid, which the set-up calls), it
 *                  starts a thread that calls _exit(0), no report asked:
 *                  that _exit waited half a second for the set-up (the
 *                  wait ran before "nothing asked, nothing done": 71e29fe).
 *                  Still alive 300 ms after the _exit: says so, exits 2.
 *   no_room ROOM   allocates (the heap set up), grows its stack by 512 KiB,
 *                  then sets RLIMIT_AS to its address space (VmSize) plus
 *                  ROOM bytes and calls exit(7): the report's own buffer
 *                  (client_out) cannot be mapped (ROOM 0) or, a report on a
 *                  heap being 4.2 KiB, its first page cannot be doubled
 *                  (ROOM 4096: mremap).  That refusal had no test (h40rep);
 *                  the line "cannot write ...: Cannot allocate memory", the
 *                  status 7.
 *   fork_during_setup  the same hold; the thread started there forks, the
 *                  child calls _exit(0) (HEAPLAB_STATS asked): the child
 *                  kept the parent's "being set up" for good -- its _exit
 *                  waited half a second and said the heap was busy (71e29fe:
 *                  the fork handler makes it "on the system allocator").
 *                  The child's run over 300 ms: says so, exits 2.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <err.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;
static const char *mode = "";
static char self[4096];
static volatile int exiting, forked;

/* The library's open (exported: -rdynamic).  fork_in_report: the first
 * /proc status file opened during exit forks a child that flushes every
 * stdio stream it inherited, then ends. */
int open(const char *path, int flags, ...) {
  mode_t m = 0;
  if (flags & (O_CREAT | O_TMPFILE)) {
    va_list ap;
    va_start(ap, flags);
    m = (mode_t)va_arg(ap, int);
    va_end(ap);
  }
  if (exiting && !forked && strcmp(mode, "fork_in_report") == 0 && strstr(path, "/status")) {
    forked = 1;
    pid_t pid = fork();
    if (pid == 0) {
      fflush(NULL);
      _exit(0);
    }
    if (pid > 0) waitpid(pid, NULL, 0);
  }
  return (int)syscall(SYS_openat, AT_FDCWD, path, flags, m);
}

static void note_exit(void) { exiting = 1; }

/* whole_or_old: what the report's path holds until the new report replaces
 * it, and the check at every write of the exit */
#define OLD_REPORT "{\"old\": true}\n"
static int writes_seen;
static void report_path_still_old(const char *when) {
  const char *path = getenv("HEAPLAB_STATS");
  char got[256];
  ssize_t n = -1;
  int fd = path ? (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0) : -1;
  if (fd >= 0) {
    n = (ssize_t)syscall(SYS_read, fd, got, sizeof got - 1);
    syscall(SYS_close, fd);
  }
  got[n > 0 ? n : 0] = 0;
  if (n != (ssize_t)strlen(OLD_REPORT) || memcmp(got, OLD_REPORT, (size_t)n) != 0) {
    char msg[400];
    int m = snprintf(msg, sizeof msg, "%s write %d of the report: %s holds %zd bytes (%.60s), "
                     "not the old report: written in place\n", when, writes_seen, path, n, got);
    syscall(SYS_write, 2, msg, (size_t)(m > 0 ? m : 0));
    syscall(SYS_exit_group, 9);
  }
}

/* The library's write (exported: -rdynamic). */
ssize_t write(int fd, const void *buf, size_t len) {
  int check = exiting && strcmp(mode, "whole_or_old") == 0 && fd > 2;
  if (check) report_path_still_old("before");
  ssize_t r = (ssize_t)syscall(SYS_write, fd, buf, len);
  if (check) {
    writes_seen++;
    report_path_still_old("after");
  }
  return r;
}

/* The library's getpid (exported: -rdynamic).  two_exits: once the threads
 * have met, each call takes 2 ms -- one lies between glibc handing the
 * library's waiting handler out and that handler's registering itself again
 * (or, in its exit(), before the first thread is known): the window where a
 * third exit() found glibc's list empty and ended the process under the
 * report's writer (1 of 500 runs of eight threads at full speed; with the
 * pause, 68 of 100 of four -- the fresh-clone CI of session 33). */
static volatile int threads_met;
static void held_in_the_setup(void);
static volatile long setup_tid; /* exit/fork_during_setup: main, at its first malloc */
static volatile int setup_held;
pid_t getpid(void) {
  if (threads_met && strcmp(mode, "two_exits") == 0) {
    struct timespec d = {0, 2000000};
    nanosleep(&d, NULL);
  }
  if (setup_tid && !setup_held && syscall(SYS_gettid) == setup_tid) {
    setup_held = 1;
    held_in_the_setup();
  }
  return (pid_t)syscall(SYS_getpid);
}

/* exit/fork_during_setup: what the thread started in the hold does, and
 * what it found */
static volatile int beside_done;
static volatile long child_ms = -1;
static long now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}
static void say(const char *msg) { (void)syscall(SYS_write, 2, msg, strlen(msg)); }
static void *beside_the_setup(void *arg) {
  (void)arg;
  if (strcmp(mode, "exit_during_setup") == 0) {
    beside_done = 1;
    _exit(0);
  }
  long t0 = now_ms();
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  int st;
  if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0)
    child_ms = now_ms() - t0;
  beside_done = 1;
  return NULL;
}
/* (in main's first malloc, the heap being set up: allocations here go to
 * glibc -- pthread_create's) */
static void held_in_the_setup(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, beside_the_setup, NULL) != 0) {
    say("pthread_create failed in the set-up\n");
    syscall(SYS_exit_group, 2);
  }
  for (long t0 = now_ms(); !beside_done && now_ms() - t0 < 20000;) usleep(1000);
  if (!beside_done) {
    say("the thread beside the set-up did not finish in 20 s\n");
    syscall(SYS_exit_group, 2);
  }
  if (strcmp(mode, "exit_during_setup") == 0) {
    struct timespec d = {0, 300000000};
    nanosleep(&d, NULL); /* (the process ends under this sleep) */
    say("another thread's _exit (no report asked) did not end the process in 300 ms: "
        "it waited for the heap's set-up\n");
    syscall(SYS_exit_group, 2);
  }
  pthread_join(t, NULL);
  if (child_ms < 0 || child_ms >= 300) {
    char msg[200];
    snprintf(msg, sizeof msg, "a child forked during the heap's set-up: _exit(0) took %ld ms "
             "(or failed: -1)\n", child_ms);
    say(msg);
    syscall(SYS_exit_group, 2);
  }
}

static void *min_stack(void *arg) {
  (void)arg;
  exit(3);
}

/* Is the main thread gone (its /proc/self maps read empty)? */
static int main_gone(void) {
  int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return 1;
  char c;
  ssize_t n = read(fd, &c, 1);
  close(fd);
  return n <= 0;
}

static void *last_thread(void *arg) {
  (void)arg;
  for (int i = 0; i < 10000 && !main_gone(); i++) usleep(1000);
  if (!main_gone()) {
    fprintf(stderr, "the main thread's pthread_exit did not show in /proc/self/maps\n");
    exit(2);
  }
  char *argv[] = {self, "child", NULL};
  pid_t pid;
  if (posix_spawn(&pid, self, NULL, NULL, argv, environ) != 0) exit(2);
  int st;
  waitpid(pid, &st, 0);
  printf("%d\n", (int)pid);
  fflush(stdout);
  exit(WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 2);
}

static pthread_barrier_t all_exit;
static int by_errx; /* two_exits errx: every thread ends with errx(0) */
static void *exit_too(void *arg) {
  char *volatile p = malloc(100);
  memset(p, 1, 100);
  pthread_barrier_wait(&all_exit);
  threads_met = 1;
  if (by_errx) errx((int)(long)arg, "exits");
  exit((int)(long)arg);
}

/* n bytes of stack touched (no_room: the report, on this stack when its own
 * cannot be mapped, needs no more than the stack mapped already) */
__attribute__((noinline)) static void grow_stack(size_t n) {
  volatile char *a = __builtin_alloca(n);
  for (size_t i = 0; i < n; i += 4096) a[i] = 1;
  a[n - 1] = 1;
}

static void exit_now(int sig) {
  (void)sig;
  exit(0);
}

__attribute__((destructor)) static void program_destructor(void) {
  if (strcmp(mode, "exit_in_destructor") == 0) exit(3);
  if (strcmp(mode, "fork_in_destructor") == 0) {
    pid_t p = fork();
    if (p == 0) exit(0);
    int st;
    if (p > 0) waitpid(p, &st, 0);
  }
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  mode = argv[1];
  if (strcmp(mode, "exit_in_destructor") == 0 || strcmp(mode, "fork_in_destructor") == 0) {
    char *volatile b = malloc(10);
    free(b);
    return 0;
  }
  if (strcmp(mode, "no_malloc") == 0) return 0;
  if (strcmp(mode, "exit_during_setup") == 0 || strcmp(mode, "fork_during_setup") == 0) {
    setup_tid = syscall(SYS_gettid);
    char *volatile b = malloc(100); /* (the process's first: held in its set-up) */
    setup_tid = 0;
    if (!setup_held) {
      say("main's first malloc did not set the heap up (getpid not called in it)\n");
      return 2;
    }
    free(b);
    return 0;
  }
  if (strcmp(mode, "no_room") == 0 && argc == 3) {
    char *volatile b = malloc(100);
    if (!b) return 2;
    b[0] = 1;
    grow_stack(512 << 10);
    /* (read with open and read: a stdio FILE's buffer may map memory) */
    static char status[8192];
    int fd = open("/proc/self/status", O_RDONLY);
    ssize_t got = fd < 0 ? -1 : read(fd, status, sizeof status - 1);
    if (fd >= 0) close(fd);
    const char *vm = got > 0 ? (status[got] = 0, strstr(status, "VmSize:")) : NULL;
    if (!vm) return 2;
    struct rlimit rl = {(rlim_t)strtoull(vm + 7, NULL, 10) * 1024 + (rlim_t)atol(argv[2]),
                        RLIM_INFINITY};
    if (setrlimit(RLIMIT_AS, &rl) != 0) return 2;
    exit(7);
  }
  if (strcmp(mode, "sleep_first") == 0) {
    struct timespec ts = {0, 300000000};
    nanosleep(&ts, NULL);
    return 0;
  }
  if (strcmp(mode, "large_frees") == 0) {
    for (int i = 0; i < 100; i++) {
      char *volatile b = malloc(100000);
      if (!b) return 2;
      b[0] = 1;
      free(b);
    }
    return 0;
  }
  if (strcmp(mode, "chdir_first") == 0 && chdir("sub") != 0) return 2;
  if (strcmp(mode, "signal_exit") == 0) {
    if (argc != 3) return 2;
    signal(SIGALRM, exit_now);
    struct itimerval it = {{0, 0}, {0, atoi(argv[2])}};
    setitimer(ITIMER_REAL, &it, NULL);
    void *v[512] = {0};
    unsigned r = 1;
    for (;;) {
      r = r * 1103515245 + 12345;
      int i = (r >> 8) % 512;
      free(v[i]);
      v[i] = malloc((r >> 12) % 40000 + 1);
    }
  }
  if (strcmp(mode, "two_exits") == 0) {
    int n = argc >= 3 ? atoi(argv[2]) : 2;
    if (n < 2 || pthread_barrier_init(&all_exit, NULL, (unsigned)n) != 0) return 2;
    by_errx = argc == 4 && strcmp(argv[3], "errx") == 0;
    for (int i = 1; i < n; i++) {
      pthread_t t;
      if (pthread_create(&t, NULL, exit_too, NULL) != 0) return 2;
    }
    pthread_barrier_wait(&all_exit);
    threads_met = 1;
    if (argc == 4 && strcmp(argv[3], "return") == 0) return 0; /* (glibc's own exit) */
    if (by_errx) errx(0, "exits");
    exit(0);
  }
  if (strcmp(mode, "vfork_first") == 0) { /* before any malloc of main's */
    pid_t pid = vfork();
    if (pid == 0) {
      char *volatile c = malloc(100);
      (void)c;
      _exit(0);
    }
    if (pid < 0 || waitpid(pid, NULL, 0) != pid) return 2;
    char *volatile q = malloc(200);
    free(q);
    return 0;
  }
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  self[n > 0 ? n : 0] = 0;
  char *p = malloc(1000);
  memset(p, 1, 1000);
  if (strcmp(mode, "child") == 0 || strcmp(mode, "chdir_first") == 0) {
    free(p);
    return 0;
  }
  if (strcmp(mode, "min_stack") == 0) {
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, PTHREAD_STACK_MIN);
    pthread_t t;
    if (pthread_create(&t, &at, min_stack, NULL) != 0) return 2;
    pthread_join(t, NULL);
    return 2; /* (exit(3) ends the process first) */
  }
  if (strcmp(mode, "fork_in_report") == 0 || strcmp(mode, "whole_or_old") == 0) {
    atexit(note_exit);
    return 0;
  }
  if (strcmp(mode, "pthread_exit") == 0) {
    pthread_t t;
    if (pthread_create(&t, NULL, last_thread, NULL) != 0) return 2;
    pthread_exit(NULL);
  }
  return 2;
}
