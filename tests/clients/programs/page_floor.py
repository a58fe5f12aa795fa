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
import sys

import _heaplab_client as client   # this program needs the launcher's module
from client_record import Recorder

MiB = 1 << 20
ARM = sys.argv[1] if len(sys.argv) > 1 else "unnamed"
TARGET = (int(sys.argv[2]) if len(sys.argv) > 2 else 192) * MiB
BUFFER = 16 * MiB
ITEM_BYTES = 530          # one item below, measured on CPython 3.11 (64-bit)


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
    rec = Recorder("E8", ARM)
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
    options = client.options()
    rec.write("page floor on a real interpreter", {"target_bytes": TARGET},
              {"warm_bytes": options["warm_pages"] * options["page_size"] if options else 0})


if __name__ == "__main__":
    main()
