/*
 * args.c -- the Lua module's errors and argument checking.
 *
 * Every error is a Lua error whose message names the function, the argument
 * and what was wrong ("h:alloc: size must be >= 0, got -1"); every argument
 * is checked here before it reaches C, so bad input never does.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lhl.h"

/* ---- errors ---------------------------------------------------------------- */

/* Raise "fn: message".  luaL_error prefixes the caller's position. */
int lhl_fail(lua_State *L, const char *fn, const char *fmt, ...) {
  char msg[1200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return luaL_error(L, "%s: %s", fn, msg);
}

/* "fn: msg (<code name>)" for a C error code and its message.  C's messages
 * start with their own verb ("inject: ...", "sampler: ..."); when it is the
 * function's last name, say it once: "h:inject: every needs N >= 1",
 * "heaplab.sampler: capacity 1 out of range" (not "heaplab.sampler:
 * sampler: ...", which the sampler said before it came here). */
void lhl_rc_text(char *buf, size_t len, const char *fn, const char *msg, int rc) {
  if (!msg || !*msg) msg = hl_error_name(rc);
  const char *verb = fn;
  for (const char *p = fn; *p; p++)
    if (*p == ':' || *p == '.') verb = p + 1;
  size_t n = strlen(verb);
  if (strncmp(msg, verb, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ') msg += n + 2;
  /* a C function's name is no Lua name: "hl_roots_add: ..." said so to
   * h:conservative_region's caller; the one C call a message points to is
   * said as Lua calls it ("(use hl_trim)" to a Lua h:collect) */
  if (strncmp(msg, "hl_", 3) == 0) {
    size_t k = 3 + strspn(msg + 3, "abcdefghijklmnopqrstuvwxyz_0123456789");
    if (msg[k] == ':' && msg[k + 1] == ' ') msg += k + 2;
  }
  static const char *const lua_names[][2] = {{"hl_trim", "h:trim()"}};
  char said[512];
  snprintf(said, sizeof said, "%s", msg);
  for (size_t i = 0; i < sizeof lua_names / sizeof lua_names[0]; i++) {
    char *at = strstr(said, lua_names[i][0]);
    size_t cn = strlen(lua_names[i][0]);
    if (at && !(at[cn] == '_' || (at[cn] >= 'a' && at[cn] <= 'z'))) {
      char rest[512];
      snprintf(rest, sizeof rest, "%s", at + cn);
      snprintf(at, sizeof said - (size_t)(at - said), "%s%s", lua_names[i][1], rest);
    }
  }
  snprintf(buf, len, "%s: %s (%s)", fn, said, hl_error_name(rc));
}

/* "1 word", "2 words": a count and its noun. */
const char *lhl_count(char *buf, size_t len, uint64_t n, const char *noun) {
  snprintf(buf, len, "%" PRIu64 " %s%s", n, noun, n == 1 ? "" : "s");
  return buf;
}

/* "fn: <the heap's message> (<code name>)" for a C error code. */
static void rc_message(char *buf, size_t len, const char *fn, hl_heap *h, int rc) {
  lhl_rc_text(buf, len, fn, h ? hl_heap_error(h) : NULL, rc);
}

/* A C error code from a heap call, raised: the heap's own message and the
 * code's name. */
int lhl_fail_rc(lua_State *L, const char *fn, hl_heap *h, int rc) {
  char msg[600];
  rc_message(msg, sizeof msg, fn, h, rc);
  return luaL_error(L, "%s", msg);
}

/* liolib's convention: when the operation itself fails -- memory or the
 * reservation exhausted, a system call refused, a heap invariant broken --
 * the caller gets nil, message, code (the code's name, as Python's
 * heaplab.Error.code); every other code means the call was wrong (a bad
 * argument, a released handle, a heap of the other mode) and is raised. */
int lhl_is_failure(int rc) { return rc == HL_ENOMEM || rc == HL_ESYS || rc == HL_ECHECK; }

int lhl_push_failure(lua_State *L, const char *message, int rc) {
  lua_pushnil(L);
  lua_pushstring(L, message);
  lua_pushstring(L, hl_error_name(rc));
  return 3;
}

int lhl_result(lua_State *L, const char *fn, hl_heap *h, int rc) {
  if (!lhl_is_failure(rc)) return lhl_fail_rc(L, fn, h, rc);
  char msg[600];
  rc_message(msg, sizeof msg, fn, h, rc);
  return lhl_push_failure(L, msg, rc);
}

/* ---- Ctrl-C during a long call ------------------------------------------------ */

/* The handler a disposition runs (sa_handler and sa_sigaction share their
 * storage in glibc; read it as the flag says). */
static void *handler_of(const struct sigaction *sa) {
  return (sa->sa_flags & SA_SIGINFO) ? (void *)sa->sa_sigaction : (void *)sa->sa_handler;
}

/* lua.c installs its SIGINT handler (laction: a hook that raises
 * "interrupted!") around each chunk it runs, with sigaction, so heaplab's
 * handler attached once would be gone after the first chunk: it is put in
 * front for the length of each long call instead, chaining the handler there
 * now.  A count hook cannot cut a C call short: without this, Ctrl-C waited
 * for a 1.5 GiB fill's end (2.7 s) or a churn's (its duration). */
/* The disposition is the process's, and states may run long calls in
 * several threads at once: the first call to start puts heaplab's handler in
 * front, the last to end puts back what was there (each thread doing both
 * for itself left heaplab's handler in place for good when the calls
 * interleaved -- one's "before" was the other's heaplab handler -- and made
 * hl_interrupt_attach race itself: the review of session 28). */
static pthread_mutex_t sigint_lock = PTHREAD_MUTEX_INITIALIZER;
static int sigint_calls;                     /* long calls with it in front */
static struct sigaction sigint_before, sigint_ours;

void lhl_sigint_begin(lhl_sigint *s) {
  s->attached = 0;
  pthread_mutex_lock(&sigint_lock);
  if (sigint_calls == 0) {
    struct sigaction before, ours;
    if (sigaction(SIGINT, NULL, &before) != 0 ||
        (!(before.sa_flags & SA_SIGINFO) &&
         (before.sa_handler == SIG_DFL || before.sa_handler == SIG_IGN)) ||
        /* Ctrl-C ends the process, or is ignored: as it was */
        hl_interrupt_attach(SIGINT) != HL_OK || /* (then Ctrl-C waits for the call) */
        sigaction(SIGINT, NULL, &ours) != 0) {
      pthread_mutex_unlock(&sigint_lock);
      return;
    }
    sigint_before = before;
    sigint_ours = ours;
  }
  sigint_calls++;
  s->attached = 1;
  pthread_mutex_unlock(&sigint_lock);
}

/* Put back what was there -- unless the disposition changed during the call:
 * lua.c's handler, chained, sets SIG_DFL (a second Ctrl-C ends the process)
 * until its chunk ends, and that stays. */
void lhl_sigint_end(lhl_sigint *s) {
  if (!s->attached) return;
  s->attached = 0;
  pthread_mutex_lock(&sigint_lock);
  struct sigaction now;
  if (--sigint_calls == 0 && sigaction(SIGINT, NULL, &now) == 0 &&
      (now.sa_flags & SA_SIGINFO) == (sigint_ours.sa_flags & SA_SIGINFO) &&
      handler_of(&now) == handler_of(&sigint_ours))
    sigaction(SIGINT, &sigint_before, NULL);
  pthread_mutex_unlock(&sigint_lock);
}

/* A paced wait of a heap the module made (hl_heap_set_wait_hook, set by
 * heaplab.heap): heaplab's handler in front for the wait alone, as for a long
 * call, so Ctrl-C ends it (the allocation goes on unpaced and returns; the
 * interpreter's "interrupted!" is raised as h:alloc returns).  Around every
 * h:alloc it cost sigactions on each allocation; without it Ctrl-C waited
 * for the wait's end, up to pacing_max_wait_ms.  A thread waits once at a
 * time, and inside a long call the handler is in front already (the count
 * of calls goes up and down, no sigaction). */
static _Thread_local lhl_sigint wait_sigint;

void lhl_wait_hook(hl_heap *h, int begins, void *arg) {
  (void)h;
  (void)arg;
  if (begins) lhl_sigint_begin(&wait_sigint);
  else lhl_sigint_end(&wait_sigint);
}

/* "a string 'abc'", "the number 1.5", "a table": what the caller passed. */
void *lhl_ud(lua_State *L, int idx, uint64_t tag, size_t size) {
  if (lua_type(L, idx) != LUA_TUSERDATA || lua_rawlen(L, idx) != size) return NULL;
  void *p = lua_touserdata(L, idx);
  return *(const uint64_t *)p == tag ? p : NULL;
}

int lhl_finalize(lua_State *L) {
  lhl_heap_finalize(L);
  lhl_obj_finalize(L);
  lhl_region_finalize(L);
  lhl_sampler_finalize(L);
  return 0;
}

/* What a value of the module is, by its tag (its metatable may say
 * otherwise), or NULL. */
static const char *kind_of(lua_State *L, int idx) {
  if (lhl_heap_at(L, idx)) return HEAP_MT;
  if (lhl_obj_at(L, idx)) return OBJ_MT;
  if (lhl_region_at(L, idx)) return REGION_MT;
  if (lhl_sampler_at(L, idx)) return SAMPLER_MT;
  return NULL;
}

/* __tostring of a kind given a value of another (debug.setmetatable):
 * what it is, and whose metatable it carries. */
int lhl_tostring_other(lua_State *L, const char *mt) {
  const char *kind = kind_of(L, 1);
  char b[120];
  /* called on a value that is no userdata (getmetatable(h).__tostring(5)
   * said "5: (nil)"): a mistake */
  if (lua_type(L, 1) != LUA_TUSERDATA)
    return lhl_fail(L, mt, "__tostring: expected a %s, got %s", mt, lhl_shown(L, 1, b, sizeof b));
  if (kind)
    lua_pushfstring(L, "a %s (with the metatable of %s): %p", kind, mt, lua_topointer(L, 1));
  else
    lua_pushfstring(L, "%s: %p", lhl_shown(L, 1, b, sizeof b), lua_topointer(L, 1));
  return 1;
}

const char *lhl_float(double v, char *buf, size_t len) { return lhl_float_text(v, buf, len); }

/* The module's own values by their tag ("a heaplab.heap"), whatever their
 * metatable says; any other as lhl_shown.h shows it. */
const char *lhl_shown(lua_State *L, int idx, char *buf, size_t len) {
  const char *kind = kind_of(L, idx);
  if (kind) {
    snprintf(buf, len, "a %s", kind);
    return buf;
  }
  return lhl_shown_value(L, idx, buf, len);
}

/* ---- argument checking --------------------------------------------------------- */

/* An integer argument: an integer, or a float with an integral value. */
int64_t lhl_arg_int(lua_State *L, int idx, const char *fn, const char *name) {
  char b[80];
  if (lua_type(L, idx) != LUA_TNUMBER)
    return lhl_fail(L, fn, "%s must be an integer, got %s", name, lhl_shown(L, idx, b, sizeof b));
  int ok = 0;
  lua_Integer v = lua_tointegerx(L, idx, &ok);
  if (!ok && lhl_beyond_int64(L, idx))
    return lhl_fail(L, fn, "%s %s is out of range (beyond the 64-bit integers)", name,
                    lhl_shown(L, idx, b, sizeof b));
  if (!ok)
    return lhl_fail(L, fn, "%s must be an integer, got %s", name, lhl_shown(L, idx, b, sizeof b));
  return (int64_t)v;
}

/* An integer in [0, max]; `def` when absent or nil and def >= 0 (else required). */
uint64_t lhl_arg_uint(lua_State *L, int idx, const char *fn, const char *name, uint64_t max,
                      int64_t def) {
  return lhl_arg_range(L, idx, fn, name, 0, max, def);
}

/* An integer in [min, max] (min 0 or 1); `def` as lhl_arg_uint's.  One
 * message for every value below min ("every must be >= 1, got -1": it said
 * ">= 0" for -1, then refused 0). */
uint64_t lhl_arg_range(lua_State *L, int idx, const char *fn, const char *name, uint64_t min,
                       uint64_t max, int64_t def) {
  if (def >= 0 && lua_isnoneornil(L, idx)) return (uint64_t)def;
  char b[80];
  int beyond = lhl_beyond_int64(L, idx); /* (the messages of an integer that size) */
  if (beyond < 0)
    return (uint64_t)lhl_fail(L, fn, "%s must be >= %" PRIu64 ", got %s", name, min,
                              lhl_shown(L, idx, b, sizeof b));
  if (beyond > 0 && max < (uint64_t)INT64_MAX) /* (the range, as lhl_arg_checked says it) */
    return (uint64_t)lhl_fail_beyond(L, idx, fn, name, (int64_t)min, (int64_t)max);
  int64_t v = lhl_arg_int(L, idx, fn, name);
  if (v < 0 || (uint64_t)v < min)
    return (uint64_t)lhl_fail(L, fn, "%s must be >= %" PRIu64 ", got %" PRId64, name, min, v);
  if ((uint64_t)v > max)
    return (uint64_t)lhl_fail(L, fn, "%s %" PRId64 " exceeds the maximum of %" PRIu64, name, v,
                              max);
  return (uint64_t)v;
}

/* A bound as a message shows it: the 64-bit integers' ends in Lua's words
 * ("2^63-1"), any other as its number. */
static const char *bound_shown(char *buf, size_t len, int64_t v) {
  if (v == INT64_MAX) return "2^63-1";
  if (v == INT64_MIN) return "-2^63";
  snprintf(buf, len, "%" PRId64, v);
  return buf;
}

int lhl_fail_beyond(lua_State *L, int idx, const char *fn, const char *name, int64_t low,
                    int64_t high) {
  char b[80], lo[24], hi[24];
  return lhl_fail(L, fn, "%s %s out of range [%s, %s]", name, lhl_shown(L, idx, b, sizeof b),
                  bound_shown(lo, sizeof lo, low), bound_shown(hi, sizeof hi, high));
}

uint64_t lhl_arg_checked(lua_State *L, int idx, const char *fn, const char *name, int64_t low,
                         int64_t high, int64_t def) {
  if (lhl_beyond_int64(L, idx) > 0) return (uint64_t)lhl_fail_beyond(L, idx, fn, name, low, high);
  return lhl_arg_uint(L, idx, fn, name, UINT64_MAX, def);
}

double lhl_arg_number(lua_State *L, int idx, const char *fn, const char *name) {
  char b[80];
  if (lua_type(L, idx) != LUA_TNUMBER)
    return lhl_fail(L, fn, "%s must be a number, got %s", name, lhl_shown(L, idx, b, sizeof b));
  return (double)lua_tonumber(L, idx);
}

/* nil/absent -> def; a boolean -> itself; anything else is an error. */
int lhl_arg_bool(lua_State *L, int idx, const char *fn, const char *name, int def) {
  char b[80];
  if (lua_isnoneornil(L, idx)) return def;
  if (!lua_isboolean(L, idx))
    return lhl_fail(L, fn, "%s must be a boolean, got %s", name, lhl_shown(L, idx, b, sizeof b));
  return lua_toboolean(L, idx);
}

/* The table at idx as a plain table, pushed: itself when it has no
 * metatable; else a copy of what `pairs` gives (its __pairs honoured, as
 * pairs does), plus each of `names` not given so that reading it finds
 * through __index.  An options table built on defaults
 * (setmetatable(t, {__index = defaults})) or a proxy reads as Lua code
 * would read it; it was read raw, and a proxy's options were silently
 * ignored (hostile Lua run).  The metamethods may run any code: call this
 * before reading a heap pointer. */
int lhl_plain_table(lua_State *L, int idx, const char *const *names, size_t nnames) {
  idx = lua_absindex(L, idx);
  if (!lua_getmetatable(L, idx)) {
    lua_pushvalue(L, idx);
    return lua_gettop(L);
  }
  lua_pop(L, 1);
  lua_newtable(L);
  int copy = lua_gettop(L);
  if (luaL_getmetafield(L, idx, "__pairs") != LUA_TNIL) {
    lua_pushvalue(L, idx);
    lua_call(L, 1, 3); /* iterator, state, control */
    for (;;) {
      lua_pushvalue(L, -3);
      lua_pushvalue(L, -3);
      lua_pushvalue(L, -3);
      lua_call(L, 2, 2); /* key, value */
      if (lua_isnil(L, -2)) {
        lua_pop(L, 5);
        break;
      }
      lua_pushvalue(L, -2);
      lua_insert(L, -3); /* ..., key (the next control), key, value */
      lua_rawset(L, copy);
      lua_replace(L, -2); /* the control := key */
    }
  } else {
    lua_pushnil(L);
    while (lua_next(L, idx)) {
      lua_pushvalue(L, -2);
      lua_insert(L, -2);
      lua_rawset(L, copy);
    }
  }
  for (size_t i = 0; i < nnames; i++) {
    if (lua_getfield(L, copy, names[i]) != LUA_TNIL) { /* (the copy: raw) */
      lua_pop(L, 1);
      continue;
    }
    lua_pop(L, 1);
    if (lua_getfield(L, idx, names[i]) == LUA_TNIL) { /* through __index */
      lua_pop(L, 1);
      continue;
    }
    lua_setfield(L, copy, names[i]);
  }
  return copy;
}

void lhl_check_rc(lua_State *L, const char *fn, hl_heap *h, int rc) {
  if (rc) lhl_fail_rc(L, fn, h, rc);
}

void lhl_mib(char *buf, size_t len, uint64_t bytes) {
  snprintf(buf, len, "%.1f MiB", (double)bytes / (1024.0 * 1024.0));
}

/* In an __index closure of lhl_new_type's, for the key at 2: a string is a
 * method -- 1, with it pushed -- or an error naming the type's methods (a
 * typo must not be a silent nil), `hint` after the list; 0 for any other
 * key (the type's own meaning, if it has one). */
int lhl_method(lua_State *L, const char *hint) {
  if (lua_type(L, 2) != LUA_TSTRING) return 0;
  lua_pushvalue(L, 2);
  if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1;
  return lhl_fail(L, lua_tostring(L, lua_upvalueindex(3)), "no method '%s' (methods: %s%s)",
                  lua_tostring(L, 2), lua_tostring(L, lua_upvalueindex(2)), hint);
}

/* A type with methods only (the sampler): anything else is an error. */
static int methods_only(lua_State *L) {
  if (lhl_method(L, "")) return 1;
  char b[80];
  return lhl_fail(L, lua_tostring(L, lua_upvalueindex(3)), "no field %s (a %s has methods only)",
                  lhl_shown(L, 2, b, sizeof b), lua_tostring(L, lua_upvalueindex(3)));
}

/* ---- the module's registry entries ----------------------------------------------- */

/* Its metatables live in the registry under their names (REGISTRY["heaplab.heap"]),
 * where debug.getregistry() reaches them: set to 42, a metatable read from there
 * was used as a table and the next heaplab.heap{} crashed.  Each is checked as
 * it is read -- a table whose __name is its name, read raw -- and made again
 * when it is not (the values made before keep the metatable they have). */

/* Push registry[name] and return 1 when it is the module's metatable `name`;
 * else push nothing and return 0. */
static int own_metatable(lua_State *L, const char *name) {
  lua_pushstring(L, name);
  if (lua_rawget(L, LUA_REGISTRYINDEX) == LUA_TTABLE) {
    lua_pushliteral(L, "__name");
    int ok = lua_rawget(L, -2) == LUA_TSTRING && strcmp(lua_tostring(L, -1), name) == 0;
    lua_pop(L, 1);
    if (ok) return 1;
  }
  lua_pop(L, 1);
  return 0;
}

/* luaL_newmetatable, raw, over whatever registry[name] held that is not the
 * module's metatable.  Leaves the metatable on the stack. */
void lhl_newmetatable(lua_State *L, const char *name) {
  if (own_metatable(L, name)) return;
  lua_createtable(L, 0, 4);
  lua_pushstring(L, name);
  lua_setfield(L, -2, "__name");
  lua_pushstring(L, name);
  lua_pushvalue(L, -2);
  lua_rawset(L, LUA_REGISTRYINDEX);
}

/* luaL_setmetatable(L, name) for the value on top, the metatable made again
 * first if the registry's entry was replaced. */
void lhl_setmetatable(lua_State *L, const char *name) {
  if (!own_metatable(L, name)) {
    if (strcmp(name, HEAP_MT) == 0) lhl_open_heap(L);
    else if (strcmp(name, OBJ_MT) == 0) lhl_open_object(L);
    else if (strcmp(name, SAMPLER_MT) == 0) lhl_open_sampler(L);
    else if (strcmp(name, REGION_MT) == 0) lhl_open_region(L);
    else lhl_open_show(L);
    if (!own_metatable(L, name)) luaL_error(L, "heaplab: no metatable %s", name); /* (cannot happen) */
  }
  lua_setmetatable(L, -2);
}

/* Make metatable `name`: its metamethods, and __index a closure (index, or
 * methods_only when NULL) over the method table, the list of its names
 * (for lhl_method's error, made from `methods` so that it cannot drift from
 * it) and `name`.  Leaves the metatable on the stack. */
void lhl_new_type(lua_State *L, const char *name, const luaL_Reg *meta, const luaL_Reg *methods,
                  lua_CFunction index) {
  lhl_newmetatable(L, name);
  luaL_setfuncs(L, meta, 0);
  lua_newtable(L);
  luaL_setfuncs(L, methods, 0);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (const luaL_Reg *m = methods; m->name; m++) {
    if (m != methods) luaL_addstring(&b, ", ");
    luaL_addstring(&b, m->name);
  }
  luaL_pushresult(&b);
  lua_pushstring(L, name);
  lua_pushcclosure(L, index ? index : methods_only, 3);
  lua_setfield(L, -2, "__index");
}
