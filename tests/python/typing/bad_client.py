"""Must NOT type-check: test_conventions.py checks that mypy --strict
rejects each marked line (so the typed API can fail a wrong program)."""
import heaplab

heaplab.Heap(no_such_option=1)            # error: unknown option
heaplab.Heap(page_release="yes please")   # error: a bool option given a str
heaplab.Heap(collector="bogus")           # error: not one of the enum's choices
h = heaplab.Heap()
h.alloc("16")                             # error: size is an int
n: str = h.resident_bytes()               # error: returns an int
