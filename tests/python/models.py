"""Helpers of the model tests (test_collector_model.py,
test_compaction_model.py, test_manual_model.py): the byte patterns they
write into blocks and check after every step, and the wait for a forked
child."""
import functools
import os
import select


@functools.lru_cache(maxsize=None)
def _period(start, step):
    return bytes((start + step * i) & 0xFF for i in range(256))


def ramp(start, step, n):
    """bytes((start + step * i) & 0xFF for i in range(n)), made from its
    256-byte period (cached): the byte-by-byte generator was most of the
    model tests' time (every block checked after every step)."""
    if n <= 0:
        return b""
    return (_period(start & 0xFF, step & 0xFF) * (n // 256 + 1))[:n]


def wait_child(pid, timeout=60.0):
    """The forked child's exit status; a child that does not finish in
    `timeout` seconds is a hang (killed, and the test fails)."""
    # (woken by the exit itself: a poll every 10 ms took most of the
    # machine's time, the child ending in a few ms)
    fd = os.pidfd_open(pid)
    try:
        select.select([fd], [], [], timeout)
    finally:
        os.close(fd)
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        return os.waitstatus_to_exitcode(status)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    raise AssertionError(f"the forked child did not finish in {timeout} s (deadlock?)")
