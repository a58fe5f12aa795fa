/* A program that takes malloc's address in its code and never allocates.
 * Built without PIE (meson: pie false, -fno-pic), its executable holds a
 * canonical PLT entry for malloc -- an undefined dynamic symbol with an
 * address, which dlsym(RTLD_DEFAULT, "malloc") answers (as for Debian's
 * python3) -- but defines no malloc: libc's calls still reach the preloaded
 * library.  The library took it for a program with its own malloc and, with
 * HEAPLAB_STATS asked, said "malloc is defined by <this program>" and wrote
 * no report (the preload hunt, session 34; tests/preload/run.py,
 * own_malloc).  It writes with write(2) only: nothing allocates. */
#include <stdlib.h>
#include <unistd.h>
void *(*volatile malloc_address)(size_t);
int main(void) {
  malloc_address = malloc;
  return write(1, malloc_address ? "taken\n" : "none\n", 6) == 6 ? 0 : 1;
}
