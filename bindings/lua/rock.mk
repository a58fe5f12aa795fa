# What `luarocks make` runs (heaplab-0.1.0-1.rockspec, build.type "make"),
# from the top of the tree: the Lua module, compiled with the variables
# LuaRocks passes (CC, CFLAGS, LIBFLAG, LUA_INCDIR), into build-luarocks/ --
# never beside the sources: a heaplab.so at the top of a checkout is what
# Python imports as `heaplab` from there (an extension module of that name),
# and every `python3 -m heaplab ...` or `python3 -m pytest experiments` run
# from the top of the checkout would then fail.  LuaRocks installs
# build-luarocks/heaplab.so itself (the rockspec's build.install).
#
# The C sources are listed by hand: tests/lua/luarocks_make.py fails when they
# differ from core/meson.build's and bindings/lua/meson.build's, and when the
# version below differs from meson.build's.
CC ?= cc
CFLAGS ?= -O2 -fPIC
LIBFLAG ?= -shared
LUA_INCDIR ?= /usr/include/lua5.4
OUT ?= build-luarocks

SOURCES = \
  bindings/lua/heaplab_lua.c \
  bindings/lua/heap.c \
  bindings/lua/object.c \
  bindings/lua/sampler.c \
  bindings/lua/region.c \
  bindings/lua/args.c \
  bindings/lua/show.c \
  core/src/prim/prim_linux.c \
  core/src/prim/syscall.c \
  core/src/pages/pages.c \
  core/src/check/check.c \
  core/src/small/small.c \
  core/src/large/large.c \
  core/src/gc/alloc.c \
  core/src/gc/mark.c \
  core/src/gc/markers.c \
  core/src/gc/cycle.c \
  core/src/gc/evacuate.c \
  core/src/gc/barrier.c \
  core/src/gc/roots.c \
  core/src/gc/collector.c \
  core/src/release/release.c \
  core/src/release/reuse.c \
  core/src/release/subpage.c \
  core/src/release/prefault.c \
  core/src/manual/manual.c \
  core/src/workload/fill.c \
  core/src/workload/checksum.c \
  core/src/workload/churn.c \
  core/src/workload/thin.c \
  core/src/telemetry/options.c \
  core/src/telemetry/telemetry.c \
  core/src/telemetry/sampler.c \
  core/src/util/ptrset.c \
  core/src/registry.c \
  core/src/heap.c

# the version, as Meson's generated heaplab_version.h has it (no configure step here)
DEFINES = -D_GNU_SOURCE -DNDEBUG -DHL_VERSION_MAJOR=0 -DHL_VERSION_MINOR=1 -DHL_VERSION_PATCH=0
INCLUDES = -Icore/include -Icore/src -I$(LUA_INCDIR)
# the module exports luaopen_heaplab only, as the Meson build's does
MAP = bindings/lua/heaplab_lua.map

OBJECTS = $(SOURCES:%.c=$(OUT)/%.o)

$(OUT)/heaplab.so: $(OBJECTS) $(MAP)
	$(CC) $(LIBFLAG) -o $@ $(OBJECTS) -Wl,--version-script=$(MAP) -lpthread -lm

$(OUT)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DEFINES) $(INCLUDES) -MMD -MP -c $< -o $@

-include $(OBJECTS:.o=.d)
