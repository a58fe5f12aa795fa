/*
 * preload_conformance.c -- the malloc family of libheaplab-malloc.so keeps
 * glibc's contract: every pointer aligned, malloc_usable_size >= request,
 * calloc zeroes and refuses an overflow with ENOMEM, realloc keeps contents
 * (NULL and size-0 semantics as glibc's), the memalign family aligns and
 * reports EINVAL/ENOMEM as glibc does, and pointers heaplab does not own
 * (glibc's, mmapped by glibc) are handed to glibc.
 *
 * Run with LD_PRELOAD=libheaplab-malloc.so (it checks that malloc is
 * heaplab's) and, as a control, without it: the same checks pass on glibc.
 * Exit status 0 = all passed; each failure prints one line.
 */
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_memalign(size_t, size_t);

static int failures, on_heaplab;
#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      failures++;                                                              \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                     \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
    }                                                                          \
  } while (0)

/* the compiler must not see through these */
static void *(*volatile m_malloc)(size_t) = malloc;
static void *(*volatile m_calloc)(size_t, size_t) = calloc;
static void *(*volatile m_realloc)(void *, size_t) = realloc;
static void (*volatile m_free)(void *) = free;

static void fill(unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(seed + i * 7);
}
static int same(const unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != (unsigned char)(seed + i * 7)) return 0;
  return 1;
}

static const size_t sizes[] = {0, 1, 7, 8, 15, 16, 17, 24, 31, 32, 48, 63, 64, 100, 127, 128,
                               200, 255, 256, 500, 512, 513, 1000, 1024, 2047, 2048, 4000,
                               4096, 5000, 8191, 8192, 10000, 16383, 16384, 16385, 20000,
                               65536, 100000, 131072, 1 << 20, (1 << 20) + 1, 5 << 20};
#define NSIZES (sizeof sizes / sizeof sizes[0])

static void malloc_free_usable(void) {
  void *ps[NSIZES];
  for (size_t i = 0; i < NSIZES; i++) {
    unsigned char *p = m_malloc(sizes[i]);
    CHECK(p != NULL, "malloc(%zu) = NULL", sizes[i]);
    if (!p) continue;
    CHECK((uintptr_t)p % 16 == 0, "malloc(%zu) = %p not 16-aligned", sizes[i], (void *)p);
    CHECK(malloc_usable_size(p) >= sizes[i], "malloc_usable_size(malloc(%zu)) = %zu", sizes[i],
          malloc_usable_size(p));
    /* the whole usable size is ours to write */
    memset(p, 0xab, malloc_usable_size(p));
    fill(p, sizes[i], (unsigned)i);
    ps[i] = p;
  }
  for (size_t i = 0; i < NSIZES; i++) {
    if (!ps[i]) continue;
    CHECK(same(ps[i], sizes[i], (unsigned)i), "malloc(%zu): contents changed", sizes[i]);
    m_free(ps[i]);
  }
  m_free(NULL); /* nothing */
  CHECK(malloc_usable_size(NULL) == 0, "malloc_usable_size(NULL) != 0");
  errno = 0;
  void *huge = m_malloc(SIZE_MAX - 4096);
  CHECK(huge == NULL && errno == ENOMEM, "malloc(SIZE_MAX - 4096) = %p, errno %d", huge, errno);
}

static void calloc_semantics(void) {
  for (size_t i = 0; i < NSIZES; i++) {
    /* dirty the memory calloc may reuse */
    unsigned char *d = m_malloc(sizes[i] + 1);
    if (d) memset(d, 0x5a, sizes[i] + 1);
    m_free(d);
    unsigned char *p = m_calloc(1, sizes[i]);
    CHECK(p != NULL, "calloc(1, %zu) = NULL", sizes[i]);
    if (!p) continue;
    CHECK((uintptr_t)p % 16 == 0, "calloc(1, %zu) not 16-aligned", sizes[i]);
    size_t nz = 0;
    for (size_t k = 0; k < sizes[i]; k++) nz += p[k] != 0;
    CHECK(nz == 0, "calloc(1, %zu): %zu nonzero bytes", sizes[i], nz);
    m_free(p);
  }
  errno = 0;
  void *p = m_calloc(SIZE_MAX / 2, 3);
  CHECK(p == NULL && errno == ENOMEM, "calloc overflow = %p, errno %d (want NULL, ENOMEM)", p,
        errno);
  errno = 0;
  p = m_calloc((size_t)1 << 33, (size_t)1 << 33);
  CHECK(p == NULL && errno == ENOMEM, "calloc(2^33, 2^33) = %p, errno %d", p, errno);
  p = m_calloc(0, 0);
  CHECK(p != NULL, "calloc(0, 0) = NULL (glibc returns a block)");
  m_free(p);
}

static void realloc_semantics(void) {
  /* every pair of sizes: contents kept up to the smaller one */
  for (size_t i = 0; i < NSIZES; i++)
    for (size_t j = 0; j < NSIZES; j += 3) {
      if (sizes[i] == 0 || sizes[j] == 0) continue;
      unsigned char *p = m_malloc(sizes[i]);
      fill(p, sizes[i], 3);
      unsigned char *q = m_realloc(p, sizes[j]);
      CHECK(q != NULL, "realloc(%zu -> %zu) = NULL", sizes[i], sizes[j]);
      if (!q) continue;
      size_t keep = sizes[i] < sizes[j] ? sizes[i] : sizes[j];
      CHECK(same(q, keep, 3), "realloc(%zu -> %zu) lost contents", sizes[i], sizes[j]);
      CHECK((uintptr_t)q % 16 == 0, "realloc result not 16-aligned");
      CHECK(malloc_usable_size(q) >= sizes[j], "realloc(%zu -> %zu): usable %zu", sizes[i],
            sizes[j], malloc_usable_size(q));
      m_free(q);
    }
  /* growth in small steps, as a string builder does */
  unsigned char *g = NULL;
  size_t n = 0;
  for (size_t step = 1; n < (3 << 20); step = step * 5 / 4 + 1) {
    unsigned char *ng = m_realloc(g, n + step);
    CHECK(ng != NULL, "realloc growth to %zu = NULL", n + step);
    if (!ng) break;
    g = ng;
    for (size_t k = 0; k < step; k++) g[n + k] = (unsigned char)((n + k) * 13);
    n += step;
  }
  size_t bad = 0;
  for (size_t k = 0; k < n; k++) bad += g[k] != (unsigned char)(k * 13);
  CHECK(bad == 0, "realloc growth: %zu bytes changed", bad);
  m_free(g);
  /* NULL = malloc; size 0 = free and NULL (glibc) */
  void *p = m_realloc(NULL, 40);
  CHECK(p != NULL, "realloc(NULL, 40) = NULL");
  void *z = m_realloc(p, 0);
  CHECK(z == NULL, "realloc(p, 0) = %p (glibc frees and returns NULL)", z);
  /* failure leaves the block */
  p = m_malloc(100);
  fill(p, 100, 9);
  errno = 0;
  void *r = m_realloc(p, SIZE_MAX - 4096);
  CHECK(r == NULL && errno == ENOMEM, "realloc(p, huge) = %p errno %d", r, errno);
  CHECK(same(p, 100, 9), "a failed realloc changed the block");
  m_free(p);
  errno = 0;
  p = m_malloc(100);
  volatile size_t many = SIZE_MAX / 4;
  void *(*volatile ra)(void *, size_t, size_t) = reallocarray;
  r = ra(p, many, 8);
  CHECK(r == NULL && errno == ENOMEM, "reallocarray overflow = %p errno %d", r, errno);
  /* a product that wraps to a small size (SIZE_MAX/4 x 8 wraps to SIZE_MAX-7,
   * which fails anyway): without the check, a 4-byte block for a huge
   * array (the mutation hunt, twenty-fifth session) */
  volatile size_t wraps = SIZE_MAX / 2 + 2;
  errno = 0;
  r = ra(p, wraps, 4);
  CHECK(r == NULL && errno == ENOMEM, "reallocarray(p, SIZE_MAX/2+2, 4) = %p errno %d", r, errno);
  r = ra(p, 10, 30); /* (p is still live: the failed call kept it) */
  CHECK(r != NULL && malloc_usable_size(r) >= 300, "reallocarray(p, 10, 30)");
  m_free(r);
}

static void aligned_semantics(void) {
  static const size_t aligns[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096,
                                  8192, 65536, 1 << 21};
  for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++)
    for (size_t i = 0; i < NSIZES; i += 2) {
      size_t al = aligns[a], eff = al < 16 ? 16 : al;
      void *p = memalign(al, sizes[i]);
      CHECK(p && (uintptr_t)p % eff == 0, "memalign(%zu, %zu) = %p", al, sizes[i], p);
      if (p) {
        CHECK(malloc_usable_size(p) >= sizes[i], "memalign usable %zu < %zu",
              malloc_usable_size(p), sizes[i]);
        memset(p, 1, sizes[i]);
        /* an aligned block resizes like any other */
        unsigned char *q = m_realloc(p, sizes[i] + 100);
        CHECK(q != NULL, "realloc of memalign(%zu, %zu)", al, sizes[i]);
        for (size_t k = 0; q && k < sizes[i]; k++)
          if (q[k] != 1) {
            CHECK(0, "realloc of memalign(%zu, %zu) lost byte %zu", al, sizes[i], k);
            break;
          }
        m_free(q);
      }
      if (al >= sizeof(void *)) {
        void *out = (void *)1;
        int rc = posix_memalign(&out, al, sizes[i]);
        CHECK(rc == 0 && out && (uintptr_t)out % al == 0, "posix_memalign(%zu, %zu) = %d %p", al,
              sizes[i], rc, out);
        if (rc == 0) m_free(out);
      }
      void *c = aligned_alloc(al, sizes[i]);
      CHECK(c && (uintptr_t)c % eff == 0, "aligned_alloc(%zu, %zu) = %p", al, sizes[i], c);
      m_free(c);
    }
  /* posix_memalign: EINVAL for an alignment that is no power of two or not a
   * multiple of sizeof(void *); the out pointer untouched; errno untouched */
  static const size_t bad[] = {0, 1, 2, 4, 12, 24, 48, 100, 4097};
  for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
    void *out = (void *)0x1234;
    errno = 1234;
    int rc = posix_memalign(&out, bad[b], 64);
    CHECK(rc == EINVAL && out == (void *)0x1234 && errno == 1234,
          "posix_memalign(align %zu) = %d, out %p, errno %d (want EINVAL, untouched)", bad[b], rc,
          out, errno);
  }
  void *out = (void *)0x1234;
  int (*volatile pm)(void **, size_t, size_t) = posix_memalign; /* (gcc assumes errno kept) */
  errno = 0;
  int rc = pm(&out, 64, SIZE_MAX - 4096);
  /* (heaplab's leaves errno alone, as its manual page says; glibc 2.36's sets
   * ENOMEM all the same) */
  CHECK(rc == ENOMEM && (!on_heaplab || errno == 0), "posix_memalign(64, huge) = %d, errno %d "
        "(want ENOMEM, errno untouched)", rc, errno);
  /* memalign with an alignment that is not a power of two: rounded up (glibc) */
  void *m = memalign(48, 100);
  CHECK(m && (uintptr_t)m % 64 == 0, "memalign(48, 100) = %p (glibc rounds up to 64)", m);
  m_free(m);
  if (on_heaplab) { /* past 1 GiB: refused, not corrupted */
    errno = 0;
    m = memalign((size_t)1 << 31, 10);
    CHECK(m == NULL && errno == ENOMEM, "memalign(2 GiB, 10) = %p errno %d", m, errno);
  }
  errno = 0;
  m = memalign(SIZE_MAX / 2 + 2, 10);
  CHECK(m == NULL && errno == EINVAL, "memalign(huge alignment) = %p errno %d", m, errno);
  long ps = sysconf(_SC_PAGESIZE);
  void *v = valloc(100);
  CHECK(v && (uintptr_t)v % (uintptr_t)ps == 0, "valloc(100) = %p", v);
  m_free(v);
  v = pvalloc(100);
  CHECK(v && (uintptr_t)v % (uintptr_t)ps == 0 && malloc_usable_size(v) >= (size_t)ps,
        "pvalloc(100) = %p usable %zu", v, v ? malloc_usable_size(v) : 0);
  m_free(v);
}

/* Blocks heaplab did not hand out: glibc's own (as from before the library
 * was loaded, or from a program calling __libc_malloc), small and mmapped. */
static void foreign_pointers(void) {
  static const size_t fs[] = {24, 1000, 100000, 4 << 20};
  for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) {
    unsigned char *p = __libc_malloc(fs[i]);
    fill(p, fs[i], 77);
    CHECK(malloc_usable_size(p) >= fs[i], "malloc_usable_size(glibc's %zu) = %zu", fs[i],
          malloc_usable_size(p));
    unsigned char *q = m_realloc(p, fs[i] * 2);
    CHECK(q && same(q, fs[i], 77), "realloc(glibc's %zu) lost contents", fs[i]);
    m_free(q);
    p = __libc_malloc(fs[i]);
    m_free(p);
    p = __libc_memalign(256, fs[i]);
    m_free(p);
  }
  /* and the heap is still consistent after them */
  void *ps[1000];
  for (int i = 0; i < 1000; i++) ps[i] = m_malloc((size_t)(i % 300) * 8 + 1);
  for (int i = 0; i < 1000; i++) m_free(ps[i]);
}

/* A call that succeeds leaves errno alone, even when it ran a trim whose
 * advice was refused (run with HEAPLAB_FAULT_RELEASE=always:ENOMEM too). */
static void errno_untouched(void) {
  void *ps[20000];
  errno = 4321;
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < 20000; i++) ps[i] = m_malloc((size_t)(i % 50) * 16 + 1);
    for (int i = 0; i < 20000; i++) m_free(ps[i]);
    void *big = m_realloc(m_calloc(1, 100000), 300000);
    m_free(big);
    m_free(aligned_alloc(4096, 100));
  }
  CHECK(errno == 4321, "errno is %d after calls that succeeded (set to 4321 before)", errno);
}

/* heaplab: a large block grown by realloc gets a quarter more than asked,
 * but never so much that it crosses glibc's mapping threshold (fixed at
 * 1 MiB by the library) while the size asked stays under it: the block
 * stays in glibc's heap, where it grows in place, instead of moving to a
 * mapping of its own with the copy and the old block both resident. */
static void growth_under_the_threshold_stays_in_the_heap(void) {
  if (!on_heaplab) return;
  size_t n = 20000;
  unsigned char *p = m_malloc(n);
  CHECK(p != NULL, "malloc(%zu)", n);
  memset(p, 5, n);
  while (n + 100 < 1000000) {
    unsigned char *q = m_realloc(p, n + 100);
    CHECK(q != NULL, "realloc to %zu", n + 100);
    if (!q) return;
    memset(q + n, 5, 100);
    p = q;
    n += 100;
  }
  /* (a quarter more than the 888,000-byte block was 1.11 MB: mapped) */
  CHECK(malloc_usable_size(p) < 1024 * 1024, "a block grown to %zu bytes holds %zu: past "
        "glibc's mapping threshold", n, malloc_usable_size(p));
  CHECK(p[0] == 5 && p[n - 1] == 5, "the grown block lost its contents");
  m_free(p);
}

/* heaplab: eight size classes from 512 bytes to 1 KiB (every 64 bytes),
 * where a collected heap has four: a block of 513..1024 bytes wastes at most
 * 63 bytes (with four classes, 520 bytes took a 640-byte slot).  A server's
 * values and buffers of these sizes fill fewer pages (docs/performance.md,
 * the sixth round). */
static void mid_sizes_in_64_byte_steps(void) {
  if (!on_heaplab) return;
  for (size_t n = 513; n <= 1024; n += 7) {
    void *p = m_malloc(n);
    CHECK(p != NULL, "malloc(%zu)", n);
    if (!p) return;
    CHECK(malloc_usable_size(p) - n < 64, "malloc(%zu): usable %zu, %zu bytes wasted", n,
          malloc_usable_size(p), malloc_usable_size(p) - n);
    m_free(p);
  }
}

static void trim_and_sized(void) {
  void *ps[4096];
  for (int i = 0; i < 4096; i++) ps[i] = m_malloc(1000);
  for (int i = 0; i < 4096; i++) m_free(ps[i]);
  malloc_trim(0); /* runs; 0 or 1 */
  void (*fs)(void *, size_t) = (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "free_sized");
  void (*fas)(void *, size_t, size_t) =
      (void (*)(void *, size_t, size_t))dlsym(RTLD_DEFAULT, "free_aligned_sized");
  if (fs) fs(m_malloc(100), 100);
  if (fas) fas(aligned_alloc(64, 128), 64, 128);
}

/* Corners a hostile user tried (docs/clients.md, "Tried on"): every power
 * of two up to 1 MiB with odd sizes through the three aligned calls, the
 * whole usable size written, shrunk and grown by realloc across the
 * small/large boundary; errno on every failure path of the family. */
static void api_corners(void) {
  static const size_t odd[] = {0, 1, 3, 17, 100, 1000, 4095, 4097, 9999, 16383, 16385, 65537,
                               1000001};
  for (size_t a = 1; a <= (1 << 20); a <<= 1)
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
      size_t n = odd[i], eff = a < 16 ? 16 : a;
      unsigned char *p = memalign(a, n), *q = aligned_alloc(a, n);
      void *pm = NULL;
      int rc = a >= sizeof(void *) ? posix_memalign(&pm, a, n) : 0;
      CHECK(p && (uintptr_t)p % eff == 0, "memalign(%zu, %zu) = %p", a, n, (void *)p);
      CHECK(q && (uintptr_t)q % eff == 0, "aligned_alloc(%zu, %zu) = %p", a, n, (void *)q);
      CHECK(rc == 0 && (a < sizeof(void *) || (uintptr_t)pm % a == 0),
            "posix_memalign(%zu, %zu) = %d %p", a, n, rc, pm);
      if (!p || !q) continue;
      size_t u = malloc_usable_size(p);
      CHECK(u >= n, "memalign(%zu, %zu): usable %zu", a, n, u);
      memset(p, 0xee, u);
      memset(q, 0x11, malloc_usable_size(q));
      if (pm) memset(pm, 3, malloc_usable_size(pm));
      unsigned char *r = m_realloc(p, n / 2 + 1);
      CHECK(r != NULL, "realloc(memalign(%zu, %zu), %zu)", a, n, n / 2 + 1);
      for (size_t k = 0; r && k < n / 2 + 1 && k < u; k++)
        if (r[k] != 0xee) {
          CHECK(0, "memalign(%zu, %zu) shrunk: byte %zu changed", a, n, k);
          break;
        }
      r = m_realloc(r, n * 3 + 20000);
      CHECK(r != NULL, "realloc(memalign(%zu, %zu)) grown", a, n);
      m_free(r);
      m_free(q);
      m_free(pm);
    }
  static const size_t steps[] = {1, 16000, 16384, 16385, 17000, 32768, 100000, 1 << 20,
                                 3 << 20, 8, 16384, 1};
  unsigned char *p = NULL;
  size_t have = 0;
  for (int rep = 0; rep < 3; rep++)
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
      unsigned char *q = m_realloc(p, steps[i]);
      CHECK(q != NULL, "realloc to %zu", steps[i]);
      if (!q) return;
      size_t keep = have < steps[i] ? have : steps[i];
      for (size_t k = 0; k < keep; k++)
        if (q[k] != (unsigned char)(k * 31)) {
          CHECK(0, "realloc %zu -> %zu: byte %zu changed", have, steps[i], k);
          break;
        }
      have = malloc_usable_size(q);
      CHECK(have >= steps[i], "realloc to %zu: usable %zu", steps[i], have);
      for (size_t k = 0; k < have; k++) q[k] = (unsigned char)(k * 31);
      p = q;
    }
  m_free(p);
  volatile size_t huge = SIZE_MAX - 10;
  void *v;
  errno = 0, v = valloc(huge);
  CHECK(!v && errno == ENOMEM, "valloc(huge) = %p errno %d", v, errno);
  errno = 0, v = pvalloc(huge);
  CHECK(!v && errno == ENOMEM, "pvalloc(huge) = %p errno %d", v, errno);
  errno = 0, v = aligned_alloc(16, huge);
  CHECK(!v && errno == ENOMEM, "aligned_alloc(16, huge) = %p errno %d", v, errno);
  errno = 0, v = memalign(4096, huge);
  CHECK(!v && errno == ENOMEM, "memalign(4096, huge) = %p errno %d", v, errno);
  errno = 0, v = m_malloc((size_t)PTRDIFF_MAX + 1);
  CHECK(!v && errno == ENOMEM, "malloc(PTRDIFF_MAX + 1) = %p errno %d", v, errno);
  errno = 0, v = m_calloc(1, huge);
  CHECK(!v && errno == ENOMEM, "calloc(1, huge) = %p errno %d", v, errno);
  errno = 0, v = m_realloc(NULL, huge);
  CHECK(!v && errno == ENOMEM, "realloc(NULL, huge) = %p errno %d", v, errno);
  void *b = m_malloc(100000);
  errno = 0, v = m_realloc(b, huge);
  CHECK(!v && errno == ENOMEM, "realloc(large, huge) = %p errno %d", v, errno);
  m_free(b);
  v = reallocarray(NULL, 0, 5);
  CHECK(v != NULL, "reallocarray(NULL, 0, 5) = NULL (glibc: a block)");
  m_free(v);
  v = m_malloc(5);
  errno = 77;
  void *z = m_realloc(v, 0);
  CHECK(z == NULL && errno == 77, "realloc(p, 0) = %p errno %d (want NULL, errno kept)", z, errno);
}

/* mallinfo2 counts the program's blocks, whoever's heap holds them: 32 MiB
 * of 64-byte blocks raise uordblks by about that much (glibc's own
 * mallinfo2 saw none of heaplab's small blocks) and freeing them lowers
 * it again. */
static void mallinfo_counts_every_block(void) {
  enum { N = 512 * 1024 };
  void **ps = m_malloc(N * sizeof(void *));
  size_t before = mallinfo2().uordblks;
  for (int i = 0; i < N; i++) ps[i] = m_malloc(64);
  size_t during = mallinfo2().uordblks;
  for (int i = 0; i < N; i++) m_free(ps[i]);
  size_t after = mallinfo2().uordblks;
  m_free(ps);
  /* (less 1 MiB: blocks in this thread's cache counted as used already) */
  CHECK(during >= before + (size_t)N * 62, "mallinfo2: uordblks %zu -> %zu after 32 MiB of "
        "64-byte blocks", before, during);
  CHECK(after + (size_t)N * 48 <= during, "mallinfo2: uordblks %zu after freeing them (%zu "
        "before)", after, during);
  struct mallinfo2 mi = mallinfo2(); /* (uordblks: the non-mapped blocks, as arena) */
  CHECK(mi.arena >= mi.uordblks, "mallinfo2: arena %zu < in use %zu", mi.arena, mi.uordblks);
}

/* The program's own errors, for HEAPLAB_VERIFY=1 to catch (run.py,
 * verify_refuses): a double free, a realloc of a freed block, 20 more double
 * frees.  Prints what the calls returned. */
/* HEAPLAB_VERIFY=1 (misuse): what the program sees through the pointer of a
 * large block it no longer owns -- `how` it lost it -- after writing through
 * it: its usable size, a second free, a realloc. */
static void probe_freed_large(const char *how, char *p, size_t n) {
  memset(p, 0xd5, n); /* a write after free */
  printf("%s: malloc_usable_size %zu\n", how, malloc_usable_size(p));
  m_free(p);
  char *again = m_malloc(n);
  printf("%s: free: %s\n", how, again == p ? "the block was handed out twice" : "refused");
  errno = 0;
  void *u = m_realloc(p, n + 1000);
  printf("%s: realloc: %s, errno %d\n", how, u ? "moved" : "NULL", errno);
  m_free(again);
}

/* HEAPLAB_VERIFY=1 (damage): the program damages a free block -- `how`:
 * writes into one it freed, or overflows a live block into the free one
 * after it -- then allocates and frees blocks of that class (the damaged
 * one handed out, or through the quarantine), then ends with malloc_trim
 * (trim) or by returning (exit).  The library reports the damage on stderr
 * and aborts; on glibc the program may go on (or glibc aborts on its own
 * corruption check). */
static int damage(const char *how, const char *end) {
  char *keep = m_malloc(48), *p = m_malloc(48);
  if (strcmp(how, "write-after-free") == 0) {
    m_free(p);
    memset(p + 20, 'X', 8);
  } else {
    char *q = m_malloc(48);
    m_free(q); /* (free: the slot after p) */
    memset(p, 'A', 80);
  }
  if (strcmp(end, "malloc") == 0)
    for (int i = 0; i < 1000; i++) m_free(m_malloc(48));
  else if (strcmp(end, "trim") == 0)
    malloc_trim(0);
  printf("%s, then %s: not caught\n", how, end);
  fflush(stdout);
  (void)keep;
  return 0;
}

/* HEAPLAB_VERIFY=1: free_sized (C23) with a size that is not the block's:
 * refused and reported (the block stays live); without verify, freed. */
static int free_sized_wrong(void) {
  void (*fs)(void *, size_t) = (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "free_sized");
  if (!fs) {
    puts("no free_sized");
    return 0;
  }
  char *p = m_malloc(40), *big = m_malloc(100000);
  fs(p, 4000);
  fs(big, 600);
  printf("free_sized(40-byte block, 4000): usable %zu\n", malloc_usable_size(p));
  printf("free_sized(100000-byte block, 600): %s\n", malloc_usable_size(big) ? "live" : "freed");
  fs(p, 40);
  fs(big, 100000);
  printf("then with their sizes: usable %zu, %zu\n", malloc_usable_size(p), malloc_usable_size(big));
  return 0;
}

/* HEAPLAB_VERIFY=1: free_sized of an aligned block is refused saying it is
 * one (free_aligned_sized frees it); free_aligned_sized is checked too -- a
 * size past the block, an alignment the block does not have, refused; it
 * was never checked. */
static int free_aligned_sized_checked(void) {
  void (*fs)(void *, size_t) = (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "free_sized");
  void (*fas)(void *, size_t, size_t) =
      (void (*)(void *, size_t, size_t))dlsym(RTLD_DEFAULT, "free_aligned_sized");
  if (!fs || !fas) {
    puts("no free_aligned_sized");
    return 0;
  }
  char *a = aligned_alloc(64, 100), *b = aligned_alloc(256, 300);
  fs(a, 100);
  printf("free_sized(aligned 64, 100): %s\n", malloc_usable_size(a) ? "live" : "freed");
  fas(a, 64, 100);
  printf("free_aligned_sized(aligned 64, 64, 100): %s\n", malloc_usable_size(a) ? "live" : "freed");
  fas(b, 256, 5000);
  printf("free_aligned_sized(aligned 256 of 300, 256, 5000): %s\n",
         malloc_usable_size(b) ? "live" : "freed");
  fas(b, 3, 300);
  printf("free_aligned_sized(aligned 256 of 300, 3, 300): %s\n",
         malloc_usable_size(b) ? "live" : "freed");
  fas(b, 256, 300);
  printf("free_aligned_sized(aligned 256 of 300, 256, 300): %s\n",
         malloc_usable_size(b) ? "live" : "freed");
  return 0;
}

static int misuse(void) {
  char *p = m_malloc(40);
  m_free(p);
  printf("malloc_usable_size of a freed block: %zu\n", malloc_usable_size(p));
  m_free(p);
  char *q = m_malloc(40), *r = m_malloc(40);
  printf("double free: %s\n", q == r ? "the block was handed out twice" : "refused");
  char *s = m_malloc(100);
  m_free(s);
  errno = 0;
  void *t = m_realloc(s, 200);
  printf("realloc of a freed block: %s, errno %d\n", t ? "moved" : "NULL", errno);
  /* a large block (past small_max): freed twice, then realloc'd -- it was
   * handed to glibc as a foreign pointer, which aborted ("free(): invalid
   * pointer") */
  char *big = m_malloc(256 << 10);
  memset(big, 1, 256 << 10);
  m_free(big);
  printf("malloc_usable_size of a freed large block: %zu\n", malloc_usable_size(big));
  m_free(big);
  char *big2 = m_malloc(256 << 10);
  printf("large double free: %s\n", big2 == big ? "the block was handed out twice" : "refused");
  errno = 0;
  void *u = m_realloc(big, 300 << 10);
  printf("realloc of a freed large block: %s, errno %d\n", u ? "moved" : "NULL", errno);
  m_free(big2);
  /* a large block realloc moved is freed as free() frees it: into the
   * quarantine (the system realloc freed it, and its second free went to
   * glibc: an abort).  A block after it, so that the growth cannot be in
   * place on either allocator. */
  enum { LARGE = 200 << 10 };
  char *a = m_malloc(LARGE);
  memset(a, 1, LARGE);
  m_free(a);
  probe_freed_large("after free", a, LARGE);
  char *b = m_malloc(LARGE), *fence = m_malloc(LARGE);
  memset(b, 1, LARGE);
  char *grown = m_realloc(b, 2 * LARGE);
  printf("realloc to a larger block: %s\n", grown != b ? "moved" : "in place");
  probe_freed_large("after realloc moved it", b, LARGE);
  char *c = m_malloc(LARGE);
  memset(c, 1, LARGE);
  char *shrunk = m_realloc(c, 100);
  printf("realloc to a small block: %s\n", shrunk != c ? "moved" : "in place");
  probe_freed_large("after realloc made it small", c, LARGE);
  m_free(grown);
  m_free(shrunk);
  /* a pointer inside a live large block: it went to glibc as foreign, which
   * aborted ("free(): invalid pointer") or -- bytes there that read as a
   * chunk header -- handed the live block's memory out again (the preload
   * hunt, session 25) */
  char *live = m_malloc(LARGE);
  memset(live, 0, LARGE);
  size_t *fake = (size_t *)(live + 48); /* the header glibc reads for live + 64 */
  fake[1] = 0x10000 | 1;
  ((size_t *)(live + 48 + 0x10000))[1] = 0x100 | 1;
  ((size_t *)(live + 48 + 0x10100))[1] = 0x100 | 1;
  m_free(live + 64);
  char *inner = m_malloc(0x8000);
  printf("free inside a live large block: %s\n",
         inner >= live && inner < live + LARGE ? "its memory was handed out again" : "refused");
  errno = 0;
  void *moved = m_realloc(live + 64, 100);
  printf("realloc inside a live large block: %s, errno %d\n", moved ? "moved" : "NULL", errno);
  m_free(inner);
  m_free(live);
  m_free(fence);
  for (int i = 0; i < 20; i++) {
    char *x = m_malloc(24);
    m_free(x);
    m_free(x);
  }
  return 0;
}

/* A program that empties its environment before its first malloc
 * (clearenv sets environ to NULL): its blocks are still heaplab's --
 * malloc_stats (stderr) has the heaplab section (run.py, clearenv_first). */
static int clearenv_first(void) {
  clearenv();
  void *ps[1000];
  for (int i = 0; i < 1000; i++) ps[i] = m_malloc((size_t)i + 1);
  malloc_stats();
  for (int i = 0; i < 1000; i++) m_free(ps[i]);
  return 0;
}

/* Run with a reservation far smaller than what the program allocates
 * (HEAPLAB_RESERVE_BYTES=32m, meson.build): 96 MiB of small blocks --
 * malloc, calloc, memalign, realloc within the small sizes -- all succeed,
 * aligned, usable, contents kept, and free.  (malloc returned NULL once the
 * reservation's pages were used, where glibc would have gone on.) */
static int exhausted_reservation(void) {
  enum { N = 3 * 256 * 1024 };
  unsigned char **ps = m_malloc(N * sizeof *ps);
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < N; i++) {
      size_t n = 32 + (size_t)(i % 5) * 16;
      unsigned char *p = i % 4 == 0 ? m_calloc(1, n) : i % 4 == 1 ? memalign(64, n) : m_malloc(n);
      if (i % 4 == 3 && p) p = m_realloc(p, n + 1000);
      CHECK(p != NULL, "block %d of %zu bytes (round %d): NULL, errno %d", i, n, round, errno);
      if (!p) return 1;
      CHECK((uintptr_t)p % (i % 4 == 1 ? 64 : 16) == 0, "block %d misaligned: %p", i, (void *)p);
      CHECK(malloc_usable_size(p) >= n, "block %d: usable %zu < %zu", i, malloc_usable_size(p), n);
      if (i % 4 == 0) CHECK(p[0] == 0 && p[n - 1] == 0, "calloc'd block %d not zero", i);
      fill(p, n, (unsigned)i);
      ps[i] = p;
    }
    size_t bad = 0;
    for (int i = 0; i < N; i++) bad += !same(ps[i], 32 + (size_t)(i % 5) * 16, (unsigned)i);
    CHECK(bad == 0, "%zu blocks lost their contents", bad);
    for (int i = 0; i < N; i++) m_free(ps[i]);
  }
  m_free(ps);
  printf("%s: %s\n", on_heaplab ? "heaplab" : "glibc", failures ? "FAILED" : "96 MiB on a 32 MiB reservation");
  return failures ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--misuse") == 0) return misuse();
  if (argc > 1 && strcmp(argv[1], "--free-sized-wrong") == 0) return free_sized_wrong();
  if (argc > 1 && strcmp(argv[1], "--free-aligned-sized") == 0) return free_aligned_sized_checked();
  if (argc > 3 && strcmp(argv[1], "--damage") == 0) return damage(argv[2], argv[3]);
  if (argc > 1 && strcmp(argv[1], "--clearenv-first") == 0) return clearenv_first();
  if (argc > 1 && strcmp(argv[1], "--first-malloc-errno") == 0) {
    /* the heap is set up by this malloc (nothing allocated before main);
     * under a small RLIMIT_AS its first reservations are refused */
    errno = 0;
    void *p = m_malloc(10);
    int e = errno;
    printf("first malloc: %s, errno %d\n", p ? "ok" : "NULL", e);
    return p && e == 0 ? 0 : 1;
  }
  if (argc > 2 && strcmp(argv[1], "--big-block") == 0) {
    /* under a tight ulimit -v / -d (the suite's sh sets it): a small block
     * sets the heap up, then one of argv[2] MiB -- glibc's, a large block --
     * must fit in what the reservation left (it took 256 MiB of 293) */
    size_t mib = strtoul(argv[2], NULL, 10);
    char *small = m_malloc(100);
    char *big = m_malloc(mib << 20);
    if (big) memset(big, 7, mib << 20);
    printf("a %zu MiB block after a small one: %s\n", mib, big ? "ok" : "NULL");
    int ok = small && big && big[(mib << 20) - 1] == 7;
    m_free(big);
    m_free(small);
    return ok ? 0 : 1;
  }
  int want_heaplab = argc > 1 && strcmp(argv[1], "--heaplab") == 0;
  Dl_info info;
  void *sym = dlsym(RTLD_DEFAULT, "malloc");
  on_heaplab = sym && dladdr(sym, &info) && info.dli_fname &&
               strstr(info.dli_fname, "libheaplab-malloc");
  if (want_heaplab && !on_heaplab) {
    fprintf(stderr, "FAIL: malloc is not libheaplab-malloc.so's (LD_PRELOAD?)\n");
    return 1;
  }
  if (argc > 2 && strcmp(argv[2], "--exhausted-reservation") == 0) return exhausted_reservation();
  malloc_free_usable();
  calloc_semantics();
  realloc_semantics();
  aligned_semantics();
  foreign_pointers();
  errno_untouched();
  growth_under_the_threshold_stays_in_the_heap();
  mid_sizes_in_64_byte_steps();
  trim_and_sized();
  api_corners();
  mallinfo_counts_every_block();
  printf("%s: %s\n", on_heaplab ? "heaplab" : "glibc", failures ? "FAILED" : "all checks passed");
  return failures ? 1 : 0;
}
