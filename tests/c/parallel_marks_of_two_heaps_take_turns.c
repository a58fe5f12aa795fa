/* Two heaps' parallel marks at once: the helper threads are the process's
 * (gc/markers.c), and one mark holds them at a time -- a mark that finds
 * them serving another heap's mark runs on its own thread.  Heap A's mark
 * is held in its parallel part: its marking thread stops on a page of A's
 * list that the test made unreadable (PROT_NONE; a SIGSEGV handler waits
 * there until the test lets it go), past the first 4096 objects, which a
 * mark traces alone before it asks for helpers.  Meanwhile heap B, of
 * mark_threads=2 too, collects: its mark must find the helpers busy, mark
 * alone -- no `mark` event, which a mark that had the helpers records -- and
 * end while A's is held.  Without the busy check B took over the helpers A
 * marks with: B's mark waited for A's helper (which waits for A's marking
 * thread) for good, or gave it B's work in the middle of A's mark (the
 * mutation audit's leftover, sessions 37-39: "needs a threaded race" -- the
 * held page makes it one that always happens).  Then A goes on, and both
 * heaps are whole. */
#include <pthread.h>
#include <signal.h>

#include "check.h"

enum { NODES = 8192, NODE_PAYLOAD = 48 }; /* 8 + 8 + 48 bytes: one 64-byte slot each */

static uintptr_t held_page; /* the OS page A's mark stops on */
static size_t os_page;
static sem_t faulted, let_go;

static void on_segv(int sig, siginfo_t *si, void *uc) {
  (void)sig;
  (void)uc;
  if ((uintptr_t)si->si_addr - held_page >= os_page) {
    signal(SIGSEGV, SIG_DFL); /* not the held page: a real fault, as it is */
    return;
  }
  sem_post(&faulted);
  while (sem_wait(&let_go) != 0) {
  }
  sem_post(&let_go); /* (any other thread stopped there goes too) */
}

/* A list of NODES objects rooted by *root; node[i] its i-th. */
static void build_list(hl_heap *h, hl_ref *root, void **node) {
  OK(h, hl_alloc(h, 0, 1, root));
  hl_object_info info;
  OK(h, hl_ref_info(h, *root, &info));
  hl_enter(h);
  void *prev = (void *)(uintptr_t)info.object;
  for (int i = 0; i < NODES; i++) {
    node[i] = hl_obj_new_in(h, prev, 0, NODE_PAYLOAD, 1);
    CHECK(node[i], "node %d: %s", i, hl_heap_error(h));
    prev = node[i];
  }
  hl_leave(h);
}

/* The `mark` events h recorded since the last call (consumed). */
static int mark_events(hl_heap *h) {
  static hl_event ev[256];
  int marks = 0;
  for (;;) {
    size_t n = 0;
    OK(h, hl_events_read(h, ev, 256, &n, 1));
    for (size_t i = 0; i < n; i++) marks += ev[i].kind == HL_EV_mark;
    if (n < 256) return marks;
  }
}

static uint64_t marked_objects(hl_heap *h) {
  hl_stats st;
  OK(h, hl_stats_get(h, &st));
  return st.marked_objects;
}

static void check_list(hl_heap *h, hl_ref root, void **node, const char *what) {
  hl_object_info info;
  OK(h, hl_ref_info(h, root, &info));
  const void *o = (const void *)(uintptr_t)info.object;
  for (int i = 0; i < NODES; i++) {
    o = hl_obj_get(o, 0);
    CHECK(o == node[i], "%s: node %d is %p, not %p", what, i, (void *)o, node[i]);
  }
  CHECK(hl_obj_get(o, 0) == NULL, "%s: the list goes on past its end", what);
  OK(h, hl_heap_check(h));
}

typedef struct {
  hl_heap *h;
  int rc;
} collect_job;

static void *collect(void *p) {
  collect_job *j = p;
  j->rc = hl_collect(j->h, 1, 1);
  return NULL;
}

int main(void) {
  os_page = (size_t)sysconf(_SC_PAGESIZE);
  /* (compact=never: A's list stays where it was made, on the held page) */
  hl_heap *a = HEAP("mark_threads=2", "compact=never", "reserve_bytes=256m");
  hl_heap *b = HEAP("mark_threads=2", "compact=never", "reserve_bytes=256m");
  static void *a_node[NODES], *b_node[NODES];
  hl_ref a_root, b_root;
  build_list(a, &a_root, a_node);
  build_list(b, &b_root, b_node);

  /* each mark alone has the helpers: one `mark` event each */
  OK(a, hl_collect(a, 1, 1));
  OK(b, hl_collect(b, 1, 1));
  CHECK(mark_events(a) == 1, "A's mark alone had no helpers (no `mark` event)");
  CHECK(mark_events(b) == 1, "B's mark alone had no helpers (no `mark` event)");
  CHECK(marked_objects(a) == NODES + 1 && marked_objects(b) == NODES + 1,
        "marked %llu and %llu objects, not %d", (unsigned long long)marked_objects(a),
        (unsigned long long)marked_objects(b), NODES + 1);

  /* the page of node NODES-64, which holds no node a mark traces alone */
  held_page = (uintptr_t)a_node[NODES - 64] & ~(uintptr_t)(os_page - 1);
  for (int i = 0; i < NODES; i++)
    if ((uintptr_t)a_node[i] - held_page < os_page)
      CHECK(i > 4096 + 1024, "node %d of A is on the held page: a mark traces it alone", i);
  CHECK(sem_init(&faulted, 0, 0) == 0 && sem_init(&let_go, 0, 0) == 0, "sem_init");
  struct sigaction sa, before;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  CHECK(sigaction(SIGSEGV, &sa, &before) == 0, "sigaction: %s", strerror(errno));
  CHECK(mprotect((void *)held_page, os_page, PROT_NONE) == 0, "mprotect: %s", strerror(errno));

  collect_job ja = {a, -1}, jb = {b, -1};
  pthread_t ta, tb;
  CHECK(pthread_create(&ta, NULL, collect, &ja) == 0, "pthread_create");
  CHECK(sem_wait_for(&faulted, 60), "A's mark never reached the held page");
  /* A's mark is held in its parallel part, the helpers with it */
  CHECK(pthread_create(&tb, NULL, collect, &jb) == 0, "pthread_create");
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 10;
  CHECK(pthread_timedjoin_np(tb, NULL, &until) == 0,
        "B's collection did not end in 10 s while A's mark held the helpers (it took them "
        "over and waits for A's helper?)");
  OK(b, jb.rc);
  CHECK(mark_events(b) == 0,
        "B's mark had the helpers while A's mark held them (a `mark` event)");
  CHECK(marked_objects(b) == NODES + 1, "B marked %llu objects, not %d",
        (unsigned long long)marked_objects(b), NODES + 1);
  check_list(b, b_root, b_node, "B beside A's held mark");

  /* A goes on */
  CHECK(mprotect((void *)held_page, os_page, PROT_READ | PROT_WRITE) == 0, "mprotect: %s",
        strerror(errno));
  sem_post(&let_go);
  CHECK(pthread_join(ta, NULL) == 0, "pthread_join");
  CHECK(sigaction(SIGSEGV, &before, NULL) == 0, "sigaction");
  OK(a, ja.rc);
  CHECK(mark_events(a) == 1, "A's held mark had no helpers (no `mark` event): it held nothing");
  CHECK(marked_objects(a) == NODES + 1, "A marked %llu objects, not %d",
        (unsigned long long)marked_objects(a), NODES + 1);
  check_list(a, a_root, a_node, "A after its held mark");

  /* and the helpers are free again: each mark has them */
  OK(b, hl_collect(b, 1, 1));
  OK(a, hl_collect(a, 1, 1));
  CHECK(mark_events(b) == 1 && mark_events(a) == 1, "the helpers are not free again");
  check_list(a, a_root, a_node, "A after another mark");
  check_list(b, b_root, b_node, "B after another mark");
  hl_ref_release(a, a_root);
  hl_ref_release(b, b_root);
  hl_heap_free(a);
  hl_heap_free(b);
  puts("ok");
  return 0;
}
