"""Heap.events() consumes exactly the events it returns: a MemoryError while
it builds the list consumes none (it read with clear=1 first, and every event
was lost -- the Lua binding's defect, the Lua hunt of session 28, found here
too), and events read meanwhile by another call are returned once.  The
failing allocation is made by replacing heaplab.Event, which events() builds
each event with, by one that raises MemoryError at its Nth call."""
import heaplab
import pytest


def heap_with_events():
    h = heaplab.Heap(events_capacity=256)
    for _ in range(5):
        h.collect()
    n = len(h.events(clear=False))
    assert n >= 5
    return h, n


@pytest.mark.parametrize("at", [1, 3, 7])
def test_a_memory_error_building_the_list_consumes_nothing(monkeypatch, at):
    h, n = heap_with_events()
    real, calls = heaplab.Event, []

    def failing(*args):
        calls.append(1)
        if len(calls) == at:
            raise MemoryError("refused while building")
        return real(*args)

    monkeypatch.setattr(heaplab, "Event", failing)
    with pytest.raises(MemoryError):
        h.events()
    monkeypatch.setattr(heaplab, "Event", real)
    assert len(h.events(clear=False)) == n, "events consumed by the failed call"
    got = h.events()
    assert len(got) == n and got[0].kind == "heap_created"
    assert h.events(clear=False) == []
    h.close()


def test_a_read_during_another_returns_each_event_once(monkeypatch):
    h, n = heap_with_events()
    real, inner = heaplab.Event, []

    def reading(*args):
        if not inner:
            inner.append(None)
            monkeypatch.setattr(heaplab, "Event", real)
            inner.extend(h.events())  # consumes everything, meanwhile
        return real(*args)

    monkeypatch.setattr(heaplab, "Event", reading)
    outer = h.events()
    assert len(inner) - 1 + len(outer) == n, (len(inner) - 1, len(outer))
    assert h.events(clear=False) == []
    h.close()


def test_events_appended_meanwhile_are_left_for_the_next_read(monkeypatch):
    h, n = heap_with_events()
    real, once = heaplab.Event, []

    def collecting(*args):
        if not once:
            once.append(1)
            h.collect()  # appends this cycle's events behind the ones being read
        return real(*args)

    monkeypatch.setattr(heaplab, "Event", collecting)
    got = h.events()
    monkeypatch.setattr(heaplab, "Event", real)
    assert len(got) == n
    later = h.events()
    assert later and later[-1].kind == "cycle" and later[0].time_ns >= got[-1].time_ns
    h.close()
