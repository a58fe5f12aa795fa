"""libc's exit installed as SIGALRM's handler through ctypes (as
exit_in_handler.py), the program calling glibc's own malloc and free
through ctypes -- any C code's allocations, which the launchers do not
interpose: the alarm calls exit(14) often inside glibc's allocator.
python3 exits 14.  heaplab-python's report at exit was made with glibc's
allocator (open_memstream): alone it re-entered the interrupted malloc and
glibc aborted ("malloc(): ... assertion failure in sysmalloc", or a
corrupted list), and with THREADS > 1 (the arena's lock taken) it waited
for the lock its own thread held, for ever (tests/clients/run.py
exit_in_glibc_malloc).

    exit_in_glibc_malloc.py SECONDS THREADS"""
import ctypes
import signal
import sys
import threading

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.signal.restype = ctypes.c_void_p
libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]


def work(seed):
    # blocks of 20-21 KiB, below glibc's mmap threshold: 64 made, then all
    # freed, so the top of glibc's heap grows and is trimmed (sysmalloc,
    # systrim: brk) over and over
    malloc, free = libc.malloc, libc.free
    while True:
        blocks = [malloc(20000 + (seed + k) % 64 * 64) for k in range(64)]
        for p in blocks:
            free(p)


for t in range(1, int(sys.argv[2])):
    threading.Thread(target=work, args=(t,), daemon=True).start()
libc.signal(signal.SIGALRM, ctypes.cast(libc.exit, ctypes.c_void_p).value)
signal.setitimer(signal.ITIMER_REAL, float(sys.argv[1]))
work(0)
