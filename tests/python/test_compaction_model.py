"""Compaction and sub-page release against a model: random programs of
allocations, slot stores, payload writes, dropped roots, bursts of which one
object in N survives (scattered over pages), thinned fills, collections
(each one evacuates sparse pages: compact=always or sparse) and trims (each
one releases the OS pages the survivors left empty: subpage_release), after
which

  - every object the model says is reachable has its payload and its slots
    intact, reached through Refs made before and after any number of moves;
  - a Ref keeps its hash through moves, and a Ref made after a move equals
    (and hashes like) one made before it;
  - a thinned fill's checksum is what it was when it was made;
  - verify (on in every heap: the invariant checker, sub-page state against
    the allocation bitmap, no reference left in an evacuated page, after
    every cycle) never fired, and objects did move and OS pages were
    released over the examples.

`make test-python-asan` runs this file against an ASan-instrumented extension
too (fewer examples there: HEAPLAB_MODEL_EXAMPLES)."""
import os
import struct

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings
import pytest

import heaplab

from models import ramp

# no assertion here depends on the machine's load (no bounded wait, no sampled
# footprint): make test runs these beside the notebooks, the fuzzers and the
# soak (pyproject.toml's markers)
pytestmark = pytest.mark.shares_the_machine

SLOTS = 3
BURST = 24    # survivors of a burst (one in 2..21 of its objects)
SIZES = (8, 24, 56, 120, 200, 400)
EXAMPLES = int(os.environ.get("HEAPLAB_MODEL_EXAMPLES", "40"))

ops = st.lists(st.tuples(st.sampled_from(["alloc", "child", "set", "clear", "drop", "write",
                                          "garbage", "burst", "thin", "collect", "trim"]),
                         st.integers(0, 63), st.integers(0, 63)),
               min_size=1, max_size=80)



def payload(oid, version, size):
    head = struct.pack("<QQ", oid, version)
    body = ramp(oid * 7 + version * 13, 1, size - 16)
    return (head + body)[:size] if size >= 16 else struct.pack("<Q", oid)[:size]


class Model:
    def __init__(self, h):
        self.h = h
        self.roots = []        # [Ref, id]
        self.edges = {}        # id -> [id or None] * SLOTS
        self.data = {}         # id -> (version, size)
        self.hashes = {}       # id -> the hash of the first Ref seen to it
        self.thinned = []      # (Ref, checksum)
        self.next_id = 1

    def new(self, refs=SLOTS):
        oid = self.next_id
        self.next_id += 1
        size = SIZES[oid % len(SIZES)]
        r = self.h.alloc(size, refs=refs)
        r.write(payload(oid, 0, size))
        self.edges[oid] = [None] * refs
        self.data[oid] = (0, size)
        self.hashes[oid] = hash(r)
        return r, oid

    def root(self, a):
        if not self.roots:
            self.roots.append(list(self.new()))
        return self.roots[a % len(self.roots)]

    def run(self, kind, a, b):
        h = self.h
        if kind == "alloc":
            self.roots.append(list(self.new()))
        elif kind == "child":
            src, sid = self.root(a)
            c, cid = self.new()
            src[b % SLOTS] = c
            self.edges[sid][b % SLOTS] = cid
            c.release()
        elif kind == "set":
            (src, sid), (dst, did) = self.root(a), self.root(b)
            src[b % SLOTS] = dst
            self.edges[sid][b % SLOTS] = did
        elif kind == "clear":
            src, sid = self.root(a)
            src[b % SLOTS] = None
            self.edges[sid][b % SLOTS] = None
        elif kind == "drop":
            if self.roots:
                r, _ = self.roots.pop(a % len(self.roots))
                r.release()
        elif kind == "write":
            r, oid = self.root(a)
            version, size = self.data[oid]
            r.write(payload(oid, version + 1, size))
            self.data[oid] = (version + 1, size)
        elif kind == "garbage":
            for i in range(40 * (b % 8 + 1)):
                h.alloc(SIZES[(a + i) % len(SIZES)], refs=1).release()
        elif kind == "burst":
            # a burst of objects of which one in (b % 20 + 2) survives, hung
            # from a new root: scattered survivors
            keep = b % 20 + 2
            holder, hid = self.new(refs=BURST)
            for i in range(BURST * keep):
                c, cid = self.new()
                if i % keep == 0:
                    holder[i // keep] = c
                    self.edges[hid][i // keep] = cid
                c.release()
            self.roots.append([holder, hid])
        elif kind == "thin":
            f = h.fill(64 * 1024 * (a % 4 + 1), SIZES[b % len(SIZES)])
            k = h.thin(f, b % 50 + 2)
            f.release()
            self.thinned.append((k, k.checksum()))
        elif kind == "collect":
            h.collect(major=True)
            self.verify()
        else:
            h.trim()

    def verify(self):
        seen = set()
        stack = [(r, i) for r, i in self.roots]
        while stack:
            ref, oid = stack.pop()
            version, size = self.data[oid]
            assert ref.read() == payload(oid, version, size), f"object {oid} corrupted"
            assert hash(ref) == self.hashes[oid], f"object {oid}: its Ref's hash changed"
            if oid in seen:
                continue
            seen.add(oid)
            for k, child in enumerate(self.edges[oid]):
                got = ref[k]
                if child is None:
                    assert got is None, f"object {oid} slot {k} should be empty"
                else:
                    assert got is not None, f"object {oid} slot {k}: child {child} lost"
                    stack.append((got, child))
        for k, sum0 in self.thinned:
            assert k.checksum() == sum0, "a thinned fill changed"
        # Refs made now to the roots' objects equal the old ones, hash alike
        for r, oid in self.roots:
            again = r.dup()
            assert again == r and hash(again) == hash(r)
            again.release()


def run_program(program, **options):
    with heaplab.Heap(verify=True, warm_pages=0, warm_demand_trims=0, subpage_release=True,
                      gc_trigger_min_bytes="64k", gc_trigger_bytes="256k", **options) as h:
        m = Model(h)
        for kind, a, b in program:
            m.run(kind, a, b)
        h.collect(major=True)
        h.trim()
        m.verify()
        s = h.stats()
        assert s.verify_failures == 0, heaplab.Heap.__repr__(h)
        h.check()
        return s


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_compacting_heap_matches_its_model(program):
    run_program(program, compact="always", page_size="4k")


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_sparse_compaction_on_64k_pages_matches_its_model(program):
    run_program(program, compact="sparse", compact_live_pct=50)


@settings(max_examples=EXAMPLES // 2, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_generational_compacting_heap_matches_its_model(program):
    # minor cycles in every allocation-heavy op; full marks compact
    run_program(program, compact="always", page_size="16k", generational=True,
                young_bytes="64k", tenure_full_marks=2)


def test_the_programs_do_move_objects_and_release_os_pages():
    program = ([("alloc", 0, 0)] * 8 + [("burst", k, 18) for k in range(12)] +
               [("garbage", 0, 7), ("thin", 3, 30), ("write", 2, 0), ("collect", 0, 0),
                ("trim", 0, 0), ("child", 3, 1), ("set", 1, 2), ("collect", 0, 0)])
    s = run_program(program, compact="always", page_size="4k")
    assert s.evacuated_objects > 0 and s.compactions > 0, s
    s = run_program(program, compact="never", page_size="16k")
    assert s.evacuated_objects == 0 and s.subpage_runs > 0, s
