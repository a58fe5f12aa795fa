"""exit() from a C signal handler (libc's exit installed as SIGALRM's
handler through ctypes) that interrupted heaplab-python inside the heap's
errlock, the heap's lock free: a calloc whose count x size overflows,
called in a loop through the launcher's own allocator (PyMem_GetAllocator's
calloc, with the GIL held: PYFUNCTYPE), is refused and copies its message to
the heap under errlock.  Run without /proc and with every mutex held 300 us
longer (modules/slow_unlock.c, armed here), the report at exit's vma_count
fails there and its message waited for the errlock its own thread held, for
ever (tests/clients/run.py exit_inside_errlock).  python3 exits 14.

    exit_inside_errlock.py SECONDS"""
import ctypes
import signal
import sys

libc = ctypes.CDLL(None)
libc.signal.restype = ctypes.c_void_p
libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.signal(signal.SIGALRM, ctypes.cast(libc.exit, ctypes.c_void_p).value)


class Allocator(ctypes.Structure):      # PyMemAllocatorEx
    _fields_ = [(n, ctypes.c_void_p) for n in ("ctx", "malloc", "calloc", "realloc", "free")]


raw = Allocator()
ctypes.pythonapi.PyMem_GetAllocator(0, ctypes.byref(raw))       # PYMEM_DOMAIN_RAW
calloc = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                           ctypes.c_size_t)(raw.calloc)
try:
    ctypes.c_int.in_dll(libc, "slow_unlock_armed").value = 1
except ValueError:      # (not preloaded: python3)
    pass
signal.setitimer(signal.ITIMER_REAL, float(sys.argv[1]))
while True:
    assert not calloc(raw.ctx, 1 << 33, 1 << 33)
