/*
 * client.c -- the allocator switch, the heap from the environment and the
 * HEAPLAB_STATS report of the launchers (see client.h).
 */
#include "client.h"
#include "../core/src/prim/prim.h" /* (the /proc reads: peak RSS) */
#include "../core/src/internal.h" /* (the heap's lock: is it free at exit) */

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

hl_client client;

uint64_t client_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The process's own peak: VmHWM (hl__prim_os_peak_rss).  Not ru_maxrss, which
 * Linux carries over exec -- a launcher started by a Python parent holding
 * 400 MiB reported 420,768 kB where its own peak was 14,192 (the benchmarks
 * read VmHWM for the same reason: experiments/bench/bench_main.c).
 * ru_maxrss only when /proc cannot be read. */
uint64_t client_peak_rss(void) {
  uint64_t hwm = hl__prim_os_peak_rss();
  if (hwm) return hwm;
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return (uint64_t)ru.ru_maxrss * 1024u; /* Linux reports KiB */
}

/* ---- a refused allocation ---- */

static pthread_mutex_t refusal_lock = PTHREAD_MUTEX_INITIALIZER;
static char refusal[400];

void client_refused(void) {
  if (!client.heap) return;
  const char *why = hl_heap_error(client.heap);
  if (!why || !*why) why = "the heap refused it";
  /* the option the message names (reserve_bytes, heap_limit_bytes), as the
   * variable that sets it for a launcher */
  char var[80] = "";
  for (int i = 0; i < hl_option_count(); i++) {
    hl_option_info info;
    hl_option_info_get(i, &info);
    /* the name as a word: not "mode" inside "model" */
    size_t len = strlen(info.name);
    const char *at = why;
    while ((at = strstr(at, info.name)) &&
           ((at > why && (isalnum((unsigned char)at[-1]) || at[-1] == '_')) ||
            isalnum((unsigned char)at[len]) || at[len] == '_'))
      at += len;
    if (!at) continue;
    size_t n = 0;
    for (const char *p = "HEAPLAB_"; *p; p++) var[n++] = *p;
    for (const char *p = info.name; *p && n + 1 < sizeof var; p++)
      var[n++] = (char)toupper((unsigned char)*p);
    var[n] = 0;
    break;
  }
  pthread_mutex_lock(&refusal_lock);
  snprintf(refusal, sizeof refusal, "%s%s%s", why, *var ? "; raise " : "", var);
  pthread_mutex_unlock(&refusal_lock);
}

/* Every allocation the launcher's heap refuses (hl_set_refusal_hook): the
 * interpreter's allocator need not test each result. */
static void on_refusal(hl_heap *h, size_t size, void *arg) {
  (void)h, (void)size, (void)arg;
  client_refused();
}

void client_refusal_clear(void) {
  pthread_mutex_lock(&refusal_lock);
  refusal[0] = 0;
  pthread_mutex_unlock(&refusal_lock);
}

const char *client_refusal(void) {
  static char copy[sizeof refusal];
  pthread_mutex_lock(&refusal_lock);
  memcpy(copy, refusal, sizeof copy);
  pthread_mutex_unlock(&refusal_lock);
  return copy[0] ? copy : NULL;
}

/* ---- the report's writer (client.h, client_out) ---- */

/* Room for n more bytes: a page mapped first, then doubled with mremap --
 * the preloaded library's event trace may be megabytes, and the report on
 * a heap (4.2 KiB) grows once, so every report test goes through the
 * growth.  False, err set, when the kernel refuses: never cut short
 * without a word. */
static bool out_room(client_out *o, size_t n) {
  if (o->err) return false;
  if (o->cap - o->len >= n) return true;
  size_t cap = o->cap ? o->cap : (size_t)4 << 10;
  while (cap - o->len < n) {
    if (cap > SIZE_MAX / 2) {
      o->err = ENOMEM;
      return false;
    }
    cap *= 2;
  }
  void *p = o->buf ? mremap(o->buf, o->cap, cap, MREMAP_MAYMOVE)
                   : mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    o->err = errno ? errno : ENOMEM;
    return false;
  }
  o->buf = p;
  o->cap = cap;
  return true;
}

void client_out_write(client_out *o, const void *p, size_t n) {
  if (!n || !out_room(o, n)) return;
  memcpy(o->buf + o->len, p, n);
  o->len += n;
}

void client_out_puts(client_out *o, const char *s) { client_out_write(o, s, strlen(s)); }

void client_out_putc(client_out *o, char c) { client_out_write(o, &c, 1); }

/* (by hand, not snprintf: no locale, no stdio, nothing that may allocate) */
void client_out_u64(client_out *o, uint64_t v) {
  char d[20];
  size_t n = 0;
  do d[sizeof d - ++n] = (char)('0' + v % 10);
  while ((v /= 10));
  client_out_write(o, d + sizeof d - n, n);
}

void client_out_i64(client_out *o, int64_t v) {
  if (v < 0) client_out_putc(o, '-');
  client_out_u64(o, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v);
}

void client_out_free(client_out *o) {
  if (o->buf) munmap(o->buf, o->cap);
  *o = (client_out){0};
}

/* "\u00XX" for a byte */
static void out_u00(client_out *o, unsigned c) {
  char e[6] = {'\\', 'u', '0', '0', "0123456789abcdef"[c >> 4 & 15], "0123456789abcdef"[c & 15]};
  client_out_write(o, e, sizeof e);
}

/* The length of the valid UTF-8 sequence at p (1-4), or 0: overlong forms,
 * surrogates and code points past U+10FFFF are not valid. */
static int utf8_len(const unsigned char *p) {
  unsigned c = p[0];
  if (c < 0x80) return 1;
  int n;
  unsigned cp;
  if (c >= 0xc2 && c <= 0xdf) n = 2, cp = c & 0x1f;
  else if (c >= 0xe0 && c <= 0xef) n = 3, cp = c & 0x0f;
  else if (c >= 0xf0 && c <= 0xf4) n = 4, cp = c & 0x07;
  else return 0;
  for (int i = 1; i < n; i++) {
    if ((p[i] & 0xc0) != 0x80) return 0; /* (a NUL stops here too) */
    cp = cp << 6 | (p[i] & 0x3f);
  }
  if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
      (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
    return 0;
  return n;
}

void client_json_string(client_out *out, const char *s) {
  if (!s) {
    client_out_puts(out, "null");
    return;
  }
  client_out_putc(out, '"');
  for (const unsigned char *p = (const unsigned char *)s; *p;) {
    unsigned c = *p;
    if (c == '"' || c == '\\') {
      client_out_putc(out, '\\');
      client_out_putc(out, (char)c);
      p++;
    } else if (c < 0x20 || c == 0x7f) {
      const char *esc = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r"
                        : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
      if (esc) client_out_puts(out, esc);
      else out_u00(out, c);
      p++;
    } else {
      int n = utf8_len(p);
      if (n == 0) { /* not UTF-8: U+00XX of the byte (see client.h) */
        out_u00(out, c);
        p++;
      } else {
        client_out_write(out, p, (size_t)n);
        p += n;
      }
    }
  }
  client_out_putc(out, '"');
}

/* ", \"name\": value" of a figure, null when absent */
static void out_figure(client_out *out, const char *name, bool have, uint64_t v) {
  client_out_puts(out, ", \"");
  client_out_puts(out, name);
  client_out_puts(out, "\": ");
  if (have) client_out_u64(out, v);
  else client_out_puts(out, "null");
}

int client_write_report(client_out *out) {
  /* what could not be read is null, not 0 (without /proc -- a mount
   * namespace without it, a chroot -- the report said a footprint of 0,
   * vma_count 0 and interpreter "": the environment hunt, session 27) */
  hl_footprint fp = {0};
  bool have_fp = hl_footprint_get(&fp) == 0;
  /* elapsed_s in whole numbers: %f writes the decimal point of the
   * program's locale, and a program that called setlocale(LC_ALL, "") under
   * de_DE wrote "elapsed_s": 0,002136 -- not JSON (the environment hunt,
   * session 27).  The writer's integers do not depend on the locale. */
  uint64_t ns = client_now_ns() - client.start_ns;
  client_out_puts(out, "{\"launcher\": ");
  client_json_string(out, client.launcher);
  client_out_puts(out, ", \"interpreter\": ");
  client_json_string(out, client.interpreter && *client.interpreter ? client.interpreter : NULL);
  client_out_puts(out, ", \"allocator\": ");
  client_json_string(out, client.allocator);
  client_out_puts(out, ", \"pid\": ");
  client_out_i64(out, (int)getpid());
  client_out_puts(out, ", \"elapsed_s\": ");
  client_out_u64(out, ns / 1000000000u);
  uint64_t us = ns % 1000000000u / 1000u;
  char frac[7] = {'.'};
  for (int i = 6; i >= 1; i--, us /= 10) frac[i] = (char)('0' + us % 10);
  client_out_write(out, frac, sizeof frac);
  client_out_puts(out, ", \"footprint\": {\"rss\": ");
  const struct { const char *name; uint64_t v; } figures[] = {
      {"anonymous", fp.anonymous}, {"lazyfree", fp.lazyfree}, {"swap", fp.swap},
      {"phys_footprint", fp.phys_footprint}, {"anon_huge", fp.anon_huge}};
  if (have_fp) client_out_u64(out, fp.rss);
  else client_out_puts(out, "null");
  for (size_t i = 0; i < sizeof figures / sizeof figures[0]; i++)
    out_figure(out, figures[i].name, have_fp, figures[i].v);
  client_out_putc(out, '}');
  uint64_t peak = client_peak_rss();
  out_figure(out, "peak_rss", peak != 0, peak);
  hl_heap *h = client.heap;
  if (!h) {
    client_out_puts(out, ", \"options\": null, \"stats\": null, \"resident_bytes\": null, "
                         "\"vma_count\": null}\n");
    return out->err;
  }
  hl_options o;
  hl_heap_options(h, &o);
  client_out_puts(out, ", \"options\": {");
  for (int i = 0; i < hl_option_count(); i++) {
    hl_option_info info;
    int64_t v = 0;
    hl_option_info_get(i, &info);
    hl_options_get(&o, info.name, &v);
    client_out_puts(out, i ? ", " : "");
    client_json_string(out, info.name);
    client_out_puts(out, ": ");
    if (info.kind == HL_OPT_BOOL) {
      client_out_puts(out, v ? "true" : "false");
    } else if (info.kind == HL_OPT_ENUM) {
      client_json_string(out, hl_option_choice(i, v));
    } else {
      client_out_i64(out, v);
    }
  }
  hl_stats st;
  hl_stats_get(h, &st);
  const uint64_t *field = (const uint64_t *)&st;
  client_out_puts(out, "}, \"stats\": {");
  for (int i = 0; i < hl_stat_count(); i++) {
    client_out_puts(out, i ? ", " : "");
    client_json_string(out, hl_stat_name(i));
    client_out_puts(out, ": ");
    client_out_u64(out, field[i]);
  }
  client_out_putc(out, '}');
  uint64_t resident = 0, vmas = 0;
  bool have_resident = hl_resident_bytes(h, &resident) == 0;
  out_figure(out, "resident_bytes", have_resident, resident);
  bool have_vmas = hl_vma_count(h, &vmas) == 0;
  out_figure(out, "vma_count", have_vmas, vmas);
  client_out_puts(out, "}\n");
  return out->err;
}

/* Write all of buf to fd: 0 or the errno. */
static int write_all(int fd, const char *buf, size_t len) {
  for (size_t off = 0; off < len;) {
    ssize_t w = write(fd, buf + off, len - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return w < 0 && errno ? errno : EIO;
    off += (size_t)w;
  }
  return 0;
}

/* The report is made in memory and written with write(2) at once: written
 * through a stdio stream on the file, a child another thread forked in the
 * middle inherited the stream's unwritten bytes, and its exit() wrote them
 * into the parent's file at the offset they shared -- 13 of 60 reports not
 * JSON when four threads forked children that exited while the program
 * exited (tests/preload/c/preload_report_edges.c).
 *
 * And it goes into a temporary file of the same folder, .<name>.<pid>.<salt>.tmp,
 * renamed over path once whole, as the Python side's write_atomic does: the
 * path was opened with O_TRUNC and written in place, and two processes
 * writing the same path (`a | b`, parallel jobs, both with HEAPLAB_STATS=
 * same.json) left one report's bytes spliced into the other's -- 6 of 60
 * files not JSON (the harness hunt, session 29).  Now the path holds one
 * whole report, the last renamed.  Not fsync'ed: the rename is atomic for
 * the readers and the other writers, which is what is asked; a crash of the
 * machine is not.  Written in place as before: a path that is there and is
 * not a regular file (/dev/full, /dev/stderr, a FIFO; a symbolic link, which
 * a rename would replace) or a file with hard links, and a folder where no
 * file can be made (a file made writable in a read-only folder).  A file
 * replaced keeps its mode (and owner, where allowed).  One caller at a time
 * (tmp is static): the exit's report, or client_report_now. */
bool client_stream_path(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode));
}

/* tmp's name, .<name>.<pid>.<salt as 8 hex digits>.tmp in path's folder,
 * made by hand (no stdio at exit: client_out); false when it does not fit */
static bool tmp_name(char *tmp, size_t cap, const char *path, size_t dir, unsigned salt) {
  char pid[24], hex[8];
  size_t np = 0;
  for (unsigned v = (unsigned)getpid(); np == 0 || v; v /= 10) pid[sizeof pid - ++np] = (char)('0' + v % 10);
  for (int i = 7; i >= 0; i--, salt >>= 4) hex[i] = "0123456789abcdef"[salt & 15];
  size_t base = strlen(path + dir);
  if (dir + 1 + base + 1 + np + 1 + 8 + 4 + 1 > cap) return false;
  char *t = tmp;
  memcpy(t, path, dir), t += dir;
  *t++ = '.';
  memcpy(t, path + dir, base), t += base;
  *t++ = '.';
  memcpy(t, pid + sizeof pid - np, np), t += np;
  *t++ = '.';
  memcpy(t, hex, 8), t += 8;
  memcpy(t, ".tmp", 5);
  return true;
}

int client_save(const char *path, void (*write_fn)(client_out *)) {
  static char tmp[4400]; /* (static: the exiting thread's stack may be 16 KiB) */
  /* made in a buffer of the writer's own, not glibc's (client.h, client_out) */
  client_out out = {0};
  write_fn(&out);
  int err = out.err;
  const char *buf = out.buf;
  size_t len = out.len;
  if (err) {
    client_out_free(&out);
    return err;
  }
  struct stat st;
  bool exists = lstat(path, &st) == 0;
  /* (a file with other names -- hard links -- is rewritten in place: a rename
   * would leave the other names on the old report) */
  bool in_place = exists && (!S_ISREG(st.st_mode) || st.st_nlink > 1);
  int fd = -1;
  if (!in_place) {
    const char *slash = strrchr(path, '/');
    size_t dir = slash ? (size_t)(slash - path) + 1 : 0;
    /* the pid and a few bits of the clock: a pid is unique in its own
     * namespace only (two containers writing one folder); a name taken is
     * never removed -- it may be a live writer's -- but another tried */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    unsigned salt = (unsigned)ts.tv_nsec ^ (unsigned)ts.tv_sec * 2654435761u;
    for (int attempt = 0; attempt < 8 && fd < 0; attempt++) {
      if (!tmp_name(tmp, sizeof tmp, path, dir, salt + (unsigned)attempt * 0x9e3779b9u)) break;
      fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) in_place = true; /* (the open of path below says why it cannot be written) */
    else if (exists) {
      /* the file replaced keeps its mode and, where allowed, its owner: a
       * report made private stays private */
      (void)fchmod(fd, st.st_mode & 07777);
      if (fchown(fd, st.st_uid, st.st_gid) != 0) { /* (not ours to give: kept as made) */
      }
    }
  }
  if (in_place) {
    errno = 0;
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
      err = errno ? errno : EIO;
      client_out_free(&out);
      return err;
    }
  }
  err = write_all(fd, buf, len);
  client_out_free(&out);
  if (close(fd) != 0 && !err && errno != EINTR) err = errno ? errno : EIO;
  if (!in_place) {
    if (!err && rename(tmp, path) != 0) err = errno ? errno : EIO;
    if (err) unlink(tmp);
  }
  return err;
}

static void write_report(client_out *out) { client_write_report(out); }

static int reported; /* client_report_now wrote it: exit() does not again */

/* Is the heap free to be read at exit?  exit() from a signal handler that
 * interrupted an allocation runs the report with the heap's lock held by the
 * very thread (or a large realloc's block out of the heap): the flush and
 * the stats waited for it for ever -- the preloaded library's malloc loops
 * (3-6 of 20 runs, the preload hunt, session 25) and the launchers (exit()
 * from a C handler -- libc's exit installed through ctypes, an extension's
 * -- that interrupted heaplab-python inside the heap: 5-8 of 30 runs, where
 * python3 exits every time; clients scenario exit_in_signal_handler, h39exit,
 * session 39).  Another thread's hold is a moment: tried every millisecond
 * for about half a second.  (nanosleep: a signal handler may be waiting.) */
bool client_heap_free_at_exit(hl_heap *h) {
  for (int i = 0;; i++) {
    if (pthread_mutex_trylock(&h->lock) == 0) {
      bool busy = h->in_cycle || h->large_moving;
      pthread_mutex_unlock(&h->lock);
      if (!busy) return true;
    }
    if (i == 500) return false;
    struct timespec d = {0, 1000000};
    nanosleep(&d, NULL);
  }
}

static void report_at_exit(void) {
  /* a forked child inherits the handler; only the launcher's own process
   * writes, so a child's exit cannot overwrite the parent's report */
  if (!client.stats_path || getpid() != client.pid || reported) return;
  if (client.heap && !client_heap_free_at_exit(client.heap)) {
    hl__say("%s: the heap is busy at exit (exit() from a signal handler that "
            "interrupted an allocation?): no HEAPLAB_STATS report written\n", client.launcher);
    return;
  }
  /* From here failures wait for the heap's errlock a bounded time, as in
   * the preloaded library's report: the handler may have interrupted this
   * thread holding it, the heap's lock free (a refused calloc -- count x
   * size overflows -- copies its message to the heap there), and the
   * report's vma_count fails without /proc (hl__errors_at_exit: it waited
   * for ever -- clients scenario exit_inside_errlock, h40left, session 40) */
  hl__errors_at_exit(true);
  /* the exiting thread's cached blocks go home first, so the live bytes in
   * the report are the program's, not the cache's */
  if (client.heap) hl_thread_flush(client.heap);
  /* The exit status stays the program's (docs/clients.md, "The report"):
   * this handler does not know it, and the launchers exit as the stock
   * interpreters do; the line says the report is missing or cut short. */
  int err = client_save(client.stats_path, write_report);
  hl__errors_at_exit(false); /* (client_report_now: the program goes on) */
  if (err)
    hl__say("%s: HEAPLAB_STATS=%s: cannot write the report: %s\n", client.launcher,
            client.stats_path, hl__strerror(err));
}

/* ---- whose report: an exec'd child's own name ---- */

/* Does the environ file at path hold name=value?  1 or 0; -1 when it cannot
 * be opened or reads empty.  Matched byte by byte as it is read, so an entry
 * of any length is compared, in a buffer of 512 bytes: it runs in the
 * preloaded library's set-up, on whatever stack the first malloc is on. */
static int environ_file_has(const char *path, const char *name, const char *value) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t nlen = strlen(name), want = nlen + 1 + strlen(value), pos = 0, total = 0;
  bool match = true;
  int found = 0;
  char buf[512];
  ssize_t r;
  while (!found && (r = read(fd, buf, sizeof buf)) > 0) {
    total += (size_t)r;
    for (ssize_t i = 0; i < r; i++) {
      char c = buf[i];
      if (c == 0) { /* an entry ends */
        if (match && pos == want) {
          found = 1;
          break;
        }
        pos = 0;
        match = true;
        continue;
      }
      if (match && (pos >= want || c != (pos < nlen ? name[pos] : pos == nlen ? '='
                                                                    : value[pos - nlen - 1])))
        match = false;
      pos++;
    }
  }
  close(fd);
  return found ? 1 : total ? 0 : -1;
}

int client_proc_probe(int pid, const char *file, int (*probe)(const char *path, void *arg),
                      void *arg) {
  char path[320]; /* (a d_name is up to 255 bytes) */
  snprintf(path, sizeof path, "/proc/%d/%s", pid, file);
  int r = probe(path, arg);
  if (r >= 0) return r;
  /* A process whose main thread has called pthread_exit: its
   * /proc/PID/environ and maps read as empty; any of its live threads'
   * say the same as the process's. */
  snprintf(path, sizeof path, "/proc/%d/task", pid);
  int dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return 0;
  char ents[2048];
  ssize_t n;
  while (r < 0 && (n = getdents64(dir, ents, sizeof ents)) > 0) {
    for (ssize_t at = 0; r < 0 && at < n;) {
      struct dirent64 *e = (struct dirent64 *)(ents + at);
      at += e->d_reclen;
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      snprintf(path, sizeof path, "/proc/%d/task/%s/%s", pid, e->d_name, file);
      r = probe(path, arg);
    }
  }
  close(dir);
  return r > 0;
}

struct environ_entry {
  const char *name, *value;
};

static int environ_probe(const char *path, void *arg) {
  const struct environ_entry *e = arg;
  return environ_file_has(path, e->name, e->value);
}

int client_environ_has(int pid, const char *name, const char *value) {
  struct environ_entry e = {name, value};
  return client_proc_probe(pid, "environ", environ_probe, &e);
}

/* Each line of a /proc maps file, NUL-terminated, to line(l, arg) until it
 * returns nonzero (that result); a line longer than the buffer is seen by
 * its head.  -1 when the file cannot be opened or reads empty.  A stack
 * buffer, no allocation, no stdio. */
static int maps_lines(const char *path, int (*line)(const char *l, void *arg), void *arg) {
  char buf[4096];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t have = 0, total = 0;
  int r = 0;
  bool skipping = false;
  for (;;) {
    ssize_t n = read(fd, buf + have, sizeof buf - 1 - have);
    if (n <= 0) break;
    total += (size_t)n;
    have += (size_t)n;
    buf[have] = 0;
    char *start = buf, *nl;
    while ((nl = memchr(start, '\n', (size_t)(buf + have - start)))) {
      *nl = 0;
      if (!skipping && (r = line(start, arg)) != 0) goto done;
      skipping = false;
      start = nl + 1;
    }
    size_t rest = (size_t)(buf + have - start);
    if (rest == sizeof buf - 1) { /* (one line fills the buffer: its head) */
      if (!skipping && (r = line(start, arg)) != 0) goto done;
      skipping = true;
      rest = 0;
    }
    memmove(buf, start, rest);
    have = rest;
  }
done:
  close(fd);
  return total ? r : -1; /* (a live process's maps are never empty) */
}

/* a maps line's device and inode ("fd:01 1234567"): fields 4 and 5 */
static bool maps_file_key(const char *l, char *key, size_t len) {
  for (int f = 0; f < 3; f++) {
    while (*l && *l != ' ') l++;
    while (*l == ' ') l++;
  }
  const char *k = l;
  while (*l && *l != ' ') l++; /* dev */
  while (*l == ' ') l++;
  const char *ino = l;
  while (*l >= '0' && *l <= '9') l++; /* inode (0: no file) */
  size_t n = (size_t)(l - k);
  if (l == ino || (l - ino == 1 && *ino == '0') || n >= len) return false;
  memcpy(key, k, n);
  key[n] = 0;
  return true;
}

/* This copy of the library's file, as the maps print it (client_identify) */
static char own_file[64];

static int maps_line_has_own_file(const char *l, void *arg) {
  (void)arg;
  char key[64];
  return maps_file_key(l, key, sizeof key) && strcmp(key, own_file) == 0;
}

static int maps_line_holding(const char *l, void *arg) {
  uintptr_t at = (uintptr_t)arg, lo = 0, hi = 0;
  const char *p = l;
  for (; *p && *p != '-'; p++) lo = lo * 16 + (uintptr_t)(*p <= '9' ? *p - '0' : (*p | 32) - 'a' + 10);
  if (*p == '-') p++;
  for (; *p && *p != ' '; p++) hi = hi * 16 + (uintptr_t)(*p <= '9' ? *p - '0' : (*p | 32) - 'a' + 10);
  if (at < lo || at >= hi) return 0;
  return maps_file_key(l, own_file, sizeof own_file) ? 1 : -2;
}

void client_identify(const void *addr) {
  own_file[0] = 0;
  if (maps_lines("/proc/self/maps", maps_line_holding, (void *)addr) != 1) own_file[0] = 0;
}

/* Does process pid run on libheaplab-malloc.so (a shell or server
 * preloaded, which started this program with exec)?  Its maps hold this
 * copy's file (client_identify: its device and inode -- a copy renamed is
 * told by its file, not its name: a renamed copy's children wrote path over
 * their parent's report) or a file named libheaplab-malloc (another copy:
 * the parent on the build's, the child on the Python package's; a library
 * rebuilt, a new inode, under a shell preloaded with the old one -- the
 * review, session 32). */
static int maps_line_names_the_library(const char *l, void *arg) {
  (void)arg;
  return strstr(l, "libheaplab-malloc") != NULL ||
         (own_file[0] && maps_line_has_own_file(l, arg));
}

static int maps_probe(const char *path, void *arg) {
  (void)arg;
  return maps_lines(path, maps_line_names_the_library, NULL);
}

bool client_preloaded(int pid) { return client_proc_probe(pid, "maps", maps_probe, NULL) > 0; }

/* The parent of pid (/proc/<pid>/stat's fourth field), or 0. */
static int parent_of(int pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  const char *end = strrchr(buf, ')'); /* the command name may hold spaces and ')' */
  int ppid = 0;
  if (!end || sscanf(end + 1, " %*c %d", &ppid) != 1) return 0;
  return ppid;
}

/* Is pid one of the launchers (its executable named heaplab-lua or
 * heaplab-python)? */
static int is_launcher(int pid) {
  char path[64], exe[4096];
  snprintf(path, sizeof path, "/proc/%d/exe", pid);
  ssize_t n = readlink(path, exe, sizeof exe - 1);
  if (n <= 0) return 0;
  exe[n] = 0;
  const char *base = strrchr(exe, '/');
  base = base ? base + 1 : exe;
  return strcmp(base, "heaplab-lua") == 0 || strcmp(base, "heaplab-python") == 0;
}

/* Was this process started, directly or through a shell or other program,
 * by a launcher -- or a preloaded program -- that writes the same report (HEAPLAB_STATS=value in its
 * environment)?  Then this process writes value.<pid>, as the preloaded
 * library's exec'd children do: multiprocessing's spawn and forkserver
 * helpers and subprocess.Popen([sys.executable, ...]) exited after the
 * launcher's own program and wrote their report over its. */
static int started_by_a_launcher(const char *value) {
  /* the mark a launcher leaves its descendants (client_start): read where
   * /proc cannot be -- a child run as another user (subprocess's user=)
   * cannot read its root parent's /proc/PID/exe, took itself for the first
   * and wrote over the parent's report, or failed to write it (the
   * launchers hunt, session 25) */
  if (client_marked_by_another(getenv("HEAPLAB_STATS_OWNER"), value)) return 1;
  int pid = getppid();
  for (int depth = 0; pid > 1 && depth < 64; depth++, pid = parent_of(pid))
    /* (a preloaded program writes the report too -- the library's rule for
     * its exec'd children, client_preloaded: under a preloaded `sh -c`
     * heaplab-lua wrote path and the shell's report replaced it at exit) */
    if (client_environ_has(pid, "HEAPLAB_STATS", value) && (is_launcher(pid) || client_preloaded(pid)))
      return 1;
  return 0;
}

#ifndef HL_PRELOAD
/* The launchers' mark (client.h, CLIENT_LAUNCHER_MARK): in the executable's
 * dynamic symbols (clients/launcher.dynlist), where the preloaded library
 * looks it up */
__attribute__((visibility("default"), used)) const char heaplab_launcher_process[] =
    "heaplab-lua or heaplab-python: the report is the launcher's";
#endif

static char child_stats_path[4200];

void client_report_now(void) {
  report_at_exit();
  if (getpid() == client.pid) reported = 1;
}

bool client_marked_by_another(const char *mark, const char *stats) {
  if (!stats || !mark) return false;
  long pid = 0;
  while (*mark >= '0' && *mark <= '9') pid = pid * 10 + (*mark++ - '0');
  return *mark == ':' && pid != (long)getpid() && strcmp(mark + 1, stats) == 0;
}

void client_cap_reservation(hl_options *o) {
  uint64_t half = UINT64_MAX;
  const int limits[] = {RLIMIT_AS, RLIMIT_DATA};
  for (int i = 0; i < 2; i++) {
    struct rlimit rl;
    if (getrlimit(limits[i], &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur / 2 < half)
      half = rl.rlim_cur / 2;
  }
  uint64_t unit = o->thp != HL_THP_NEVER ? (2u << 20) : (uint64_t)o->page_size;
  if (half != UINT64_MAX && (uint64_t)o->reserve_bytes > half)
    o->reserve_bytes = (int64_t)(half / unit * unit > unit ? half / unit * unit : unit);
}

int client_start(const char *launcher, const char *interpreter) {
  client.launcher = launcher;
  client.interpreter = interpreter;
  client.pid = (int)getpid();
  client.start_ns = client_now_ns();
  const char *alloc = getenv("HEAPLAB_ALLOCATOR");
  if (!alloc || !*alloc || strcmp(alloc, "heaplab") == 0) {
    client.allocator = "heaplab";
  } else if (strcmp(alloc, "libc") == 0) {
    client.allocator = "libc";
  } else {
    fprintf(stderr, "%s: HEAPLAB_ALLOCATOR=%s: expected heaplab or libc\n", launcher, alloc);
    return 2;
  }
  const char *stats = getenv("HEAPLAB_STATS");
  client.stats_path = stats && *stats ? stats : NULL;
  if (client.stats_path && !client_stream_path(client.stats_path) &&
      started_by_a_launcher(client.stats_path)) {
    int n = snprintf(child_stats_path, sizeof child_stats_path, "%s.%d", client.stats_path,
                     client.pid);
    if (n > 0 && (size_t)n < sizeof child_stats_path) client.stats_path = child_stats_path;
  }
  if (client.stats_path) atexit(report_at_exit);
  if (client.stats_path == stats) { /* the report's owner: its descendants write path.<pid> */
    char mark[4200];
    int m = snprintf(mark, sizeof mark, "%d:%s", client.pid, stats);
    if (m > 0 && (size_t)m < sizeof mark) setenv("HEAPLAB_STATS_OWNER", mark, 1);
  }
  if (strcmp(client.allocator, "libc") == 0) return 0;

  hl_options o;
  char err[1024];
  hl_options_defaults(&o);
  o.dump_unused = 0; /* a core dump of the interpreter's pages, not 32 GiB (HEAPLAB_DUMP_UNUSED=1) */
  /* the mode first: the environment's collected-only options
   * (HEAPLAB_GENERATIONAL, HEAPLAB_GC_TRIGGER_BYTES, HEAPLAB_YOUNG_MIN_BYTES
   * ...: hl_option_info.collected_only) are then ignored by
   * hl_options_from_env, as on any manual heap -- they are for a script's
   * collected heaps, and the launchers' heap never collects */
  o.mode = HL_MODE_MANUAL;
  int rc = hl_options_from_env(&o, err, sizeof err);
  if (!rc && getenv("HEAPLAB_MODE") && strcmp(getenv("HEAPLAB_MODE"), "manual") != 0) {
    snprintf(err, sizeof err, "environment HEAPLAB_MODE=%s: a launcher's heap is always manual",
             getenv("HEAPLAB_MODE"));
    rc = HL_EVALUE;
  }
  if (!rc) rc = hl_options_set_int(&o, "mode", HL_MODE_MANUAL, err, sizeof err);
  /* (the launchers hunt, session 25: under `ulimit -v 400000` a 150 MB
   * bytearray, under 60000 the interpreter itself, failed where the stock
   * one ran) */
  if (!rc && !getenv("HEAPLAB_RESERVE_BYTES")) client_cap_reservation(&o);
  if (!rc) rc = hl_heap_new(&o, &client.heap, err, sizeof err);
  if (rc) {
    fprintf(stderr, "%s: %s\n", launcher, err);
    return 2;
  }
  hl_set_refusal_hook(client.heap, on_refusal, NULL);
  return 0;
}
