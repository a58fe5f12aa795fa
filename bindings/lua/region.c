/*
 * region.c -- heaplab.region: a conservatively scanned root region (E7).
 *
 * The userdata owns n machine words (C memory, zeroed) registered with
 * hl_roots_add(..., conservative = 1); its user value holds the heap
 * userdata, so the heap stays alive while the region does, and a region
 * whose heap was closed finds the hl_heap * gone and refuses to run.  The
 * user value can be replaced (debug.setuservalue), so the heap is also kept
 * in a weak-keyed registry table, region -> heap: it keeps the heap alive
 * while the region lives (and during its __gc), and tells the finalizer
 * which heap to unregister the words from whatever the user value is.  One
 * finalizer (lhl_region_finalize) serves __gc, __close and reg:remove(): it
 * unregisters the words (if the heap is still open) and frees them.  A
 * closed heap was freed synchronously (hl_heap_free stops its collector),
 * so nothing reads the words after that.  Words are 1-based, as slots are.
 */
/*** @submodule heaplab */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "lhl.h"

/* The registry's weak-keyed table region -> heap userdata. */
static const char owners_key = 0;

/* Push the owners table, made again when the registry's entry is not a
 * table (debug.getregistry() reaches it: set to nil or 42, it was indexed as
 * a table and the next region crashed).  A replaced table loses the entries
 * of the regions made before: theirs keep their heap through their user
 * value, and their finalizer frees the words only if that is still it. */
static void owners_table(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &owners_key) == LUA_TTABLE) return;
  lua_pop(L, 1);
  lua_newtable(L);
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &owners_key);
}

/* The heap userdata the owners table holds for the region at idx, or NULL. */
static lheap *registered_owner(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &owners_key) != LUA_TTABLE) {
    lua_pop(L, 1);
    return NULL;
  }
  lua_pushvalue(L, idx);
  lua_rawget(L, -2);
  lheap *lh = lhl_heap_at(L, -1);
  lua_pop(L, 2);
  return lh;
}

/* The region at idx and its open heap; an error if removed or closed. */
static lregion *region_check(lua_State *L, int idx, const char *fn, hl_heap **hp) {
  char b[80];
  lregion *r = lhl_region_at(L, idx);
  if (!r) {
    lhl_fail(L, fn, "expected a heaplab region as self (call it with ':'), got %s",
             lhl_shown(L, idx, b, sizeof b));
    return NULL;
  }
  lheap *lh = lhl_uv_heap(L, idx); /* the region's user value keeps the heap alive */
  if (!lh || lh != r->owner) {
    lua_getiuservalue(L, idx, 1);
    lhl_fail(L, fn, "the region's user value is not its heap (it is %s: replaced by "
             "debug.setuservalue?)", lhl_shown(L, -1, b, sizeof b));
    return NULL;
  }
  if (!lh->h) lhl_fail(L, fn, "the region's heap is closed");
  if (!r->words) lhl_fail(L, fn, "the region was removed");
  if (hp) *hp = lh->h;
  return r;
}

/* The one finalizer: __gc, __close and reg:remove().  The words are freed
 * only when no heap can scan them any more: unregistered from the open heap
 * they were registered with, or that heap closed.  That heap is the user
 * value, or -- when debug.setuservalue replaced it -- the owners table's
 * entry (still there in __gc: Lua clears a weak key only once its
 * finalized object is freed).  If neither is the region's heap (the
 * registry was tampered with too), the words are left allocated: a leak,
 * never a use after free. */
int lhl_region_finalize(lua_State *L) {
  lregion *r = lhl_region_at(L, 1);
  if (!r || !r->words) return 0;
  void **w = r->words;
  r->words = NULL;
  lheap *lh = lhl_uv_heap(L, 1);
  if (!lh || lh != r->owner) lh = registered_owner(L, 1);
  if (!lh || lh != r->owner) return 0;
  if (!lh->h || hl_roots_remove(lh->h, w) == HL_OK) free(w);
  return 0;
}

/* h:conservative_region(words) (heap.c calls this with the heap at 1). */
int lhl_region_new(lua_State *L) {
  static const char fn[] = "h:conservative_region";
  lheap *at = lhl_heap_at(L, 1);
  hl_stats st;
  /* (beyond the 64-bit integers: hl_roots_fit's range, as the Python binding
   * names it -- the words the reservation holds) */
  if (lhl_beyond_int64(L, 2) > 0 && at && at->h && hl_stats_get(at->h, &st) == HL_OK)
    return lhl_fail_beyond(L, 2, fn, "words", 1,
                           (int64_t)(st.reserved_bytes / sizeof(void *)));
  uint64_t n = lhl_arg_range(L, 2, fn, "words", 1, UINT64_MAX, -1);
  lregion *r = lua_newuserdatauv(L, sizeof *r, 1); /* (may run a finalizer) */
  r->tag = LHL_TAG_REGION;
  r->words = NULL;
  r->n = 0;
  r->owner = NULL;
  lhl_setmetatable(L, REGION_MT);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);
  owners_table(L); /* owners[region] = heap */
  lua_pushvalue(L, -2);
  lua_pushvalue(L, 1);
  lua_rawset(L, -3); /* (may run a finalizer) */
  lua_pop(L, 1);
  lheap *lh = lhl_heap_at(L, 1); /* (h:conservative_region checked it) */
  r->owner = lh;
  if (!lh->h) return lhl_fail(L, fn, "the heap is closed");
  /* (a region larger than the heap's reservation refused before its words
   * are allocated: 2^33 asked calloc for 64 GiB) */
  int fit = hl_roots_fit(lh->h, n);
  if (fit) return lhl_result(L, fn, lh->h, fit);
  void **w = n <= SIZE_MAX / sizeof(void *) ? calloc((size_t)n, sizeof(void *)) : NULL;
  if (!w) {
    char msg[160], c[48];
    snprintf(msg, sizeof msg, "%s: cannot allocate %s (ENOMEM)", fn,
             lhl_count(c, sizeof c, n, "word"));
    return lhl_push_failure(L, msg, HL_ENOMEM);
  }
  int rc = hl_roots_add(lh->h, w, n, 1);
  if (rc) {
    free(w);
    return lhl_result(L, fn, lh->h, rc);
  }
  r->words = w;
  r->n = n;
  return 1;
}

/***
A conservatively scanned root region of machine words (`heap:conservative_region`).
Any word that points at an allocated object -- or into one, with the heap option
`conservative_interior` (the default) -- keeps that object and everything it refers to
alive; a word that points nowhere keeps nothing.  `#reg` is its number of words,
`reg[i]` (1-based) a word as an integer (a 64-bit value: may show negative),
`reg[i] = v` stores a handle's object address, an integer (its 64 bits), or 0 for nil.
Removed by `__gc` and `__close` too.
@type region
*/

/* A word to store: an object of the region's heap (0, and its handle in
 * *ref: the address is read as the word is stored, store_words), an
 * integer (its 64 bits), nil (0). */
static uint64_t word_value(lua_State *L, int ridx, int idx, const char *fn, hl_ref *ref) {
  char b[80];
  idx = lua_absindex(L, idx);
  *ref = 0;
  if (lua_isnoneornil(L, idx)) return 0;
  if (lua_type(L, idx) == LUA_TNUMBER) {
    int ok = 0;
    lua_Integer v = lua_tointegerx(L, idx, &ok);
    if (!ok)
      return (uint64_t)lhl_fail(L, fn, "a word is an integer, an object or nil, got %s",
                                lhl_shown(L, idx, b, sizeof b));
    return (uint64_t)v;
  }
  lobj *o = lhl_obj_at(L, idx);
  if (!o)
    return (uint64_t)lhl_fail(L, fn, "a word is an integer, an object or nil, got %s",
                              lhl_shown(L, idx, b, sizeof b));
  lua_getiuservalue(L, ridx, 1);
  lua_getiuservalue(L, idx, 1);
  int same = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  if (!same) return (uint64_t)lhl_fail(L, fn, "the object belongs to another heap");
  if (o->ref == 0) return (uint64_t)lhl_fail(L, fn, "the object was released");
  *ref = o->ref;
  return 0;
}

/* A 1-based word index at idx -> the 0-based index. */
static uint64_t word_index(lua_State *L, int idx, const char *fn, const lregion *r) {
  char b[80];
  int ok = 0;
  lua_Integer i = lua_tointegerx(L, idx, &ok);
  int beyond = ok ? 0 : lhl_beyond_int64(L, idx); /* (1e300: out of range, an integer) */
  if ((!ok && !beyond) || lua_type(L, idx) != LUA_TNUMBER)
    return (uint64_t)lhl_fail(L, fn, "word index must be an integer, got %s",
                              lhl_shown(L, idx, b, sizeof b));
  if (beyond)
    return (uint64_t)lhl_fail(L, fn, "word index %s out of range [1, %" PRIu64 "]",
                              lhl_shown(L, idx, b, sizeof b), r->n);
  if (i < 1 || (uint64_t)i > r->n)
    return (uint64_t)lhl_fail(L, fn, "word index %lld out of range [1, %" PRIu64 "]",
                              (long long)i, r->n);
  return (uint64_t)(i - 1);
}

static inline void store(lregion *r, uint64_t i, uint64_t v) {
  __atomic_store_n(&r->words[i], (void *)(uintptr_t)v, __ATOMIC_RELAXED);
}

/* Store n words from word `start` (0-based): v[i], or the address of the
 * object of handle refs[i] when that is not 0 -- hl_roots_store, which
 * reads the address and stores every word with the heap held (no cycle
 * between the read and the store, no mark during the stores: heaplab.h).
 * Nothing is stored if a handle was released meanwhile. */
static void store_words(lua_State *L, const char *fn, lregion *r, hl_heap *h, uint64_t start,
                        uint64_t *v, const hl_ref *refs, uint64_t n) {
  uint64_t bad = 0;
  int rc = hl_roots_store(h, &r->words[start], v, refs, n, &bad);
  if (rc != HL_OK && bad != UINT64_MAX)
    lhl_fail(L, fn, "word %" PRIu64 ": its object was released before it was stored (nothing "
             "was stored)", start + bad + 1);
  lhl_check_rc(L, fn, h, rc); /* (not a handle's failure) */
}

/***
Zero every word: the region keeps nothing alive from now on.
@function region:scrub
@treturn region the region itself
*/
static int g_scrub(lua_State *L) {
  lregion *r = region_check(L, 1, "reg:scrub", NULL);
  for (uint64_t i = 0; i < r->n; i++) store(r, i, 0);
  lua_pushvalue(L, 1);
  return 1;
}

/***
Store many words at once: the array's values (integers, objects, no holes) from word
`start` on.  Nothing is stored if one is bad or they do not fit.
@function region:write
@tparam table values
@tparam[opt=1] integer start
@treturn region the region itself
*/
static int g_write(lua_State *L) {
  static const char fn[] = "reg:write";
  char b[80];
  hl_heap *h;
  lregion *r = region_check(L, 1, fn, &h);
  if (!lua_istable(L, 2))
    return lhl_fail(L, fn, "values must be a table (an array), got %s",
                    lhl_shown(L, 2, b, sizeof b));
  if (lhl_beyond_int64(L, 3) > 0) /* (the words from which values fit: Python's range) */
    return lhl_fail_beyond(L, 3, fn, "start", 1, (int64_t)r->n + 1);
  uint64_t start = lhl_arg_range(L, 3, fn, "start", 1, UINT64_MAX, 1);
  /* #values, its __len honoured: an integer >= 0 (luaL_len said "object
   * length is not an integer", naming no function; -1 was "-1 words") */
  lua_len(L, 2);
  int ok = 0;
  lua_Integer n = lua_tointegerx(L, -1, &ok);
  int beyond = ok ? 0 : lhl_beyond_int64(L, -1); /* (1e300: an integer out of range) */
  if (beyond)
    return lhl_fail(L, fn, beyond > 0 ? "#values is out of range (its __len returned %s)"
                                      : "#values must be >= 0 (its __len returned %s)",
                    lhl_shown(L, -1, b, sizeof b));
  if (!ok || lua_type(L, -1) != LUA_TNUMBER)
    return lhl_fail(L, fn, "#values must be an integer (its __len returned %s)",
                    lhl_shown(L, -1, b, sizeof b));
  if (n < 0) return lhl_fail(L, fn, "#values must be >= 0 (its __len returned %lld)", (long long)n);
  lua_pop(L, 1);
  r = region_check(L, 1, fn, &h); /* (__len may run any code) */
  if (start - 1 > r->n || (uint64_t)n > r->n - (start - 1)) {
    char cn[48], cr[48];
    return lhl_fail(L, fn, "%s from word %" PRIu64 " do%s not fit a region of %s",
                    lhl_count(cn, sizeof cn, (uint64_t)n, "word"), start, n == 1 ? "es" : "",
                    lhl_count(cr, sizeof cr, r->n, "word"));
  }
  /* the values, then the handles (freed by Lua) */
  uint64_t *v = lua_newuserdatauv(L, (size_t)(n ? n : 1) * 2 * sizeof *v, 0);
  hl_ref *refs = v + n;
  for (lua_Integer i = 1; i <= n; i++) {
    lua_geti(L, 2, i);
    /* after an allocation, and the table's __index may run any code (remove
     * the region, close the heap, collect): look again before each word
     * (heap.c); an object's address is read as it is stored */
    r = region_check(L, 1, fn, &h);
    v[i - 1] = word_value(L, 1, -1, fn, &refs[i - 1]);
    lua_pop(L, 1);
  }
  r = region_check(L, 1, fn, &h); /* (n == 0: after the allocation above) */
  store_words(L, fn, r, h, start - 1, v, refs, (uint64_t)n);
  lua_pushvalue(L, 1);
  return 1;
}

/***
Every word, as an array of integers.
@function region:words
@treturn table
*/
static int g_words(lua_State *L) {
  lregion *r = region_check(L, 1, "reg:words", NULL);
  uint64_t n = r->n;
  lua_createtable(L, n < INT32_MAX ? (int)n : 0, 0); /* (may run a finalizer) */
  r = region_check(L, 1, "reg:words", NULL);
  for (uint64_t i = 0; i < n; i++) {
    lua_pushinteger(L, (lua_Integer)(uintptr_t)__atomic_load_n(&r->words[i], __ATOMIC_RELAXED));
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 1;
}

/***
Unregister the region and free its words now.  Idempotent.
@function region:remove
@treturn boolean true
*/
static int g_remove(lua_State *L) {
  char b[80];
  if (!lhl_region_at(L, 1))
    return lhl_fail(L, "reg:remove", "expected a heaplab region as self (call it with ':'), got %s",
                    lhl_shown(L, 1, b, sizeof b));
  lhl_region_finalize(L);
  lua_pushboolean(L, 1); /* (methods with nothing to return return true) */
  return 1;
}

/***
Does the region keep nothing alive any more: was it removed (`reg:remove()`, `__close`,
`__gc`), or its heap closed?  As `h:closed()`, never an error.
@function region:removed
@treturn boolean
*/
static int g_removed(lua_State *L) {
  char b[80];
  lregion *r = lhl_region_at(L, 1);
  if (!r)
    return lhl_fail(L, "reg:removed", "expected a heaplab region as self, got %s",
                    lhl_shown(L, 1, b, sizeof b));
  lheap *lh = lhl_uv_heap(L, 1);
  lua_pushboolean(L, r->words == NULL || (lh && lh == r->owner && !lh->h));
  return 1;
}

/***
The heap whose collector scans the region.
@function region:heap
@treturn heap
*/
static int g_heap(lua_State *L) {
  char b[80];
  if (!lhl_region_at(L, 1))
    return lhl_fail(L, "reg:heap", "expected a heaplab region as self, got %s",
                    lhl_shown(L, 1, b, sizeof b));
  lua_getiuservalue(L, 1, 1);
  return 1;
}

static const luaL_Reg region_methods[] = {
    {"scrub", g_scrub},     {"write", g_write}, {"words", g_words}, {"remove", g_remove},
    {"removed", g_removed}, {"heap", g_heap},   {NULL, NULL}};

/* reg[i] -> integer; reg.method -> method */
static int region_index(lua_State *L) {
  if (lhl_method(L, "; reg[i] for words")) return 1;
  lregion *r = region_check(L, 1, "reg[i]", NULL);
  uint64_t i = word_index(L, 2, "reg[i]", r);
  lua_pushinteger(L, (lua_Integer)(uintptr_t)__atomic_load_n(&r->words[i], __ATOMIC_RELAXED));
  return 1;
}

/* reg[i] = object | integer | nil */
static int region_newindex(lua_State *L) {
  static const char fn[] = "reg[i] = v";
  hl_heap *h;
  lregion *r = region_check(L, 1, fn, &h);
  if (lua_type(L, 2) == LUA_TSTRING)
    return lhl_fail(L, fn, "cannot set field '%s' (a region has words reg[1..#reg], not fields)",
                    lua_tostring(L, 2));
  uint64_t i = word_index(L, 2, fn, r);
  hl_ref ref;
  uint64_t v = word_value(L, 1, 3, fn, &ref);
  store_words(L, fn, r, h, i, &v, &ref, 1);
  return 0;
}

/* #reg: as reg[i] and #o, an error once the region was removed or its heap
 * closed (it gave the word count then, while reg[i] raised). */
static int region_len(lua_State *L) {
  lregion *r = region_check(L, 1, "#reg", NULL);
  lua_pushinteger(L, (lua_Integer)r->n);
  return 1;
}

static int region_tostring(lua_State *L) {
  lregion *r = lhl_region_at(L, 1);
  if (!r) return lhl_tostring_other(L, REGION_MT);
  lheap *lh = lhl_uv_heap(L, 1);
  if (!r->words) {
    lua_pushstring(L, "heaplab.region (removed)");
  } else if (!lh || lh != r->owner) {
    lua_pushstring(L, "heaplab.region (its user value is not its heap)");
  } else if (!lh->h) {
    lua_pushstring(L, "heaplab.region (heap closed)");
  } else {
    uint64_t nonzero = 0;
    for (uint64_t i = 0; i < r->n; i++)
      nonzero += __atomic_load_n(&r->words[i], __ATOMIC_RELAXED) != NULL;
    char line[120];
    snprintf(line, sizeof line, "heaplab.region(words=%" PRIu64 ", nonzero=%" PRIu64 ")", r->n,
             nonzero);
    lua_pushstring(L, line);
  }
  return 1;
}

static const luaL_Reg region_meta[] = {
    {"__gc", lhl_finalize},      {"__close", lhl_finalize}, {"__tostring", region_tostring},
    {"__newindex", region_newindex}, {"__len", region_len}, {NULL, NULL}};

void lhl_open_region(lua_State *L) {
  lhl_new_type(L, REGION_MT, region_meta, region_methods, region_index);
  lua_pop(L, 1);
  owners_table(L); /* (once per state) */
  lua_pop(L, 1);
}
