"""The default collector against a model (hypothesis stateful testing).

Rules: allocate objects (small and large) with slots, hang new objects into
slots, store and clear slots, drop roots, make garbage (cycles run inside
allocation), fill and drop bulk phases (whole pages go back to the OS: page
release), partial fills (stride), collections (major or not), trims, faults
injected at every release/reuse site with every mode, and fork(): the child
checks the heap it inherited, works on it and exits; the parent's heap goes on.

After every step: every object the model can reach from the roots has its
payload and its slots intact, the fills' checksums are unchanged,
Heap.check() passes and no cycle's verification failed.  After a collection
with no fault armed, the heap's resident bytes stay within a bound derived from
the model's live bytes (a generous factor, plus the warm cache and one page
per live object for fragmentation).

The same machine runs the generational collector (sticky marks, barrier,
tenuring) with fewer examples; tests/python/test_generational_model.py has the
generational-specific programs.
"""
import os
import struct

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
import pytest

import heaplab

from models import ramp, wait_child

# no assertion here depends on the machine's load (no bounded wait, no sampled
# footprint): make test runs these beside the notebooks, the fuzzers and the
# soak (pyproject.toml's markers)
pytestmark = pytest.mark.shares_the_machine


def scaled(n):
    """n examples, times HEAPLAB_MODEL_SCALE (e.g. 10 for a long run)."""
    return max(1, int(n * float(os.environ.get("HEAPLAB_MODEL_SCALE", "1"))))

SLOTS = 3
PAGE = 4096
WARM = 2
OPTIONS = dict(verify=True, page_size=PAGE, small_max=1024, warm_pages=WARM,
               warm_demand_trims=0, gc_trigger_bytes="256k", gc_trigger_min_bytes="64k",
               gc_trigger_max_bytes="1m", young_bytes="128k", reserve_bytes="256m",
               syscall_retry_max=3, syscall_retry_backoff_us=0, events_capacity=64,
               release_per_sweep=65536)

# where a fault can land on this path, and what the OS could answer
SITES = ["release", "fallback", "upgrade", "restore", "dump", "meta", "populate", "any"]
MODES = ["first", "always", "every", "sticky"]
ERRNOS = ["EAGAIN", "ENOMEM", "EIO", "EINVAL"]




def payload(oid, size):
    """The bytes object `oid` holds: its id, then a pattern."""
    head = struct.pack("<Q", oid)
    body = ramp(oid * 7, 1, size - 8)
    return (head + body)[:size]



class CollectorModel(RuleBasedStateMachine):
    options = {}

    def __init__(self):
        super().__init__()
        self.h = heaplab.Heap(**OPTIONS, **self.options)
        self.roots = []       # (Ref, id): what the program holds
        self.objects = {}     # id -> (size, [child id or None] * refs): the model
        self.fills = []       # (Ref, checksum, objects, total)
        # pages that held a dropped fill or a stride fill's garbage: a later
        # fill's objects may sit in their holes, one page pinned per object
        # (the heap does not move them; the footprint bound allows for it)
        self.hole_pages = 0
        self.next_id = 1
        self.armed = set()

    # ---- helpers ----
    def new_object(self, size, refs):
        oid = self.next_id
        self.next_id += 1
        r = self.h.alloc(size, refs=refs)
        r.write(payload(oid, size))
        self.objects[oid] = (size, [None] * refs)
        return r, oid

    def root(self, i):
        return self.roots[i % len(self.roots)]

    def reachable(self):
        seen, stack = set(), [oid for _, oid in self.roots]
        while stack:
            oid = stack.pop()
            if oid in seen:
                continue
            seen.add(oid)
            stack.extend(c for c in self.objects[oid][1] if c is not None)
        return seen

    # ---- rules ----
    @rule(size=st.integers(8, 300) | st.integers(1025, 20000), refs=st.integers(0, SLOTS))
    def alloc(self, size, refs):
        self.roots.append(self.new_object(size, refs))

    @precondition(lambda self: self.roots)
    @rule(i=st.integers(0, 99), slot=st.integers(0, SLOTS - 1), size=st.integers(8, 2000))
    def child(self, i, slot, size):
        """A new object whose only reference is a slot of an older one."""
        r, pid = self.root(i)
        if not self.objects[pid][1]:
            return
        c, cid = self.new_object(size, SLOTS)
        k = slot % len(self.objects[pid][1])
        r[k] = c
        c.release()
        self.objects[pid][1][k] = cid

    @precondition(lambda self: self.roots)
    @rule(i=st.integers(0, 99), j=st.integers(0, 99), slot=st.integers(0, SLOTS - 1))
    def store(self, i, j, slot):
        (s, sid), (d, did) = self.root(i), self.root(j)
        if not self.objects[sid][1]:
            return
        k = slot % len(self.objects[sid][1])
        s[k] = d
        self.objects[sid][1][k] = did

    @precondition(lambda self: self.roots)
    @rule(i=st.integers(0, 99), slot=st.integers(0, SLOTS - 1))
    def clear(self, i, slot):
        s, sid = self.root(i)
        if not self.objects[sid][1]:
            return
        k = slot % len(self.objects[sid][1])
        s[k] = None
        self.objects[sid][1][k] = None

    @precondition(lambda self: self.roots)
    @rule(i=st.integers(0, 99))
    def drop(self, i):
        r, _ = self.roots.pop(i % len(self.roots))
        r.release()

    @precondition(lambda self: self.roots)
    @rule(i=st.integers(0, 99), slot=st.integers(0, SLOTS - 1))
    def get(self, i, slot):
        """A slot's object becomes a root of its own."""
        s, sid = self.root(i)
        if not self.objects[sid][1]:
            return
        k = slot % len(self.objects[sid][1])
        c = s[k]
        assert (c is None) == (self.objects[sid][1][k] is None)
        if c is not None:
            self.roots.append((c, self.objects[sid][1][k]))

    @rule(n=st.integers(1, 3000), size=st.sampled_from([16, 200, 1000, 5000]))
    def garbage(self, n, size):
        """Allocate and drop: cycles run inside allocation."""
        for _ in range(n if size < 1000 else n // 20 + 1):
            self.h.alloc(size).release()

    @rule(total=st.integers(1 << 16, 4 << 20), size=st.sampled_from([16, 64, 256, 1000]),
          stride=st.integers(1, 4))
    def fill(self, total, size, stride):
        r = self.h.fill(total, size, stride=stride)
        s, n = r.checksum()
        self.fills.append((r, s, n, total))
        if stride > 1:
            self.hole_pages += total // PAGE + 1

    @precondition(lambda self: self.fills)
    @rule(i=st.integers(0, 99))
    def drop_fill(self, i):
        r, _, _, total = self.fills.pop(i % len(self.fills))
        r.release()
        self.hole_pages += total // PAGE + 1

    @rule(major=st.sampled_from([None, True, False]), cycles=st.integers(1, 2))
    def collect(self, major, cycles):
        self.h.collect(cycles=cycles, major=major)

    @rule()
    def trim(self):
        self.h.trim()

    @rule(site=st.sampled_from(SITES), mode=st.sampled_from(MODES), n=st.integers(0, 40),
          errno=st.sampled_from(ERRNOS))
    def inject(self, site, mode, n, errno):
        self.h.inject(site, mode, max(n, 1) if mode == "every" else n, errno)
        self.armed.add(site)

    @precondition(lambda self: self.armed)
    @rule()
    def disarm(self):
        for site in self.armed:
            self.h.inject(site, "off")
        self.armed.clear()

    @precondition(lambda self: not self.armed)
    @rule()
    def footprint_within_bound(self):
        """With no fault armed, after a full collection and a trim, the heap
        holds no more than the live objects need (generously): dropped fills
        and garbage went back to the OS."""
        self.h.collect(major=True)
        self.h.trim()
        live = self.reachable()
        live_bytes = sum(self.objects[o][0] + 8 + 8 * len(self.objects[o][1])
                         for o in live if self.objects[o][0] <= 1024)
        live_bytes += sum(2 * total for _, _, _, total in self.fills)
        bound = 4 * live_bytes + PAGE * (len(live) + WARM + 64) + (256 << 10)
        # a fill made after others were dropped (or left garbage) may have
        # gone into their holes: each of its objects can keep one such page
        # (a 64 KiB fill into a dropped stride-2 fill's holes held 250 pages,
        # the bound without this was 258 -- the sequence fill(1.59 MB,
        # stride=2), footprint, drop, fill(64 KiB), footprint)
        bound += PAGE * min(sum(n for _, _, n, _ in self.fills), self.hole_pages)
        resident = self.h.resident_bytes()
        assert resident <= bound, (
            f"{resident} bytes resident for {live_bytes} live bytes in {len(live)} objects "
            f"and {len(self.fills)} fills (bound {bound}); stats {self.h.stats()}")

    @rule(work=st.integers(0, 2000))
    def fork(self, work):
        """fork(): the child checks what it inherited, allocates, collects,
        checks again and exits; the parent's heap is untouched."""
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                self.every_object_intact()
                self.h.check()
                for _ in range(work):
                    self.h.alloc(100).release()
                keep = self.h.alloc(64)
                keep.write(b"child" * 12)
                self.h.collect(major=True)
                self.every_object_intact()
                assert keep.read(0, 60) == b"child" * 12
                self.h.check()
                code = 0
            except BaseException as e:  # noqa: BLE001 -- reported through the exit code
                os.write(2, f"fork child: {e!r}\n".encode())
            finally:
                os._exit(code)
        assert wait_child(pid) == 0, "the forked child found the heap broken (see stderr)"

    # ---- checks, after every step ----
    @invariant()
    def every_object_intact(self):
        seen = set()
        stack = list(self.roots)
        while stack:
            ref, oid = stack.pop()
            size, slots = self.objects[oid]
            got = ref.read(0, size)
            assert got == payload(oid, size), f"object {oid} ({size} bytes) corrupted"
            if oid in seen:
                continue
            seen.add(oid)
            for k, child in enumerate(slots):
                c = ref[k]
                if child is None:
                    assert c is None, f"object {oid} slot {k} should be empty"
                else:
                    assert c is not None, f"object {oid} slot {k}: object {child} lost"
                    stack.append((c, child))
        for i, (r, s, n, _) in enumerate(self.fills):
            assert r.checksum() == (s, n), f"fill {i} changed"

    @invariant()
    def heap_checks(self):
        self.h.check()
        assert self.h.stats().verify_failures == 0

    def teardown(self):
        for r, _ in self.roots:
            r.release()
        self.h.close()


class GenerationalModel(CollectorModel):
    options = dict(generational=True, tenure_full_marks=2)


class TenuringModel(CollectorModel):
    """The default collector tenures too: every other full mark skips the
    tenured pages.  Only the cycles allocation calls tenure (collect() marks
    everything and tenures nothing), and only pages 7/8 live through two of
    them: `batch` roots objects of one class back to back, so that their
    pages are dense and `garbage` runs the cycles that tenure them; `store`
    and `child` then write into tenured objects (the barrier's case).
    Without `batch` no example tenured a page (15 of 15, 2026-12-03)."""
    options = dict(tenure_full_marks=2, full_growth_ratio=1000)

    @rule(n=st.integers(100, 400), size=st.sampled_from([8, 40]))
    def batch(self, n, size):
        for _ in range(n):
            self.roots.append(self.new_object(size, SLOTS))


def test_tenuring_model_tenures_and_keeps_what_tenured_objects_refer_to():
    """A fixed run of TenuringModel's rules: the batch's pages are tenured
    by allocation-driven cycles, young children stored into the tenured
    objects survive the full marks that skip them (the remembered set), and
    every object stays intact (the model's own invariants, checked after
    each step as hypothesis would)."""
    m = TenuringModel()
    try:
        def step(rule, *args):
            rule(m, *args)
            m.every_object_intact()
            m.heap_checks()

        step(TenuringModel.batch, 400, 40)
        for _ in range(6):
            step(TenuringModel.garbage, 3000, 200)
        s = m.h.stats()
        assert s.tenured_pages > 0, f"nothing tenured: {s}"
        for i in range(0, 400, 7):
            step(TenuringModel.child, i, i, 16)
        for _ in range(6):
            step(TenuringModel.garbage, 3000, 200)
        s = m.h.stats()
        assert s.remembered_pages_scanned > 0, f"no remembered page traced: {s}"
        assert s.verify_failures == 0
    finally:
        m.teardown()


TestCollectorModel = CollectorModel.TestCase
TestCollectorModel.settings = settings(max_examples=scaled(40), stateful_step_count=30,
                                       deadline=None,
                                       suppress_health_check=[HealthCheck.too_slow])
TestGenerationalModel = GenerationalModel.TestCase
TestGenerationalModel.settings = settings(max_examples=scaled(15), stateful_step_count=30,
                                          deadline=None,
                                          suppress_health_check=[HealthCheck.too_slow])
TestTenuringModel = TenuringModel.TestCase
TestTenuringModel.settings = settings(max_examples=scaled(15), stateful_step_count=30,
                                      deadline=None,
                                      suppress_health_check=[HealthCheck.too_slow])
