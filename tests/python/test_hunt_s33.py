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


@pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle"])
def test_sweep_stopped_copies_and_pickles(how):
    # its default reduction made it again from args, the signal's name:
    # Stopped('SIGTERM') -> ValueError: 'SIGTERM' is not a valid Signals
    import copy
    import pickle
    import signal
    from heaplab import sweep
    e = sweep.Stopped(signal.SIGTERM)
    e.arm = 3          # (in its __dict__, as __notes__ on 3.11+)
    c = {"copy": copy.copy, "deepcopy": copy.deepcopy,
         "pickle": lambda e: pickle.loads(pickle.dumps(e))}[how](e)
    assert type(c) is sweep.Stopped and isinstance(c, KeyboardInterrupt)
    assert c is not e
    assert (c.signum, c.args, str(c)) == (signal.SIGTERM, ("SIGTERM",), "SIGTERM")
    assert c.arm == 3
    h = sweep.Stopped(signal.SIGHUP)
    assert pickle.loads(pickle.dumps(h)).signum == signal.SIGHUP


def test_the_manual_bench_ignores_the_collectors_variables():
    # heaplab-manual-bench read the environment before it set mode=manual:
    # under HEAPLAB_GENERATIONAL=1 or HEAPLAB_COMPACT=sparse it refused to
    # start ("needs mode=collected"), the one manual heap that still did
    # (the review of session 33)
    import os
    import subprocess
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    exe = os.path.join(os.environ.get("HEAPLAB_BUILD", os.path.join(root, "build")),
                       "clients", "heaplab-manual-bench")
    if not os.path.exists(exe):
        pytest.skip("heaplab-manual-bench is not built")
    env = dict(os.environ, HEAPLAB_GENERATIONAL="1", HEAPLAB_COMPACT="sparse",
               HEAPLAB_COLLECTOR="background")
    p = subprocess.run([exe, "1", "lifo"], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and '"pattern": "lifo"' in p.stdout, (p.returncode, p.stderr)
