/*
 * A program whose first malloc comes from inside setlocale(), on a heap that
 * cannot be set up (the reservation refused: HEAPLAB_FAULT_RESERVE=always,
 * or a small ulimit -v), runs on glibc with one line -- and its later
 * setlocale calls work.
 *
 * setlocale holds glibc's locale lock for writing while it mallocs; the
 * heap's set-up, failing, built its message with strerror, which translates
 * through gettext and read-locks the same lock: the read-lock failed
 * (EDEADLK), its unlock released setlocale's write lock, and the next
 * setlocale hung (bash -c 'echo hi' under ulimit -v 60000 hung for ever; a
 * helper's hostile run).  The core's messages say errnos untranslated now
 * (hl__strerror).  The alarm turns the hang into a failure.
 */
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "preload_setlocale_after_a_refused_heap: setlocale hung\n";
  (void)!write(2, msg, sizeof msg - 1);
  _exit(1);
}

int main(void) {
  signal(SIGALRM, on_alarm);
  alarm(20);
  if (!setlocale(LC_ALL, "")) {
    fprintf(stderr, "setlocale(LC_ALL, \"\") failed: LANG=%s\n", getenv("LANG"));
    return 1;
  }
  fprintf(stderr, "%s\n", strerror(2)); /* a reader of the same lock */
  for (int i = 0; i < 3; i++) {
    if (!setlocale(LC_ALL, i % 2 ? "C" : "")) return 1;
    char *p = malloc(100);
    if (!p) return 1;
    free(p);
  }
  puts("preload_setlocale_after_a_refused_heap: ok");
  return 0;
}
