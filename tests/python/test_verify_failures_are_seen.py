"""A verify failure in a cycle nobody called -- the background collector's, an
allocation's -- is seen from Python: an event verify_failed (the address the
check named, the count, whether in a cycle) and Heap.last_error, the heap's
last failure message.  Before, verify_failures rose and nothing said why
(the verify hunt's py4.py)."""
import ctypes
import time

import heaplab


def _written_after_free(h):
    keep = [h.alloc(40, 1) for _ in range(100)]
    victim = keep[7]
    addr = victim.address
    victim.release()
    h.collect(cycles=2, major=True)
    ctypes.memset(addr + 8, 0x58, 4)   # the defect: a write into the freed slot
    return keep, addr


def test_a_background_cycles_failure_is_an_event_with_its_message():
    with heaplab.Heap(verify=True, reserve_bytes=64 << 20, collector="background",
                      gc_trigger_bytes=4 << 20, adaptive_trigger=False) as h:
        keep, addr = _written_after_free(h)
        h.events()                                   # (what came before)
        deadline = time.monotonic() + 30
        seen = []
        while not seen and time.monotonic() < deadline:
            for _ in range(5000):
                h.alloc(200)                         # another class: the slot stays free
            seen = [e for e in h.events() if e.kind == "verify_failed"]
        assert seen, "no verify_failed event from the background cycles"
        e = seen[0]
        assert e.fields["in_cycle"] == 1 and e.fields["failures"] >= 1
        # (the freed slot's start: the payload less the header and the slot)
        assert e.fields["address"] == addr - 16, (hex(e.fields["address"]), hex(addr))
        assert h.stats().verify_failures >= 1
        assert "written after" in h.last_error, h.last_error
        del keep


def test_last_error_is_empty_without_a_failure():
    with heaplab.Heap(reserve_bytes=64 << 20) as h:
        assert h.last_error == ""
