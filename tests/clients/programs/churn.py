"""churn.py: rounds of building lists, dicts and strings, checking them,
dropping them and collecting, so pages empty, go back to the OS and are
wanted again by the next round.  Prints one digest per round: the output
depends on the program alone, never on the allocator.
usage: churn.py [rounds [MiB per round]]   (default 6 rounds of 24 MiB)"""
import gc
import sys
import zlib


def build(n, seed):
    return [{"id": (i * 7919 + seed) % 1000003, "name": f"item-{i}-{seed}",
             "tags": [i % 7, i % 11, i % 13]} for i in range(n)]


def digest(items):
    h = 0
    for o in items:
        h = (h * 31 + o["id"] + len(o["name"]) + sum(o["tags"])) % 4294967311
    return h


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    mib = int(sys.argv[2]) if len(sys.argv) > 2 else 24
    per_round = mib * 1024 * 1024 // 400          # about 400 bytes per item
    keep = []
    for r in range(1, rounds + 1):
        items = build(per_round, r)
        keep.append(items[r])
        blob = zlib.compress(repr(items[:2000]).encode())
        print(f"round {r}: {len(items)} items, digest {digest(items)}, blob {zlib.crc32(blob)}")
        del items, blob
        gc.collect()
    print("survivors", len(keep), sum(o["id"] for o in keep))


if __name__ == "__main__":
    main()
