/* HEAPLAB_COUNTERS_FILE names the observer's counters file (E6: 4096 zero
 * bytes the parent made, or an empty file): the library maps it shared and
 * bumps its counters.  Any other file is refused with one line on stderr
 * and left as it was: it was truncated to 4096 bytes and its first bytes
 * overwritten by counters (the environment hunt, session 27). */
#include "check.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* A child that makes a heap with HEAPLAB_COUNTERS_FILE=path (the file is
 * opened once per process); what it printed on stderr goes to err. */
static void heap_in_child(const char *path, char *err, size_t len) {
  int fds[2];
  CHECK(pipe(fds) == 0, "pipe");
  pid_t pid = fork();
  CHECK(pid >= 0, "fork");
  if (pid == 0) {
    dup2(fds[1], 2);
    setenv("HEAPLAB_COUNTERS_FILE", path, 1);
    hl_heap *h = NULL;
    char e[256];
    if (hl_heap_new(NULL, &h, e, sizeof e) != HL_OK) child_exit(3);
    hl_ref r;
    for (int i = 0; i < 1000; i++) hl_alloc(h, 100, 0, &r);
    hl_collect(h, 1, 1);
    hl_heap_free(h);
    child_exit(0);
  }
  close(fds[1]);
  size_t n = 0;
  ssize_t r;
  while (n + 1 < len && (r = read(fds[0], err + n, len - 1 - n)) > 0) n += (size_t)r;
  err[n] = 0;
  close(fds[0]);
  int st;
  CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: %d", st);
}

static uint64_t first_counter(const char *path) {
  int fd = open(path, O_RDONLY);
  CHECK(fd >= 0, "open %s", path);
  uint64_t v = 0;
  CHECK(pread(fd, &v, sizeof v, 0) == (ssize_t)sizeof v, "read %s", path);
  close(fd);
  return v;
}

static off_t size_of(const char *path) {
  struct stat st;
  CHECK(stat(path, &st) == 0, "stat %s", path);
  return st.st_size;
}

int main(void) {
  char dir[] = "/tmp/hl_counters_XXXXXX", path[256], err[2048];
  CHECK(mkdtemp(dir), "mkdtemp");

  /* a file of someone's: 10,000 bytes of text, kept as they are */
  snprintf(path, sizeof path, "%s/precious.txt", dir);
  char text[10000];
  for (size_t i = 0; i < sizeof text; i++) text[i] = (char)('a' + i % 26);
  FILE *f = fopen(path, "w");
  CHECK(f && fwrite(text, 1, sizeof text, f) == sizeof text && fclose(f) == 0, "write");
  heap_in_child(path, err, sizeof err);
  CHECK(size_of(path) == (off_t)sizeof text, "truncated to %lld bytes", (long long)size_of(path));
  char back[sizeof text];
  f = fopen(path, "r");
  CHECK(f && fread(back, 1, sizeof back, f) == sizeof back, "read back");
  fclose(f);
  CHECK(memcmp(back, text, sizeof text) == 0, "the file's bytes were written over");
  CHECK(strstr(err, "HEAPLAB_COUNTERS_FILE") && strstr(err, path) && strstr(err, "10000 bytes"),
        "no warning naming the file: '%s'", err);
  unlink(path);

  /* the observer's files: 4096 zero bytes (E6), or empty */
  for (int empty = 0; empty < 2; empty++) {
    snprintf(path, sizeof path, "%s/counters%d", dir, empty);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0 && (empty || ftruncate(fd, 4096) == 0), "make %s", path);
    close(fd);
    heap_in_child(path, err, sizeof err);
    CHECK(!*err, "a warning for the observer's file: '%s'", err);
    CHECK(size_of(path) == 4096 && first_counter(path) > 0, "%s: %lld bytes, %" PRIu64
          " syscalls counted", path, (long long)size_of(path), first_counter(path));
    unlink(path);
  }
  rmdir(dir);
  return 0;
}
