"""A failed operation's message names the call that failed, once, and what
ran out (the hostile Lua run's findings, helper msgs)."""
import pytest

import heaplab


def test_bulk_calls_stopped_by_the_heap_limit_name_themselves():
    # "alloc: heap_limit_bytes ..." leaked from the allocation sequence into
    # fill's and churn's messages
    with heaplab.Heap(heap_limit_bytes="4m") as h:
        with pytest.raises(heaplab.OutOfMemory, match=r"^fill: heap_limit_bytes 4194304 reached"):
            h.fill(64 << 20, 64)
        with pytest.raises(heaplab.OutOfMemory, match=r"^churn: heap_limit_bytes 4194304 reached"):
            h.churn(600, 64, 8 << 20)  # the limit stops it, not the clock (0.05 s ran out first on a loaded machine)


def test_churn_past_the_reservation_names_itself():
    with heaplab.Heap(reserve_bytes="1m", warm_pages=0) as h:
        with pytest.raises(heaplab.OutOfMemory, match=r"^churn: the reservation of 1048576 bytes is exhausted \(reserve_bytes\)$"):
            h.churn(600, 64, 8 << 20)  # the limit stops it, not the clock (0.05 s ran out first on a loaded machine)


def test_reads_of_the_footprint_say_why_they_failed():
    """With no file descriptor left, heaplab.footprint() said "cannot read
    /proc/self/smaps_rollup" without the reason, and a Sampler whose every
    read failed summed up nothing as samples 0, min/max 0 (the environment
    hunt, session 27): both are errors naming the file and the errno's
    text.  In a child process: it exhausts its descriptors."""
    import subprocess
    import sys
    prog = r"""
import os, resource, time, heaplab
# (its thread first: it needs no descriptor to start; every 10 s, so that it
# holds no descriptor of its own while this one takes them all)
s = heaplab.Sampler(10)
time.sleep(0.3)                     # (its thread's first read, done before the descriptors go)
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
fds = []
try:
    while True:
        fds.append(os.open("/dev/null", os.O_RDONLY))
except OSError:
    pass
s.reset()
for name, fn in (("footprint", heaplab.footprint), ("summary", s.summary)):
    try:
        print(name, "returned", fn())
    except heaplab.Error as e:
        print(name, "raised", e.code, e)
"""
    p = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == ("footprint raised ESYS footprint: /proc/self/smaps_rollup could not be "
                        "read: Too many open files"), p.stdout
    assert lines[1].startswith("summary raised ESYS sampler: no sample taken") and \
        lines[1].endswith("/proc/self/smaps_rollup could not be read: Too many open files"), p.stdout
