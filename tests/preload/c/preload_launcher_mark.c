/* A launcher's process -- heaplab-lua, heaplab-python: the executable
 * exports the mark the preloaded library looks for (CLIENT_LAUNCHER_MARK,
 * clients/client.h; -rdynamic here) -- whose HEAPLAB_STATS report is the
 * launcher's own, written at exit (an atexit handler here), and which never
 * allocated through the library.  The library sets a heap up at exit for a
 * program that never allocated, and that set-up fills the report's path:
 * with the launcher check made before it, the library's report replaced the
 * launcher's (the review of session 33, mended in 71e29fe).  Run by
 * tests/preload/run.py's launcher_that_never_allocated. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((used)) const char heaplab_launcher_process[] =
    "test_preload_launcher_mark: the report is the launcher's";

#define OWN_REPORT "{\"launcher\": \"test_preload_launcher_mark\"}\n"

/* (open, write, close: no malloc) */
static void launcher_report(void) {
  const char *path = getenv("HEAPLAB_STATS");
  int fd = path ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
  if (fd < 0 || write(fd, OWN_REPORT, strlen(OWN_REPORT)) != (ssize_t)strlen(OWN_REPORT)) _exit(2);
  close(fd);
}

int main(void) {
  atexit(launcher_report); /* (one of the 32 entries glibc keeps without malloc) */
  return 0;
}
