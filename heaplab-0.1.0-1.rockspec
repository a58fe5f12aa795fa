-- luarocks make: builds and installs the Lua module (require "heaplab")
-- against the system's Lua 5.4, from this source tree -- no Meson needed:
-- `luarocks --lua-version=5.4 make` (docs/lua.md, "Install with LuaRocks").
-- The C sources are listed in bindings/lua/rock.mk.
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
   -- bindings/lua/rock.mk builds the module into build-luarocks/ (never beside
   -- the sources: a heaplab.so at the top of a checkout would shadow the
   -- Python package there) with the variables below; LuaRocks installs it
   type = "make",
   makefile = "bindings/lua/rock.mk",
   build_variables = {
      CC = "$(CC)",
      CFLAGS = "$(CFLAGS)",
      LIBFLAG = "$(LIBFLAG)",
      LUA_INCDIR = "$(LUA_INCDIR)",
   },
   install_pass = false,
   install = {
      lib = { heaplab = "build-luarocks/heaplab.so" },
   },
}
