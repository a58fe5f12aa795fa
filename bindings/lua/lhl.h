/*
 * lhl.h -- what the files of the Lua module share (internal; not installed).
 *
 *   heaplab_lua.c  the module table: declarations read from C, probes, luaopen
 *   heap.c         heaplab.heap      (hl_heap *)
 *   object.c       heaplab.object    (hl_ref: a root)
 *   sampler.c      heaplab.sampler   (hl_sampler *)
 *   region.c       heaplab.region    (a conservative root region: words)
 *   args.c         errors and argument checking shared by all of them
 *   show.c         __tostring of the stats, footprint and events tables
 */
#ifndef HEAPLAB_LHL_H
#define HEAPLAB_LHL_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include <lauxlib.h>
#include <lua.h>

#include "heaplab.h"
#include "lhl_int64.h" /* lhl_beyond_int64 (shared with the launcher's heaplab.client) */
#include "lhl_shown.h" /* lhl_shown_value (shared with the launcher's heaplab.client) */

#define HEAP_MT "heaplab.heap"
#define OBJ_MT "heaplab.object"
#define SAMPLER_MT "heaplab.sampler"
#define REGION_MT "heaplab.region"
/* plain tables with a __tostring (show.c) */
#define STATS_MT "heaplab.stats"
#define FOOTPRINT_MT "heaplab.footprint"
#define EVENTS_MT "heaplab.events"
#define EVENT_MT "heaplab.event"
/* the other returned tables, shown by one __tostring (show.c, show_table) */
#define SUMMARY_MT "heaplab.summary"       /* s:summary() */
#define SERIES_MT "heaplab.series"         /* s:series() */
#define CHURN_MT "heaplab.churn"           /* h:churn() */
#define EFFECTIVE_MT "heaplab.effective_options" /* h:options() */
#define OPTIONS_MT "heaplab.options"       /* heaplab.options() */
#define OPTION_MT "heaplab.option"         /* each of its declarations */
#define FAULTS_MT "heaplab.faults"         /* h:faults() */
#define FAULT_MT "heaplab.fault"           /* each of its sites */
/* The integer fields of s:summary() (hl_sampler_summary) and h:churn()
 * (hl_churn_result), in the order tostring shows them: the builders
 * (sampler.c, heap.c) set them from this list and show.c reads its order
 * from it, one list each. */
#define LHL_SUMMARY_FIELDS(F)                                                  \
  F(samples) F(min_phys) F(max_phys) F(min_phys_after_mark) F(max_phys_after_mark) \
  F(min_rss) F(max_rss) F(mark_ns) F(interval_us) F(stored)
#define LHL_CHURN_FIELDS(F)                                                    \
  F(allocations) F(allocated_bytes) F(cycles) F(pacing_waits) F(pacing_wait_ns) \
  F(elapsed_ns) F(peak_large_live_bytes)

/* The first word of each of the module's userdata: which kind it is.  A
 * value is one of ours by this word and its size (lhl_ud), never by its
 * metatable alone -- debug.setmetatable gives any userdata any metatable
 * (a heap read as a sampler crashed), and a copy of ours is not ours (a
 * heap whose __gc refused it leaked). */
#define LHL_TAG_HEAP 0x706165682e6c68ULL    /* "hl.heap" */
#define LHL_TAG_OBJ 0x6a626f2e6c68ULL       /* "hl.obj" */
#define LHL_TAG_SAMPLER 0x706d61732e6c68ULL /* "hl.samp" */
#define LHL_TAG_REGION 0x6765722e6c68ULL    /* "hl.reg" */

typedef struct lheap {
  uint64_t tag;            /* LHL_TAG_HEAP */
  hl_heap *h;              /* NULL when closed */
  int manual;              /* mode=manual: no handles, no collector */
  int64_t events_capacity; /* events() reads at most this many */
} lheap;

typedef struct lobj {
  uint64_t tag; /* LHL_TAG_OBJ */
  hl_ref ref; /* 0 when released (or never acquired); user value 1 = the heap userdata */
} lobj;

typedef struct lsampler {
  uint64_t tag;  /* LHL_TAG_SAMPLER */
  hl_sampler *s; /* NULL when stopped */
} lsampler;

typedef struct lregion {
  uint64_t tag; /* LHL_TAG_REGION */
  void **words; /* NULL once removed */
  uint64_t n;
  /* the heap userdata the words are registered with; alive while the region
   * is (the owners table), read through only once a live heap userdata (the
   * user value, or the owners table's entry) is found to be this one */
  const struct lheap *owner;
} lregion;

/* The userdata at idx when the module made it as that kind (tag and size),
 * else NULL. */
void *lhl_ud(lua_State *L, int idx, uint64_t tag, size_t size);
#define lhl_heap_at(L, i) ((lheap *)lhl_ud((L), (i), LHL_TAG_HEAP, sizeof(lheap)))
#define lhl_obj_at(L, i) ((lobj *)lhl_ud((L), (i), LHL_TAG_OBJ, sizeof(lobj)))
#define lhl_sampler_at(L, i) ((lsampler *)lhl_ud((L), (i), LHL_TAG_SAMPLER, sizeof(lsampler)))
#define lhl_region_at(L, i) ((lregion *)lhl_ud((L), (i), LHL_TAG_REGION, sizeof(lregion)))
/* The kinds' finalizers (each does nothing to a value of another kind) and
 * the one __gc and __close of every kind, which runs the right one
 * whatever metatable the value has now. */
int lhl_heap_finalize(lua_State *L);
int lhl_obj_finalize(lua_State *L);
int lhl_region_finalize(lua_State *L);
int lhl_sampler_finalize(lua_State *L);
int lhl_finalize(lua_State *L);
int lhl_tostring_other(lua_State *L, const char *mt);

/* args.c */
int lhl_fail(lua_State *L, const char *fn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int lhl_fail_rc(lua_State *L, const char *fn, hl_heap *h, int rc);
/* "fn: msg (CODE)", msg's own leading "verb: " dropped when it is fn's last name. */
void lhl_rc_text(char *buf, size_t len, const char *fn, const char *msg, int rc);
void lhl_check_rc(lua_State *L, const char *fn, hl_heap *h, int rc);
/* The table at idx read as Lua code reads it (pairs honours __pairs, a
 * name's value found through __index), as a plain table pushed on the
 * stack; returns its index.  May run any code. */
int lhl_plain_table(lua_State *L, int idx, const char *const *names, size_t nnames);
/* A failed operation (rc != 0): nil, message, code when lhl_is_failure(rc),
 * else a raised error.  Returns the number of results pushed (3). */
int lhl_result(lua_State *L, const char *fn, hl_heap *h, int rc);
int lhl_is_failure(int rc);
int lhl_push_failure(lua_State *L, const char *message, int rc);
const char *lhl_shown(lua_State *L, int idx, char *buf, size_t len);
/* A float as a message shows it ("nan", never "-nan"). */
const char *lhl_float(double v, char *buf, size_t len);
int64_t lhl_arg_int(lua_State *L, int idx, const char *fn, const char *name);
uint64_t lhl_arg_uint(lua_State *L, int idx, const char *fn, const char *name, uint64_t max,
                      int64_t def);
uint64_t lhl_arg_range(lua_State *L, int idx, const char *fn, const char *name, uint64_t min,
                       uint64_t max, int64_t def);
/* An integer >= 0 that the C call checks against [low, high] itself (its
 * own message, from the call); one beyond the 64-bit integers (2^63, 1e300),
 * which never reaches the call, said out of that range here, as the Python
 * binding says it of 2**64 -- "(beyond the 64-bit integers)" named no range
 * where one more than the call's maximum names it (session 44).  `def` as
 * lhl_arg_uint's. */
uint64_t lhl_arg_checked(lua_State *L, int idx, const char *fn, const char *name, int64_t low,
                         int64_t high, int64_t def);
/* Raise "name <the value at idx> out of range [low, high]" (INT64_MAX said
 * 2^63-1): for an integer beyond the 64-bit integers, with C's range. */
int lhl_fail_beyond(lua_State *L, int idx, const char *fn, const char *name, int64_t low,
                    int64_t high);
const char *lhl_count(char *buf, size_t len, uint64_t n, const char *noun);
double lhl_arg_number(lua_State *L, int idx, const char *fn, const char *name);
int lhl_arg_bool(lua_State *L, int idx, const char *fn, const char *name, int def);
void lhl_mib(char *buf, size_t len, uint64_t bytes);
/* The module's metatables, checked as they are read from the registry
 * (debug.getregistry() can replace them) and made again when not ours. */
void lhl_newmetatable(lua_State *L, const char *name);
void lhl_setmetatable(lua_State *L, const char *name);
void lhl_new_type(lua_State *L, const char *name, const luaL_Reg *meta, const luaL_Reg *methods,
                  lua_CFunction index);
int lhl_method(lua_State *L, const char *hint);

/* Ctrl-C during a long call (fill, thin, churn, collect, checksum): while
 * SIGINT has a handler -- lua.c's, heaplab-lua's, a host's -- heaplab's is put
 * in front of it for the call (hl_interrupt_attach: it stops the call at a
 * safe point with HL_EINTR, then runs that handler), and the disposition
 * that was there is put back after.  SIG_DFL (the process ends) and SIG_IGN
 * are left alone.  lhl_sigint_end before anything that may raise.  A paced
 * h:alloc is no long call: the heap's wait hook does the same for its wait
 * alone (lhl_wait_hook). */
typedef struct lhl_sigint {
  int attached;
} lhl_sigint;
void lhl_sigint_begin(lhl_sigint *s);
void lhl_sigint_end(lhl_sigint *s);
/* The hook of each heap the module makes: the same, around a paced wait. */
void lhl_wait_hook(hl_heap *h, int begins, void *arg);

/* show.c */
void lhl_open_show(lua_State *L);

/* heaplab_lua.c */
void lhl_push_option_value(lua_State *L, int index, const hl_option_info *info, int64_t v);

/* heap.c */
int lhl_heap_new(lua_State *L);
/* The heap userdata in user value 1 of the handle or region at idx, or NULL
 * when that is not a heap (debug.setuservalue can put any value there).
 * Nothing is left on the stack: the user value keeps the heap alive. */
lheap *lhl_uv_heap(lua_State *L, int idx);
void lhl_open_heap(lua_State *L);

/* object.c */
lobj *lhl_obj_new(lua_State *L, int heap_idx);
void lhl_open_object(lua_State *L);

/* region.c */
int lhl_region_new(lua_State *L);
void lhl_open_region(lua_State *L);

/* sampler.c */
int lhl_sampler_new(lua_State *L);
void lhl_open_sampler(lua_State *L);

#endif
