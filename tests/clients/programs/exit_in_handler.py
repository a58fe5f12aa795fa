"""libc's exit installed as SIGALRM's handler through ctypes -- C, no Python
in the handler (a C extension's handler calling exit() is the same): the
alarm calls exit(14) wherever the interpreter is, often inside its
allocator.  python3 exits 14.  heaplab-python's report at exit waited for the
heap's lock, held by the very allocation the alarm interrupted, for ever
(tests/clients/run.py exit_in_signal_handler).  Every block small (a list of
at most 49 pointers, a bytearray of at most 415 bytes: under the launchers'
small_max, 512), so that none is glibc's: a report written inside glibc's
malloc is another story (docs/clients.md).

    exit_in_handler.py SECONDS"""
import ctypes
import signal
import sys

libc = ctypes.CDLL(None)
libc.signal.restype = ctypes.c_void_p
libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.signal(signal.SIGALRM, ctypes.cast(libc.exit, ctypes.c_void_p).value)
signal.setitimer(signal.ITIMER_REAL, float(sys.argv[1]))
keep = [None] * 256
i = 0
while True:
    keep[i % 256] = [str(i)] * (i % 50) + [bytearray(16 + (i * 7919) % 400)]
    i += 1
