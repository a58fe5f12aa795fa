"""sparse_survivors.py -- E10 sparse survivors inside a real CPython.

Protocol (issue 18, on Python's own objects): build about 1.5 M small
objects (bytes of 64-256 bytes each, made in order), drop all but every Nth
and collect fully; the lowest footprint after the drop is the floor.  Runs on
heaplab-python (the arm is chosen from outside: HEAPLAB_SUBPAGE_RELEASE and
other HEAPLAB_* options in the environment) and on a stock python3 (no
_heaplab_client module there: the footprint is read from
/proc/self/smaps_rollup after the collection, which releases synchronously on
the C library and pymalloc).  Prints one arm record in the harness's JSON
format (docs/harness.md) on stdout, nothing else.

usage: python3 sparse_survivors.py ARM N [OBJECTS]   (default 1500000)
"""
import gc
import json
import os
import sys
import time

try:
    import _heaplab_client as client
except ImportError:        # a stock interpreter
    client = None

ARM = sys.argv[1] if len(sys.argv) > 1 else "unnamed"
EVERY = int(sys.argv[2]) if len(sys.argv) > 2 else 100
OBJECTS = int(sys.argv[3]) if len(sys.argv) > 3 else 1_500_000
HEAPLAB = client is not None and client.allocator() == "heaplab"


def footprint():
    if client is not None:
        return client.footprint()
    out = {"rss": 0, "anonymous": 0, "lazyfree": 0, "swap": 0}
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            key, _, rest = line.partition(":")
            k = key.strip().lower()
            if k in out:
                out[k] = int(rest.split()[0]) * 1024
    out["phys_footprint"] = out["anonymous"] + out["swap"]
    return out


def now():
    return client.now() if client is not None else time.monotonic()


class Recorder:
    def __init__(self):
        self.t0 = now()
        self.records = []
        if client is not None:
            client.sampler_start(0.002)

    def phase(self, name):
        return Phase(self, name)


class Phase:
    def __init__(self, rec, name):
        self.rec, self.name, self.notes, self.marked = rec, name, {}, False

    def __enter__(self):
        if client is not None:
            client.sampler_reset()
        f = footprint()
        self.t = now()
        self.record = {
            "experiment": "E10", "arm": ARM, "phase": self.name, "index": len(self.rec.records),
            "t_start_s": self.t - self.rec.t0, "phys_before": f["phys_footprint"],
            "rss_before": f["rss"], "lazyfree_before": f["lazyfree"],
            "anonymous_before": f["anonymous"],
            "resident_before": client.resident_bytes() if client is not None else None,
        }
        return self

    def mark(self, label="event"):
        if client is not None:
            client.sampler_mark()
        self.marked = True
        self.notes["mark"] = label

    def note(self, key, value):
        self.notes[key] = value

    def __exit__(self, *exc):
        f = footprint()
        t1 = now()
        if client is not None:
            s = client.sampler_summary()
            low_mark = s["min_phys_after_mark"] if self.marked else None
            peak, low, rss_peak, samples = s["max_phys"], s["min_phys"], s["max_rss"], s["samples"]
        else:   # no sampler: the reading after the phase, which ends with a full collection
            low_mark = f["phys_footprint"] if self.marked else None
            peak = max(self.record["phys_before"], f["phys_footprint"])
            low = min(self.record["phys_before"], f["phys_footprint"])
            rss_peak, samples = max(self.record["rss_before"], f["rss"]), 2
        self.record.update({
            "t_end_s": t1 - self.rec.t0, "duration_s": t1 - self.t,
            "phys_after": f["phys_footprint"], "rss_after": f["rss"],
            "lazyfree_after": f["lazyfree"], "anonymous_after": f["anonymous"],
            "resident_after": client.resident_bytes() if client is not None else None,
            "vmas_after": client.vma_count() if client is not None else None,
            "phys_peak": peak, "phys_low": low, "rss_peak": rss_peak,
            "phys_low_after_mark": low_mark, "samples": samples, "notes": self.notes,
        })
        if HEAPLAB:
            self.record["stats"] = client.stats()
        self.rec.records.append(self.record)
        return False


def make(i):
    """A bytes object of 64-256 bytes in all (33 bytes of header), its
    content from i; the size from a hash of i, so the survivors (every Nth)
    are of every size too."""
    n = 31 + ((i * 2654435761) >> 7) % 4 * 64
    return i.to_bytes(8, "little") * (n // 8) + b"x" * (n % 8)


def checksum(objs):
    return sum(int.from_bytes(b[:8], "little") * len(b) for b in objs) % (1 << 61), len(objs)


def main():
    rec = Recorder()
    with rec.phase("build"):
        items = [make(i) for i in range(OBJECTS)]
    with rec.phase("hold") as ph:
        gc.collect()
        ph.note("checksum", list(checksum(items[::EVERY])))
    with rec.phase("drop") as ph:
        ph.mark("drop")
        survivors = items[::EVERY]
        del items
        gc.collect()
        ph.note("checksum", list(checksum(survivors)))
        ph.note("survivor_bytes", sum(len(b) + 33 for b in survivors))
    series = []
    if client is not None:
        series = [[t / 1e9 - rec.t0, p, r, lz] for t, p, r, lz in client.sampler_series()]
        client.sampler_stop()
    options = client.options() if client is not None else None
    out = {
        "experiment": "E10", "title": "sparse survivors on a real interpreter", "arm": ARM,
        "options": options, "params": {"language": "python", "every": EVERY, "objects": OBJECTS},
        "pid": os.getpid(), "error": None, "records": rec.records,
        "notes": {"allocator": client.allocator() if client is not None else "stock",
                  "language": "python", "interpreter": sys.version.split()[0],
                  "executable": sys.executable},
        "series": series,
    }
    sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
