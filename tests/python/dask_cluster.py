"""A dask scheduler and workers on loopback, each its own process (dask's
command line), for the sweep tests that run `heaplab run --cluster ADDR`
(test_sweep.py, test_sweep_resume.py)."""
import json
import os
import signal
import subprocess
import sys
import time

BIN = os.path.dirname(sys.executable)


def dask(*args, log):
    exe = os.path.join(BIN, "dask")
    return subprocess.Popen([exe, *args], stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


class Cluster:
    """A scheduler and `workers` workers, each its own process."""

    def __init__(self, tmp, workers=2):
        self.tmp = tmp
        self.file = str(tmp / "scheduler.json")
        self.log = open(tmp / "dask.log", "w")
        self.scheduler = dask("scheduler", "--host", "127.0.0.1", "--port", "0",
                              "--no-dashboard", "--scheduler-file", self.file, log=self.log)
        # the workers start beside the scheduler (each waits for its file,
        # distributed's json_load_robust): started after it, they waited for
        # its start, about a second of make test's part that runs alone
        self.workers = [self.add_worker() for _ in range(workers)]
        try:
            self.address = self._scheduler_address(time.monotonic() + 60)
            self.wait_workers(workers)
        except BaseException:
            self.close()
            raise

    def _scheduler_address(self, deadline):
        # the scheduler file's address once the file is whole (it was read
        # after a fixed 0.2 s past its appearance)
        while True:
            assert self.scheduler.poll() is None, "the scheduler exited"
            try:
                with open(self.file) as f:
                    return json.load(f)["address"]
            except (FileNotFoundError, ValueError, KeyError):
                pass
            assert time.monotonic() < deadline, "no scheduler file within 60 s"
            time.sleep(0.02)

    def add_worker(self):
        # one arm at a time: one thread and the `arm` resource heaplab run asks for
        return dask("worker", "--scheduler-file", self.file, "--nthreads", "1",
                    "--resources", "arm=1", "--no-nanny", "--no-dashboard",
                    "--host", "127.0.0.1", log=self.log)

    def wait_workers(self, n):
        from distributed import Client
        with Client(self.address, timeout=30) as c:
            c.wait_for_workers(n, timeout=60)

    def close(self):
        # the workers first, then the scheduler: a worker stopping while the
        # scheduler closed too could hang in its own close (a CancelledError
        # in its rpc's, dask.log) until the 20 s below ran out -- 20 s of
        # make test's part that runs alone, in 6 of 11 runs
        for group in (self.workers, [self.scheduler]):
            for p in group:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in group:
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.log.close()
