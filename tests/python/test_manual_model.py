"""The manual mode (malloc/free) against a model (hypothesis stateful testing).

heaplab.Heap(mode="manual") has no malloc/free in Python on purpose: the
manual mode is for C clients (heaplab-lua, heaplab-python).  The machine
drives the C entry points themselves -- hl_malloc, hl_calloc, hl_realloc,
hl_free, hl_free_sized, hl_thread_flush, hl_trim, hl_inject_named -- through
the CFFI module the package already builds (heaplab._heaplab: its cdef is
heaplab.h, so every public function is there), on a heap it creates with
hl_heap_new: no second harness to keep in step with the header, and nothing of
the Python wrapper's internals is relied on.

Rules: allocate (small, large, zero-sized; calloc must give zeros), free
(sized or not, in this thread or another), realloc (the contents up to the
smaller size survive), write into blocks, flush the thread cache, trim
(page release), faults injected at every release/reuse site with every mode,
and fork(): the child checks every block it inherited, allocates and frees,
checks again and exits.

After every step: every live block holds exactly what the model says,
hl_usable_size covers it, and hl_heap_check passes.  After a trim with no
fault armed, the heap's resident bytes stay within a bound derived from the
model's live bytes (a generous factor, plus the warm cache, the trim
threshold, and one page per live block for fragmentation).  One machine runs
with verify on (no thread caches), one with the thread caches.
"""
import os
import threading

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
import pytest

from heaplab._heaplab import ffi, lib

from models import ramp, wait_child

# no assertion here depends on the machine's load (no bounded wait, no sampled
# footprint): make test runs these beside the notebooks, the fuzzers and the
# soak (pyproject.toml's markers)
pytestmark = pytest.mark.shares_the_machine


def scaled(n):
    """n examples, times HEAPLAB_MODEL_SCALE (e.g. 10 for a long run)."""
    return max(1, int(n * float(os.environ.get("HEAPLAB_MODEL_SCALE", "1"))))

PAGE = 4096
WARM = 2
SMALL_MAX = 512
SITES = ["release", "fallback", "upgrade", "restore", "dump", "meta", "any"]
MODES = ["first", "always", "every", "sticky"]
ERRNOS = ["EAGAIN", "ENOMEM", "EIO", "EINVAL"]




def contents(seed, size):
    return ramp(seed * 31, 7, size)



def new_heap(**options):
    opts = ffi.new("hl_options *")
    lib.hl_options_defaults(opts)
    err = ffi.new("char[256]")
    for name, value in options.items():
        rc = lib.hl_options_set(opts, name.encode(), str(value).encode(), err, 256)
        assert rc == 0, ffi.string(err).decode()
    out = ffi.new("hl_heap **")
    rc = lib.hl_heap_new(opts, out, err, 256)
    assert rc == 0, ffi.string(err).decode()
    return out[0]


class ManualModel(RuleBasedStateMachine):
    options = dict(verify="true")

    def __init__(self):
        super().__init__()
        self.h = new_heap(mode="manual", page_size=PAGE, small_max=SMALL_MAX, warm_pages=WARM,
                          warm_demand_trims=0, reserve_bytes="256m", syscall_retry_max=3,
                          release_per_sweep=65536,
                          syscall_retry_backoff_us=0, **self.options)
        self.blocks = []      # [pointer, size, seed]
        self.armed = set()
        self.seed = 1

    def error(self):
        return ffi.string(lib.hl_heap_error(self.h)).decode()

    def write(self, p, size):
        self.seed += 1
        if size:
            ffi.memmove(p, contents(self.seed, size), size)
        return self.seed

    def take(self, p, size, what):
        assert p != ffi.NULL, f"{what}({size}) failed: {self.error()}"
        assert int(ffi.cast("uintptr_t", p)) % 16 == 0, f"{what}({size}) is not 16-byte aligned"
        assert lib.hl_usable_size(self.h, p) >= size
        self.blocks.append([p, size, self.write(p, size)])

    def block(self, i):
        return self.blocks[i % len(self.blocks)]

    # ---- rules ----
    @rule(size=st.integers(0, 64) | st.integers(0, SMALL_MAX) | st.integers(SMALL_MAX + 1, 70000))
    def malloc(self, size):
        self.take(lib.hl_malloc(self.h, size), size, "malloc")

    @rule(count=st.integers(0, 40), size=st.integers(0, 600))
    def calloc(self, count, size):
        p = lib.hl_calloc(self.h, count, size)
        n = count * size
        assert p != ffi.NULL, f"calloc({count}, {size}) failed: {self.error()}"
        assert bytes(ffi.buffer(p, n)) == bytes(n), f"calloc({count}, {size}) is not zero"
        self.take(p, n, "calloc")

    @rule(n=st.integers(100, 20000), size=st.integers(16, SMALL_MAX),
          keep_every=st.integers(0, 64))
    def burst(self, n, size, keep_every):
        """Many blocks at once, most freed again: whole pages empty (and go
        back to the OS), the kept ones pin partial pages."""
        ps = [lib.hl_malloc(self.h, size) for _ in range(n)]
        assert ffi.NULL not in ps, f"malloc({size}) failed in a burst: {self.error()}"
        for k, p in enumerate(ps):
            if keep_every and k % keep_every == 0 and len(self.blocks) < 400:
                self.take(p, size, "malloc")
            else:
                lib.hl_free_sized(self.h, p, size)

    @precondition(lambda self: self.blocks)
    @rule(i=st.integers(0, 999), sized=st.booleans())
    def free(self, i, sized):
        p, size, _ = self.blocks.pop(i % len(self.blocks))
        if sized:
            lib.hl_free_sized(self.h, p, size)
        else:
            lib.hl_free(self.h, p)

    @precondition(lambda self: self.blocks)
    @rule(i=st.integers(0, 999), size=st.integers(1, 3000) | st.integers(3000, 70000))
    def realloc(self, i, size):
        b = self.block(i)
        p, old, seed = b
        q = lib.hl_realloc(self.h, p, old, size)
        assert q != ffi.NULL, f"realloc({old} -> {size}) failed: {self.error()}"
        keep = min(old, size)
        assert bytes(ffi.buffer(q, keep)) == contents(seed, old)[:keep], "realloc lost the contents"
        b[0], b[1], b[2] = q, size, self.write(q, size)

    @precondition(lambda self: self.blocks)
    @rule(i=st.integers(0, 999))
    def rewrite(self, i):
        b = self.block(i)
        b[2] = self.write(b[0], b[1])

    @precondition(lambda self: self.blocks)
    @rule(n=st.integers(1, 8))
    def free_in_another_thread(self, n):
        """Blocks allocated here, freed by a thread that then exits (its cache
        goes home at exit)."""
        gone = [self.blocks.pop() for _ in range(min(n, len(self.blocks)))]

        def run():
            for p, size, _ in gone:
                lib.hl_free_sized(self.h, p, size)
        t = threading.Thread(target=run)
        t.start()
        t.join()

    @rule()
    def flush(self):
        lib.hl_thread_flush(self.h)

    @rule()
    def trim(self):
        assert lib.hl_trim(self.h) == 0, self.error()

    @rule(site=st.sampled_from(SITES), mode=st.sampled_from(MODES), n=st.integers(0, 40),
          errno=st.sampled_from(ERRNOS))
    def inject(self, site, mode, n, errno):
        n = max(n, 1) if mode == "every" else n
        rc = lib.hl_inject_named(self.h, site.encode(), mode.encode(), n, errno.encode())
        assert rc == 0, self.error()
        self.armed.add(site)

    @precondition(lambda self: self.armed)
    @rule()
    def disarm(self):
        for site in self.armed:
            lib.hl_inject_named(self.h, site.encode(), b"off", 0, ffi.NULL)
        self.armed.clear()

    @precondition(lambda self: not self.armed)
    @rule()
    def footprint_within_bound(self):
        """With no fault armed, after a flush and a trim, the heap holds no
        more than the live blocks need (generously)."""
        lib.hl_thread_flush(self.h)
        lib.hl_trim(self.h)
        small = [size for _, size, _ in self.blocks if size <= SMALL_MAX]
        live_bytes = sum(max(s, 16) for s in small)
        bound = 4 * live_bytes + PAGE * (len(small) + WARM + 16 + 64) + (256 << 10)
        out = ffi.new("uint64_t *")
        assert lib.hl_resident_bytes(self.h, out) == 0, self.error()
        assert out[0] <= bound, (f"{out[0]} bytes resident for {live_bytes} live bytes "
                                 f"in {len(small)} small blocks (bound {bound})")

    @rule(work=st.integers(0, 300))
    def fork(self, work):
        """fork(): the child checks every block it inherited, works, checks
        again and exits."""
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                self.every_block_intact()
                mine = []
                for k in range(work):
                    p = lib.hl_malloc(self.h, 16 + k % 700)
                    assert p != ffi.NULL, self.error()
                    ffi.memmove(p, bytes([k & 0xFF]) * 16, 16)
                    mine.append((p, k))
                for p, k in mine:
                    assert bytes(ffi.buffer(p, 16)) == bytes([k & 0xFF]) * 16
                    lib.hl_free(self.h, p)
                for p, size, _ in self.blocks[::2]:
                    lib.hl_free_sized(self.h, p, size)
                lib.hl_thread_flush(self.h)
                lib.hl_trim(self.h)
                for p, size, seed in self.blocks[1::2]:
                    assert bytes(ffi.buffer(p, size)) == contents(seed, size)
                assert lib.hl_heap_check(self.h) == 0, self.error()
                code = 0
            except BaseException as e:  # noqa: BLE001 -- reported through the exit code
                os.write(2, f"fork child: {e!r}\n".encode())
            finally:
                os._exit(code)
        assert wait_child(pid) == 0, "the forked child found the heap broken (see stderr)"

    # ---- checks, after every step ----
    @invariant()
    def every_block_intact(self):
        for p, size, seed in self.blocks:
            assert bytes(ffi.buffer(p, size)) == contents(seed, size), \
                f"a {size}-byte block changed"
            assert lib.hl_usable_size(self.h, p) >= size, f"a {size}-byte block is no longer live"

    @invariant()
    def heap_checks(self):
        assert lib.hl_heap_check(self.h) == 0, self.error()

    def teardown(self):
        for p, size, _ in self.blocks:
            lib.hl_free_sized(self.h, p, size)
        lib.hl_thread_flush(self.h)
        assert lib.hl_heap_check(self.h) == 0, self.error()
        lib.hl_heap_free(self.h)


class ManualCachedModel(ManualModel):
    """The thread caches on (verify turns them off)."""
    options = dict(verify="false", tcache_blocks=16)


TestManualModel = ManualModel.TestCase
TestManualModel.settings = settings(max_examples=scaled(50), stateful_step_count=40,
                                    deadline=None,
                                    suppress_health_check=[HealthCheck.too_slow])
TestManualCachedModel = ManualCachedModel.TestCase
TestManualCachedModel.settings = settings(max_examples=scaled(30), stateful_step_count=40,
                                          deadline=None,
                                          suppress_health_check=[HealthCheck.too_slow])
