-- luarocks make: builds and installs the Lua module (require "heaplab")
-- against the system's Lua 5.4, from this source tree -- no Meson needed.
-- docs/lua.md, "Install with LuaRocks".  The C sources are listed by hand:
-- tests/lua/luarocks_make.py fails when they differ from core/meson.build's
-- and bindings/lua/meson.build's.
rockspec_format = "3.0"
package = "heaplab"
version = "0.1.0-1"
source = {
   url = "git+file:///dev/null", -- not published: `luarocks make` in a checkout only
}
description = {
   summary = "A garbage-collected heap and page allocator for memory experiments",
   detailed = [[
heaplab is a garbage-collected heap and page allocator in C whose policies for
returning memory to the operating system are switchable, built for experiments
on what the OS really charges a process (RSS, phys_footprint, VMAs).  This rock
is its Lua 5.4 binding: heaps, object handles, fault injection, events and a
footprint sampler.
]],
   license = "MIT",
   labels = { "memory", "allocator", "gc", "benchmark" },
}
dependencies = {
   "lua >= 5.4, < 5.5",
}
build = {
   type = "builtin",
   modules = {
      heaplab = {
         sources = {
            "bindings/lua/heaplab_lua.c",
            "bindings/lua/heap.c",
            "bindings/lua/object.c",
            "bindings/lua/sampler.c",
            "bindings/lua/region.c",
            "bindings/lua/args.c",
            "bindings/lua/show.c",
            "core/src/prim/prim_linux.c",
            "core/src/prim/syscall.c",
            "core/src/pages/pages.c",
            "core/src/check/check.c",
            "core/src/small/small.c",
            "core/src/large/large.c",
            "core/src/gc/alloc.c",
            "core/src/gc/mark.c",
            "core/src/gc/markers.c",
            "core/src/gc/cycle.c",
            "core/src/gc/evacuate.c",
            "core/src/gc/barrier.c",
            "core/src/gc/roots.c",
            "core/src/gc/collector.c",
            "core/src/release/release.c",
            "core/src/release/reuse.c",
            "core/src/release/subpage.c",
            "core/src/release/prefault.c",
            "core/src/manual/manual.c",
            "core/src/workload/fill.c",
            "core/src/workload/checksum.c",
            "core/src/workload/churn.c",
            "core/src/workload/thin.c",
            "core/src/telemetry/options.c",
            "core/src/telemetry/telemetry.c",
            "core/src/telemetry/sampler.c",
            "core/src/util/ptrset.c",
            "core/src/registry.c",
            "core/src/heap.c",
         },
         -- the version, as Meson's generated heaplab_version.h has it (no
         -- configure step here): tests/lua/luarocks_make.py checks these
         -- against meson.build
         defines = { "_GNU_SOURCE", "NDEBUG", "HL_VERSION_MAJOR=0", "HL_VERSION_MINOR=1",
                     "HL_VERSION_PATCH=0" },
         incdirs = { "core/include", "core/src" },
         libraries = { "pthread", "m" },
      },
   },
}
