"""A generational heap against a model: random programs of allocations, slot
stores, dropped roots and collections (minor cycles and full marks run inside
allocation; with tenuring, pages are tenured and untenured),
after which every object the model says is reachable has its payload and its
slots intact -- the write barrier's promise -- and the verifier (checking,
between mark and sweep of every cycle, that no old object hides a young one)
never fired.  The same programs on the default collector, as a control."""
import struct

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings
import pytest

import heaplab

# no assertion here depends on the machine's load (no bounded wait, no sampled
# footprint): make test runs these beside the notebooks, the fuzzers and the
# soak (pyproject.toml's markers)
pytestmark = pytest.mark.shares_the_machine

SLOTS = 3

# one operation: (kind, a, b) with small integers interpreted against the state
ops = st.lists(st.tuples(st.sampled_from(["alloc", "child", "set", "clear", "drop", "garbage",
                                          "churn", "collect"]),
                         st.integers(0, 63), st.integers(0, 63)),
               min_size=1, max_size=120)


def run_program(program, **options):
    with heaplab.Heap(young_bytes="64k", gc_trigger_min_bytes="64k", verify=True,
                      **options) as h:
        roots = []                 # (Ref, id): what the program holds
        edges = {}                 # id -> [id or None] * SLOTS: the model
        next_id = 1
        for kind, a, b in program:
            if kind == "alloc" or not roots:
                r = h.alloc(8, refs=SLOTS)
                r.write(struct.pack("<Q", next_id))
                roots.append((r, next_id))
                edges[next_id] = [None] * SLOTS
                next_id += 1
            elif kind == "child":
                # a new object whose only reference is a slot of a root that is
                # probably old by now: the case the barrier is for
                src, sid = roots[a % len(roots)]
                c = h.alloc(8, refs=SLOTS)
                c.write(struct.pack("<Q", next_id))
                src[b % SLOTS] = c
                c.release()
                edges[sid][b % SLOTS] = next_id
                edges[next_id] = [None] * SLOTS
                next_id += 1
            elif kind == "set":
                (src, sid), (dst, did) = roots[a % len(roots)], roots[b % len(roots)]
                src[b % SLOTS] = dst
                edges[sid][b % SLOTS] = did
            elif kind == "clear":
                src, sid = roots[a % len(roots)]
                src[b % SLOTS] = None
                edges[sid][b % SLOTS] = None
            elif kind == "drop":
                r, _ = roots.pop(a % len(roots))
                r.release()
            elif kind == "garbage":
                for _ in range(200 * (b + 1)):     # minor cycles run in here
                    h.alloc(200).release()
            elif kind == "churn":
                # temporaries that outlive a minor cycle and then die: the old
                # generation grows, and full marks run (tenuring, with them)
                ring = [None] * 300
                for i in range(100 * (b + 1)):
                    if ring[i % 300] is not None:
                        ring[i % 300].release()
                    ring[i % 300] = h.alloc(200)
                for r in ring:
                    if r is not None:
                        r.release()
            else:
                h.collect()
        for _ in range(3000):                      # and a few more, after everything
            h.alloc(200).release()

        # everything the model can reach from the roots must be intact
        seen = set()
        stack = [(r, i) for r, i in roots]
        while stack:
            ref, rid = stack.pop()
            assert struct.unpack("<Q", ref.read(0, 8))[0] == rid, f"object {rid} corrupted"
            if rid in seen:
                continue
            seen.add(rid)
            for k, child in enumerate(edges[rid]):
                got = ref[k]
                if child is None:
                    assert got is None, f"object {rid} slot {k} should be empty"
                else:
                    assert got is not None, f"object {rid} slot {k}: child {child} lost"
                    stack.append((got, child))
        s = h.stats()
        assert s.verify_failures == 0, h.stats()
        return s


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_generational_heap_matches_its_model(program):
    run_program(program, generational=True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_tenuring_heap_matches_its_model(program):
    # small pages and a whole mark every second full mark: pages are tenured
    # and untenured often
    run_program(program, generational=True, tenure_full_marks=2, page_size="4k")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_default_collector_matches_the_same_model(program):
    run_program(program)


def test_the_programs_do_run_minor_cycles():
    program = [("alloc", 0, 0)] * 4 + [("garbage", 0, 20), ("child", 0, 0), ("child", 1, 1),
                                       ("garbage", 0, 20), ("set", 0, 1), ("garbage", 0, 20),
                                       ("set", 1, 2),
                                       ("drop", 0, 0), ("garbage", 0, 20), ("collect", 0, 0),
                                       ("set", 2, 0), ("garbage", 0, 20)]
    s = run_program(program, generational=True)
    assert s.minor_cycles >= 10 and s.promoted_bytes > 0


def test_the_programs_do_tenure_pages():
    program = ([("alloc", 0, 0)] * 100 + [("churn", 0, 63)] * 4 +
               [("child", k, k) for k in range(0, 100, 3)] + [("set", k, k + 1) for k in range(40)] +
               [("churn", 0, 63)] * 3)
    s = run_program(program, generational=True, tenure_full_marks=3, page_size="4k")
    assert s.major_full_mark >= 4 and s.whole_marks >= 1, s
    assert s.tenured_pages > 0 or s.remembered_pages_scanned > 0, s
