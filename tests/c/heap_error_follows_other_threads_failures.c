/* hl_heap_error(h) is the message of the calling thread's last failed call
 * on h the first time it is asked for -- another thread's failure in
 * between does not take its place (a binding raising that call's error) --
 * and otherwise the heap's last failure's, whichever thread it was in: a
 * background cycle's "verify:" message has no caller to return to
 * (verify_failures: "hl_heap_error says why").  A thread kept the first
 * message it read, or made, for good: after reading one failure of another
 * thread's, or failing once itself, it read that same message again
 * whatever failed later.  And a heap made at the address of a freed one
 * starts with no message, not the old heap's. */
#include <pthread.h>

#include "check.h"

static hl_heap *H;

static void *fail_with(void *arg) {
  /* a release of a handle that was never made: the message names it */
  int rc = hl_ref_release(H, (hl_ref)(uintptr_t)arg);
  CHECK(rc != HL_OK, "releasing handle %p succeeded", arg);
  return NULL;
}

static void other_thread_fails(uintptr_t ref) {
  pthread_t t;
  CHECK(pthread_create(&t, NULL, fail_with, (void *)ref) == 0, "thread");
  pthread_join(t, NULL);
}

/* the message of releasing `ref`, as this heap words it */
static void message_of(uintptr_t ref, char *out, size_t len) {
  hl_heap *h = HEAP("page_size=64k");
  CHECK(hl_ref_release(h, (hl_ref)ref) != HL_OK, "release");
  snprintf(out, len, "%s", hl_heap_error(h));
  hl_heap_free(h);
}

int main(void) {
  char a[256], b[256], c[256], d[256];
  /* four failures with four different messages */
  message_of(0x11111, a, sizeof a);
  message_of(0x22222, b, sizeof b);
  message_of(0x33333, c, sizeof c);
  message_of(0x44444, d, sizeof d);
  CHECK(strcmp(a, b) && strcmp(b, c) && strcmp(c, d), "the messages do not differ: '%s'", a);

  H = HEAP("page_size=64k");
  CHECK(strcmp(hl_heap_error(H), "") == 0, "a new heap says '%s'", hl_heap_error(H));
  other_thread_fails(0x11111);
  CHECK(strcmp(hl_heap_error(H), a) == 0, "after another thread's failure: '%s'",
        hl_heap_error(H));
  other_thread_fails(0x22222);
  CHECK(strcmp(hl_heap_error(H), b) == 0,
        "after another thread's second failure: '%s' (the first one read, kept)",
        hl_heap_error(H));
  /* this thread's own failure, then another thread's: its own first */
  CHECK(hl_ref_release(H, (hl_ref)0x33333) != HL_OK, "release");
  other_thread_fails(0x44444);
  CHECK(strcmp(hl_heap_error(H), c) == 0,
        "this thread's failed call, then another thread's: '%s', not this call's", hl_heap_error(H));
  CHECK(strcmp(hl_heap_error(H), d) == 0, "asked again: '%s', not the heap's last",
        hl_heap_error(H));
  CHECK(strcmp(hl_heap_error(H), d) == 0, "asked a third time: '%s'", hl_heap_error(H));
  CHECK(hl_ref_release(H, (hl_ref)0x11111) != HL_OK, "release");
  CHECK(strcmp(hl_heap_error(H), a) == 0, "this thread's failure alone: '%s'", hl_heap_error(H));
  CHECK(strcmp(hl_heap_error(H), a) == 0, "asked again: '%s'", hl_heap_error(H));

  /* a new heap, perhaps at the same address: no message yet (also when
   * this thread's failure on the old one was never read) */
  const void *old = H;
  CHECK(hl_ref_release(H, (hl_ref)0x22222) != HL_OK, "release");
  hl_heap_free(H);
  H = HEAP("page_size=64k");
  CHECK(strcmp(hl_heap_error(H), "") == 0, "a new heap%s says '%s'",
        (const void *)H == old ? " at the freed one's address" : "", hl_heap_error(H));
  hl_heap_free(H);
  puts("ok");
  return 0;
}
