"""heaplab: a garbage-collected heap and page allocator for memory experiments.

A thin layer over libheaplab (CFFI, API mode).  Option names, stats, event
fields and fault sites all come from the C declarations in heaplab.h; no
policy lives here.

    import heaplab
    with heaplab.Heap(page_release=True, warm_pages=64) as h:
        r = h.fill(192 << 20, 256)      # 192 MiB of 256-byte objects
        r.release()
        h.collect(cycles=2)
        print(h.stats().released_pages, heaplab.footprint().phys_footprint)
"""
from __future__ import annotations

import collections
import inspect
import sys
import threading
from typing import (TYPE_CHECKING, Any, Dict, Iterator, List, Mapping, NoReturn, Optional, Tuple,
                    Union)

from ._heaplab import ffi, lib
from ._options import OPTION_TABLE, HeapOptions

if TYPE_CHECKING:
    if sys.version_info >= (3, 11):
        from typing import Unpack
    else:
        from typing_extensions import Unpack

__all__ = [
    "Heap", "HeapOptions", "Ref", "Stats", "Event", "Footprint", "ChurnResult", "Sampler",
    "Error", "HeapClosed", "StaleRef", "OutOfMemory", "ModeError", "InvalidArgument",
    "SlotIndexError", "UnknownOption", "CheckFailed",
    "footprint", "options", "stat_names", "fault_sites", "fault_modes",
    "MAX_SIZE", "MAX_REFS", "__version__",
]

__version__: str = ffi.string(lib.hl_version()).decode()
#: the largest payload of one object, bytes
MAX_SIZE: int = int(lib.hl_max_size())
#: the most reference slots one object can have
MAX_REFS: int = int(lib.hl_max_refs())


# ---- exceptions: one mapping from C error codes -------------------------------

class Error(Exception):
    """Any failure reported by libheaplab.  `code` is the C error name."""

    code = "ERROR"


class HeapClosed(Error):
    """The heap was closed; its handles are gone."""

    code = "ECLOSED"


class StaleRef(Error):
    """The Ref was released (or never belonged to a live handle)."""

    code = "ESTALE"


class OutOfMemory(Error, MemoryError):
    """The heap could not get the memory it needed (reservation full, limit hit)."""

    code = "ENOMEM"


class ModeError(Error):
    """The operation needs the other heap mode (collected or manual)."""

    code = "EMODE"


class InvalidArgument(Error, ValueError):
    """A value out of range (an option, a size, an index base...); a ValueError."""

    code = "EINVAL"


class SlotIndexError(Error, IndexError):
    """A slot index outside the object's slots; an IndexError."""

    code = "ERANGE"


class UnknownOption(Error, TypeError):
    """Heap() got an option name that is not in the option table; a TypeError."""

    code = "EOPTION"


class CheckFailed(Error):
    """A heap invariant does not hold (hl_heap_check)."""

    code = "ECHECK"


_ERRORS = {
    lib.HL_EINVAL: InvalidArgument,
    lib.HL_ENOMEM: OutOfMemory,
    lib.HL_ERANGE: SlotIndexError,
    lib.HL_ESTALE: StaleRef,
    lib.HL_EFOREIGN: InvalidArgument,
    lib.HL_ECLOSED: HeapClosed,
    lib.HL_EOPTION: UnknownOption,
    lib.HL_EVALUE: InvalidArgument,
    lib.HL_EMODE: ModeError,
    lib.HL_ECHECK: CheckFailed,
}


def _raise(rc: int, message: Optional[str]) -> NoReturn:
    cls = _ERRORS.get(rc, Error)
    exc = cls(message)
    if cls is Error:
        exc.code = ffi.string(lib.hl_error_name(rc)).decode()
    raise exc


def _s(p: Any) -> Optional[str]:
    return ffi.string(p).decode() if p != ffi.NULL else None


# ---- declarations read from C --------------------------------------------------

_KINDS = {lib.HL_OPT_BOOL: "bool", lib.HL_OPT_INT: "int", lib.HL_OPT_BYTES: "bytes",
          lib.HL_OPT_ENUM: "enum"}


def _option_table():
    table = {}
    info = ffi.new("hl_option_info *")
    for i in range(lib.hl_option_count()):
        lib.hl_option_info_get(i, info)
        kind = _KINDS[info.kind]
        choices = _s(info.choices).split(",") if kind == "enum" else None
        default = getattr(info, "def")
        table[_s(info.name)] = {
            "kind": kind,
            "default": choices[default] if choices else (bool(default) if kind == "bool" else default),
            "min": info.min,
            "max": info.max,
            "choices": choices,
            "description": _s(info.description),
        }
    return table


_OPTIONS = _option_table()
_STAT_NAMES = tuple(_s(lib.hl_stat_name(i)) for i in range(lib.hl_stat_count()))
_EVENTS = tuple((_s(lib.hl_event_name(k)), tuple(f for f in _s(lib.hl_event_fields(k)).split(",") if f))
                for k in range(lib.HL_EV_COUNT))
_SITES = tuple(_s(lib.hl_fault_site_name(i)) for i in range(lib.HL_SITE_COUNT))
_MODES = tuple(_s(lib.hl_fault_mode_name(i)) for i in range(lib.HL_FAULT_MODE_COUNT))


def options() -> Dict[str, Dict[str, Any]]:
    """The option table: name -> {kind, default, min, max, choices, description}."""
    return {k: dict(v) for k, v in _OPTIONS.items()}


def stat_names() -> Tuple[str, ...]:
    """The names of the heap's counters (HL_STATS), in the order of Stats."""
    return _STAT_NAMES


def fault_sites() -> Tuple[str, ...]:
    """The fault-injection sites (HL_FAULT_SITES): what Heap.inject() takes as site."""
    return _SITES


def fault_modes() -> Tuple[str, ...]:
    """The fault schedules Heap.inject() takes as mode (first, always, every, sticky, off)."""
    return _MODES


# ---- value types ----------------------------------------------------------------

def _fields(ctype):
    """The field names of a C struct, in declaration order (from heaplab.h)."""
    return [name for name, _ in ffi.typeof(ctype).fields]


def _tuple_of(cls, cdata):
    return cls(*(getattr(cdata, f) for f in cls._fields))


if TYPE_CHECKING:   # the same fields, as typed classes generated from heaplab.h
    from ._options import ChurnResult, Footprint
else:
    Footprint = collections.namedtuple("Footprint", _fields("hl_footprint"))
    Footprint.__doc__ = "Bytes charged to this process (Linux: /proc/self/smaps_rollup)."

    ChurnResult = collections.namedtuple("ChurnResult", _fields("hl_churn_result"))
    ChurnResult.__doc__ = "What Heap.churn() did: bytes and objects allocated, cycles, pacing."


def footprint() -> Footprint:
    """This process's footprint now: rss, anonymous, lazyfree, swap, phys_footprint."""
    f = ffi.new("hl_footprint *")
    if lib.hl_footprint_get(f) != lib.HL_OK:
        raise Error("footprint: cannot read /proc/self/smaps_rollup")
    return _tuple_of(Footprint, f)


class Stats:
    """The heap's counters (names from HL_STATS in heaplab.h): attribute access
    and as_dict()."""

    __slots__ = ("_values",)

    def __init__(self, values: Dict[str, int]) -> None:
        object.__setattr__(self, "_values", values)

    def __getattr__(self, name: str) -> int:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"Stats has no field {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        raise AttributeError("Stats is read-only")

    def as_dict(self) -> Dict[str, int]:
        """The counters as a new dict: name -> value."""
        return dict(self._values)

    def __iter__(self) -> Iterator[Tuple[str, int]]:
        return iter(self._values.items())

    def __repr__(self) -> str:
        keys = ("cycles", "major_sweeps", "total_pages", "free_pool_pages", "released_pool_pages",
                "released_pages", "small_live_bytes", "large_live_bytes")
        return "Stats(" + ", ".join(f"{k}={self._values[k]}" for k in keys) + ", ...)"


class Event:
    """One structured record of the heap's event ring: kind, cycle, time_ns and
    the kind's own fields (names from HL_EVENTS in heaplab.h)."""

    __slots__ = ("kind", "cycle", "time_ns", "fields")

    kind: str
    cycle: int
    time_ns: int
    fields: Dict[str, int]

    def __init__(self, kind: str, cycle: int, time_ns: int, fields: Dict[str, int]) -> None:
        self.kind, self.cycle, self.time_ns, self.fields = kind, cycle, time_ns, fields

    def __getattr__(self, name: str) -> int:
        try:
            return self.fields[name]
        except KeyError:
            raise AttributeError(f"{self.kind} event has no field {name!r}") from None

    def as_dict(self) -> Dict[str, Any]:
        """kind, cycle, time_ns and the kind's fields as one dict."""
        return {"kind": self.kind, "cycle": self.cycle, "time_ns": self.time_ns, **self.fields}

    def __repr__(self):
        f = ", ".join(f"{k}={v}" for k, v in self.fields.items())
        return f"Event({self.kind}, cycle={self.cycle}, {f})"


# ---- options ------------------------------------------------------------------------

def _build_options(kwargs: Mapping[str, Any]) -> Any:
    opts = ffi.new("hl_options *")
    err = ffi.new("char[256]")
    lib.hl_options_defaults(opts)
    rc = lib.hl_options_from_env(opts, err, 256)
    if rc:
        raise InvalidArgument(_s(err))
    for name, value in kwargs.items():
        spec = _OPTIONS.get(name)
        if spec is None:
            raise UnknownOption(f"Heap() got an unknown option {name!r}; options are: "
                                + ", ".join(sorted(_OPTIONS)))
        kind = spec["kind"]
        if isinstance(value, str):
            rc = lib.hl_options_set(opts, name.encode(), value.encode(), err, 256)
        elif kind == "bool":
            if not isinstance(value, (bool, int)) or value not in (0, 1):
                raise TypeError(f"option {name}: expected a bool, got {value!r}")
            rc = lib.hl_options_set_int(opts, name.encode(), int(value), err, 256)
        elif kind == "enum":
            raise TypeError(f"option {name}: expected one of {'|'.join(spec['choices'])} "
                            f"as a string, got {value!r}")
        else:
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"option {name}: expected an integer, got {type(value).__name__} {value!r}")
            if not -(1 << 63) <= value < (1 << 63):
                raise InvalidArgument(f"option {name}: {value} is out of range; expected an integer "
                                      f"in [{spec['min']}, {spec['max']}]")
            rc = lib.hl_options_set_int(opts, name.encode(), value, err, 256)
        if rc:
            _raise(rc, _s(err))
    rc = lib.hl_options_validate(opts, err, 256)
    if rc:
        _raise(rc, _s(err))
    return opts


def _options_dict(opts: Any) -> Dict[str, Any]:
    out = {}
    for name, spec in _OPTIONS.items():
        v = getattr(opts, name)
        if spec["kind"] == "bool":
            v = bool(v)
        elif spec["kind"] == "enum":
            v = spec["choices"][v]
        out[name] = v
    return out


# ---- argument checking ---------------------------------------------------------------

def _uint(name: str, value: Any, limit: Optional[int] = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < 0:
        raise InvalidArgument(f"{name} must be >= 0, got {value}")
    if limit is not None and value > limit:
        raise InvalidArgument(f"{name} {value} exceeds the maximum of {limit}")
    if value >= 1 << 64:
        raise InvalidArgument(f"{name} {value} does not fit in 64 bits")
    return value


# ---- heaps ------------------------------------------------------------------------------

class Heap:
    """A heaplab heap.  Keyword arguments are options (see heaplab.options());
    HEAPLAB_<NAME> environment variables change the defaults.

    Unknown option -> TypeError; bad value -> ValueError naming the option and
    its allowed range.  Use as a context manager or call close()."""

    def __init__(self, **options: Unpack[HeapOptions]) -> None:
        opts = _build_options(options)
        out = ffi.new("hl_heap **")
        err = ffi.new("char[256]")
        rc = lib.hl_heap_new(opts, out, err, 256)
        if rc:
            _raise(rc, _s(err))
        self._ptr = out[0]
        self._options = _options_dict(opts)
        self._manual = self._options["mode"] == "manual"
        # close() waits for calls in flight (other threads) to finish
        self._cv = threading.Condition()
        self._active = 0
        self._closed = False

    # -- plumbing --
    def _enter(self) -> Any:
        with self._cv:
            if self._closed:
                raise HeapClosed("the heap is closed")
            self._active += 1
        return self._ptr

    def _exit(self) -> None:
        with self._cv:
            self._active -= 1
            if self._active == 0:
                self._cv.notify_all()

    def _check(self, rc: int) -> None:
        if rc:
            _raise(rc, _s(lib.hl_heap_error(self._ptr)))

    def _call(self, fn: Any, *args: Any) -> None:
        p = self._enter()
        try:
            self._check(fn(p, *args))
        finally:
            self._exit()

    # -- lifecycle --
    def close(self) -> None:
        """Free the heap: every object and handle is gone.  Idempotent."""
        with self._cv:
            if self._closed:
                return
            self._closed = True
            while self._active:
                self._cv.wait()
            ptr, self._ptr = self._ptr, ffi.NULL
        lib.hl_heap_free(ptr)

    @property
    def closed(self) -> bool:
        """True once close() ran."""
        return self._closed

    def __enter__(self) -> Heap:
        if self._closed:
            raise HeapClosed("the heap is closed")
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        if self._closed:
            return "<heaplab.Heap closed>"
        s = self.stats()
        return (f"<heaplab.Heap {self._options['mode']} pages={s.total_pages} "
                f"free={s.free_pool_pages} released={s.released_pool_pages} cycles={s.cycles}>")

    @property
    def options(self) -> Dict[str, Any]:
        """The effective options (defaults, environment, arguments)."""
        return dict(self._options)

    # -- objects --
    def alloc(self, size: int, refs: int = 0) -> Ref:
        """A new object with `size` payload bytes and `refs` empty slots, as a Ref."""
        _uint("size", size, MAX_SIZE)
        _uint("refs", refs, MAX_REFS)
        out = ffi.new("hl_ref *")
        self._call(lib.hl_alloc, size, refs, out)
        return Ref(self, out[0])

    def fill(self, total_bytes: int, size: int, refs: int = 0, stride: int = 1) -> Ref:
        """Bulk phase in C (GIL released): objects of `size` until total_bytes,
        payload touched, reachable from the returned Ref (one slot per page the
        objects landed on, each holding that page's index).  stride=N keeps
        only every Nth object (the rest are garbage at once), so the pages come
        out partially live."""
        _uint("total_bytes", total_bytes, MAX_SIZE)
        _uint("size", size, MAX_SIZE)
        _uint("refs", refs, MAX_REFS)
        _uint("stride", stride)
        out = ffi.new("hl_ref *")
        self._call(lib.hl_fill_stride, total_bytes, size, refs, stride, out)
        return Ref(self, out[0])

    def collect(self, cycles: int = 1, major: Optional[bool] = None) -> None:
        """Synchronous full collection(s); major=True forces a major sweep,
        False forbids it, None lets the policy decide."""
        _uint("cycles", cycles)
        if not 1 <= cycles <= 1_000_000:
            raise InvalidArgument(f"collect: cycles {cycles} out of range [1, 1000000]")
        if major not in (None, True, False):
            raise TypeError(f"collect: major must be None, True or False, not {major!r}")
        self._call(lib.hl_collect, cycles, -1 if major is None else int(major))

    def trim(self) -> None:
        """Run a trim pass now (release beyond the warm cache, upgrades)."""
        self._call(lib.hl_trim)

    def memory_pressure(self) -> None:
        """Tell the heap the OS is under pressure: the next cycle sweeps major."""
        self._call(lib.hl_memory_pressure)

    def check(self) -> None:
        """Check every heap invariant; raises heaplab.CheckFailed naming the first
        one that does not hold."""
        self._call(lib.hl_heap_check)

    def churn(self, duration_s: float, size: int, live_bytes: int,
              rate_bytes_per_s: Optional[float] = None) -> ChurnResult:
        """Keep a ring of live_bytes of objects of `size` alive while allocating
        at rate_bytes_per_s (None = as fast as possible) for duration_s."""
        if not isinstance(duration_s, (int, float)) or isinstance(duration_s, bool):
            raise TypeError("churn: duration_s must be a number")
        _uint("size", size, MAX_SIZE)
        _uint("live_bytes", live_bytes)
        rate = 0.0 if rate_bytes_per_s is None else rate_bytes_per_s
        if not isinstance(rate, (int, float)) or isinstance(rate, bool) or rate < 0:
            raise InvalidArgument(f"churn: rate_bytes_per_s must be a positive number or None, "
                                  f"got {rate_bytes_per_s!r}")
        out = ffi.new("hl_churn_result *")
        self._call(lib.hl_churn, float(duration_s), size, live_bytes, float(rate), out)
        return _tuple_of(ChurnResult, out)

    # -- telemetry --
    def stats(self) -> Stats:
        """The heap's counters now (names: heaplab.stat_names())."""
        out = ffi.new("hl_stats *")
        self._call(lib.hl_stats_get, out)
        return Stats({name: getattr(out, name) for name in _STAT_NAMES})

    def events(self, clear: bool = True) -> List[Event]:
        """The structured events recorded since the last read (clear=True
        consumes them)."""
        cap = self._options["events_capacity"]
        buf = ffi.new("hl_event[]", cap)
        n = ffi.new("size_t *")
        self._call(lib.hl_events_read, buf, cap, n, int(bool(clear)))
        out = []
        for i in range(n[0]):
            e = buf[i]
            name, fields = _EVENTS[e.kind]
            out.append(Event(name, e.cycle, e.time_ns,
                             {f: e.fields[k] for k, f in enumerate(fields) if k < e.nfields}))
        return out

    def resident_bytes(self) -> int:
        """Bytes of the heap's own reservation resident now (mincore)."""
        out = ffi.new("uint64_t *")
        self._call(lib.hl_resident_bytes, out)
        return out[0]

    def vma_count(self) -> int:
        """VMAs of /proc/self/maps that overlap the heap's reservation."""
        out = ffi.new("uint64_t *")
        self._call(lib.hl_vma_count, out)
        return out[0]

    def range(self) -> Tuple[int, int]:
        """(base address, reserved bytes) of the heap's reservation."""
        base, size = ffi.new("uint64_t *"), ffi.new("uint64_t *")
        self._call(lib.hl_heap_range, base, size)
        return base[0], size[0]

    # -- fault injection --
    def inject(self, site: str, mode: str, n: int = 0, errno: Union[str, int] = "ENOMEM") -> None:
        """Arm a fault schedule: site in heaplab.fault_sites(), mode in
        heaplab.fault_modes() ('first' N calls, 'always', 'every' Nth call,
        'sticky' on page N, 'off'), errno by name or number."""
        if site not in _SITES:
            raise InvalidArgument(f"inject: unknown site {site!r}; sites are: {', '.join(_SITES)}")
        if mode not in _MODES:
            raise InvalidArgument(f"inject: unknown mode {mode!r}; modes are: {', '.join(_MODES)}")
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"inject: n must be an int, not {type(n).__name__}")
        if isinstance(errno, str):
            e = lib.hl_errno_index(errno.encode())
            if e < 0:
                raise InvalidArgument(f"inject: unknown errno {errno!r}")
        elif isinstance(errno, int) and not isinstance(errno, bool):
            e = errno
        else:
            raise TypeError(f"inject: errno must be a name or an int, not {errno!r}")
        if not -(1 << 63) <= n < (1 << 63):
            raise InvalidArgument(f"inject: n {n} does not fit in 64 bits")
        self._call(lib.hl_inject, _SITES.index(site), _MODES.index(mode), n, e)

    @property
    def faults(self) -> Dict[str, Dict[str, Any]]:
        """What is armed at each site and how often it fired."""
        buf = ffi.new("hl_fault_state[]", len(_SITES))
        n = ffi.new("size_t *")
        self._call(lib.hl_faults_get, buf, len(_SITES), n)
        out = {}
        for i in range(n[0]):
            f = buf[i]
            out[_SITES[f.site]] = {"mode": _MODES[f.mode], "n": f.arg,
                                   "errno": _s(lib.hl_errno_name(f.err)) if f.err else None,
                                   "calls": f.calls, "fired": f.fired}
        return out


def _document_options(cls: type) -> None:
    """Heap's signature and docstring list every option, from OPTION_TABLE
    (generated at build time from heaplab.h's HL_OPTIONS): help(heaplab.Heap)
    and inspect.signature show them all, with their C defaults."""
    types = {"bool": "bool", "int": "int", "bytes": "int | str"}
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    lines = ["", "", "Options (name: type = C default -- allowed values; description):", ""]
    for name, kind, default, lo, hi, choices, desc in OPTION_TABLE:
        ann = " | ".join(repr(c) for c in choices) if kind == "enum" else types[kind]
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                        annotation=ann))
        allowed = "|".join(choices) if kind == "enum" else (
            "True|False" if kind == "bool" else f"{lo}..{hi}")
        lines.append(f"    {name}: {ann} = {default!r} -- {allowed}")
        lines.append(f"        {desc}")
    init = cls.__init__  # type: ignore[misc]
    init.__signature__ = inspect.Signature(params, return_annotation=None)
    cls.__doc__ = (cls.__doc__ or "") + "\n".join(lines)


_document_options(Heap)


class Ref:
    """A root: while this Ref lives its object survives.  Slots are 0-based;
    o[i] = other_ref_or_None; o[i] -> Ref or None.  release(), `del`, or a
    `with` block drop the root (idempotent)."""

    __slots__ = ("_heap", "_ref", "__weakref__")

    def __init__(self, heap: Heap, ref: Any) -> None:
        self._heap = heap
        self._ref = ref

    def _h(self) -> Heap:
        if self._ref == 0:
            raise StaleRef("this Ref was released")
        return self._heap

    def _info(self) -> Any:
        h = self._h()
        out = ffi.new("hl_object_info *")
        h._call(lib.hl_ref_info, self._ref, out)
        return out

    @property
    def heap(self) -> Heap:
        """The heap the object lives in."""
        return self._heap

    @property
    def size(self) -> int:
        """Payload bytes."""
        return self._info().size

    @property
    def address(self) -> int:
        """The payload's address."""
        return self._info().address

    @property
    def large(self) -> bool:
        """True when the object is on the large path (size > small_max)."""
        return bool(self._info().large)

    @property
    def released(self) -> bool:
        """True once this root was dropped (release(), del, the end of a with block)."""
        return self._ref == 0

    def __len__(self) -> int:
        return self._info().refs

    def _index(self, i: int) -> int:
        if isinstance(i, bool) or not isinstance(i, int):
            raise TypeError(f"slot index must be an int, not {type(i).__name__}")
        n = len(self)
        j = i + n if i < 0 else i
        if not 0 <= j < n:
            raise SlotIndexError(f"slot {i} out of range for an object with {n} slots")
        return j

    def __getitem__(self, i: int) -> Optional[Ref]:
        j = self._index(i)
        out = ffi.new("hl_ref *")
        self._heap._call(lib.hl_ref_get, self._ref, j, out)
        return Ref(self._heap, out[0]) if out[0] else None

    def __setitem__(self, i: int, value: Optional[Ref]) -> None:
        j = self._index(i)
        if value is None:
            v = 0
        elif isinstance(value, Ref):
            if value._heap is not self._heap:
                raise InvalidArgument("slot value belongs to another heap")
            value._h()
            v = value._ref
        else:
            raise TypeError(f"a slot holds a Ref or None, not {type(value).__name__}")
        self._heap._call(lib.hl_ref_set, self._ref, j, v)

    def __iter__(self) -> Iterator[Optional[Ref]]:
        for i in range(len(self)):
            yield self[i]

    def dup(self) -> Ref:
        """A second, independent root to the same object."""
        out = ffi.new("hl_ref *")
        self._h()._call(lib.hl_ref_dup, self._ref, out)
        return Ref(self._heap, out[0])

    def read(self, offset: int = 0, length: Optional[int] = None) -> bytes:
        """Copy payload bytes out."""
        size = self.size
        _uint("offset", offset)
        length = size - offset if length is None else _uint("length", length)
        buf = ffi.new("char[]", max(length, 1))
        self._heap._call(lib.hl_ref_read, self._ref, offset, buf, length)
        return bytes(ffi.buffer(buf, length))

    def write(self, data: Union[bytes, bytearray, memoryview], offset: int = 0) -> None:
        """Copy bytes into the payload."""
        data = bytes(data)
        _uint("offset", offset)
        self._h()._call(lib.hl_ref_write, self._ref, offset, data, len(data))

    def checksum(self) -> Tuple[int, int]:
        """(checksum, objects) over the payloads of everything reachable from
        this object; independent of addresses and traversal order."""
        s, n = ffi.new("uint64_t *"), ffi.new("uint64_t *")
        self._h()._call(lib.hl_ref_checksum, self._ref, s, n)
        return s[0], n[0]

    def release(self) -> None:
        """Drop this root (idempotent; a no-op once the heap is closed)."""
        ref, self._ref = self._ref, 0
        if ref and not self._heap._closed:
            try:
                self._heap._call(lib.hl_ref_release, ref)
            except HeapClosed:
                pass

    def __enter__(self) -> Ref:
        self._h()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:
            pass

    def _object(self) -> int:
        return self._info().object

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Ref):
            return NotImplemented
        return other._heap is self._heap and other._object() == self._object()

    def __hash__(self) -> int:
        return hash((id(self._heap), self._object()))

    def __repr__(self) -> str:
        if self._ref == 0:
            return "<heaplab.Ref released>"
        if self._heap._closed:
            return "<heaplab.Ref of a closed heap>"
        i = self._info()
        return f"<heaplab.Ref size={i.size} refs={i.refs} at 0x{i.address:x}{' large' if i.large else ''}>"


class Sampler:
    """A C thread sampling this process's footprint every interval_s: the peak,
    the lowest value after mark(), and a time series.  Use as a context
    manager; summary() and series() can be read at any time."""

    def __init__(self, interval_s: float = 0.002, capacity: int = 65536) -> None:
        out = ffi.new("hl_sampler **")
        rc = lib.hl_sampler_start(out, int(interval_s * 1e6), capacity)
        if rc:
            _raise(rc, f"Sampler: cannot start (interval_s={interval_s}, capacity={capacity}; "
                       "interval 100 us..10 s, capacity 16..2^24)")
        self._s = out[0]

    def _p(self) -> Any:
        if self._s == ffi.NULL:
            raise Error("the sampler is stopped")
        return self._s

    def mark(self) -> None:
        """Start the lowest-after-mark window now (summary()'s min_phys_after_mark)."""
        lib.hl_sampler_mark(self._p())

    def reset(self) -> None:
        """Start a new summary window: peak, lowest and mark from now on."""
        lib.hl_sampler_reset(self._p())

    def summary(self) -> Dict[str, int]:
        """The window's figures: samples, max_phys, min_phys, max_rss,
        min_phys_after_mark... (names of hl_sampler_summary)."""
        o = ffi.new("hl_sampler_summary *")
        lib.hl_sampler_summary_get(self._p(), o)
        return {f: getattr(o, f) for f in _fields("hl_sampler_summary")}

    def series(self, start: int = 0) -> List[Tuple[int, int, int, int]]:
        """[(t_ns, phys_footprint, rss, lazyfree), ...] from stored sample `start` on."""
        out = []
        buf = ffi.new("hl_sample[]", 4096)
        n = ffi.new("size_t *")
        while True:
            lib.hl_sampler_read(self._p(), start, buf, 4096, n)
            out.extend((buf[i].t_ns, buf[i].phys_footprint, buf[i].rss, buf[i].lazyfree)
                       for i in range(n[0]))
            if n[0] < 4096:
                return out
            start += n[0]

    def stop(self) -> None:
        """Stop the sampling thread (idempotent); the object is unusable after."""
        s, self._s = self._s, ffi.NULL
        if s != ffi.NULL:
            lib.hl_sampler_stop(s)

    def __enter__(self) -> Sampler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __del__(self) -> None:
        self.stop()
