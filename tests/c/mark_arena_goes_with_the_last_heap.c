/* A collected heap with mark_threads > 1 reserves the parallel mark's
 * process-wide arena (gc/mark.c: the helpers' stacks and work packets, 228
 * MiB of address space, MAP_NORESERVE).  It was never unmapped: a program
 * that dlopened libheaplab, made and freed such a heap and dlclosed the
 * library kept it, unreachable, and each cycle added another -- 20 cycles,
 * 4.5 GiB of address space (registry.c: "nothing outlives the last heap (a
 * module may be unloaded)").  Now the arena goes with the last heap when no
 * helper thread was ever started (helpers pin the library: it stays, and so
 * does its one arena).
 *   cycles      20 x dlopen, hl_heap_new (mark_threads 2), hl_collect with a
 *               few objects (a mark on one thread: too little to share),
 *               hl_heap_free, dlclose: the library is unmapped each time and
 *               VmSize grows by less than 8 MiB from the 2nd to the 20th
 *               (64 MiB under AddressSanitizer);
 *   with_marks  the same with a 64 MiB fill marked by helpers: the library
 *               stays loaded, VmSize bounded the same way.
 * (A dl_test: dl_host.h.) */
#include "dl_host.h"

static long vm_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  CHECK(f, "/proc/self/status");
  char line[256];
  long v = -1;
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "VmSize:", 7)) v = atol(line + 7);
  fclose(f);
  return v;
}

static void one_cycle(bool fill) {
  dl_load();
  hl_options o;
  F(hl_options_defaults)(&o);
  o.reserve_bytes = 256 << 20;
  o.mark_threads = 2;
  hl_heap *h;
  char err[256];
  CHECK(F(hl_heap_new)(&o, &h, err, sizeof err) == HL_OK, "hl_heap_new: %s", err);
  hl_ref r;
  CHECK(F(hl_alloc)(h, 100, 1, &r) == HL_OK, "hl_alloc: %s", F(hl_heap_error)(h));
  if (fill) {
    hl_ref all;
    CHECK(F(hl_fill)(h, 64 << 20, 64, 1, &all) == HL_OK, "hl_fill: %s", F(hl_heap_error)(h));
  }
  CHECK(F(hl_collect)(h, 1, 1) == HL_OK, "hl_collect: %s", F(hl_heap_error)(h));
  F(hl_heap_free)(h);
  dl_unload();
}

/* What 18 cycles may add: nothing here (0 KiB measured); AddressSanitizer
 * maps bookkeeping of its own for each dlopen (11 MiB in 18 cycles).  One
 * arena a cycle was 228 MiB. */
#if defined(__SANITIZE_ADDRESS__)
#define GROWTH_KIB (64 << 10)
#else
#define GROWTH_KIB (8 << 10)
#endif

static void cycles_bounded(bool fill) {
  long vm2 = 0;
  for (int i = 0; i < 20; i++) {
    one_cycle(fill);
    if (!fill) CHECK(!dl_mapped(), "cycle %d: the library stayed loaded", i);
    if (i == 1) vm2 = vm_kib();
  }
  long vm20 = vm_kib();
  printf("VmSize after cycle 2: %ld KiB, after 20: %ld KiB\n", vm2, vm20);
  CHECK(vm20 - vm2 < GROWTH_KIB, "VmSize grew by %ld KiB in 18 dlopen/dlclose cycles", vm20 - vm2);
}

static void cycles(void) { cycles_bounded(false); }
static void with_marks(void) { cycles_bounded(true); }

int main(int argc, char **argv) {
  dl_args(argc, argv);
  dl_run("cycles", cycles);
  dl_run("with_marks", with_marks);
  return 0;
}
