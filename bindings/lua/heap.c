/*
 * heap.c -- heaplab.heap: the heap userdata and its methods.
 *
 * An hl_heap * that is NULL once closed.
 *
 * A method reads the hl_heap * (heap_open) only after the last thing it
 * allocates on the Lua side before its C call: an allocation may run a
 * finalizer, and a finalizer may close the heap (issue 16: h:alloc under an
 * aggressive GC freed the heap between reading the pointer and using it).  Created closed, opened only after
 * hl_heap_new succeeds; one finalizer (heap_close) serves __gc, __close and
 * h:close(), and is idempotent.  A heap's handles (object.c) keep the heap
 * userdata alive through their user value, and see it closed -- never a
 * dangling hl_heap * -- after h:close().
 */
/*** @submodule heaplab */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lhl.h"

/* The string at idx has no NUL inside (what C will read is all of it). */
static int nul_free(lua_State *L, int idx) {
  size_t len = 0;
  const char *s = lua_tolstring(L, idx, &len);
  return s && strlen(s) == len;
}

/* The heap userdata at idx; `fn` names the method for the error. */
static lheap *heap_ud(lua_State *L, int idx, const char *fn) {
  lheap *lh = lhl_heap_at(L, idx);
  if (!lh) {
    char b[80];
    lhl_fail(L, fn, "expected a heap as self (call it with ':'), got %s",
             lhl_shown(L, idx, b, sizeof b));
  }
  return lh;
}

lheap *lhl_uv_heap(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  lua_getiuservalue(L, idx, 1);
  lheap *lh = lhl_heap_at(L, -1);
  lua_pop(L, 1);
  return lh;
}

/* An open heap at idx, or an error saying it is closed. */
static hl_heap *heap_open(lua_State *L, int idx, const char *fn) {
  lheap *lh = heap_ud(L, idx, fn);
  if (!lh->h) lhl_fail(L, fn, "the heap is closed");
  return lh->h;
}

/* " (a choice of collector: collector = \"background\")" when `name` is no
 * option but a choice of an enum option (heaplab.heap{background = true}),
 * else "". */
static const char *choice_hint(lua_State *L, const char *name, char *buf, size_t len) {
  (void)L;
  for (int i = 0; i < hl_option_count(); i++) {
    hl_option_info info;
    if (hl_option_info_get(i, &info)) continue;
    if (strcmp(info.name, name) == 0) return ""; /* an option: its value was wrong */
  }
  for (int i = 0; i < hl_option_count(); i++) {
    hl_option_info info;
    if (hl_option_info_get(i, &info) || info.kind != HL_OPT_ENUM) continue;
    for (int64_t k = info.min; k <= info.max; k++) {
      const char *c = hl_option_choice(i, k);
      if (c && strcmp(c, name) == 0) {
        snprintf(buf, len, " ('%s' is a choice of %s: %s = \"%s\")", name, info.name, info.name,
                 name);
        return buf;
      }
    }
  }
  return "";
}

/* Build hl_options from defaults, HEAPLAB_* environment, then the table at
 * idx.  The C library converts and checks every value (one message for
 * every language); this only says what Lua type each value has. */
static void build_options(lua_State *L, int idx, hl_options *o) {
  static const char fn[] = "heaplab.heap";
  char err[1024], b[80], big[320]; /* (big: the decimal of a double, at most 309 digits) */
  hl_options_defaults(o);
  if (!lua_isnoneornil(L, idx) && !lua_istable(L, idx))
    lhl_fail(L, fn, "argument 1 must be a table of options, got %s", lhl_shown(L, idx, b, sizeof b));
  if (!lua_isnoneornil(L, idx)) {
    /* read as Lua code reads it: __pairs, and __index for each option */
    const char *all[128];
    size_t nall = 0;
    for (int i = 0; i < hl_option_count() && nall < sizeof all / sizeof all[0]; i++) {
      hl_option_info info;
      hl_option_info_get(i, &info);
      all[nall++] = info.name;
    }
    idx = lhl_plain_table(L, idx, all, nall);
  }
  /* the names set explicitly: their HEAPLAB_<NAME> variables are overridden */
  const char *names[128];
  size_t n = 0;
  if (!lua_isnoneornil(L, idx)) {
    lua_pushnil(L);
    while (lua_next(L, idx)) {
      if (lua_type(L, -2) != LUA_TSTRING)
        lhl_fail(L, fn, "option names are strings, got %s as a key", lhl_shown(L, -2, b, sizeof b));
      /* C reads a name up to its first NUL: "warm_pages\0junk" set warm_pages */
      if (!nul_free(L, -2))
        lhl_fail(L, fn, "unknown option '%s...': an option name has no NUL byte",
                 lua_tostring(L, -2));
      if (n < sizeof names / sizeof names[0]) names[n++] = lua_tostring(L, -2);
      lua_pop(L, 1);
    }
  }
  if (!lua_isnoneornil(L, idx)) {
    lua_pushnil(L);
    while (lua_next(L, idx)) {
      /* key at -2, value at -1 */
      const char *name = lua_tostring(L, -2);
      int type = HL_VALUE_OTHER, ok = 0;
      int64_t ival = 0;
      size_t len = 0;
      const char *sval = NULL;
      switch (lua_type(L, -1)) {
      case LUA_TBOOLEAN:
        type = HL_VALUE_BOOL;
        ival = lua_toboolean(L, -1);
        break;
      case LUA_TSTRING:
        type = HL_VALUE_STRING;
        sval = lua_tolstring(L, -1, &len);
        break;
      case LUA_TNUMBER:
        ival = (int64_t)lua_tointegerx(L, -1, &ok);
        if (ok) {
          type = HL_VALUE_INT;
        } else if (lhl_beyond_int64(L, -1)) {
          /* an integer too big (1e300, 2^63), as in every method's integer
           * argument (docs/lua.md): its exact decimal, which C says is out
           * of range as it says Python's 1 << 64 is -- it said "got the
           * number 1e+300", a type error (h42left, session 42) */
          snprintf(big, sizeof big, "%.0f", (double)lua_tonumber(L, -1));
          type = HL_VALUE_STRING;
          sval = big;
          len = strlen(big);
          /* ...but of a boolean or a choice no integer is a value, of any
           * size: the wrong type, as 2^62's "expected a boolean (...), got
           * the integer 4611686018427387904" and Python's 1 << 63 -- handed
           * on as a string it was "'9223372036854775808' is not a boolean",
           * a string the caller never wrote (session 43) */
          hl_option_info info;
          int at = hl_option_index(name);
          if (at >= 0 && hl_option_info_get(at, &info) == HL_OK &&
              (info.kind == HL_OPT_BOOL || info.kind == HL_OPT_ENUM)) {
            char digits[320];
            snprintf(digits, sizeof digits, "%s", big);
            /* (1e300's 301 digits shortened as C shortens a string it shows) */
            snprintf(big, sizeof big, "the integer %.60s%s", digits,
                     strlen(digits) > 60 ? "..." : "");
            type = HL_VALUE_OTHER;
            len = strlen(big);
          }
        } else {
          char f[40];
          snprintf(b, sizeof b, "the number %s", lhl_float((double)lua_tonumber(L, -1), f, sizeof f));
          sval = b;
        }
        break;
      default: sval = lhl_shown(L, -1, b, sizeof b); break;
      }
      if (sval && type == HL_VALUE_OTHER) len = strlen(sval);
      if (hl_options_set_value(o, name, type, ival, sval, len, err, sizeof err))
        lhl_fail(L, fn, "%s%s", err, choice_hint(L, name, b, sizeof b));
      lua_pop(L, 1);
    }
  }
  /* the environment after the explicit options, so that it sees the mode: a
   * manual heap ignores the collector's switches the environment gives
   * (hl_options_from_env_except) */
  if (hl_options_from_env_except(o, names, n, err, sizeof err)) lhl_fail(L, fn, "%s", err);
  if (hl_options_validate(o, err, sizeof err)) lhl_fail(L, fn, "%s", err);
}

/***
Make a heap.  Options start from the defaults, then the `HEAPLAB_NAME` environment
variables, then `options`.
@function heap
@tparam[opt] table options `{name = value}`: a boolean, an integer, or a string the C library
parses ("64k", "true", "lifo"); enum options by choice name (see `options`).  Read as
`pairs` reads it (`__pairs` honoured), an option it lacks looked up through `__index`
@treturn heap
@return nil, message, code when the heap cannot be made (its reservation refused: "ENOMEM")
@raise on an unknown option, a bad value, or a bad `HEAPLAB_*` variable
@usage local h = assert(heaplab.heap{ page_release = true, warm_pages = 64 })
*/
/* heaplab.heap{ option = value, ... } */
int lhl_heap_new(lua_State *L) {
  hl_options o;
  build_options(L, 1, &o);
  lheap *lh = lua_newuserdatauv(L, sizeof *lh, 0);
  lh->tag = LHL_TAG_HEAP;
  lh->h = NULL; /* closed until hl_heap_new succeeds */
  lh->manual = o.mode == HL_MODE_MANUAL;
  lh->events_capacity = o.events_capacity;
  lhl_setmetatable(L, HEAP_MT);
  char err[1024];
  hl_heap *h = NULL;
  int rc = hl_heap_new(&o, &h, err, sizeof err);
  if (rc) {
    char msg[1200];
    snprintf(msg, sizeof msg, "heaplab.heap: %s (%s)", err, hl_error_name(rc));
    if (lhl_is_failure(rc)) return lhl_push_failure(L, msg, rc);
    return luaL_error(L, "%s", msg);
  }
  lh->h = h;
  hl_heap_set_wait_hook(h, lhl_wait_hook, NULL); /* Ctrl-C ends a paced wait */
  /* Lua's collector sees a few bytes of userdata, not what the heap holds
   * (its descriptors, events, first pages: ~100 KiB as soon as it is used),
   * so 3,000 dropped heaps held 925 MiB until collectgarbage().  Tell it:
   * a step as if the heap's cost had been allocated (not when the program
   * stopped the collector: LUA_GCSTEP runs it, finalizers included). */
  if (lua_gc(L, LUA_GCISRUNNING))
    lua_gc(L, LUA_GCSTEP, (int)((o.page_size + o.events_capacity * (int64_t)sizeof(hl_event)) >> 10));
  return 1;
}

/* The one finalizer of a heap: __gc, __close (lhl_finalize) and h:close().
 * Its handles see lh->h == NULL afterwards and refuse to run. */
int lhl_heap_finalize(lua_State *L) {
  lheap *lh = lhl_heap_at(L, 1);
  if (!lh) return 0;
  hl_heap *h = lh->h;
  lh->h = NULL;
  hl_heap_free(h);
  return 0;
}

/***
A collected or manual-mode heap: `heaplab.heap` makes one; `tostring` gives a one-line
summary.  A heap is also closed by its `__gc` and `__close` (`local h <close> = ...`).
@type heap
*/

/***
Free the heap and everything in it now.  Its handles stay valid Lua values; using them is
an error.  Idempotent.
@function heap:close
@treturn boolean true
*/
static int h_close(lua_State *L) {
  heap_ud(L, 1, "h:close");
  lhl_heap_finalize(L);
  lua_pushboolean(L, 1);
  return 1;
}

/***
Is the heap closed?
@function heap:closed
@treturn boolean
*/
/***
The heap's last failure message (hl_heap_error): this thread's last failed
call on the heap the first time it is read, after that the heap's last
failure in any thread -- a background or an allocation's cycle whose
verification failed (verify = true: a verify_failed event and the
verify_failures stat say when), which has no caller to raise in.
@function heap:last_error
@treturn string the message, "" when there was none
@raise on a closed heap
*/
static int h_last_error(lua_State *L) {
  hl_heap *h = heap_open(L, 1, "h:last_error");
  lua_pushstring(L, hl_heap_error(h));
  return 1;
}

static int h_closed(lua_State *L) {
  lua_pushboolean(L, heap_ud(L, 1, "h:closed")->h == NULL);
  return 1;
}

/***
A new object, as a handle that roots it.
@function heap:alloc
@tparam integer size payload bytes
@tparam[opt=0] integer refs empty slots
@treturn object
@return nil, message, code when the heap is out of memory ("ENOMEM")
@raise on bad arguments, a closed heap, or a manual-mode heap ("EMODE")
*/
/* h:alloc(size, refs=0) */
static int h_alloc(lua_State *L) {
  static const char fn[] = "h:alloc";
  heap_ud(L, 1, fn);
  uint64_t size = lhl_arg_checked(L, 2, fn, "size", 0, HL_MAX_SIZE, -1);
  uint64_t refs = lhl_arg_checked(L, 3, fn, "refs", 0, HL_MAX_REFS, 0);
  lobj *o = lhl_obj_new(L, 1); /* (may run a finalizer) */
  hl_heap *h = heap_open(L, 1, fn);
  /* (no handler put in front here: a paced wait puts it there itself, the
   * heap's wait hook -- lhl_wait_hook) */
  int rc = hl_alloc(h, size, refs, &o->ref);
  if (rc) return lhl_result(L, fn, h, rc);
  return 1;
}

/***
A root region of `words` machine words scanned conservatively (E7): any word that
points at an allocated object -- or into one, with the option `conservative_interior`
(the default) -- keeps it and what it refers to alive, as a stale word on a stack does.
The words start zero; see `region`.
@function heap:conservative_region
@tparam integer words
@treturn region
@return nil, message, "ENOMEM" when the words cannot be allocated
@raise on bad arguments, a closed heap, or a manual-mode heap ("EMODE")
@usage local reg = h:conservative_region(64); reg[1] = obj; obj:release()
*/
static int h_conservative_region(lua_State *L) {
  heap_open(L, 1, "h:conservative_region");
  return lhl_region_new(L);
}

/***
The bulk phase in C: objects of `size` bytes until `total_bytes`, payload written, all
reachable from the returned handle (one slot per page).
@function heap:fill
@tparam integer total_bytes
@tparam integer size
@tparam[opt=0] integer refs slots per object
@tparam[opt=1] integer stride keep every stride-th object (the rest are garbage at once: partially live pages)
@treturn object the root
@return nil, message, code when the heap is out of memory ("ENOMEM")
@raise "interrupted" when Ctrl-C stops it (no handle is made; docs/lua.md, Ctrl-C)
*/
/* h:fill(total_bytes, size, refs=0, stride=1) */
static int h_fill(lua_State *L) {
  static const char fn[] = "h:fill";
  heap_ud(L, 1, fn);
  uint64_t total = lhl_arg_checked(L, 2, fn, "total_bytes", 0, HL_MAX_SIZE, -1);
  uint64_t size = lhl_arg_checked(L, 3, fn, "size", 0, HL_MAX_SIZE, -1);
  uint64_t refs = lhl_arg_checked(L, 4, fn, "refs", 0, HL_MAX_REFS, 0);
  uint64_t stride = lhl_arg_checked(L, 5, fn, "stride", 1, HL_FILL_MAX_STRIDE, 1);
  lobj *o = lhl_obj_new(L, 1); /* (may run a finalizer) */
  hl_heap *h = heap_open(L, 1, fn);
  lhl_sigint si;
  lhl_sigint_begin(&si); /* (Ctrl-C stops it: HL_EINTR, raised) */
  int rc = hl_fill_stride(h, total, size, refs, stride, &o->ref);
  lhl_sigint_end(&si);
  if (rc) return lhl_result(L, fn, h, rc);
  return 1;
}

/***
Keep every `every`-th leaf of the graph under `obj` (the leaves: objects with no non-empty
slot, in depth-first slot order -- a fill's objects in the order it made them).  Nothing is
dropped: release `obj` afterwards and only those leaves survive, scattered over the pages the
graph filled (E10).
@function heap:thin
@tparam object obj a handle of this heap
@tparam integer every keep leaves 0, every, 2 * every, ...
@treturn object a new root whose slots hold the kept leaves
@return nil, message, code when the heap is out of memory ("ENOMEM")
@raise "interrupted" when Ctrl-C stops it (no handle is made)
*/
/* h:thin(obj, every) */
static int h_thin(lua_State *L) {
  static const char fn[] = "h:thin";
  char b[80];
  heap_ud(L, 1, fn);
  lobj *src = lhl_obj_at(L, 2);
  if (!src) return lhl_fail(L, fn, "obj must be a heaplab object, got %s", lhl_shown(L, 2, b, sizeof b));
  uint64_t every = lhl_arg_range(L, 3, fn, "every", 1, HL_THIN_MAX_EVERY, -1);
  lua_getiuservalue(L, 2, 1);
  int same = lua_rawequal(L, -1, 1);
  lua_pop(L, 1);
  if (!same) return lhl_fail(L, fn, "obj belongs to another heap");
  lobj *o = lhl_obj_new(L, 1); /* (may run a finalizer) */
  hl_heap *h = heap_open(L, 1, fn);
  if (src->ref == 0) return lhl_fail(L, fn, "obj was released");
  lhl_sigint si;
  lhl_sigint_begin(&si);
  int rc = hl_thin(h, src->ref, every, &o->ref);
  lhl_sigint_end(&si);
  if (rc) return lhl_result(L, fn, h, rc);
  return 1;
}

/***
Synchronous collection(s).
@function heap:collect
@tparam[opt] table|integer how `{cycles = 1, major = nil}`: `major = true` forces a major
sweep, `false` forbids it, `nil` lets the policy decide; a number is `{cycles = n}`
@treturn boolean true
@return nil, message, code when a cycle fails (verify found a broken invariant: "ECHECK")
@raise "interrupted" when Ctrl-C stops it between two cycles
*/
/* h:collect's cycles: an integer; one beyond the 64-bit integers (2^63,
 * 1e300), which never reaches hl_collect, out of its range as hl_collect
 * says it of 10^7 (it said "(beyond the 64-bit integers)", naming no range). */
static int64_t collect_cycles(lua_State *L, int idx, const char *fn) {
  char b[80];
  if (lhl_beyond_int64(L, idx))
    return lhl_fail(L, fn, "cycles %s out of range [1, %d] (%s)", lhl_shown(L, idx, b, sizeof b),
                    HL_COLLECT_MAX_CYCLES, hl_error_name(HL_EINVAL));
  return lhl_arg_int(L, idx, fn, "cycles");
}

/* h:collect{cycles = 1, major = nil|true|false}; h:collect(n) is h:collect{cycles = n}. */
static int h_collect(lua_State *L) {
  static const char fn[] = "h:collect";
  heap_open(L, 1, fn);
  int64_t cycles = 1;
  int major = -1;
  char b[80];
  if (lua_type(L, 2) == LUA_TNUMBER) {
    cycles = collect_cycles(L, 2, fn);
  } else if (lua_istable(L, 2)) {
    static const char *const fields[] = {"cycles", "major"};
    int t = lhl_plain_table(L, 2, fields, 2); /* (__pairs, __index) */
    lua_pushnil(L);
    while (lua_next(L, t)) {
      const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
      if (k && strcmp(k, "cycles") == 0) {
        cycles = collect_cycles(L, -1, fn);
      } else if (k && strcmp(k, "major") == 0) {
        major = lhl_arg_bool(L, -1, fn, "major", -1);
      } else {
        lhl_fail(L, fn, k ? "unknown field '%s' in its table (fields: cycles, major)"
                          : "its table's keys are the names cycles and major, got %s as a key",
                 k ? k : lhl_shown(L, -2, b, sizeof b));
      }
      lua_pop(L, 1);
    }
  } else if (!lua_isnoneornil(L, 2)) {
    return lhl_fail(L, fn, "argument must be a table {cycles=, major=} or a number, got %s",
                    lhl_shown(L, 2, b, sizeof b));
  }
  /* (after the table's metamethods, which may have closed the heap) */
  hl_heap *h = heap_open(L, 1, fn);
  lhl_sigint si;
  lhl_sigint_begin(&si); /* (Ctrl-C stops it between two cycles) */
  int rc = hl_collect(h, cycles, major);
  lhl_sigint_end(&si);
  if (rc) return lhl_result(L, fn, h, rc);
  lua_pushboolean(L, 1);
  return 1;
}

/* true, or nil, message, code (lhl_result) */
static int heap_done(lua_State *L, const char *fn, hl_heap *h, int rc) {
  if (rc) return lhl_result(L, fn, h, rc);
  lua_pushboolean(L, 1);
  return 1;
}

/***
Trim now: return every free page beyond the warm cache to the OS (passes of release_per_sweep pages, the heap lock dropped between them; a cycle's own trim is one pass).
@function heap:trim
@treturn boolean true
@return nil, message, code
*/
static int h_trim(lua_State *L) {
  hl_heap *h = heap_open(L, 1, "h:trim");
  return heap_done(L, "h:trim", h, hl_trim(h));
}

/***
Check every invariant of the heap.
@function heap:check
@treturn boolean true
@return nil, message, "ECHECK" naming the first invariant broken
*/
static int h_check(lua_State *L) {
  hl_heap *h = heap_open(L, 1, "h:check");
  return heap_done(L, "h:check", h, hl_heap_check(h));
}

/***
Make the next cycle sweep major.
@function heap:memory_pressure
@treturn boolean true
@return nil, message, code
@raise on a manual heap, which has no cycle ("EMODE", as `heap:collect`)
*/
static int h_memory_pressure(lua_State *L) {
  hl_heap *h = heap_open(L, 1, "h:memory_pressure");
  return heap_done(L, "h:memory_pressure", h, hl_memory_pressure(h));
}

/* h:stats() -> {name = integer}.  hl_stats is HL_STATS's uint64_t fields in
 * the order of hl_stat_name, both generated from the one list. */
static void push_stats(lua_State *L, const hl_stats *st) {
  const uint64_t *v = (const uint64_t *)st;
  int n = hl_stat_count();
  lua_createtable(L, 0, n);
  lhl_setmetatable(L, STATS_MT);
  for (int i = 0; i < n; i++) {
    lua_pushinteger(L, (lua_Integer)v[i]);
    lua_setfield(L, -2, hl_stat_name(i));
  }
}

/***
Every counter of the heap.
@function heap:stats
@treturn table `{name = integer}` (names: `stat_names`); `tostring` lists them all
@return nil, message, code
*/
static int h_stats(lua_State *L) {
  hl_heap *h = heap_open(L, 1, "h:stats");
  hl_stats st;
  int rc = hl_stats_get(h, &st);
  if (rc) return lhl_result(L, "h:stats", h, rc);
  push_stats(L, &st);
  return 1;
}

/* One event as a table: {kind=, cycle=, time_ns=, <the kind's fields>}. */
static void push_event(lua_State *L, const hl_event *e) {
  lua_createtable(L, 0, 3 + e->nfields);
  lhl_setmetatable(L, EVENT_MT);
  lua_pushstring(L, hl_event_name(e->kind));
  lua_setfield(L, -2, "kind");
  lua_pushinteger(L, (lua_Integer)e->cycle);
  lua_setfield(L, -2, "cycle");
  lua_pushinteger(L, (lua_Integer)e->time_ns);
  lua_setfield(L, -2, "time_ns");
  for (int k = 0; k < e->nfields && hl_event_field(e->kind, k); k++) {
    lua_pushinteger(L, (lua_Integer)e->fields[k]);
    lua_setfield(L, -2, hl_event_field(e->kind, k));
  }
}

/***
The events recorded since the last read.
@function heap:events
@tparam[opt=true] boolean clear consume them (exactly those returned: a call that raises,
"not enough memory" included, consumes none)
@treturn table `{ {kind=, cycle=, time_ns=, <the kind's fields>}, ... }`; `tostring` of the
list and of each event shows its fields
@return nil, message, code
*/
/* h:events(clear=true) -> { {kind=, cycle=, time_ns=, <fields>...}, ... }
 *
 * The events are peeked at, the result built (every Lua allocation it needs:
 * any may raise "not enough memory" or run a finalizer), and only then are
 * the events returned consumed (hl_events_consume up to the last one's
 * number): a call that raised consumed nothing.  (Consuming first lost every
 * event when building the tables failed -- a failing lua_Alloc host.)  An
 * event the background collector records meanwhile stays for the next read;
 * those another read consumed meanwhile are left out. */
static int h_events(lua_State *L) {
  static const char fn[] = "h:events";
  lheap *lh = heap_ud(L, 1, fn);
  int clear = lhl_arg_bool(L, 2, fn, "clear", 1);
  size_t cap = (size_t)lh->events_capacity;
  /* A userdata buffer (freed by Lua even if building the result raises) of
   * 64 events, four times larger while it comes back full, up to the ring's
   * capacity: one of the whole capacity at every call -- 104 MiB at
   * events_capacity=1048576 for the two events pending -- failed with "not
   * enough memory" under heaplab-lua's HEAPLAB_HEAP_LIMIT_BYTES=64m, and was
   * garbage Lua counted (the Lua hunt, session 36). */
  size_t want = cap < 64 ? (cap ? cap : 1) : 64, n = 0;
  uint64_t first = 0;
  hl_heap *h;
  for (;;) {
    hl_event *buf = lua_newuserdatauv(L, want * sizeof *buf, 0); /* (may run a finalizer) */
    h = heap_open(L, 1, fn);
    int rc = hl_events_peek(h, buf, want, &n, &first);
    if (rc) return lhl_result(L, fn, h, rc);
    if (n < want || want >= cap) break;
    lua_pop(L, 1);
    want = cap / 4 < want ? cap : want * 4;
  }
  hl_event *buf = lua_touserdata(L, -1);
  lua_createtable(L, (int)n, 0);
  lhl_setmetatable(L, EVENTS_MT);
  for (size_t i = 0; i < n; i++) {
    push_event(L, &buf[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  if (!clear || n == 0) return 1;
  /* (a finalizer run by the allocations above may have closed the heap) */
  h = heap_open(L, 1, fn);
  uint64_t kept_from = 0;
  int rc = hl_events_consume(h, first + n, &kept_from);
  if (rc) return lhl_result(L, fn, h, rc);
  /* another read consumed the first k meanwhile (a finalizer run by the
   * allocations above): they are its, not ours -- shifted out, in place */
  size_t k = kept_from > first ? (size_t)(kept_from - first < n ? kept_from - first : n) : 0;
  for (size_t i = 1; k && i <= n; i++) {
    if (i + k <= n) lua_rawgeti(L, -1, (lua_Integer)(i + k));
    else lua_pushnil(L);
    lua_rawseti(L, -2, (lua_Integer)i);
  }
  return 1;
}

/* A method that returns one number the C API reads from the heap. */
static int heap_u64(lua_State *L, const char *fn, int (*get)(hl_heap *, uint64_t *)) {
  hl_heap *h = heap_open(L, 1, fn);
  uint64_t v = 0;
  int rc = get(h, &v);
  if (rc) return lhl_result(L, fn, h, rc);
  lua_pushinteger(L, (lua_Integer)v);
  return 1;
}

/***
Bytes of the heap's reservation the kernel charges now (its Rss: the
shared zero page not counted; PAGEMAP_SCAN, mincore where the kernel has none).
@function heap:resident_bytes
@treturn integer
@return nil, message, code ("ESYS" when the pages cannot be counted)
*/
static int h_resident_bytes(lua_State *L) {
  return heap_u64(L, "h:resident_bytes", hl_resident_bytes);
}

/***
VMAs over the heap's reservation (/proc/self/maps).
@function heap:vma_count
@treturn integer
@return nil, message, code
*/
static int h_vma_count(lua_State *L) { return heap_u64(L, "h:vma_count", hl_vma_count); }

/***
The reservation.
@function heap:range
@treturn integer base address
@treturn integer reserved bytes
*/
/* h:range() -> base address, reserved bytes */
static int h_range(lua_State *L) {
  hl_heap *h = heap_open(L, 1, "h:range");
  uint64_t base = 0, bytes = 0;
  int rc = hl_heap_range(h, &base, &bytes);
  if (rc) return lhl_result(L, "h:range", h, rc);
  lua_pushinteger(L, (lua_Integer)base);
  lua_pushinteger(L, (lua_Integer)bytes);
  return 2;
}

/***
The heap's effective options.
@function heap:options
@treturn table `{name = value}` (`tostring` shows them)
*/
/* h:options() -> the effective options {name = value} */
static int h_options(lua_State *L) {
  hl_heap *h = heap_open(L, 1, "h:options");
  hl_options o;
  int rc = hl_heap_options(h, &o);
  if (rc) return lhl_result(L, "h:options", h, rc);
  int n = hl_option_count();
  lua_createtable(L, 0, n);
  lhl_setmetatable(L, EFFECTIVE_MT);
  for (int i = 0; i < n; i++) {
    hl_option_info info;
    int64_t v = 0;
    if (hl_option_info_get(i, &info) || hl_options_get(&o, info.name, &v)) continue;
    lhl_push_option_value(L, i, &info, v);
    lua_setfield(L, -2, info.name);
  }
  return 1;
}

/***
Arm a fault schedule (DESIGN.md section 4).
@function heap:inject
@tparam string site one of `fault_sites`
@tparam string mode one of `fault_modes`; "off" disarms (and records no errno)
@tparam[opt=0] integer n the schedule's count
@tparam[opt="ENOMEM"] string|integer errno by name ("EIO", any errno name) or number (5; not "5", a string)
@treturn boolean true
@raise on an unknown site, mode or errno, or a count the mode cannot take ("EINVAL")
*/
/* h:inject(site, mode, n=0, errno="ENOMEM") -- DESIGN.md section 4; the
 * names are checked by the C library (hl_inject_named). */
static int h_inject(lua_State *L) {
  static const char fn[] = "h:inject";
  hl_heap *h = heap_open(L, 1, fn);
  char b[80], num[32];
  if (lua_type(L, 2) != LUA_TSTRING)
    return lhl_fail(L, fn, "site must be a string (one of heaplab.fault_sites()), got %s",
                    lhl_shown(L, 2, b, sizeof b));
  if (lua_type(L, 3) != LUA_TSTRING)
    return lhl_fail(L, fn, "mode must be a string (one of heaplab.fault_modes()), got %s",
                    lhl_shown(L, 3, b, sizeof b));
  /* (C reads each up to its first NUL: "release\0junk" armed release) */
  if (!nul_free(L, 2))
    return lhl_fail(L, fn, "site '%s...' contains a NUL byte", lua_tostring(L, 2));
  if (!nul_free(L, 3))
    return lhl_fail(L, fn, "mode '%s...' contains a NUL byte", lua_tostring(L, 3));
  /* an n beyond the 64-bit integers, which never reaches hl_inject: out of
   * the range its mode takes (an unknown site or mode is hl_inject_named's
   * to name: n 0 then, never looked at) */
  int mode = hl_fault_mode_index(lua_tostring(L, 3));
  if (lhl_beyond_int64(L, 4) && mode >= 0 && hl_fault_site_index(lua_tostring(L, 2)) >= 0)
    return lhl_fail_beyond(L, 4, fn, "n", hl_fault_mode_min_arg(mode), INT64_MAX);
  int64_t n = lua_isnoneornil(L, 4) || lhl_beyond_int64(L, 4) ? 0 : lhl_arg_int(L, 4, fn, "n");
  const char *err = NULL;
  if (lua_type(L, 5) == LUA_TSTRING) {
    if (!nul_free(L, 5))
      return lhl_fail(L, fn, "errno '%s...' contains a NUL byte", lua_tostring(L, 5));
    /* a number as a string is no name: refused, as every integer argument
     * refuses "16" (h:alloc("16")); C parsed "5" as errno 5 */
    if (lua_stringtonumber(L, lua_tostring(L, 5))) {
      lua_pop(L, 1);
      return lhl_fail(L, fn, "errno must be a name or an integer, got %s (a number in a "
                      "string: pass the integer)", lhl_shown(L, 5, b, sizeof b));
    }
    err = lua_tostring(L, 5);
  } else if (lua_type(L, 5) == LUA_TNUMBER) {
    snprintf(num, sizeof num, "%" PRId64, lhl_arg_int(L, 5, fn, "errno"));
    err = num;
  } else if (!lua_isnoneornil(L, 5)) {
    return lhl_fail(L, fn, "errno must be a name or an integer, got %s",
                    lhl_shown(L, 5, b, sizeof b));
  }
  return heap_done(L, fn, h, hl_inject_named(h, lua_tostring(L, 2), lua_tostring(L, 3), n, err));
}

/***
The state of every fault site.
@function heap:faults
@treturn table `{site = {mode=, n=, errno=, calls=, fired=}}`: errno the name of the
site's errno ("ENOSPC"; "E<n>" for a number without one), 0 while none is set -- never
armed, or disarmed by "off" (Python's None); `tostring` shows a line a site
*/
/* h:faults() -> {site = {mode=, n=, errno=, calls=, fired=}} */
static int h_faults(lua_State *L) {
  hl_heap *h = heap_open(L, 1, "h:faults");
  hl_fault_state buf[HL_SITE_COUNT];
  size_t n = 0;
  int rc = hl_faults_get(h, buf, HL_SITE_COUNT, &n);
  if (rc) return lhl_result(L, "h:faults", h, rc);
  lua_createtable(L, 0, (int)n);
  lhl_setmetatable(L, FAULTS_MT);
  for (size_t i = 0; i < n; i++) {
    lua_createtable(L, 0, 5);
    lhl_setmetatable(L, FAULT_MT);
    lua_pushstring(L, hl_fault_mode_name(buf[i].mode));
    lua_setfield(L, -2, "mode");
    lua_pushinteger(L, (lua_Integer)buf[i].arg);
    lua_setfield(L, -2, "n");
    /* every site has its five fields: errno 0 while none was ever set
     * (Python's None), its name else -- it was left out, f.errno nil */
    if (buf[i].err)
      lua_pushstring(L, hl_errno_name(buf[i].err));
    else
      lua_pushinteger(L, 0);
    lua_setfield(L, -2, "errno");
    lua_pushinteger(L, (lua_Integer)buf[i].calls);
    lua_setfield(L, -2, "calls");
    lua_pushinteger(L, (lua_Integer)buf[i].fired);
    lua_setfield(L, -2, "fired");
    lua_setfield(L, -2, hl_fault_site_name(buf[i].site));
  }
  return 1;
}

/***
Keep a ring of `live_bytes` alive while allocating objects of `size` at the rate.
@function heap:churn
@tparam number duration_s
@tparam integer size
@tparam integer live_bytes
@tparam[opt=0] number rate_bytes_per_s 0 = as fast as possible
@treturn table the counts: allocations, allocated_bytes, cycles, pacing_waits, ...
(`tostring` shows them)
@return nil, message, code when the heap runs out of memory
@raise "interrupted" when Ctrl-C stops it
*/
/* h:churn(duration_s, size, live_bytes, rate_bytes_per_s=0) -> result table */
static int h_churn(lua_State *L) {
  static const char fn[] = "h:churn";
  hl_heap *h = heap_open(L, 1, fn);
  double dur = lhl_arg_number(L, 2, fn, "duration_s");
  uint64_t size = lhl_arg_checked(L, 3, fn, "size", 0, HL_MAX_SIZE, -1);
  /* (live_bytes: hl_churn bounds the ring, live_bytes / size objects, which
   * the largest size keeps in bounds for any 64-bit live_bytes: Lua's
   * integers are the bound, "beyond the 64-bit integers") */
  uint64_t live = lhl_arg_uint(L, 4, fn, "live_bytes", UINT64_MAX, -1);
  double rate = lua_isnoneornil(L, 5) ? 0.0 : lhl_arg_number(L, 5, fn, "rate_bytes_per_s");
  hl_churn_result r;
  lhl_sigint si;
  lhl_sigint_begin(&si);
  int rc = hl_churn(h, dur, size, live, rate, &r);
  lhl_sigint_end(&si);
  if (rc) return lhl_result(L, fn, h, rc);
  lua_createtable(L, 0, 7);
  lhl_setmetatable(L, CHURN_MT);
#define F(name)                                                                \
  lua_pushinteger(L, (lua_Integer)r.name);                                     \
  lua_setfield(L, -2, #name);
  LHL_CHURN_FIELDS(F)
#undef F
  return 1;
}

/* One line for the REPL: mode, pages by state, handles, cycles, live bytes.
 * The pages' parts are the pool counts, which add up to total_pages:
 * reuse-failed and in-flight pages only when there are some (a line that
 * left out the retired pages said 144 pages, 5 owned and nothing else). */
static int heap_tostring(lua_State *L) {
  lheap *lh = lhl_heap_at(L, 1);
  if (!lh) return lhl_tostring_other(L, HEAP_MT);
  if (!lh->h) {
    lua_pushfstring(L, "heaplab.heap (closed): %p", (void *)lh);
    return 1;
  }
  hl_stats st;
  if (hl_stats_get(lh->h, &st)) {
    lua_pushfstring(L, "heaplab.heap: %p", (void *)lh);
    return 1;
  }
  char small[32], large[32];
  lhl_mib(small, sizeof small, st.small_live_bytes);
  lhl_mib(large, sizeof large, st.large_live_bytes);
  char rare[80] = "";
  int n = 0;
  if (st.reuse_failed_pool_pages)
    n = snprintf(rare, sizeof rare, ", %" PRIu64 " reuse_failed", st.reuse_failed_pool_pages);
  if (st.in_flight_pages)
    snprintf(rare + n, sizeof rare - (size_t)n, ", %" PRIu64 " in_flight", st.in_flight_pages);
  char line[480], handles[32], cycles[32];
  snprintf(line, sizeof line,
           "heaplab.heap(%s): %" PRIu64 " pages (%" PRIu64 " owned, %" PRIu64 " retired, %" PRIu64
           " partial, %" PRIu64 " free, %" PRIu64 " released%s), %s, %s, live %s small + %s large",
           lh->manual ? "manual" : "collected", st.total_pages, st.owned_pages,
           st.retired_pool_pages, st.partial_pool_pages, st.free_pool_pages,
           st.released_pool_pages, rare, lhl_count(handles, sizeof handles, st.handles, "handle"),
           lhl_count(cycles, sizeof cycles, st.cycles, "cycle"), small, large);
  lua_pushstring(L, line);
  return 1;
}

/* h.x = ... is always a mistake: a heap has methods, not fields. */
static int heap_newindex(lua_State *L) {
  char b[80];
  return lhl_fail(L, "heaplab.heap", "cannot set field %s (a heap has methods only)",
                  lhl_shown(L, 2, b, sizeof b));
}

static const luaL_Reg heap_methods[] = {
    {"alloc", h_alloc},
    {"fill", h_fill},
    {"thin", h_thin},
    {"conservative_region", h_conservative_region},
    {"collect", h_collect},
    {"stats", h_stats},
    {"events", h_events},
    {"resident_bytes", h_resident_bytes},
    {"vma_count", h_vma_count},
    {"inject", h_inject},
    {"faults", h_faults},
    {"close", h_close},
    {"closed", h_closed},
    {"trim", h_trim},
    {"check", h_check},
    {"last_error", h_last_error},
    {"churn", h_churn},
    {"memory_pressure", h_memory_pressure},
    {"options", h_options},
    {"range", h_range},
    {NULL, NULL}};

static const luaL_Reg heap_meta[] = {
    {"__gc", lhl_finalize},
    {"__close", lhl_finalize},
    {"__tostring", heap_tostring},
    {"__newindex", heap_newindex},
    {NULL, NULL}};

void lhl_open_heap(lua_State *L) {
  lhl_new_type(L, HEAP_MT, heap_meta, heap_methods, NULL); /* methods only */
  lua_pop(L, 1);
}
