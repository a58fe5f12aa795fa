/* hl_interrupt_attach installs a process-wide signal handler in libheaplab's
 * code.  A program that dlopened the library, attached SIGUSR1 and
 * dlclosed it took its next SIGUSR1 in unmapped code: SIGSEGV.  Now the
 * attach pins the library (hl__pin_code, as the helper threads do): the
 * handler stays, counts the interrupt and chains to the program's handler
 * that was there before, as it does without the dlclose.
 *
 * (A dl_test: dl_host.h.) */
#include <signal.h>

#include "dl_host.h"

static volatile sig_atomic_t host_saw;
static void host_handler(int sig) {
  (void)sig;
  host_saw++;
}

static void attach_then_unload(void) {
  signal(SIGUSR1, host_handler);
  dl_load();
  CHECK(F(hl_interrupt_attach)(SIGUSR1) == HL_OK, "hl_interrupt_attach: %s",
        F(hl_heap_error)(NULL));
  dl_unload();
  raise(SIGUSR1);
  CHECK(host_saw == 1, "the program's own handler ran %d times, not once", (int)host_saw);
}

int main(int argc, char **argv) {
  dl_args(argc, argv);
  dl_run("attach_then_unload", attach_then_unload);
  return 0;
}
