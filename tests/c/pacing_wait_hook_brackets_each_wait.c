/* hl_heap_set_wait_hook: the hook is called in the waiting thread as each
 * paced wait begins and again as it ends -- one end for each begin, one pair
 * for each wait the stats count, none for an allocation that is not paced --
 * with the heap lock dropped (another thread reads the stats while a wait's
 * hook is running); and an interrupt once the hook said the wait began ends
 * the wait.  The Lua module attaches its SIGINT handler there: without the
 * hook, Ctrl-C during a Lua h:alloc's paced wait waited for the wait's end
 * (ctrl_c_stops_long_calls_spec.lua). */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static atomic_int begins, ends, wrong_thread, bad_args;
static atomic_bool in_begin_hook, release_begin_hook;
static pthread_t allocator;
/* the hook's argument: token[0] first; token[1] set while the first wait's
 * begin hook runs -- that wait must end with token[0], the hook it began
 * with (heaplab.h), the later ones begin and end with token[1] */
static int token[2];
static atomic_int begins_of[2], ends_of[2];

static void hook(hl_heap *h, int begin, void *arg) {
  (void)h;
  if (arg != &token[0] && arg != &token[1]) atomic_fetch_add(&bad_args, 1);
  int k = arg == &token[1];
  atomic_fetch_add(begin ? &begins_of[k] : &ends_of[k], 1);
  if (!pthread_equal(pthread_self(), allocator)) atomic_fetch_add(&wrong_thread, 1);
  if (begin) {
    atomic_fetch_add(&begins, 1);
    /* the first begin holds on until the main thread has read the stats:
     * that needs the heap lock, which the hook must not hold */
    if (atomic_load(&begins) == 1) {
      atomic_store(&in_begin_hook, true);
      while (!atomic_load(&release_begin_hook)) usleep(1000);
    }
  } else {
    atomic_fetch_add(&ends, 1);
  }
}

static atomic_bool read_done;
static hl_stats read_stats;

static void *reader(void *arg) {
  hl_heap *h = arg;
  read_stats = stats_of(h);
  OK(h, hl_heap_set_wait_hook(h, hook, &token[1]));
  atomic_store(&read_done, true);
  return NULL;
}

static atomic_bool stop;
static _Atomic double returned_at;

static void *alloc_loop(void *arg) {
  hl_heap *h = arg;
  allocator = pthread_self(); /* (before its first allocation: the hook reads it) */
  while (!atomic_load(&stop)) {
    hl_ref r;
    OK(h, hl_alloc(h, 256 << 10, 0, &r));
    atomic_store(&returned_at, now_s());
    OK(h, hl_ref_release(h, r));
  }
  return NULL;
}

int main(void) {
  CHECK(hl_heap_set_wait_hook(NULL, hook, &token) == HL_EINVAL, "a NULL heap is refused");

  /* no wait, no call: a sync heap, and allocations below the large trigger */
  hl_heap *h = HEAP("collector=sync", "large_trigger_bytes=1m");
  OK(h, hl_heap_set_wait_hook(h, hook, &token[0]));
  allocator = pthread_self();
  for (int i = 0; i < 64; i++) {
    hl_ref r;
    OK(h, hl_alloc(h, 256 << 10, 0, &r));
    OK(h, hl_ref_release(h, r));
  }
  CHECK(atomic_load(&begins) == 0 && atomic_load(&ends) == 0, "hook called without a wait");
  hl_heap_free(h);

  /* a background heap whose collector runs one cycle and then none for 30 s:
   * the allocating thread's second paced allocation waits */
  h = HEAP("collector=background", "min_cycle_interval_ms=30000", "pacing_max_wait_ms=20000",
           "large_trigger_bytes=1m", "mark_threads=1", "pacing_give_up_cycles=1000");
  OK(h, hl_heap_set_wait_hook(h, hook, &token[0]));
  pthread_t t;
  CHECK(pthread_create(&t, NULL, alloc_loop, h) == 0, "thread");
  double start = now_s();
  while (!atomic_load(&in_begin_hook) && now_s() - start < 60.0) usleep(1000);
  CHECK(atomic_load(&in_begin_hook), "no paced wait began in 60 s");
  /* the heap lock is dropped by the waiting thread: another thread reads the
   * stats and changes the hook, within 10 s (a hook called with the lock
   * held waited for ever -- the mutation audit's timeout, 300 s) */
  pthread_t r;
  CHECK(pthread_create(&r, NULL, reader, h) == 0, "thread");
  double asked = now_s();
  while (!atomic_load(&read_done) && now_s() - asked < 10.0) usleep(1000);
  CHECK(atomic_load(&read_done), "the stats could not be read in 10 s while the wait's hook "
        "ran: the hook holds the heap lock");
  pthread_join(r, NULL);
  hl_stats s = read_stats;
  atomic_store(&release_begin_hook, true);
  /* the first cycle ran at once; the next wait lasts until the collector's
   * next cycle, 30 s on: once its hook has said it began (the interrupt
   * mark is taken before the hook), an interrupt ends it */
  while (atomic_load(&begins) < 2 && now_s() - start < 60.0) usleep(1000);
  CHECK(atomic_load(&begins) >= 2, "no second paced wait began in 60 s");
  atomic_store(&stop, true);
  double fired = now_s();
  hl_interrupt();
  pthread_join(t, NULL);
  double late = atomic_load(&returned_at) - fired;
  s = stats_of(h);
  printf("%d begins, %d ends, %" PRIu64 " waits; the wait ended %.3f s after the interrupt\n",
         atomic_load(&begins), atomic_load(&ends), s.pacing_waits, late);
  CHECK(late < 1.0, "the paced wait went on %.2f s after the interrupt", late);
  CHECK(atomic_load(&begins) >= 1 && atomic_load(&begins) == atomic_load(&ends),
        "%d begins, %d ends", atomic_load(&begins), atomic_load(&ends));
  CHECK((uint64_t)atomic_load(&begins) == s.pacing_waits, "%d hook pairs for %" PRIu64 " waits",
        atomic_load(&begins), s.pacing_waits);
  CHECK(atomic_load(&wrong_thread) == 0, "the hook ran in another thread");
  CHECK(atomic_load(&bad_args) == 0, "the hook got another argument");
  CHECK(atomic_load(&begins_of[0]) == 1 && atomic_load(&ends_of[0]) == 1,
        "the hook the first wait began with: %d begins, %d ends (a wait under way ends with "
        "the hook it began with)", atomic_load(&begins_of[0]), atomic_load(&ends_of[0]));
  CHECK(atomic_load(&begins_of[1]) == atomic_load(&ends_of[1]),
        "the hook set during the first wait: %d begins, %d ends", atomic_load(&begins_of[1]),
        atomic_load(&ends_of[1]));

  OK(h, hl_heap_set_wait_hook(h, NULL, NULL)); /* removed */
  check_invariants(h);
  hl_heap_free(h);
  puts("ok");
  return 0;
}
