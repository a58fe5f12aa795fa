/* A heap the environment's fault schedule makes fail says so, naming the
 * variable: HEAPLAB_FAULT_RESERVE=always blamed "the address space is
 * exhausted -- RLIMIT_AS, or too many heaps open", which an embedder's user
 * who set it for another program could not tell from a real exhaustion (the
 * embedding hunt, session 28).  hl_heap_new reads it whatever opts is. */
#include "check.h"

static void fails_naming(const char *var, const char *value, const char *needle) {
  hl_options o;
  hl_options_defaults(&o); /* explicit options: the schedules are read all the same */
  setenv(var, value, 1);
  hl_heap *h = NULL;
  char err[512];
  int rc = hl_heap_new(&o, &h, err, sizeof err);
  unsetenv(var);
  CHECK(rc == HL_ENOMEM && !h, "%s=%s: hl_heap_new returned %s", var, value, hl_error_name(rc));
  char want[128];
  snprintf(want, sizeof want, "%s=%s", var, value);
  CHECK(strstr(err, want) && strstr(err, "injected"), "%s: the message does not name it: '%s'",
        want, err);
  CHECK(strstr(err, needle), "%s: '%s' does not say '%s'", want, err, needle);
  CHECK(!strstr(err, "RLIMIT_AS") && !strstr(err, "too many heaps"),
        "%s: the message blames the system: '%s'", want, err);
  CHECK(strcmp(hl_heap_error(NULL), err) == 0 || strstr(err, hl_heap_error(NULL)),
        "hl_heap_error(NULL) says '%s'", hl_heap_error(NULL));
  /* and without the variable the same options make a heap */
  OK(NULL, hl_heap_new(&o, &h, NULL, 0));
  hl_heap_free(h);
}

int main(void) {
  fails_naming("HEAPLAB_FAULT_RESERVE", "always", "reserve:");
  fails_naming("HEAPLAB_FAULT_ANY", "always", "reserve:");
  fails_naming("HEAPLAB_FAULT_RESERVE", "first:100:ENOMEM", "fired 10 times");
  puts("ok");
  return 0;
}
