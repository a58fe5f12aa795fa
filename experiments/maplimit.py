"""E6's tools: bring THIS process to its map limit, and watch another process
from outside.

The limit is the system's vm.max_map_count, read from /proc and never written:
changing a sysctl changes the machine for everyone on it.  Instead the process
spends its own map budget: a filler mapping whose pages alternate between two
protections is one VMA per page, so `limit - current` pages of it fill the
budget exactly.  The filler is never touched, so it costs address space and
VMA structures, not memory.  The count is per process, so the machine is never
at its limit because of us, and the filler is unmapped explicitly when the
arm is done (process exit would free it too).

The observer half (cpu_seconds, thread_cpu_seconds, thread_schedstat,
thread_switches, SharedCounters, rollup_phys) reads /proc/<pid> and a shared file, so a parent can measure a
child that is stuck inside a system-call loop and will never report anything
itself.
"""
from __future__ import annotations

import ctypes
import errno
import mmap
import os
import struct

PROT_NONE, PROT_READ, PROT_WRITE = 0, 1, 2
MAP_PRIVATE, MAP_ANONYMOUS, MAP_NORESERVE = 0x02, 0x20, 0x4000
MAP_FAILED = ctypes.c_void_p(-1).value

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]
_libc.mprotect.restype = ctypes.c_int
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.munmap.restype = ctypes.c_int
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]

OS_PAGE = os.sysconf("SC_PAGE_SIZE")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def max_map_count():
    """The system's per-process map limit (read only)."""
    with open("/proc/sys/vm/max_map_count") as f:
        return int(f.read())


def map_count(pid="self"):
    """VMAs of a process: lines of /proc/<pid>/maps, less the [vsyscall] gate
    line, which the kernel prints but does not count against the limit."""
    n = 0
    with open(f"/proc/{pid}/maps", "rb") as f:
        for line in f:
            if not line.rstrip().endswith(b"[vsyscall]"):
                n += 1
    return n


class MapFiller:
    """A filler mapping that brings this process's map count to the limit.

        with MapFiller() as filler:     # at the limit now
            ...                         # every VMA split fails (ENOMEM -> EAGAIN for madvise)
        # unmapped: the budget is back

    fill() and free() can also be called directly; free() is idempotent."""

    def __init__(self, limit=None):
        self.limit = max_map_count() if limit is None else limit
        self.base = None
        self.size = 0
        self.maps_before = None   # map count before the filler
        self.maps_at_limit = None
        self.splits = 0           # mprotect calls that split the filler

    def _protect(self, page, prot):
        rc = _libc.mprotect(self.base + page * OS_PAGE, OS_PAGE, prot)
        if rc == 0:
            self.splits += 1
            return True
        e = ctypes.get_errno()
        if e != errno.ENOMEM:
            raise OSError(e, f"mprotect on filler page {page}: {os.strerror(e)}")
        return False

    def fill(self):
        self.maps_before = map_count()
        need = self.limit - self.maps_before
        if need <= 0:
            raise RuntimeError(f"already at {self.maps_before} maps, limit {self.limit}")
        # one page per VMA we need, and a tail to spare for the last splits
        pages = need + 256
        self.size = pages * OS_PAGE
        base = _libc.mmap(None, self.size, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
        if base in (None, MAP_FAILED):
            e = ctypes.get_errno()
            raise OSError(e, f"filler mmap of {self.size} bytes: {os.strerror(e)}")
        self.base = base
        try:
            # Protecting page i of the read-write tail splits it in three
            # (+2 VMAs); the kernel refuses a split once the count is at the
            # limit, so ENOMEM here means we are within one of it.
            page = 1
            while page < pages - 8 and self._protect(page, PROT_READ):
                page += 2
            # Then +1 splits from the far end, alternating protections so the
            # new VMAs never merge with each other or with the tail, until
            # the kernel refuses: the count is now exactly the limit.
            end, prot = pages - 1, PROT_READ
            while end > page + 1 and self._protect(end, prot):
                end -= 1
                prot = PROT_NONE if prot == PROT_READ else PROT_READ
            self.maps_at_limit = map_count()
        except BaseException:
            self.free()
            raise
        return self

    def free(self):
        """Unmap the whole filler (its range covers whole VMAs: no split needed)."""
        if self.base is not None:
            base, self.base = self.base, None
            if _libc.munmap(base, self.size) != 0:
                e = ctypes.get_errno()
                raise OSError(e, f"munmap of the filler: {os.strerror(e)}")

    def __enter__(self):
        return self.fill()

    def __exit__(self, *exc):
        self.free()
        return False


# ---- observing another process --------------------------------------------------------

def _stat_cpu(path):
    with open(path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is state (field 3 of proc(5)); utime and stime are fields 14, 15
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def cpu_seconds(pid):
    """User + system CPU time of a process so far."""
    return _stat_cpu(f"/proc/{pid}/stat")


def thread_cpu_seconds(pid):
    """{tid: user + system CPU seconds} for every thread of a process."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            out[int(tid)] = _stat_cpu(f"/proc/{pid}/task/{tid}/stat")
        except (FileNotFoundError, ProcessLookupError):
            pass
    return out


def thread_schedstat(pid):
    """{tid: (on-CPU ns, runnable-but-waiting ns)} from /proc/<pid>/task/*/schedstat.
    Their sum over a window is how long a thread wanted the CPU: a thread that
    never sleeps wants all of it, however loaded the machine is."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                run_ns, wait_ns = f.read().split()[:2]
            out[int(tid)] = (int(run_ns), int(wait_ns))
        except (FileNotFoundError, ProcessLookupError):
            pass
    return out


def thread_switches(pid):
    """{tid: (voluntary, involuntary)} context switches of every thread of a
    process, from /proc/<pid>/task/*/status.  A thread switches voluntarily
    when it sleeps or blocks (nanosleep, a futex, a lock held by another), and
    involuntarily when the scheduler preempts it: a thread that spins makes
    almost only the second kind, however loaded the machine is, and a loop
    that sleeps between calls makes at least one of the first kind per call."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            vol = invol = None
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        vol = int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches:"):
                        invol = int(line.split()[1])
            out[int(tid)] = (vol, invol)
        except (FileNotFoundError, ProcessLookupError):
            pass
    return out


def rollup_phys(pid):
    """phys_footprint of another process as heaplab defines it on Linux
    (Anonymous + Swap of /proc/<pid>/smaps_rollup), bytes."""
    total = 0
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("Anonymous", "Swap"):
                total += int(rest.split()[0]) * 1024
    return total


class SharedCounters:
    """The file behind HEAPLAB_COUNTERS_FILE: created here (4096 zero bytes),
    mapped shared by the child's C library, which atomically increments
    [0] syscalls, [1] EAGAIN retries, [2] give-ups.  Readable while the child
    spins, without its cooperation."""

    def __init__(self, path):
        self.path = path
        with open(path, "wb") as f:
            f.write(b"\0" * 4096)
        self._f = open(path, "r+b")
        self._m = mmap.mmap(self._f.fileno(), 4096)

    def read(self):
        syscalls, retries, gave_up = struct.unpack_from("<3Q", self._m, 0)
        return {"syscalls": syscalls, "retries": retries, "gave_up": gave_up}

    def close(self):
        self._m.close()
        self._f.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
