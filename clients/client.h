/*
 * client.h -- what heaplab-lua and heaplab-python share: choosing the
 * allocator (HEAPLAB_ALLOCATOR), creating the manual heap from the HEAPLAB_*
 * environment, and the HEAPLAB_STATS report written at exit.
 *
 * A launcher calls client_start() before its interpreter allocates anything,
 * then routes every allocation through client.heap (or the C library when
 * client.heap is NULL).  The report is written by an atexit handler, so it is
 * there however the program ends through exit(): the end of the script,
 * Lua's os.exit, Python's sys.exit -- not _exit or a signal.  A launcher
 * started (directly or through a shell) by a launcher that writes the same
 * HEAPLAB_STATS writes HEAPLAB_STATS.<pid> (docs/clients.md).
 */
#ifndef HEAPLAB_CLIENT_H
#define HEAPLAB_CLIENT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "heaplab.h"

typedef struct hl_client {
  const char *launcher;   /* "heaplab-lua", "heaplab-python" */
  const char *interpreter; /* what runs on the heap: "Lua 5.4.4", "CPython 3.11.7" */
  const char *allocator;  /* "heaplab" or "libc" */
  hl_heap *heap;          /* NULL on the libc allocator */
  const char *stats_path; /* HEAPLAB_STATS (.<pid> for a launcher's child), or NULL */
  int pid;                /* the process that owns the report (not a fork) */
  uint64_t start_ns;
} hl_client;

extern hl_client client;

/* Read HEAPLAB_ALLOCATOR (heaplab | libc) and, for heaplab, create the heap:
 * defaults, then HEAPLAB_<OPTION> variables, then mode=manual.  On bad input
 * prints "<launcher>: <what was wrong>" on stderr and returns nonzero.
 * `interpreter` names the interpreter in the report (the launchers' banners
 * are the stock interpreters' own). */
int client_start(const char *launcher, const char *interpreter);

/* Where the report is made: bytes in memory of the writer's own, mapped
 * with mmap and grown with mremap -- no stdio stream and no call into the C
 * library's allocator.  The report at exit may run in a signal handler that
 * interrupted glibc's own malloc (the launchers do not interpose it: any C
 * code's malloc, the heap's large blocks): built in an open_memstream
 * buffer, glibc's, it re-entered the interrupted malloc -- glibc aborted
 * ("malloc assertion failure in sysmalloc") or, threaded, the report waited
 * for the arena lock its own thread held, for ever (clients scenario
 * exit_in_glibc_malloc, h40rep, session 40).  Never cut short: a mapping
 * refused is remembered in err (ENOMEM), which client_save returns.
 * Zero-initialised ({0}) is empty; client_out_free unmaps. */
typedef struct client_out {
  char *buf;  /* mmap'd, or NULL */
  size_t len; /* bytes written */
  size_t cap; /* bytes mapped */
  int err;    /* the first failure (ENOMEM), or 0 */
} client_out;

void client_out_write(client_out *o, const void *p, size_t n);
void client_out_puts(client_out *o, const char *s);
void client_out_putc(client_out *o, char c);
void client_out_u64(client_out *o, uint64_t v);
void client_out_i64(client_out *o, int64_t v);
void client_out_free(client_out *o);

/* Write the report (launcher, interpreter, allocator, options, every stat by name, residency, VMAs,
 * footprint, peak RSS) as one JSON object.  Also called by the atexit
 * handler when HEAPLAB_STATS is set.  0, or out->err. */
int client_write_report(client_out *out);

/* Write s as a JSON string, quotes included: '"' and '\\' escaped, control
 * characters as \n, \t... or \u00XX, valid UTF-8 as it is; a byte that is
 * not part of valid UTF-8 (a path's Latin-1 byte) as \u00XX of the byte's
 * value -- U+00XX, not the byte itself, so the JSON stays UTF-8 and the byte
 * can still be told.  NULL writes null.  Every string of the C side's JSON
 * goes through it (the report's "interpreter", a program's path, wrote a
 * quote or a backslash raw: not JSON). */
void client_json_string(client_out *out, const char *s);

/* Write the HEAPLAB_STATS report now (if set, in the launcher's own
 * process), and not again at exit: for a process that will not end through
 * exit() -- heaplab-python after an uncaught KeyboardInterrupt, which
 * CPython ends by killing itself with SIGINT. */
void client_report_now(void);

/* The heap refused one of the interpreter's allocations (its allocator got
 * NULL): remember why -- the heap's message -- for the line the launcher
 * prints when the program dies of it.  Allocates nothing.  client_start
 * makes it the heap's refusal hook, so it runs for every refusal. */
void client_refused(void);

/* Why the last refused allocation was refused, with the variable that
 * raises the limit it hit: "malloc: the reservation of 1048576 bytes is
 * exhausted (reserve_bytes); raise HEAPLAB_RESERVE_BYTES".  NULL when no
 * allocation was refused. */
const char *client_refusal(void);

/* Forget the refusal: the program went on after it (an allocation succeeded
 * since), so a later memory error is not its (heaplab-lua). */
void client_refusal_clear(void);


/* Under a finite RLIMIT_AS or RLIMIT_DATA (the reservation is a private
 * writable mapping: it counts against both), a reservation of at most half
 * of it: the step-down kept the first power of two the kernel took -- 256
 * MiB of a 293 MiB `ulimit -v` -- and the large blocks, the system
 * allocator's, had the rest: a 30 MiB malloc that glibc served failed.
 * For a heap whose reserve_bytes the user did not give. */
void client_cap_reservation(hl_options *o);

/* Is mark, a HEAPLAB_STATS_OWNER value (<pid>:<path>, which a launcher that
 * writes its own report leaves its descendants), another process's mark for
 * the report path `stats`?  Then this process is a descendant: it writes
 * path.<pid>.  The pid read by hand (strtol reads the locale's ctype tables,
 * which the preloaded library's set-up keeps out of the process). */
bool client_marked_by_another(const char *mark, const char *stats);

/* probe(path, arg) on /proc/<pid>/<file>: its result when >= 0; when it is
 * -1 (the file reads empty: a main thread that called pthread_exit), on each
 * live thread's /proc/<pid>/task/<tid>/<file> until one answers.  1 or 0
 * (0 when none answers).  No allocation: it runs in the preloaded library's
 * set-up. */
int client_proc_probe(int pid, const char *file, int (*probe)(const char *path, void *arg),
                      void *arg);

/* Was process pid exec'd with name=value in its environment
 * (/proc/<pid>/environ; through a live thread's when its main thread has
 * exited)?  The one test of "the same report" that the launchers (for each
 * launcher among their ancestors) and the preloaded library (for a
 * preloaded parent) make: a process is a descendant -- it writes path.<pid>
 * -- only when the process above it writes that same path.  Allocates
 * nothing. */
int client_environ_has(int pid, const char *name, const char *value);

/* Does process pid run on libheaplab-malloc.so (/proc/PID/maps: this copy's
 * file after client_identify, else a file of that name)?  The
 * preloaded library asks it of its parent, a launcher of each ancestor
 * whose environment has the same HEAPLAB_STATS: that one writes the
 * report, this one path.<pid>.  Allocates nothing. */
bool client_preloaded(int pid);

/* The preloaded library's set-up: addr is in this copy's file, whose
 * device and inode (/proc/self/maps) client_preloaded looks for in the
 * parent's maps from then on -- not the name, which a renamed copy does not
 * have. */
void client_identify(const void *addr);

/* A symbol the launchers export (their dynamic symbol table:
 * clients/launcher.dynlist): the preloaded library, finding it (a weak
 * reference the dynamic loader binds to the executable's definition),
 * writes no report in a launcher's process -- the report there is the
 * launcher's (docs/clients.md). */
#define CLIENT_LAUNCHER_MARK_SYMBOL heaplab_launcher_process
#define CLIENT_LAUNCHER_MARK "heaplab_launcher_process"

/* Write path with write(out), made in memory first (a client_out: no call
 * into the C library's allocator or stdio, so it may run at an exit() that
 * interrupted them): into .<name>.<pid>.<salt>.tmp
 * of path's folder, renamed over path once whole (two processes writing the
 * same path leave one whole report, the last renamed, never a splice of
 * both); in place (created or truncated) when path is there and is not a
 * regular file (/dev/full, a FIFO, a symbolic link) or no file can be made
 * in its folder.  0, or the errno of what failed -- the open, a write (a
 * full disk: the report was silently cut short, HEAPLAB_STATS=/dev/full said
 * nothing), the close, the rename; the temporary file is removed when
 * anything failed.  Prints nothing: the caller names the file. */
int client_save(const char *path, void (*write)(client_out *));

/* Is path a stream -- a character device or a FIFO, itself or where its
 * symbolic links lead (/dev/stderr, /dev/null, a named pipe)?  A process
 * that would write path.<pid> (a descendant's report) writes path then, in
 * place as its parent does: path.<pid> beside /dev/stderr was a regular
 * file made in /dev (as root; a "cannot write" line otherwise) --
 * HEAPLAB_STATS=/dev/null left a /dev/null.<pid> for every command of a
 * preloaded shell script (the real-programs hunt, session 38). */
bool client_stream_path(const char *path);

/* Is heap h free to be read at exit (its lock to be had, no cycle or large
 * move under way)?  Tried for about half a second: exit() from a signal
 * handler that interrupted an allocation finds the lock held by its own
 * thread (the launchers' report at exit, the preloaded library's). */
bool client_heap_free_at_exit(hl_heap *h);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t client_now_ns(void);

/* Peak resident set size of this process in bytes (getrusage). */
uint64_t client_peak_rss(void);

#endif
