"""Generate the CFFI extension's C source from the one public header.

The cdef is core/include/heaplab.h run through the C preprocessor with
HL_CDEF defined (which drops the system includes), so the X-macro lists of
options, stats, events and fault sites expand into the plain declarations
CFFI parses: nothing is typed a second time.  Meson runs this at build time
(a custom_target) and compiles the result with py.extension_module.

usage: gen_cffi.py CC HEADER OUT_C
"""
import shlex
import subprocess
import sys

import cffi


def cdef_from_header(cc, header):
    cmd = shlex.split(cc) + ["-E", "-P", "-DHL_CDEF", "-x", "c", header]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return out


def main():
    cc, header, out_c = sys.argv[1:4]
    ffi = cffi.FFI()
    ffi.cdef(cdef_from_header(cc, header))
    ffi.set_source("heaplab._heaplab", '#include "heaplab.h"')
    ffi.emit_c_code(out_c)


if __name__ == "__main__":
    main()
