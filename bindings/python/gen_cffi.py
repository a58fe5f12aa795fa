"""Generate the CFFI extension's C source from the one public header.

The cdef is core/include/heaplab.h run through the C preprocessor with
HL_CDEF defined (which drops the system includes), so the X-macro lists of
options, stats, events and fault sites expand into the plain declarations
CFFI parses: nothing is typed a second time.  Meson runs this at build time
(a custom_target) and compiles the result with py.extension_module.

The binding's own C-level owners (owners.h, owners.c: the heap and the
roots freed from cffi's deallocation, in C) are declared and compiled in
beside it.

usage: gen_cffi.py CC HEADER OUT_C [OWNERS_H OWNERS_C]
"""
import shlex
import subprocess
import sys

import cffi


def cdef_from_text(cc, text):
    """Declarations with their comments removed (the preprocessor's work)."""
    cmd = shlex.split(cc) + ["-E", "-P", "-x", "c", "-"]
    return subprocess.run(cmd, input=text, check=True, capture_output=True, text=True).stdout


def cdef_from_header(cc, header):
    cmd = shlex.split(cc) + ["-E", "-P", "-DHL_CDEF", "-x", "c", header]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return out


def main():
    cc, header, out_c = sys.argv[1:4]
    owners = sys.argv[4:6]
    ffi = cffi.FFI()
    cdef = cdef_from_header(cc, header)
    source = '#include "heaplab.h"\n'
    if owners:
        with open(owners[0]) as h, open(owners[1]) as c:
            owners_h, owners_c = h.read(), c.read()
        cdef += "\n" + cdef_from_text(cc, owners_h)
        source += owners_h + "\n" + owners_c
    ffi.cdef(cdef)
    ffi.set_source("heaplab._heaplab", source)
    ffi.emit_c_code(out_c)


if __name__ == "__main__":
    main()
