/* hl_interrupt_attach puts heaplab's handler in front of whatever the signal
 * did before, and the signal still does it: a previous SA_SIGINFO handler
 * gets its siginfo, a signal whose action was the default still ends the
 * process by that signal (its exit status says so), an ignored one is still
 * ignored.  A signal that cannot be caught is HL_ESYS, a number that is no
 * signal HL_EINVAL -- and a failed attach can be made again.  A signal whose
 * default does nothing (SIGWINCH) or stops the process (SIGTSTP) interrupts
 * every time, not only the first: the handler set the default back for good
 * and raised it.  (No test
 * reached the SA_SIGINFO and default-action branches of the handler before:
 * make coverage, heap.c 72-75, 90-91.) */
#include <signal.h>
#include <sys/wait.h>

#include "check.h"
#include "internal.h" /* hl__interrupts: the count of interrupts */

static _Atomic int info_signo, info_code;

static void with_info(int sig, siginfo_t *info, void *ctx) {
  (void)ctx;
  info_signo = sig;
  info_code = info ? info->si_code : -1;
}

int main(void) {
  CHECK(hl_interrupt_attach(0) == HL_EINVAL, "signal 0");
  CHECK(hl_interrupt_attach(65) == HL_EINVAL, "signal 65");
  CHECK(hl_interrupt_attach(-1) == HL_EINVAL, "signal -1");
  CHECK(hl_interrupt_attach(SIGKILL) == HL_ESYS, "SIGKILL cannot be caught");
  CHECK(hl_interrupt_attach(SIGKILL) == HL_ESYS, "SIGKILL again: still an error, not 'attached'");

  /* a previous SA_SIGINFO handler gets the signal and its siginfo */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = with_info;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  CHECK(sigaction(SIGUSR2, &sa, NULL) == 0, "sigaction");
  CHECK(hl_interrupt_attach(SIGUSR2) == HL_OK, "attach SIGUSR2");
  raise(SIGUSR2);
  CHECK(info_signo == SIGUSR2, "the SA_SIGINFO handler before was not called (%d)", info_signo);
  CHECK(info_code == SI_TKILL || info_code == SI_USER, "its siginfo did not come along: si_code %d",
        info_code);

  /* replaced by another handler and attached again: in front again, the
   * new one chained (it said "once" and did nothing: a Python
   * signal.signal(SIGINT, ...) and back lost Ctrl-C's stop of a long fill --
   * the review, session 26) */
  uint64_t at_replace = hl__interrupts;
  info_signo = 0;
  CHECK(sigaction(SIGUSR2, &sa, NULL) == 0, "sigaction again"); /* replaces heaplab's */
  raise(SIGUSR2);
  CHECK(hl__interrupts == at_replace && info_signo == SIGUSR2, "replaced: heaplab's handler ran");
  CHECK(hl_interrupt_attach(SIGUSR2) == HL_OK, "attach SIGUSR2 again");
  info_signo = 0;
  raise(SIGUSR2);
  CHECK(hl__interrupts == at_replace + 1, "attached again: no interrupt (%" PRIu64 " -> %" PRIu64 ")",
        at_replace, (uint64_t)hl__interrupts);
  CHECK(info_signo == SIGUSR2, "attached again: the handler in place was not chained");
  CHECK(hl_interrupt_attach(SIGUSR2) == HL_OK, "attach SIGUSR2 a third time");
  raise(SIGUSR2); /* in place: not chained to itself (it would recurse) */
  CHECK(hl__interrupts == at_replace + 2, "a third attach: %" PRIu64 " interrupts",
        (uint64_t)hl__interrupts - at_replace);

  /* an ignored signal stays ignored */
  signal(SIGHUP, SIG_IGN);
  CHECK(hl_interrupt_attach(SIGHUP) == HL_OK, "attach SIGHUP");
  raise(SIGHUP); /* (the test would end here if it were not) */

  /* a signal whose action was the default still ends the process, by it */
  pid_t pid = fork();
  CHECK(pid >= 0, "fork");
  if (pid == 0) {
    signal(SIGUSR1, SIG_DFL);
    if (hl_interrupt_attach(SIGUSR1) != HL_OK) _exit(3);
    raise(SIGUSR1);
    _exit(0); /* not reached when the default action ran */
  }
  int status;
  CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
  CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGUSR1,
        "the child %s (status %#x): SIGUSR1's default action was lost",
        WIFEXITED(status) ? "exited" : "was killed by another signal", status);

  /* a default that ignores: interrupts each time, and stays attached */
  signal(SIGWINCH, SIG_DFL);
  CHECK(hl_interrupt_attach(SIGWINCH) == HL_OK, "attach SIGWINCH");
  uint64_t before = atomic_load(&hl__interrupts);
  raise(SIGWINCH);
  raise(SIGWINCH);
  CHECK(atomic_load(&hl__interrupts) == before + 2, "SIGWINCH interrupted %d of 2 times",
        (int)(atomic_load(&hl__interrupts) - before));
  struct sigaction now;
  CHECK(sigaction(SIGWINCH, NULL, &now) == 0 && (now.sa_flags & SA_SIGINFO),
        "SIGWINCH's handler went");

  /* a default that stops: the process stops, and continued, is attached
   * still (the child stops twice, the parent continues it twice) */
  pid = fork();
  CHECK(pid >= 0, "fork");
  if (pid == 0) {
    /* a process group of its own, whose parent (this test) is in another
     * group of the session: not orphaned -- the kernel discards a stop
     * signal's default action in an orphaned group (meson runs a test in a
     * session of its own) */
    setpgid(0, 0);
    signal(SIGTSTP, SIG_DFL);
    if (hl_interrupt_attach(SIGTSTP) != HL_OK) child_exit(3);
    uint64_t first = atomic_load(&hl__interrupts);
    raise(SIGTSTP);
    raise(SIGTSTP);
    /* (child_exit: make coverage counts the handler's stop branch -- _exit
     * lost the child's counts, and heap.c's lines read never executed; the
     * SIGUSR1 child above ends by its signal, which writes no counts) */
    child_exit(atomic_load(&hl__interrupts) == first + 2 ? 0 : 4);
  }
  for (int stop = 0; stop < 2; stop++) {
    CHECK(waitpid(pid, &status, WUNTRACED) == pid, "waitpid");
    CHECK(WIFSTOPPED(status) && WSTOPSIG(status) == SIGTSTP,
          "stop %d: the child did not stop by SIGTSTP (status %#x)", stop + 1, status);
    kill(pid, SIGCONT);
  }
  CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "the child (status %#x): exit 4 is a SIGTSTP that did not interrupt", status);
  puts("ok");
  return 0;
}
