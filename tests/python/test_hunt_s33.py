"""The session 33 hunt's findings, each as the Python binding sees it."""
import pytest

import heaplab


def test_every_errno_reads_back_by_name():
    # hl_errno_name knew eight names: an errno armed by number (28) read
    # back "E?"; "off" recorded the default ENOMEM as the site's errno
    h = heaplab.Heap(reserve_bytes=64 << 20)
    try:
        h.inject("release", "first", 2, errno=28)
        assert h.faults["release"]["errno"] == "ENOSPC"
        h.inject("dump", "always", errno=4000)
        assert h.faults["dump"]["errno"] == "E4000"
        h.inject("restore", "always", errno="ENOENT")
        assert h.faults["restore"]["errno"] == "ENOENT"
        h.inject("release", "off")
        assert h.faults["release"]["errno"] is None
        assert h.faults["release"] == h.faults["meta"], "disarmed reads as never armed"
    finally:
        h.close()


def test_memory_pressure_on_a_manual_heap_is_a_mode_error():
    # it returned None and did nothing, where collect() raises ModeError
    h = heaplab.Heap(mode="manual", reserve_bytes=64 << 20)
    try:
        with pytest.raises(heaplab.ModeError, match="memory_pressure: a manual heap has no collector"):
            h.memory_pressure()
        with pytest.raises(heaplab.ModeError):
            h.collect()
        h.trim()
    finally:
        h.close()
