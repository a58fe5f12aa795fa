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
import sys

from client_record import Recorder

ARM = sys.argv[1] if len(sys.argv) > 1 else "unnamed"
EVERY = int(sys.argv[2]) if len(sys.argv) > 2 else 100
OBJECTS = int(sys.argv[3]) if len(sys.argv) > 3 else 1_500_000


def make(i):
    """A bytes object of 64-256 bytes in all (33 bytes of header), its
    content from i; the size from a hash of i, so the survivors (every Nth)
    are of every size too."""
    n = 31 + ((i * 2654435761) >> 7) % 4 * 64
    return i.to_bytes(8, "little") * (n // 8) + b"x" * (n % 8)


def checksum(objs):
    return sum(int.from_bytes(b[:8], "little") * len(b) for b in objs) % (1 << 61), len(objs)


def main():
    rec = Recorder("E10", ARM)
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
    rec.write("sparse survivors on a real interpreter", {"every": EVERY, "objects": OBJECTS},
              {"interpreter": sys.version.split()[0], "executable": sys.executable})


if __name__ == "__main__":
    main()
