"""An allocation-heavy CPython workload: binary trees of tuples, dicts of
small strings, list growth and slicing, bytes joins.  Prints a checksum so
runs on different allocators can be compared.
usage: alloc_heavy.py [scale]   (default 1, about a second on plain python3)"""
import sys


def tree(depth):
    return (tree(depth - 1), tree(depth - 1)) if depth else ()


def check(t):
    return 1 + check(t[0]) + check(t[1]) if t else 1


def trees(max_depth):
    total = 0
    long_lived = tree(max_depth)
    for depth in range(4, max_depth + 1, 2):
        for _ in range(2 ** (max_depth - depth + 4) // 8):
            total += check(tree(depth))
    return total + check(long_lived)


def dicts(n):
    total = 0
    for i in range(n):
        d = {f"key{k}": str(k * i) for k in range(20)}
        d.update(extra=[i] * 5, more={"x": i})
        total += len(d) + len(d["key7"])
    return total


def lists(n):
    total = 0
    for i in range(n):
        xs = []
        for k in range(200):
            xs.append(k * i)
        ys = xs[10:150:3] + [str(v) for v in xs[:20]]
        total += len(ys) + len(b"".join(s.encode() for s in ys[-20:]))
    return total


def main():
    scale = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    total = 0
    for _ in range(scale):
        total += trees(14) + dicts(20000) + lists(5000)
    print("checksum", total)


if __name__ == "__main__":
    main()
