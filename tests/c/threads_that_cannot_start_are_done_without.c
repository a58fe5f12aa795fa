/* A thread the library cannot start is done without, or its call fails
 * saying so -- never a hang or a lost object:
 *   - the parallel mark's helpers (mark_threads=2): the mark runs alone
 *     (gc/markers.c: "fewer helpers: the mark still completes"), every live
 *     object marked, mark_threads_used 1; and once threads can start
 *     again (the limit raised) the next mark starts its helper -- the mark
 *     that had none left the helpers free, not busy for good;
 *   - the thp_prefault helper: the fill faults its chunks in itself
 *     (release/prefault.c), every object made, no chunk counted as the
 *     helper's;
 *   - a sampler's thread: hl_sampler_open fails with HL_ESYS, "sampler: cannot
 *     start its thread: ..." (telemetry/sampler.c), and *out is NULL.
 *   - a heap's background collector: hl_heap_new fails with HL_ESYS,
 *     "hl_heap_new: cannot start the collector thread (...)", no heap; a
 *     fault schedule set in the environment is named after it (session 43).
 * None of these was executed by any test (make coverage, session 41).  A
 * fork() child lowers RLIMIT_AS to what it has mapped plus 4 MiB after making
 * its heaps: a thread's stack (8 MiB) cannot be mapped, pthread_create fails
 * with EAGAIN; the heaps' memory is reserved already.  The child starts
 * with no helper threads (they stay in the parent, and none ran there). */
#include <pthread.h>

#include "check.h"

enum { FAN = 20000 };

static uint64_t vm_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long pages = 0;
  if (f) {
    if (fscanf(f, "%lu", &pages) != 1) pages = 0;
    fclose(f);
  }
  return (uint64_t)pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

static void *nothing(void *arg) { return arg; }

/* This process's threads (/proc/self/status), 0 when unread. */
static uint64_t threads_now(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  uint64_t n = 0;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "Threads: %" SCNu64, &n) == 1) break;
  if (f) fclose(f);
  return n;
}

/* The child's findings, one word each (0: as promised). */
enum { W_LIMIT, W_THREAD, W_MARK, W_MARKED, W_THREADS_USED, W_PREFAULT_ON, W_FILL, W_FILL_SUM,
       W_FILL_OBJECTS, W_PREFAULT, W_SAMPLER, W_SAMPLER_MSG, W_COLLECTOR, W_COLLECTOR_MSG, W_RELIMIT, W_MARK_AGAIN, W_HELPERS_AFTER,
       W_N };

/* A fill of f, its checksum and objects (the index's nodes counted). */
static int fill_of(hl_heap *f, uint64_t *sum, uint64_t *objects) {
  hl_ref r;
  int rc = hl_fill(f, 24u << 20, 256, 0, &r);
  if (rc != HL_OK) return rc;
  rc = hl_ref_checksum(f, r, sum, objects);
  OK(f, hl_ref_release(f, r));
  return rc;
}

/* A heap whose mark has work for a helper: an object of FAN others, each with a
 * slot (a leaf is marked, never pushed: the mark of FAN leaves was never parallel
 * -- no helper was ever asked for until h42left, session 42). */
static hl_heap *fan_heap(void) {
  hl_heap *g = HEAP("mark_threads=2", "warm_pages=0");
  hl_ref root;
  OK(g, hl_alloc(g, 0, FAN, &root));
  for (uint64_t i = 0; i < FAN; i++) {
    hl_ref o;
    OK(g, hl_alloc(g, 16, 1, &o)); /* (a slot: pushed, so a mark has work to share) */
    OK(g, hl_ref_set(g, root, i, o));
    OK(g, hl_ref_release(g, o));
  }
  return g;
}

static void child(int fd) {
  uint64_t w[W_N] = {0};
  hl_heap *g = fan_heap();
  hl_heap *f = HEAP("thp=populate", "thp_prefault=8", "warm_pages=0", "warm_demand_trims=0");
  bool prefault = stats_of(f).thp_enabled && sysconf(_SC_NPROCESSORS_ONLN) > 1;

  uint64_t vm = vm_bytes();
  struct rlimit old, rl;
  w[W_LIMIT] = vm == 0 || getrlimit(RLIMIT_AS, &old) != 0;
  rl = (struct rlimit){vm + (4u << 20), old.rlim_max}; /* (the soft limit: raised again below) */
  w[W_LIMIT] = w[W_LIMIT] || setrlimit(RLIMIT_AS, &rl) != 0;
  /* the premise: no thread can start now */
  pthread_t t;
  if (pthread_create(&t, NULL, nothing, NULL) == 0) {
    w[W_THREAD] = 1;
    pthread_join(t, NULL);
  }

  w[W_MARK] = hl_collect(g, 1, 1) != HL_OK;
  hl_stats s = stats_of(g);
  w[W_MARKED] = s.marked_objects != 1 + FAN ? 1 + s.marked_objects : 0;
  w[W_THREADS_USED] = s.mark_threads_used != 1 ? 1 + s.mark_threads_used : 0;

  w[W_PREFAULT_ON] = prefault;
  if (prefault) {
    w[W_FILL] = (uint64_t)fill_of(f, &w[W_FILL_SUM], &w[W_FILL_OBJECTS]);
    w[W_PREFAULT] = stats_of(f).thp_prefault_chunks;
  }

  hl_sampler *sp = (hl_sampler *)&w; /* (not NULL: the call must clear it) */
  int rc = hl_sampler_open(&sp, 0.01, 64);
  w[W_SAMPLER] = rc != HL_ESYS || sp != NULL ? 1 + (uint64_t)rc : 0;
  w[W_SAMPLER_MSG] = !strstr(hl_heap_error(NULL), "sampler: cannot start its thread");
  if (w[W_SAMPLER_MSG]) fprintf(stderr, "sampler's message: '%s'\n", hl_heap_error(NULL));
  if (rc == HL_OK) hl_sampler_stop(sp);

  /* a heap whose background collector cannot start: hl_heap_new fails with
   * HL_ESYS saying so, no heap -- and, a fault schedule from the
   * environment having fired, the message names it (heap.c 483-485 and 495:
   * no test reached either, make coverage at ee5b4a1).  sticky:0 refuses the
   * one call of site reserve that covers page 0, the reservation's THP
   * advice, which the heap does without; reserve_bytes=2m fits the limit. */
  setenv("HEAPLAB_FAULT_RESERVE", "sticky:0", 1);
  hl_options o;
  hl_options_defaults(&o);
  OK(NULL, hl_options_set(&o, "collector", "background", NULL, 0));
  OK(NULL, hl_options_set(&o, "mark_threads", "1", NULL, 0));
  OK(NULL, hl_options_set(&o, "reserve_bytes", "2m", NULL, 0));
  hl_heap *bg = (hl_heap *)&w; /* (not NULL: the call must clear it) */
  char err[512] = "";
  rc = hl_heap_new(&o, &bg, err, sizeof err);
  unsetenv("HEAPLAB_FAULT_RESERVE");
  w[W_COLLECTOR] = rc != HL_ESYS || bg != NULL ? 1 + (uint64_t)rc : 0;
  w[W_COLLECTOR_MSG] = !strstr(err, "hl_heap_new: cannot start the collector thread (") ||
                       !strstr(err, " -- HEAPLAB_FAULT_RESERVE=sticky:0 fired 1 time (a fault injected");
  if (w[W_COLLECTOR] || w[W_COLLECTOR_MSG]) fprintf(stderr, "hl_heap_new's message: '%s'\n", err);
  if (rc == HL_OK && bg) hl_heap_free(bg);

  /* Threads can start again: the next parallel mark starts its helper --
   * the mark that had none left the helpers free (markers.c's no-helper
   * return; without it they stayed busy and no later mark of the process
   * ran in parallel).  The helper stays, waiting for the next mark: the
   * thread count says it started, whatever it did in this mark. */
  w[W_RELIMIT] = setrlimit(RLIMIT_AS, &old) != 0;
  hl_heap *g2 = fan_heap();
  uint64_t before = threads_now();
  w[W_MARK_AGAIN] = hl_collect(g2, 1, 1) != HL_OK;
  uint64_t after = threads_now();
  hl_heap_free(g2);
  w[W_HELPERS_AFTER] = before == 0 || after <= before ? 1 + after - before : 0;

  OK(g, hl_heap_check(g));
  hl_heap_free(g);
  hl_heap_free(f);
  if (write(fd, w, sizeof w) != (ssize_t)sizeof w) child_exit(3);
  child_exit(0);
}

int main(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  puts("SKIP: a sanitizer's shadow memory needs more address space than RLIMIT_AS leaves");
  return 77;
#endif
  int fds[2];
  CHECK(pipe(fds) == 0, "pipe");
  pid_t pid = fork();
  CHECK(pid >= 0, "fork: %s", strerror(errno));
  if (pid == 0) {
    close(fds[0]);
    child(fds[1]);
  }
  close(fds[1]);
  uint64_t w[W_N];
  ssize_t got = read(fds[0], w, sizeof w);
  close(fds[0]);
  int status;
  CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
  CHECK(got == (ssize_t)sizeof w, "the child said nothing (status %d)", status);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's status %d", status);
  CHECK(!w[W_LIMIT], "RLIMIT_AS could not be set");
  CHECK(!w[W_THREAD], "a thread started under the limit: the scenario proves nothing");
  CHECK(!w[W_MARK], "a mark without its helpers failed");
  CHECK(!w[W_MARKED], "a mark without its helpers marked %" PRIu64 " objects of %d",
        w[W_MARKED] - 1, 1 + FAN);
  CHECK(!w[W_THREADS_USED], "a mark whose helpers could not start says %" PRIu64 " threads",
        w[W_THREADS_USED] - 1);
  CHECK(!w[W_RELIMIT], "RLIMIT_AS could not be raised again");
  CHECK(!w[W_MARK_AGAIN], "the mark after the limit failed");
  CHECK(!w[W_HELPERS_AFTER], "the mark after threads could start again started no helper "
        "(threads after - before: %" PRId64 "): the helpers stayed busy", (int64_t)w[W_HELPERS_AFTER] - 1);
  if (w[W_PREFAULT_ON]) {
    /* the same fill where the helper runs */
    hl_heap *f = HEAP("thp=populate", "thp_prefault=8", "warm_pages=0", "warm_demand_trims=0");
    uint64_t sum, objects;
    OK(f, fill_of(f, &sum, &objects));
    printf("the fill with its helper: %" PRIu64 " objects, %" PRIu64 " chunks the helper's\n",
           objects, stats_of(f).thp_prefault_chunks);
    hl_heap_free(f);
    CHECK(w[W_FILL] == HL_OK, "a fill whose prefault helper could not start failed (%s)",
          hl_error_name((int)w[W_FILL]));
    CHECK(w[W_FILL_OBJECTS] == objects && w[W_FILL_SUM] == sum, "a fill whose prefault helper "
          "could not start made %" PRIu64 " objects (checksum %" PRIx64 "), %" PRIu64
          " (%" PRIx64 ") with it", w[W_FILL_OBJECTS], w[W_FILL_SUM], objects, sum);
    CHECK(!w[W_PREFAULT], "%" PRIu64 " chunks counted as the helper's, which never ran",
          w[W_PREFAULT]);
  } else {
    puts("(no THP or one CPU: the prefault helper's part skipped)");
  }
  CHECK(!w[W_SAMPLER], "hl_sampler_open without a thread returned %s (HL_ESYS, *out NULL wanted)",
        hl_error_name((int)w[W_SAMPLER] - 1));
  CHECK(!w[W_SAMPLER_MSG], "the sampler's failure does not say its thread could not start");
  CHECK(!w[W_COLLECTOR], "hl_heap_new of a background collector that cannot start returned %s "
        "(HL_ESYS, *out NULL wanted)", hl_error_name((int)w[W_COLLECTOR] - 1));
  CHECK(!w[W_COLLECTOR_MSG], "hl_heap_new's failure does not say the collector thread could not "
        "start, or does not name the fault schedule set in the environment (its message above)");
  puts("ok");
  return 0;
}
