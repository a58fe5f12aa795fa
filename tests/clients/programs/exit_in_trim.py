"""exit() while the heap's trim has its lock let go: libc's exit installed as
SIGALRM's handler through ctypes (C, no Python in the handler), then 40 MB
of small blocks dropped at once -- the frees start a trim of the heap's empty
pages.  Run with every release refused with EAGAIN and retried for long
(HEAPLAB_FAULT_RELEASE=always:EAGAIN, HEAPLAB_SYSCALL_RETRY_MAX, _BACKOFF_US:
tests/clients/run.py exit_in_signal_handler), the trim waits between its
retries with the heap's lock let go and in_cycle set, and the alarm, half a
second on, lands there.  python3 exits 14 once the blocks are dropped.

    exit_in_trim.py"""
import ctypes
import signal

libc = ctypes.CDLL(None)
libc.signal.restype = ctypes.c_void_p
libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.signal(signal.SIGALRM, ctypes.cast(libc.exit, ctypes.c_void_p).value)
keep = [bytearray(400) for _ in range(100000)]   # (under the launchers' small_max, 512)
signal.setitimer(signal.ITIMER_REAL, 0.5)
del keep
while True:         # (python3, and heaplab-python should the trim end: the alarm)
    pass
