"""page_floor.py -- E8 page floor inside a real CPython (heaplab-python).

Protocol (the shape of E1, on Python's own objects): build about 192 MiB of
small lists, dicts and strings, hold them through a full collection, drop
them and collect fully (the lowest footprint after the drop is the floor),
then allocate a set of large buffers (bytearrays of 16 MiB, every byte
written).  The arm is chosen from outside -- HEAPLAB_ALLOCATOR and HEAPLAB_*
options in the environment -- and named on the command line.  Prints one arm
record in the harness's JSON format (docs/harness.md) on stdout, nothing
else.  Needs only the launcher's own _heaplab_client module.

usage: heaplab-python page_floor.py ARM [MiB]   (default 192)
"""
import gc
import json
import os
import sys

import _heaplab_client as client

MiB = 1 << 20
ARM = sys.argv[1] if len(sys.argv) > 1 else "unnamed"
TARGET = (int(sys.argv[2]) if len(sys.argv) > 2 else 192) * MiB
BUFFER = 16 * MiB
ITEM_BYTES = 530          # one item below, measured on CPython 3.11 (64-bit)
HEAPLAB = client.allocator() == "heaplab"


class Recorder:
    def __init__(self):
        self.t0 = client.now()
        self.records = []
        client.sampler_start(0.002)

    def phase(self, name):
        return Phase(self, name)


class Phase:
    def __init__(self, rec, name):
        self.rec, self.name, self.notes, self.marked = rec, name, {}, False

    def __enter__(self):
        client.sampler_reset()
        f = client.footprint()
        self.t = client.now()
        self.record = {
            "experiment": "E8", "arm": ARM, "phase": self.name, "index": len(self.rec.records),
            "t_start_s": self.t - self.rec.t0, "phys_before": f["phys_footprint"],
            "rss_before": f["rss"], "lazyfree_before": f["lazyfree"],
            "anonymous_before": f["anonymous"], "resident_before": client.resident_bytes(),
        }
        return self

    def mark(self, label="event"):
        client.sampler_mark()
        self.marked = True
        self.notes["mark"] = label
        self.notes["mark_s"] = client.now() - self.rec.t0

    def note(self, key, value):
        self.notes[key] = value

    def __exit__(self, *exc):
        s = client.sampler_summary()
        f = client.footprint()
        t1 = client.now()
        self.record.update({
            "t_end_s": t1 - self.rec.t0, "duration_s": t1 - self.t,
            "phys_after": f["phys_footprint"], "rss_after": f["rss"],
            "lazyfree_after": f["lazyfree"], "anonymous_after": f["anonymous"],
            "resident_after": client.resident_bytes(), "vmas_after": client.vma_count(),
            "phys_peak": s["max_phys"], "phys_low": s["min_phys"], "rss_peak": s["max_rss"],
            "phys_low_after_mark": s["min_phys_after_mark"] if self.marked else None,
            "samples": s["samples"], "notes": self.notes,
        })
        if HEAPLAB:
            self.record["stats"] = client.stats()
        self.rec.records.append(self.record)
        return False


def make_item(i):
    s = str(i)
    return ["name-" + s, {"v": i, "k": "k" + str(i % 977)}, ("t", i)]


def build(total):
    """Items under a tree of 32-slot lists: no list's array is large, so
    everything stays on the small path."""
    n = total // ITEM_BYTES
    level, leaf = [], None
    for i in range(n):
        if leaf is None or len(leaf) == 32:
            leaf = []
            level.append(leaf)
        leaf.append(make_item(i))
    while len(level) > 32:
        level = [level[k:k + 32] for k in range(0, len(level), 32)]
    return level, n


def checksum(node):
    total = count = 0
    stack = [node]
    while stack:
        x = stack.pop()
        if isinstance(x, list) and x and isinstance(x[0], str):
            total += x[1]["v"] + len(x[0]) + len(x[1]["k"])
            count += 1
        else:
            stack.extend(x)
    return total, count


def main():
    rec = Recorder()
    with rec.phase("build"):
        held, items = build(TARGET)
    with rec.phase("hold") as ph:
        gc.collect()
        total, count = checksum(held)
        ph.note("checksum", total)
        ph.note("items", count)
    with rec.phase("drop") as ph:
        ph.mark("drop")
        del held
        gc.collect()
        gc.collect()
    buffers = []
    with rec.phase("buffers") as ph:
        for i in range(TARGET // BUFFER):
            buffers.append(bytearray(bytes([65 + i % 26])) * BUFFER)  # every byte written
        ph.note("buffers", len(buffers))
    series = [[t / 1e9 - rec.t0, p, r, lz] for t, p, r, lz in client.sampler_series()]
    client.sampler_stop()
    options = client.options()
    out = {
        "experiment": "E8", "title": "page floor on a real interpreter", "arm": ARM,
        "options": options, "params": {"language": "python", "target_bytes": TARGET},
        "pid": os.getpid(), "error": None, "records": rec.records,
        "notes": {"allocator": client.allocator(), "language": "python",
                  "warm_bytes": options["warm_pages"] * options["page_size"] if options else 0},
        "series": series,
    }
    sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
