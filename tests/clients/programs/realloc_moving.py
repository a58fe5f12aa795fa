"""A large block's realloc that moves it -- a bytearray past the launchers'
mid-size classes, grown with another block in use after it in glibc's heap
-- copies it with the heap's lock let go (manual.c's realloc_large_move);
its third page made unreadable, the copy faults there, and libc's exit,
installed as SIGSEGV's handler through ctypes, runs the report at exit with
the block on its way: the launcher must say the heap is busy, not read it
(tests/clients/run.py exit_in_signal_handler; the mutation audit, session
40).  python3 exits 11 the same way (its realloc's copy faults alike).

    realloc_moving.py"""
import ctypes
import mmap
import signal

libc = ctypes.CDLL(None, use_errno=True)
libc.signal.restype = ctypes.c_void_p
libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
b = bytearray(96 * 1024)
after = bytearray(96 * 1024)
view = (ctypes.c_char * 1).from_buffer(b)
held = (ctypes.addressof(view) + 2 * mmap.PAGESIZE) & ~(mmap.PAGESIZE - 1)
del view
more = bytes(300 * 1024)
libc.signal(signal.SIGSEGV, ctypes.cast(libc.exit, ctypes.c_void_p).value)
if libc.mprotect(held, mmap.PAGESIZE, 0) != 0:
    raise OSError(ctypes.get_errno(), "mprotect")
b.extend(more)
print("the realloc did not copy the block")
