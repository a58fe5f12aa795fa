/* Every errno a fault may arm reads back faithfully: hl_errno_name knew
 * eight names and gave "E?" for the rest, so h:faults() and Python's
 * faults reported "E?" for an ENOSPC armed by number (28), and a state
 * written back as a fault spec could not arm the same.  A site disarmed by
 * "off" records no errno, as one never armed (it showed the default
 * ENOMEM).  The fault hunt, session 33. */
#include <pthread.h>

#include "check.h"

static void *names_in_a_thread(void *arg) {
  (void)arg;
  for (int round = 0; round < 50; round++)
    for (int e = 1; e <= 4095; e++) {
      const char *n = hl_errno_name(e);
      if (hl_errno_index(n) != e) return (void *)1;
    }
  return NULL;
}

int main(void) {
  /* the eight of before keep their names */
  static const char *kept[] = {"EAGAIN", "ENOMEM", "EINVAL", "EIO",
                               "EPERM",  "EFAULT", "EBUSY",  "ENOSYS"};
  for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
    CHECK(strcmp(hl_errno_name(hl_errno_index(kept[i])), kept[i]) == 0, "%s", kept[i]);
  CHECK(strcmp(hl_errno_name(EAGAIN), "EAGAIN") == 0, "EAGAIN, not EWOULDBLOCK: %s",
        hl_errno_name(EAGAIN));
  CHECK(strcmp(hl_errno_name(ENOSPC), "ENOSPC") == 0, "ENOSPC: %s", hl_errno_name(ENOSPC));
  CHECK(strcmp(hl_errno_name(ENOENT), "ENOENT") == 0, "ENOENT: %s", hl_errno_name(ENOENT));
  CHECK(hl_errno_index("ENOSPC") == ENOSPC, "index ENOSPC");
  CHECK(hl_errno_index("EWOULDBLOCK") == EWOULDBLOCK, "alias EWOULDBLOCK");
  /* a number without a name: E<n>, which reads back; out of range E? */
  CHECK(strcmp(hl_errno_name(4000), "E4000") == 0, "4000: %s", hl_errno_name(4000));
  CHECK(hl_errno_index("E4000") == 4000, "E4000 reads back");
  CHECK(hl_errno_index("E28") == -1, "E28 is no name (28 has one)");
  CHECK(hl_errno_index("E04000") == -1 && hl_errno_index("E4096") == -1 &&
            hl_errno_index("E") == -1 && hl_errno_index(NULL) == -1, "bad E<n>");
  CHECK(strcmp(hl_errno_name(0), "E?") == 0 && strcmp(hl_errno_name(4096), "E?") == 0 &&
            strcmp(hl_errno_name(-1), "E?") == 0, "out of range");
  /* every number round-trips, from threads at once (the static table) */
  pthread_t t[4];
  for (int i = 0; i < 4; i++) CHECK(pthread_create(&t[i], NULL, names_in_a_thread, NULL) == 0, "thread");
  for (int i = 0; i < 4; i++) {
    void *r;
    pthread_join(t[i], &r);
    CHECK(r == NULL, "a thread's name did not read back");
  }

  hl_options o;
  hl_options_defaults(&o);
  o.reserve_bytes = 64u << 20;
  char err[256];
  hl_heap *h = NULL;
  /* armed by number from the environment: the state names it */
  setenv("HEAPLAB_FAULT_RELEASE", "first:3:28", 1);
  CHECK(hl_heap_new(&o, &h, err, sizeof err) == HL_OK, "%s", err);
  unsetenv("HEAPLAB_FAULT_RELEASE");
  hl_fault_state fs[HL_SITE_COUNT];
  size_t n = 0;
  OK(h, hl_faults_get(h, fs, HL_SITE_COUNT, &n));
  CHECK(fs[HL_SITE_release].err == 28 && strcmp(hl_errno_name(fs[HL_SITE_release].err), "ENOSPC") == 0,
        "release armed %d (%s)", fs[HL_SITE_release].err, hl_errno_name(fs[HL_SITE_release].err));
  /* by name and by E<n>, through hl_inject_named */
  OK(h, hl_inject_named(h, "restore", "always", 0, "ENOSPC"));
  OK(h, hl_inject_named(h, "dump", "first", 2, "E4000"));
  OK(h, hl_faults_get(h, fs, HL_SITE_COUNT, &n));
  CHECK(fs[HL_SITE_restore].err == ENOSPC, "restore %d", fs[HL_SITE_restore].err);
  CHECK(fs[HL_SITE_dump].err == 4000, "dump %d", fs[HL_SITE_dump].err);
  /* "off" records no errno, whatever errno it was given */
  OK(h, hl_inject_named(h, "release", "off", 0, NULL));
  OK(h, hl_inject_named(h, "restore", "off", 0, "EIO"));
  OK(h, hl_inject(h, HL_SITE_dump, HL_FAULT_off, 0, ENOMEM));
  OK(h, hl_faults_get(h, fs, HL_SITE_COUNT, &n));
  for (int s = 0; s < HL_SITE_COUNT; s++)
    CHECK(fs[s].mode == HL_FAULT_off && fs[s].err == 0, "site %s: mode %s errno %d",
          hl_fault_site_name(s), hl_fault_mode_name(fs[s].mode), fs[s].err);
  /* no errno given: ENOMEM (heaplab.h); an errno out of range is refused
   * and arms nothing -- a call that failed leaves the site as it was (both
   * hand-made defects fuzz_heap's op_fapi caught, h41fapi) */
  OK(h, hl_inject_named(h, "release", "first", 1, NULL));
  OK(h, hl_faults_get(h, fs, HL_SITE_COUNT, &n));
  CHECK(fs[HL_SITE_release].mode == HL_FAULT_first && fs[HL_SITE_release].err == ENOMEM,
        "release armed without an errno: mode %s errno %d",
        hl_fault_mode_name(fs[HL_SITE_release].mode), fs[HL_SITE_release].err);
  CHECK(hl_inject_named(h, "restore", "always", 0, "4096") == HL_EINVAL &&
            hl_inject_named(h, "restore", "always", 0, "0") == HL_EINVAL,
        "an errno out of [1, 4095] accepted");
  OK(h, hl_faults_get(h, fs, HL_SITE_COUNT, &n));
  CHECK(fs[HL_SITE_restore].mode == HL_FAULT_off && fs[HL_SITE_restore].err == 0,
        "a refused inject armed restore: mode %s errno %d",
        hl_fault_mode_name(fs[HL_SITE_restore].mode), fs[HL_SITE_restore].err);
  hl_heap_free(h);
  printf("ok\n");
  return 0;
}
