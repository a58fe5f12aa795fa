/* A heap whose reservation the kernel refuses steps it down (ulimit -v,
 * overcommit), but not below 64 MiB (or what was asked, if less): with the
 * address space nearly exhausted, heap creation fails with a clear error
 * instead of handing out a sliver.  On a8ce51d the 5,000th heap of a
 * process silently got 2 MiB of the 32 GiB it asked for.  RLIMIT_AS is set
 * in a child process here (the system's limits are left alone). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

/* In a child under RLIMIT_AS = limit: the reservation a default heap gets,
 * or 0 when creation fails with a message naming the address space. */
static void default_heap(uint64_t *got) {
  hl_heap *h = NULL;
  char err[512];
  if (hl_heap_new(NULL, &h, err, sizeof err) == HL_OK) hl_heap_range(h, NULL, got);
  else if (!strstr(err, "address space")) *got = 1; /* an unclear message */
}
static uint64_t reserved_under(uint64_t limit) {
  uint64_t got = 2;
  under_as_limit(limit, default_heap, &got, 1);
  return got;
}

/* A /proc/self/status figure now ("VmSize", "VmData"), bytes. */
static uint64_t status_bytes(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  size_t n = strlen(key);
  uint64_t kb = 0;
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, key, n) && line[n] == ':') kb = strtoull(line + n + 1, NULL, 10);
  if (f) fclose(f);
  return kb * 1024;
}

/* In a child under RLIMIT_AS (or RLIMIT_DATA) of what it uses now + room:
 * a default heap must leave the program room of its own -- a 100 MiB
 * malloc after it.  The step-down kept the first size the kernel took,
 * 256 MiB of a 300 MiB room, and the malloc failed.  What the child says:
 * 0 ok, else what failed. */
static int program_room_after_heap(int resource, uint64_t room, uint64_t want) {
  pid_t pid = fork();
  if (pid == 0) {
    uint64_t limit = status_bytes(resource == RLIMIT_DATA ? "VmData" : "VmSize") + room;
    struct rlimit rl = {limit, limit};
    if (setrlimit(resource, &rl)) child_exit(10);
    hl_heap *h = NULL;
    char err[512];
    if (hl_heap_new(NULL, &h, err, sizeof err) != HL_OK) {
      fprintf(stderr, "heap: %s\n", err);
      child_exit(11);
    }
    uint64_t got = 0;
    hl_heap_range(h, NULL, &got);
    void *p = malloc(want);
    if (!p) {
      fprintf(stderr, "a %" PRIu64 " MiB malloc failed after a heap of %" PRIu64 " MiB (room %"
              PRIu64 " MiB)\n", want >> 20, got >> 20, room >> 20);
      child_exit(12);
    }
    if (got > room / 2) child_exit(13);
    free(p);
    hl_heap_free(h);
    child_exit(0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}

int main(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  puts("SKIP: a sanitizer's shadow memory needs more address space than RLIMIT_AS leaves");
  return 77;
#endif
  uint64_t at_2g = reserved_under(2ull << 30);
  CHECK(at_2g >= (256u << 20) && at_2g < (2ull << 30), "under 2 GiB: %" PRIu64, at_2g);
  uint64_t at_50m = reserved_under(50u << 20);
  CHECK(at_50m == 0, "under 50 MiB a sliver of %" PRIu64 " bytes was handed out", at_50m);
  int as = program_room_after_heap(RLIMIT_AS, 300u << 20, 100u << 20);
  CHECK(as == 0, "RLIMIT_AS with 300 MiB of room: the child says %d (12: no room left)", as);
  int data = program_room_after_heap(RLIMIT_DATA, 300u << 20, 100u << 20);
  CHECK(data == 0, "RLIMIT_DATA with 300 MiB of room: the child says %d (12: no room left)", data);
  /* with 700 MiB the heap takes 350 and its mark stack 32, and the parallel
   * mark's 228 MiB arena (mark_threads 2) would leave about 100 for a 200
   * MiB malloc: it is declined
   * (no heap of this process has reserved the arena yet: a child would
   * inherit it) */
  setenv("HEAPLAB_MARK_THREADS", "2", 1);
  int arena = program_room_after_heap(RLIMIT_AS, 700u << 20, 200u << 20);
  unsetenv("HEAPLAB_MARK_THREADS");
  CHECK(arena == 0, "RLIMIT_AS with 700 MiB of room: the child says %d (12: no room left)", arena);
  /* asking for little is fine */
  hl_heap *h = HEAP("reserve_bytes=4m");
  uint64_t got;
  OK(h, hl_heap_range(h, NULL, &got));
  CHECK(got == 4u << 20, "4 MiB asked, %" PRIu64 " got", got);
  hl_heap_free(h);
  puts("ok");
  return 0;
}
