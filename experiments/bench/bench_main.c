/*
 * bench_main.c -- the benchmark's process: parse the command line, run ONE
 * workload once against this executable's allocator, print one JSON record.
 *
 *   bench-<allocator> WORKLOAD [--depth N] [--bytes N] [--size N]
 *                              [--rounds N] [--scattered] [--warm] [-o name=value]...
 *
 * WORKLOAD: binary-trees | fill | floor | pause | churn | release | compact
 * (each takes only the flags it reads: workload_flags; another is refused)
 * (-o sets a heaplab option; the other allocators reject it.)
 *
 * binary-trees' record also carries its phases (bench.h): bench.py phases
 * compares them between commands.
 *
 * The record goes to stdout and nothing else does; messages go to stderr,
 * which bench.py never parses.  Peak RSS is the process's own VmHWM (its
 * address space's high-water mark since exec), so every run is a fresh
 * process.  ru_maxrss is recorded too, but Linux carries it over exec: a run
 * launched from a 300 MiB Python process reports 313 MiB there and 1 MiB in
 * VmHWM (measured), so bench.py uses VmHWM.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

uint64_t bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void bench_note_u(bench_out *o, const char *key, uint64_t v) {
  if (o->nnotes < BENCH_MAX_NOTES) o->notes[o->nnotes++] = (bench_note){key, 0, v, 0};
}

void bench_note_f(bench_out *o, const char *key, double v) {
  if (o->nnotes < BENCH_MAX_NOTES) o->notes[o->nnotes++] = (bench_note){key, 1, 0, v};
}

bench_phase *bench_phase_end(bench_out *o, const char *name, int depth, uint64_t t0) {
  uint64_t ns = bench_now_ns() - t0;
  if (o->nphases == BENCH_MAX_PHASES) return NULL;
  bench_phase *ph = &o->phases[o->nphases++];
  memset(ph, 0, sizeof *ph);
  if (name) snprintf(ph->name, sizeof ph->name, "%s", name);
  else snprintf(ph->name, sizeof ph->name, "d%d", depth);
  ph->ns = ns;
  return ph;
}

int bench_fail(bench_out *o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(o->error, sizeof o->error, fmt, ap);
  va_end(ap);
  return 1;
}

/* ---- the page-fault floor: mmap + write the same bytes a fill writes ---- */

int bench_floor(const bench_params *p, bench_out *o) {
  uint64_t bytes = p->fill_bytes, size = p->obj_size;
  uint64_t n = (bytes + size - 1) / size;
  uint64_t t0 = bench_now_ns();
  uint8_t *m = mmap(NULL, n * size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return bench_fail(o, "floor: mmap of %" PRIu64 " bytes: %s", n * size,
                                         strerror(errno));
  for (uint64_t k = 0; k < n; k++) memset(m + k * size, bench_fill_byte(k), size);
  o->time_ns = bench_now_ns() - t0;
  uint64_t sum = 0;
  for (uint64_t k = 0; k < n; k++) sum += bench_payload_hash(m + k * size, size);
  o->checksum = sum;
  o->objects = n;
  /* The same writes once more, every page resident: what writing the bytes
   * costs with no fault at all (the bound under any page supply). */
  t0 = bench_now_ns();
  for (uint64_t k = 0; k < n; k++) memset(m + k * size, bench_fill_byte(k + 1), size);
  bench_note_u(o, "rewrite_ns", bench_now_ns() - t0);
  munmap(m, n * size);

  /* The bare fault cost, for reference: one write per OS page. */
  long os = sysconf(_SC_PAGESIZE);
  t0 = bench_now_ns();
  m = mmap(NULL, n * size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return bench_fail(o, "floor: second mmap: %s", strerror(errno));
  for (uint64_t off = 0; off < n * size; off += (uint64_t)os) m[off] = 1;
  bench_note_u(o, "touch_one_byte_per_page_ns", bench_now_ns() - t0);
  munmap(m, n * size);
  return 0;
}

/* ---- output ---- */

static uint64_t vm_hwm(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  uint64_t kb = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmHWM: %" SCNu64 " kB", &kb) == 1) break;
  fclose(f);
  return kb * 1024;
}

static void json_str(const char *s) {
  putchar('"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') printf("\\%c", *s);
    else if ((unsigned char)*s < 0x20) printf("\\u%04x", *s);
    else putchar(*s);
  }
  putchar('"');
}

static void print_record(const char *workload, const bench_params *p, const bench_out *o,
                         int rc) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("{\"allocator\": ");
  json_str(bench_allocator);
  printf(", \"workload\": ");
  json_str(workload);
  printf(", \"params\": {\"depth\": %d, \"bytes\": %" PRIu64 ", \"size\": %" PRIu64
         ", \"rounds\": %d, \"scattered\": %d, \"keep\": %" PRIu64 ", \"warm\": %d, \"options\": [",
         p->depth, p->fill_bytes, p->obj_size, p->rounds, p->scattered, p->keep, p->warm);
  for (int i = 0; i < p->nopts; i++) {
    if (i) printf(", ");
    json_str(p->opts[i]);
  }
  printf("]}, \"time_ns\": %" PRIu64 ", \"checksum\": \"0x%016" PRIx64 "\", \"objects\": %" PRIu64
         ", \"maxrss_bytes\": %" PRIu64 ", \"vmhwm_bytes\": %" PRIu64
         ", \"user_ns\": %" PRIu64 ", \"sys_ns\": %" PRIu64
         ", \"minflt\": %ld, \"notes\": {",
         o->time_ns, o->checksum, o->objects, (uint64_t)ru.ru_maxrss * 1024, vm_hwm(),
         (uint64_t)ru.ru_utime.tv_sec * 1000000000u + (uint64_t)ru.ru_utime.tv_usec * 1000u,
         (uint64_t)ru.ru_stime.tv_sec * 1000000000u + (uint64_t)ru.ru_stime.tv_usec * 1000u,
         ru.ru_minflt);
  for (int i = 0; i < o->nnotes; i++) {
    if (i) printf(", ");
    json_str(o->notes[i].key);
    if (o->notes[i].is_float) printf(": %.9g", o->notes[i].d);
    else printf(": %" PRIu64, o->notes[i].u);
  }
  printf("}, \"phases\": [");
  for (int i = 0; i < o->nphases; i++) {
    const bench_phase *ph = &o->phases[i];
    printf("%s{\"phase\": ", i ? ", " : "");
    json_str(ph->name);
    printf(", \"ns\": %" PRIu64, ph->ns);
    if (ph->gc)
      printf(", \"cycles\": %" PRIu64 ", \"minor_cycles\": %" PRIu64 ", \"full_marks\": %" PRIu64
             ", \"gc_ns\": %" PRIu64 ", \"promoted_bytes\": %" PRIu64,
             ph->cycles, ph->minor_cycles, ph->full_marks, ph->gc_ns, ph->promoted_bytes);
    printf("}");
  }
  printf("], \"error\": ");
  if (rc) json_str(o->error[0] ? o->error : "failed");
  else printf("null");
  printf("}\n");
  fflush(stdout);
}

/* ---- command line ---- */

static int usage(const char *msg) {
  fprintf(stderr,
          "bench-%s: %s\n"
          "usage: bench-%s WORKLOAD [--depth N] [--bytes N] [--size N] [--rounds N]"
          " [--keep N] [--scattered] [--warm] [-o name=value]...\n"
          "WORKLOAD: binary-trees | fill | floor | pause | churn | release | compact\n",
          bench_allocator, msg, bench_allocator);
  return 2;
}

/* A byte count: digits with an optional k/m/g suffix (KiB, MiB, GiB). */
static int parse_u64(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *s == '-') return -1;
  uint64_t mul = 1;
  if (*end == 'k' || *end == 'K') mul = 1u << 10, end++;
  else if (*end == 'm' || *end == 'M') mul = 1u << 20, end++;
  else if (*end == 'g' || *end == 'G') mul = 1u << 30, end++;
  if (*end) return -1;
  /* (17179869185g wrapped to 1 GiB and ran) */
  if ((uint64_t)v > UINT64_MAX / mul) return -2;
  *out = (uint64_t)v * mul;
  return 0;
}

/* The flags each workload reads: another is refused, not ignored. */
enum { F_DEPTH = 1, F_BYTES = 2, F_SIZE = 4, F_ROUNDS = 8, F_KEEP = 16, F_SCATTERED = 32,
       F_WARM = 64 };
static const struct {
  const char *workload;
  unsigned flags;
} workload_flags[] = {
    {"binary-trees", F_DEPTH},
    {"fill", F_BYTES | F_SIZE | F_WARM},
    {"floor", F_BYTES | F_SIZE},
    {"pause", F_BYTES | F_SIZE},
    {"churn", F_BYTES | F_SIZE | F_ROUNDS},
    {"release", F_BYTES | F_SIZE | F_SCATTERED},
    {"compact", F_BYTES | F_SIZE | F_KEEP},
};
static const char *const flag_names[] = {"--depth", "--bytes", "--size", "--rounds",
                                         "--keep", "--scattered", "--warm"};

/* The workloads a backend does not define: not supported there (2). */
#define BENCH_UNSUPPORTED(name)                                                 \
  __attribute__((weak)) int name(const bench_params *p, bench_out *o) {        \
    (void)p, (void)o;                                                           \
    return 2;                                                                   \
  }
BENCH_UNSUPPORTED(backend_pause)
BENCH_UNSUPPORTED(backend_churn)
BENCH_UNSUPPORTED(backend_release)
BENCH_UNSUPPORTED(backend_compact)

int main(int argc, char **argv) {
  if (argc < 2) return usage("no workload given");
  const char *workload = argv[1];
  bench_params p = {.depth = 20, .fill_bytes = 192u << 20, .obj_size = 256, .rounds = 8,
                    .keep = 10};
  unsigned given = 0; /* the F_* flags on the command line */
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    uint64_t n = 0;
    char msg[200];
    if (!strcmp(a, "--scattered")) {
      p.scattered = 1;
      given |= F_SCATTERED;
      continue;
    }
    if (!strcmp(a, "--warm")) {
      p.warm = 1;
      given |= F_WARM;
      continue;
    }
    if (!v) {
      snprintf(msg, sizeof msg, "%s needs a value", a);
      return usage(msg);
    }
    i++;
    if (!strcmp(a, "-o")) {
      if (p.nopts == BENCH_MAX_OPTS || !strchr(v, '=')) {
        snprintf(msg, sizeof msg, "-o %s: expected name=value (at most 32)", v);
        return usage(msg);
      }
      p.opts[p.nopts++] = v;
      continue;
    }
    int bad = parse_u64(v, &n);
    if (bad) {
      snprintf(msg, sizeof msg, bad == -2 ? "%s %s: too large (more than 64 bits)"
                                          : "%s %s: not a non-negative number", a, v);
      return usage(msg);
    }
    if (!strcmp(a, "--depth") && n >= 1 && n <= 30) p.depth = (int)n, given |= F_DEPTH;
    else if (!strcmp(a, "--bytes") && n >= 1 && n <= ((uint64_t)64 << 30))
      p.fill_bytes = n, given |= F_BYTES;
    else if (!strcmp(a, "--size") && n >= 8 && n <= 4096) p.obj_size = n, given |= F_SIZE;
    else if (!strcmp(a, "--rounds") && n >= 1 && n <= 100000) p.rounds = (int)n, given |= F_ROUNDS;
    else if (!strcmp(a, "--keep") && n >= 1 && n <= 1000000) p.keep = n, given |= F_KEEP;
    else {
      snprintf(msg, sizeof msg,
               "%s %s: unknown flag or out of range (depth 1..30, bytes 1..64g, size 8..4096,"
               " rounds 1..100000, keep 1..1000000)", a, v);
      return usage(msg);
    }
  }
  int (*fn)(const bench_params *, bench_out *) = NULL;
  if (!strcmp(workload, "binary-trees")) fn = backend_binary_trees;
  else if (!strcmp(workload, "fill")) fn = backend_fill;
  else if (!strcmp(workload, "floor")) fn = bench_floor;
  else if (!strcmp(workload, "pause")) fn = backend_pause;
  else if (!strcmp(workload, "churn")) fn = backend_churn;
  else if (!strcmp(workload, "release")) fn = backend_release;
  else if (!strcmp(workload, "compact")) fn = backend_compact;
  else return usage("unknown workload");
  for (size_t w = 0; w < sizeof workload_flags / sizeof workload_flags[0]; w++) {
    if (strcmp(workload_flags[w].workload, workload)) continue;
    unsigned extra = given & ~workload_flags[w].flags;
    for (int f = 0; extra; f++, extra >>= 1)
      if (extra & 1) {
        /* (a flag the workload does not read was taken and ignored) */
        char msg[120];
        snprintf(msg, sizeof msg, "%s: not a flag of the %s workload", flag_names[f], workload);
        return usage(msg);
      }
  }

  static bench_out o;
  backend_init(&p, &o);
  int rc = o.error[0] ? 1 : fn(&p, &o);
  if (rc == 2) {
    fprintf(stderr, "bench-%s: workload %s is not supported by this allocator\n",
            bench_allocator, workload);
    return 2;
  }
  print_record(workload, &p, &o, rc);
  return rc ? 1 : 0;
}
