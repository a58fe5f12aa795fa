"""A Ref released while `==` runs compares unequal; it never raises.

Ref.__eq__ checked `not self._ref`, then read the handle again (_live): a
release() in another thread between the two raised StaleRef from `==`,
though a released Ref is equal only to itself (and Lua's __eq says false).
It also let hl_ref_same's HL_ESTALE -- a release between the read and the
call -- out as StaleRef.

The race is made deterministic with a line tracer (sys.settrace), not by
replacing any part of heaplab: the release runs just before each line of
Ref.__eq__ in turn -- a release in another thread at that point -- of
either side, and `==` must give a bool every time: True only when the release
came after the comparison, False whenever it came before hl_ref_same."""
import dis
import linecache
import sys

import heaplab

EQ = heaplab.Ref.__eq__.__code__


def _lines():
    return sorted({ln for _, ln in dis.findlinestarts(EQ) if ln is not None})


def _compare_releasing_before(line, which):
    """a == a.dup(), `which` of them released just before `line` of __eq__
    runs: (the result, whether the release happened, the released Ref)."""
    h = heaplab.Heap()
    a = h.alloc(40, refs=1)
    b = a.dup()
    victim = a if which == "a" else b
    fired = []

    def local(frame, event, arg):
        if event == "line" and frame.f_lineno == line and not fired:
            fired.append(line)
            victim.release()
        return local

    def call(frame, event, arg):
        return local if frame.f_code is EQ else None

    before = sys.gettrace()
    sys.settrace(call)
    try:
        result = a == b
    finally:
        sys.settrace(before)
    assert victim.released == bool(fired)
    assert a == a and b == b                 # (itself: always)
    h.close()
    return result, bool(fired)


def test_a_release_before_any_line_of_eq_gives_false_or_true_never_an_error():
    lines = _lines()
    assert len(lines) > 5, lines
    call_lines = [ln for ln in lines
                  if "hl_ref_same" in linecache.getline(EQ.co_filename, ln)]
    assert call_lines, "__eq__ calls hl_ref_same"
    fired_at = []
    for line in lines:
        for which in ("a", "b"):
            result, fired = _compare_releasing_before(line, which)  # (raised StaleRef)
            assert result in (True, False), (line, which, result)
            if fired:
                fired_at.append(line)
                if line <= call_lines[0]:
                    # released before hl_ref_same: stale there (HL_ESTALE)
                    assert result is False, (line, which)
    # the release came between the handles' reads and hl_ref_same at least
    assert call_lines[0] in fired_at, (call_lines, fired_at)


def test_a_ref_released_before_eq_is_unequal_to_its_dup():
    h = heaplab.Heap()
    a = h.alloc(8)
    b = a.dup()
    assert a == b and b == a
    a.release()
    assert not (a == b) and not (b == a) and a != b
    assert a == a
    h.close()
