/* fork() while another thread fills a heap.  The fill drops the heap lock
 * while the kernel faults its pages in (thp=populate: a whole 2 MiB chunk
 * per call; the thp_prefault helper's chunks are waited for the same way),
 * and fork_prepare takes the lock right there: the child inherits a heap in
 * the middle of a call whose thread did not come along.  On cff259f the
 * child kept that call's state for ever: the page it was faulting in stayed
 * in flight (never formatted, never released: in_flight_pages 1 for the
 * child's life), the fill's hold on moving objects (compaction blocked: the
 * child's full collections evacuated nothing) and its bulk flag (every
 * later page faulted in ahead).  3 or 4 of 10 children of this test had
 * them (16 forks: all 16 miss a window about once in a thousand runs).
 * The child here checks its heap, allocates 64 pages' worth of objects
 * outside any fill (no page may be populated: the bulk flag kept, every one
 * taken was -- mutant fork-child-keeps-bulk of tools/mutants.toml survived
 * this test before that check), then compacts a sparse fill and checks its
 * contents; an alarm fails it if anything hangs.  Threads:
 * runs under ThreadSanitizer too (suite threads), whose runtime cannot start
 * threads in the child: one marking thread, and no helper in the child's
 * stride fill.  Not under AddressSanitizer (SKIP_WHERE_FORK_IS_UNSAFE).
 */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define ROUNDS 16
/* verify=1: the heap checked after every cycle, the parent's and each
 * child's.  Not under ThreadSanitizer, where those checks of the whole heap
 * (up to 100 MiB of 256-byte objects) were most of the test's time (perf:
 * hl__check_locked 42%): the child has one thread, so TSan has nothing there
 * to judge, and in the parent they run in the filling thread, under the
 * heap lock, while no other thread of the test uses the heap.  What the
 * children assert (pages in flight, populated pages, evacuation, contents,
 * hl_heap_check before and after) stays, and so does how often they catch
 * the mutants: 3-4, 11-13 and 2-4 children of 16 (fork-child-keeps-the-
 * page-in-flight, -nomove, -bulk) with verify=0 under TSan, 4, -, 3-4 with
 * verify=1. */
#if UNDER_TSAN
#define VERIFY "verify=0"
#else
#define VERIFY "verify=1"
#endif
#define ALLOCS 16384 /* 4 MiB of 256-byte slots: 64 pages */

static hl_heap *h;
static _Atomic int go, started, done;

/* One fill per round the main thread starts: it forks while the fill runs. */
static void *filler(void *arg) {
  (void)arg;
  hl_ref keep[4];
  int n = 0;
  for (;;) {
    while (go == done) usleep(200);
    if (go < 0) break;
    started = go;
    hl_ref r;
    if (hl_fill(h, 24u << 20, 248, 0, &r)) {
      fprintf(stderr, "fill: %s\n", hl_heap_error(h));
      exit(1);
    }
    keep[n++] = r;
    if (n == 4) { /* fresh chunks, then released ones: both kinds of window */
      for (int i = 0; i < n; i++) hl_ref_release(h, keep[i]);
      n = 0;
      hl_collect(h, 1, 1);
    }
    done = started;
  }
  for (int i = 0; i < n; i++) hl_ref_release(h, keep[i]);
  return NULL;
}

static int child(void) {
  alarm(20);
  hl_stats s;
  if (hl_stats_get(h, &s)) return 2;
  if (s.in_flight_pages) {
    fprintf(stderr, "child: %" PRIu64 " pages in flight, owned by a thread that stayed in the "
            "parent\n", s.in_flight_pages);
    return 3;
  }
  if (hl_heap_check(h)) {
    fprintf(stderr, "child: %s\n", hl_heap_error(h));
    return 4;
  }
  /* outside a fill no page is faulted in ahead (populated_pages counts the
   * bulk phases' calls): a child that kept the fill's bulk flag populated
   * the released or fresh pages its plain allocations took */
  static hl_ref small[ALLOCS];
  hl_stats p0, p1;
  if (hl_stats_get(h, &p0)) return 2;
  for (int i = 0; i < ALLOCS; i++)
    if (hl_alloc(h, 248, 0, &small[i])) return 11;
  if (hl_stats_get(h, &p1)) return 2;
  for (int i = 0; i < ALLOCS; i++)
    if (hl_ref_release(h, small[i])) return 11;
  if (p1.populated_pages != p0.populated_pages) {
    fprintf(stderr, "child: %" PRIu64 " pages populated by plain allocations (the parent's "
            "fill's bulk flag kept)\n", p1.populated_pages - p0.populated_pages);
    return 12;
  }
  /* one object of 8 kept: sparse pages, which compact=always evacuates */
  hl_ref r;
  uint64_t sum0, sum1, n0, n1;
  if (hl_fill_stride(h, 4u << 20, 248, 0, 8, &r) || hl_ref_checksum(h, r, &sum0, &n0)) return 5;
  hl_stats a, b;
  if (hl_stats_get(h, &a) || hl_collect(h, 1, 1) || hl_stats_get(h, &b)) return 6;
  if (b.evacuated_objects == a.evacuated_objects) {
    fprintf(stderr, "child: a full collection with compact=always evacuated nothing (%" PRIu64
            " objects pinned)\n", b.pinned_objects - a.pinned_objects);
    return 7;
  }
  if (hl_ref_checksum(h, r, &sum1, &n1) || sum0 != sum1 || n0 != n1) return 8;
  if (hl_ref_release(h, r) || hl_collect(h, 1, 1)) return 9;
  if (hl_heap_check(h)) {
    fprintf(stderr, "child, after: %s\n", hl_heap_error(h));
    return 10;
  }
  return 0;
}

int main(void) {
  SKIP_WHERE_FORK_IS_UNSAFE();
  h = HEAP("thp=populate", "thp_prefault=4", "warm_pages=0", "compact=always", VERIFY,
           "mark_threads=1");
  pthread_t t;
  CHECK(pthread_create(&t, NULL, filler, NULL) == 0, "pthread_create");
  int bad = 0;
  for (int i = 1; i <= ROUNDS; i++) {
    go = i;
    while (started != i) usleep(100); /* the fill is under way */
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) child_exit(child());
    int status;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    if (!WIFEXITED(status) || WEXITSTATUS(status)) {
      fprintf(stderr, "fork %d: child status %#x\n", i, status);
      bad++;
    }
    while (done != i) usleep(100);
  }
  go = -1;
  pthread_join(t, NULL);
  OK(h, hl_heap_check(h));
  hl_stats s = stats_of(h);
  printf("%d of %d children found the heap broken; helper chunks %" PRIu64 "\n", bad, ROUNDS,
         s.thp_prefault_chunks);
  CHECK(bad == 0, "%d of %d children inherited a heap in the middle of the parent's fill", bad,
        ROUNDS);
  hl_heap_free(h);
  return 0;
}
