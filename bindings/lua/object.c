/*
 * object.c -- heaplab.object: a handle (a root) to one object of a heap.
 *
 * The userdata holds the hl_ref; its user value holds the heap userdata, so
 * a heap stays alive while any of its handles does, and a handle whose heap
 * was closed finds the hl_heap * gone and refuses to run (a Lua error, not a
 * crash).  One finalizer (lhl_obj_finalize) serves __gc, __close and o:release(): it
 * drops the root, so the next heap collection can reclaim the object.
 * Slots are 1-based: o[1] is C's slot 0; every o[i] read is a NEW root.
 */
/*** @submodule heaplab */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lhl.h"

/* Push a new object userdata for heap at heap_idx, ref 0 (safe to collect). */
lobj *lhl_obj_new(lua_State *L, int heap_idx) {
  heap_idx = lua_absindex(L, heap_idx);
  lobj *o = lua_newuserdatauv(L, sizeof *o, 1);
  o->tag = LHL_TAG_OBJ;
  o->ref = 0;
  lhl_setmetatable(L, OBJ_MT);
  lua_pushvalue(L, heap_idx);
  lua_setiuservalue(L, -2, 1);
  return o;
}

/* The object at idx and (in *hp) its open hl_heap, read from the object's
 * user value.  An error if released or if the heap was closed -- never a
 * dangling use. */
static lobj *obj_check(lua_State *L, int idx, const char *fn, hl_heap **hp) {
  char b[80];
  lobj *o = lhl_obj_at(L, idx);
  if (!o) {
    lhl_fail(L, fn, "expected a heaplab object as self (call it with ':'), got %s",
             lhl_shown(L, idx, b, sizeof b));
    return NULL;
  }
  lheap *lh = lhl_uv_heap(L, idx); /* the object's user value keeps the heap alive */
  if (!lh) {
    lua_getiuservalue(L, idx, 1);
    lhl_fail(L, fn, "the object's user value is not its heap (it is %s: replaced by "
             "debug.setuservalue?)", lhl_shown(L, -1, b, sizeof b));
    return NULL;
  }
  if (!lh->h) lhl_fail(L, fn, "the object's heap is closed");
  if (o->ref == 0) lhl_fail(L, fn, "the object was released");
  *hp = lh->h;
  return o;
}

static void obj_info(lua_State *L, const char *fn, hl_heap *h, lobj *o, hl_object_info *info) {
  lhl_check_rc(L, fn, h, hl_ref_info(h, o->ref, info));
}

/* The one finalizer of a handle: __gc, __close and o:release().  Drops the
 * root unless the heap is already gone (its handles went with it).  When the
 * user value is no longer a heap (debug.setuservalue), the heap that holds
 * the root is unknown: the root stays until that heap is closed or collected
 * (a root never outlives its heap), and nothing else is touched.  Another heap
 * there refuses the handle (it names its heap: HL_EFOREIGN), harmlessly. */
static int obj_release_ud(lua_State *L, int idx) {
  lobj *o = lhl_obj_at(L, idx);
  if (!o) return 0;
  hl_ref ref = o->ref;
  o->ref = 0;
  if (!ref) return 0;
  lheap *lh = lhl_uv_heap(L, idx);
  if (lh && lh->h) hl_ref_release(lh->h, ref);
  return 0;
}

int lhl_obj_finalize(lua_State *L) { return obj_release_ud(L, 1); }

/***
A handle to one object of a heap: a root.  `#o` is its number of slots, `o[i]` the object
in slot `i` (1-based) as a new handle or nil, `o[i] = v` stores a handle of the same heap
or nil (indexing raises on failure: an expression cannot return nil, message, code), and
`a == b` when both root the same object.  Released by `__gc` and `__close` too.
@type object
*/

/***
Drop this root now.  Idempotent.
@function object:release
@treturn boolean true
*/
static int o_release(lua_State *L) {
  char b[80];
  if (!lhl_obj_at(L, 1))
    return lhl_fail(L, "o:release", "expected a heaplab object as self (call it with ':'), got %s",
                    lhl_shown(L, 1, b, sizeof b));
  obj_release_ud(L, 1);
  lua_pushboolean(L, 1); /* (methods with nothing to return return true) */
  return 1;
}

/***
Does the handle root nothing any more: was it released (`o:release()`, `__close`, `__gc`),
or its heap closed (which dropped every root)?  As `h:closed()`, never an error.
@function object:released
@treturn boolean
*/
static int o_released(lua_State *L) {
  char b[80];
  lobj *o = lhl_obj_at(L, 1);
  if (!o)
    return lhl_fail(L, "o:released", "expected a heaplab object as self, got %s",
                    lhl_shown(L, 1, b, sizeof b));
  /* (its heap closed: the root went with it -- o:released() said false while
   * every other use said "the object's heap is closed"; a user value that
   * is not a heap says nothing of the root: false, as before) */
  lheap *lh = lhl_uv_heap(L, 1);
  lua_pushboolean(L, o->ref == 0 || (lh && !lh->h));
  return 1;
}

/* o:size(), o:refs(), o:address(), o:large(): one field of the object's
 * info each, so one body serves all four. */
enum { INFO_SIZE, INFO_REFS, INFO_ADDRESS, INFO_LARGE };

static int info_field(lua_State *L, const char *fn, int field) {
  hl_heap *h;
  lobj *o = obj_check(L, 1, fn, &h);
  hl_object_info info;
  obj_info(L, fn, h, o, &info);
  switch (field) {
  case INFO_SIZE: lua_pushinteger(L, (lua_Integer)info.size); break;
  case INFO_REFS: lua_pushinteger(L, (lua_Integer)info.refs); break;
  case INFO_ADDRESS: lua_pushinteger(L, (lua_Integer)info.address); break;
  default: lua_pushboolean(L, info.large); break;
  }
  return 1;
}

/***
Payload bytes.
@function object:size
@treturn integer
*/
static int o_size(lua_State *L) { return info_field(L, "o:size", INFO_SIZE); }
/***
Number of slots (also `#o`).
@function object:refs
@treturn integer
*/
static int o_refs(lua_State *L) { return info_field(L, "o:refs", INFO_REFS); }
/***
The payload's address.
@function object:address
@treturn integer
*/
static int o_address(lua_State *L) { return info_field(L, "o:address", INFO_ADDRESS); }
/***
Is the object on the large path?
@function object:large
@treturn boolean
*/
static int o_large(lua_State *L) { return info_field(L, "o:large", INFO_LARGE); }

/***
A number that names the object for as long as it lives (hl_ref_identity): the same for
every handle to it and across moves by compaction, unlike `o:address()`.  Each handle is a
distinct Lua value, so a table keyed by handles never finds another handle to the same
object: key it by `o:id()` (`seen[o:id()] = true` in a graph walk).  Two live objects never
share an id; one object never has two (a dead object's id may be given again).
@function object:id
@treturn integer
*/
static int o_id(lua_State *L) {
  static const char fn[] = "o:id";
  hl_heap *h;
  lobj *o = obj_check(L, 1, fn, &h);
  uint64_t id = 0;
  lhl_check_rc(L, fn, h, hl_ref_identity(h, o->ref, &id));
  lua_pushinteger(L, (lua_Integer)id);
  return 1;
}

/***
The heap the object belongs to.
@function object:heap
@treturn heap
*/
/* o:heap() -> the heap userdata this object belongs to */
static int o_heap(lua_State *L) {
  char b[80];
  if (!lhl_obj_at(L, 1))
    return lhl_fail(L, "o:heap",
                    "expected a heaplab object as self, got %s", lhl_shown(L, 1, b, sizeof b));
  lua_getiuservalue(L, 1, 1);
  return 1;
}

/***
A checksum over everything reachable from the object, independent of addresses and order.
@function object:checksum
@treturn integer sum (a 64-bit value; may show negative)
@treturn integer objects
@return nil, message, code
@raise "interrupted" when Ctrl-C stops it
*/
/* o:checksum() -> sum, objects over everything reachable from o (the sum is
 * a uint64 shown as a Lua integer, so it may be negative). */
static int o_checksum(lua_State *L) {
  hl_heap *h;
  lobj *o = obj_check(L, 1, "o:checksum", &h);
  uint64_t sum = 0, n = 0;
  lhl_sigint si;
  lhl_sigint_begin(&si);
  int rc = hl_ref_checksum(h, o->ref, &sum, &n);
  lhl_sigint_end(&si);
  if (rc) return lhl_result(L, "o:checksum", h, rc);
  lua_pushinteger(L, (lua_Integer)sum);
  lua_pushinteger(L, (lua_Integer)n);
  return 2;
}

/***
A second, independent root to the same object.
@function object:dup
@treturn object
@return nil, message, code when the heap is out of memory
*/
/* o:dup() -> a second, independent root to the same object */
static int o_dup(lua_State *L) {
  hl_heap *h;
  obj_check(L, 1, "o:dup", &h);
  lua_getiuservalue(L, 1, 1);
  lobj *d = lhl_obj_new(L, -1);
  /* the allocation may have run a finalizer that closed the heap or
   * released o: look again (heap.c says why) */
  lobj *o = obj_check(L, 1, "o:dup", &h);
  int rc = hl_ref_dup(h, o->ref, &d->ref);
  if (rc) return lhl_result(L, "o:dup", h, rc);
  return 1;
}

/***
Copy payload bytes out.
@function object:read
@tparam[opt=0] integer offset
@tparam[opt] integer length the rest by default
@treturn string
*/
/* o:read(offset=0, length=size-offset) -> string */
static int o_read(lua_State *L) {
  static const char fn[] = "o:read";
  hl_heap *h;
  lobj *o = obj_check(L, 1, fn, &h);
  hl_object_info info;
  /* (a broken invariant -- the header overwritten -- is a failure, returned
   * as nil, message, "ECHECK" as docs/lua.md's Errors says; it was raised) */
  int rc = hl_ref_info(h, o->ref, &info);
  if (rc) return lhl_result(L, fn, h, rc);
  uint64_t off = lhl_arg_uint(L, 2, fn, "offset", info.size, 0);
  uint64_t len = lhl_arg_uint(L, 3, fn, "length", info.size - off, (int64_t)(info.size - off));
  luaL_Buffer b;
  char *dst = luaL_buffinitsize(L, &b, (size_t)len);
  o = obj_check(L, 1, fn, &h); /* (after an allocation: heap.c says why) */
  rc = hl_ref_read(h, o->ref, off, dst, len);
  if (rc) return lhl_result(L, fn, h, rc);
  luaL_pushresultsize(&b, (size_t)len);
  return 1;
}

/***
Copy payload bytes in.
@function object:write
@tparam string data
@tparam[opt=0] integer offset
@treturn object the object itself (`o:write(a):write(b, 16)`)
*/
/* o:write(data, offset=0) */
static int o_write(lua_State *L) {
  static const char fn[] = "o:write";
  hl_heap *h;
  char bb[80];
  lobj *o = obj_check(L, 1, fn, &h);
  if (lua_type(L, 2) != LUA_TSTRING)
    return lhl_fail(L, fn, "data must be a string, got %s", lhl_shown(L, 2, bb, sizeof bb));
  size_t len = 0;
  const char *src = lua_tolstring(L, 2, &len);
  hl_object_info info;
  int rc = hl_ref_info(h, o->ref, &info); /* (as o:read) */
  if (rc) return lhl_result(L, fn, h, rc);
  uint64_t off = lhl_arg_uint(L, 3, fn, "offset", info.size, 0);
  if (len > info.size - off) {
    char c[48];
    return lhl_fail(L, fn, "%s at offset %" PRIu64 " do%s not fit a %" PRIu64 "-byte payload",
                    lhl_count(c, sizeof c, len, "byte"), off, len == 1 ? "es" : "", info.size);
  }
  rc = hl_ref_write(h, o->ref, off, src, len);
  if (rc) return lhl_result(L, fn, h, rc);
  lua_pushvalue(L, 1); /* as file:write, the object: o:write(a):write(b, 16) */
  return 1;
}

/* A 1-based slot key at idx -> the 0-based C slot, checked against the object. */
static uint64_t slot_index(lua_State *L, int idx, const char *fn, hl_heap *h, lobj *o) {
  char b[80];
  int ok = 0;
  lua_Integer i = lua_tointegerx(L, idx, &ok);
  int beyond = ok ? 0 : lhl_beyond_int64(L, idx); /* (1e300: out of range, an integer) */
  if ((!ok && !beyond) || lua_type(L, idx) != LUA_TNUMBER)
    return (uint64_t)lhl_fail(L, fn, "slot index must be an integer, got %s",
                              lhl_shown(L, idx, b, sizeof b));
  hl_object_info info;
  obj_info(L, fn, h, o, &info);
  if (beyond)
    return (uint64_t)lhl_fail(L, fn, "slot index %s out of range [1, %" PRIu64 "]",
                              lhl_shown(L, idx, b, sizeof b), info.refs);
  if (info.refs == 0)
    return (uint64_t)lhl_fail(L, fn, "slot index %lld: the object has no slots (#o == 0)",
                              (long long)i);
  if (i < 1 || (uint64_t)i > info.refs)
    return (uint64_t)lhl_fail(L, fn, "slot index %lld out of range [1, %" PRIu64 "]", (long long)i,
                              info.refs);
  return (uint64_t)(i - 1);
}

/* Methods of an object, looked up by obj_index for string keys. */
static const luaL_Reg obj_methods[] = {
    {"release", o_release}, {"released", o_released}, {"size", o_size},   {"refs", o_refs},
    {"address", o_address}, {"large", o_large},       {"heap", o_heap},   {"checksum", o_checksum},
    {"dup", o_dup},         {"read", o_read},         {"write", o_write}, {"id", o_id},
    {NULL, NULL}};

/* o[i] -> object or nil (a NEW root to the slot's object); o.method -> method */
static int obj_index(lua_State *L) {
  if (lhl_method(L, "; o[i] for slots")) return 1;
  static const char fn[] = "o[i]";
  hl_heap *h;
  lobj *o = obj_check(L, 1, fn, &h);
  uint64_t slot = slot_index(L, 2, fn, h, o);
  lua_getiuservalue(L, 1, 1);
  lobj *v = lhl_obj_new(L, -1);
  o = obj_check(L, 1, fn, &h); /* (after an allocation: heap.c says why) */
  lhl_check_rc(L, fn, h, hl_ref_get(h, o->ref, slot, &v->ref));
  if (v->ref == 0) lua_pushnil(L);
  return 1;
}

/* o[i] = object or nil */
static int obj_newindex(lua_State *L) {
  static const char fn[] = "o[i] = v";
  char b[80];
  hl_heap *h;
  lobj *o = obj_check(L, 1, fn, &h);
  if (lua_type(L, 2) == LUA_TSTRING)
    return lhl_fail(L, fn, "cannot set field '%s' (an object has slots o[1..#o], not fields)",
                    lua_tostring(L, 2));
  uint64_t slot = slot_index(L, 2, fn, h, o);
  hl_ref value = 0;
  if (!lua_isnil(L, 3)) {
    lobj *v = lhl_obj_at(L, 3);
    if (!v) return lhl_fail(L, fn, "v must be a heaplab object or nil, got %s",
                            lhl_shown(L, 3, b, sizeof b));
    lua_getiuservalue(L, 1, 1);
    lua_getiuservalue(L, 3, 1);
    int same = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    if (!same) {
      lheap *vh = lhl_uv_heap(L, 3);
      /* (a closed heap's handle was named another heap's: say what it is) */
      if (vh && !vh->h) return lhl_fail(L, fn, "v's heap is closed");
      return lhl_fail(L, fn, "v belongs to another heap");
    }
    if (v->ref == 0) return lhl_fail(L, fn, "v was released");
    value = v->ref;
  }
  lhl_check_rc(L, fn, h, hl_ref_set(h, o->ref, slot, value));
  return 0;
}

static int obj_len(lua_State *L) {
  hl_heap *h;
  lobj *o = obj_check(L, 1, "#o", &h);
  hl_object_info info;
  obj_info(L, "#o", h, o, &info);
  lua_pushinteger(L, (lua_Integer)info.refs);
  return 1;
}

/* Two handles are equal when they root the same object of the same heap. */
static int obj_eq(lua_State *L) {
  lobj *a = lhl_obj_at(L, 1), *b = lhl_obj_at(L, 2);
  if (!a || !b || !a->ref || !b->ref) {
    lua_pushboolean(L, lua_rawequal(L, 1, 2));
    return 1;
  }
  lua_getiuservalue(L, 1, 1);
  lua_getiuservalue(L, 2, 1);
  int same_heap = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  lheap *lh = lhl_uv_heap(L, 1);
  /* one call, both objects read under one hold of the heap lock: between
   * two hl_ref_info calls the background collector could move the object,
   * and two handles to it compared unequal */
  int same = 0;
  lua_pushboolean(L, same_heap && lh && lh->h && !hl_ref_same(lh->h, a->ref, b->ref, &same) &&
                  same);
  return 1;
}

static int obj_tostring(lua_State *L) {
  lobj *o = lhl_obj_at(L, 1);
  if (!o) return lhl_tostring_other(L, OBJ_MT);
  lheap *lh = lhl_uv_heap(L, 1);
  hl_object_info info;
  if (o->ref == 0)
    lua_pushstring(L, "heaplab.object (released)");
  else if (!lh)
    lua_pushstring(L, "heaplab.object (its user value is not its heap)");
  else if (!lh->h)
    lua_pushstring(L, "heaplab.object (heap closed)");
  else if (hl_ref_info(lh->h, o->ref, &info))
    lua_pushstring(L, "heaplab.object (stale)");
  else {
    char line[160];
    snprintf(line, sizeof line, "heaplab.object(size=%" PRIu64 ", refs=%" PRIu64 "%s): 0x%" PRIx64,
             info.size, info.refs, info.large ? ", large" : "", info.address);
    lua_pushstring(L, line);
  }
  return 1;
}

static const luaL_Reg obj_meta[] = {
    {"__gc", lhl_finalize},
    {"__close", lhl_finalize},
    {"__tostring", obj_tostring},
    {"__newindex", obj_newindex},
    {"__len", obj_len},
    {"__eq", obj_eq},
    {NULL, NULL}};

void lhl_open_object(lua_State *L) {
  lhl_new_type(L, OBJ_MT, obj_meta, obj_methods, obj_index);
  lua_pop(L, 1);
}
