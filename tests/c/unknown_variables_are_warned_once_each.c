/* Each HEAPLAB_ variable that is no option is warned about on stderr once,
 * whatever its name's length and however many there are (heaplab.h, the
 * environment).  The warnings were remembered in sixteen 64-byte names: a
 * name of 63 characters or more after HEAPLAB_ was never warned about, and
 * past sixteen variables each further one was warned about again at every
 * call -- a line per heap a program made from the environment (the C API
 * hunt, session 36).  Past 256 of them one line says the rest are not
 * listed. */
#include <fcntl.h>

#include "check.h"

static char out[1 << 20];

/* What hl_options_from_env writes to stderr in `calls` calls. */
static const char *stderr_of(int calls) {
  char path[] = "/tmp/heaplab-warned-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0, "mkstemp: %s", strerror(errno));
  unlink(path);
  fflush(stderr);
  int saved = dup(2);
  dup2(fd, 2);
  for (int i = 0; i < calls; i++) {
    hl_options o;
    hl_options_defaults(&o);
    char err[256];
    CHECK(hl_options_from_env(&o, err, sizeof err) == HL_OK, "from_env: %s", err);
  }
  dup2(saved, 2);
  close(saved);
  ssize_t n = pread(fd, out, sizeof out - 1, 0);
  close(fd);
  out[n > 0 ? n : 0] = 0;
  return out;
}

static int count(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

int main(void) {
  /* (the variables of the environment the test runs in, warned about now) */
  int before = count(stderr_of(1), "is not an option");
  char name[160] = "HEAPLAB_";
  memset(name + 8, 'Q', 100); /* 100 characters after the prefix */
  name[108] = 0;
  setenv(name, "1", 1);
  for (int i = 0; i < 20; i++) {
    char v[64];
    snprintf(v, sizeof v, "HEAPLAB_TYPO_%02d", i);
    setenv(v, "1", 1);
  }
  const char *said = stderr_of(3);
  /* (its first 18 characters: the name spelled out here would be one the
   * conventions test sets, and a warning about it fail that test) */
  char start[32];
  snprintf(start, sizeof start, "%.18s", name);
  CHECK(count(said, start) == 1, "the 100-character name warned about %d times in 3 calls: '%s'",
        count(said, start), said);
  for (int i = 0; i < 20; i++) {
    char v[64];
    snprintf(v, sizeof v, "HEAPLAB_TYPO_%02d is not an option", i);
    CHECK(count(said, v) == 1, "HEAPLAB_TYPO_%02d warned about %d times in 3 calls", i,
          count(said, v));
  }
  CHECK(count(said, "\n") == 21, "%d lines for 21 variables: '%s'", count(said, "\n"), said);

  /* 300 more: the first 235 of them (256 in all) named, then one line */
  int named = 235 - before;
  for (int i = 0; i < 300; i++) {
    char v[64];
    snprintf(v, sizeof v, "HEAPLAB_MORE_%03d", i);
    setenv(v, "1", 1);
  }
  said = stderr_of(3);
  CHECK(count(said, "is not an option") == named && count(said, "not listed") == 1 &&
            count(said, "\n") == named + 1,
        "%d variables named (%d expected), %d 'not listed', %d lines",
        count(said, "is not an option"), named, count(said, "not listed"), count(said, "\n"));
  said = stderr_of(2);
  CHECK(!*said, "said again: '%.200s'", said);
  puts("ok");
  return 0;
}
