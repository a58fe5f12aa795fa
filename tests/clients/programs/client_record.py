"""client_record.py -- the phase recorder the client programs share
(page_floor.py, sparse_survivors.py): one arm's records in the harness's JSON
format (docs/harness.md), written on stdout.  On heaplab-python it reads the
launcher's own _heaplab_client module (footprint, sampler, stats); on a stock
python3 there is none, and the footprint is read from /proc/self/smaps_rollup
before and after each phase (no sampler: a phase that must show its lowest
footprint ends with a full collection).
"""
import json
import os
import sys
import time

try:
    import _heaplab_client as client
except ImportError:        # a stock interpreter
    client = None

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


def _client(name):
    """client.NAME(), or None on a stock interpreter."""
    return getattr(client, name)() if client is not None else None


class Recorder:
    def __init__(self, experiment, arm):
        self.experiment, self.arm = experiment, arm
        self.t0 = now()
        self.records = []
        if client is not None:
            client.sampler_start(0.002)

    def phase(self, name):
        return Phase(self, name)

    def write(self, title, params, notes):
        """Print the arm's document: the records, the sampler's series and
        NOTES beside the allocator and the language."""
        series = []
        if client is not None:
            series = [[t / 1e9 - self.t0, p, r, lz] for t, p, r, lz in client.sampler_series()]
            client.sampler_stop()
        out = {
            "experiment": self.experiment, "title": title, "arm": self.arm,
            "options": _client("options"), "params": dict(params, language="python"),
            "pid": os.getpid(), "error": None, "records": self.records,
            "notes": dict(notes, allocator=_client("allocator") or "stock", language="python"),
            "series": series,
        }
        sys.stdout.write(json.dumps(out) + "\n")


class Phase:
    def __init__(self, rec, name):
        self.rec, self.name, self.notes, self.marked = rec, name, {}, False

    def __enter__(self):
        if client is not None:
            client.sampler_reset()
        f = footprint()
        self.t = now()
        self.record = {
            "experiment": self.rec.experiment, "arm": self.rec.arm, "phase": self.name,
            "index": len(self.rec.records), "t_start_s": self.t - self.rec.t0,
            "phys_before": f["phys_footprint"], "rss_before": f["rss"],
            "lazyfree_before": f["lazyfree"], "anonymous_before": f["anonymous"],
            "resident_before": _client("resident_bytes"),
        }
        return self

    def mark(self, label="event"):
        if client is not None:
            client.sampler_mark()
        self.marked = True
        self.notes["mark"] = label
        self.notes["mark_s"] = now() - self.rec.t0

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
            "resident_after": _client("resident_bytes"), "vmas_after": _client("vma_count"),
            "phys_peak": peak, "phys_low": low, "rss_peak": rss_peak,
            "phys_low_after_mark": low_mark, "samples": samples, "notes": self.notes,
        })
        if HEAPLAB:
            self.record["stats"] = client.stats()
        self.rec.records.append(self.record)
        return False
