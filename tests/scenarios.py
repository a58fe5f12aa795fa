"""What the scenario runners of suites 'clients' and 'preload' (tests/clients/run.py,
tests/preload/run.py) share: a mount namespace without /proc, and runs three at a time."""
import concurrent.futures
import os
import shutil
import subprocess
import sys


def without_proc():
    """The command that runs `sh -c SCRIPT` in a mount namespace of its own
    (unshare -m), where SCRIPT may unmount /proc; or the scenario is skipped
    (exit 77): it needs root and unshare(1)."""
    unshare = shutil.which("unshare")
    if os.geteuid() != 0 or not unshare:
        print("SKIP: needs root and unshare(1) to unmount /proc in a mount namespace of its own")
        sys.exit(77)
    ns = [unshare, "-m", "--propagation", "private", "sh", "-c"]
    probe = subprocess.run(ns + ["umount -l /proc && ! test -e /proc/self"], capture_output=True,
                           text=True)
    if probe.returncode != 0:
        print(f"SKIP: cannot unmount /proc in a mount namespace here: {probe.stderr.strip()}")
        sys.exit(77)
    return ns


def three_at_a_time(calls):
    """[fn(*args) for fn, args in calls], three running at a time; the
    first failure is the answer (the calls not started are cancelled)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        futures = [pool.submit(fn, *args) for fn, args in calls]
        try:
            return [f.result() for f in futures]
        except BaseException:
            for f in futures:
                f.cancel()
            raise
