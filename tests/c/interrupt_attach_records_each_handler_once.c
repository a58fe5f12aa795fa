/* hl_interrupt_attach records the handler it chains once for each handler
 * (flags, mask, function), whatever glibc's sigaction leaves in the sigset's
 * bytes past the kernel's 8: it copies them from its own stack, garbage that
 * differs from one call path to the next, and every attach whose garbage
 * differed made a new record and searched all the old ones -- the Lua module
 * attaches at each long call (and, paced, each large h:alloc): 160 us an
 * allocation after 300,000 (the pacing fixes, session 30).  Attach after
 * attach, with the host's handler put back between, from stacks of
 * different depths and contents: the library's malloc'ed bytes stay flat. */
#include <malloc.h>
#include <signal.h>

#include "check.h"

static void host(int sig) { (void)sig; }

static struct sigaction host_sa;
static volatile int sink;

/* The stack below the caller's frame written with salt's bytes: the frame of
 * the call made next -- hl_interrupt_attach's locals -- starts out holding
 * them, different at each attach.  (glibc's sigemptyset clears only the
 * first of a sigset's 16 words -- the 64 signals the kernel has -- so a mask
 * built with it in a local kept whatever the stack held there: a record per
 * attach again, seen in make coverage's -O0 build, 121,440 bytes for 4000
 * attaches, never in the release build, whose stack happened to hold the
 * same bytes each time, until this scribble.) */
static __attribute__((noinline)) void scribble(int salt) {
  volatile unsigned char junk[4096];
  for (int i = 0; i < 4096; i++) junk[i] = (unsigned char)(salt * 131 + i * 17 + 1);
  sink += junk[salt & 4095];
}

static void attach_at(int depth, int salt) {
  volatile char junk[256];
  for (int i = 0; i < 256; i++) junk[i] = (char)(salt * 31 + depth * 7 + i);
  sink += junk[salt & 255];
  if (depth > 0) {
    attach_at(depth - 1, salt);
    return;
  }
  struct sigaction now; /* as the Lua module reads it: not zeroed */
  CHECK(sigaction(SIGUSR2, NULL, &now) == 0, "sigaction");
  scribble(salt);
  CHECK(hl_interrupt_attach(SIGUSR2) == HL_OK, "attach: %s", hl_heap_error(NULL));
  CHECK(sigaction(SIGUSR2, &now, NULL) == 0, "sigaction"); /* the host's back */
}

int main(void) {
#if defined(__SANITIZE_ADDRESS__)
  /* ASan's allocator leaves mallinfo2 at zero: the test could not fail */
  puts("SKIP: mallinfo2 counts nothing under AddressSanitizer");
  return 77;
#endif
  memset(&host_sa, 0, sizeof host_sa);
  host_sa.sa_handler = host;
  sigemptyset(&host_sa.sa_mask);
  CHECK(sigaction(SIGUSR2, &host_sa, NULL) == 0, "sigaction");
  attach_at(0, 0);
  size_t before = mallinfo2().uordblks;
  for (int i = 0; i < 4000; i++) attach_at(i % 16, i);
  size_t after = mallinfo2().uordblks;
  printf("4000 attaches: %zu bytes more allocated\n", after - before);
  CHECK(after - before < 4096, "%zu bytes allocated by 4000 attaches of the same handler",
        after - before);
  puts("ok");
  return 0;
}
