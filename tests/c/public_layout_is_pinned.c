/* The binary interface of HL_ABI_VERSION, pinned: the size and every field
 * offset of every public struct, and the values of the public enums and
 * X-macro lists.  heaplab.h's structs changed (hl_options 312 -> 384 -> 464
 * bytes, options inserted mid-list; hl_stats 488 -> 888) while the soname
 * stayed libheaplab.so.0: a program built against an older header was
 * corrupted by the newer library, with no way to tell (the embedding hunt,
 * session 28).  A change of layout fails here until HL_ABI_VERSION (which
 * the soname follows) and this table change together.
 *
 * Run against the shared library (not the static copy the other tests use):
 * it also checks that the library loaded is libheaplab.so.<HL_ABI_VERSION>
 * and says the same version. */
#include <dlfcn.h>
#include <stddef.h>

#include "check.h"

/* The version this table pins, and the fingerprint of every version's
 * table: append a line for a new version, never edit one. */
#define PINNED_ABI 6
static const struct {
  int abi;
  uint64_t fingerprint;
} history[] = {
    {1, 0xb1830e5876cc1291u},
    {2, 0xee5644d72d1b1b45u}, /* + event large_unmap_pending (HL_EV_COUNT 14) */
    {3, 0x1b4f6c7d58c2cb40u}, /* + event verify_failed (HL_EV_COUNT 15) */
    {4, 0xdf513641cf8d5e9au}, /* + function hl_ref_same (layout as 3) */
    {5, 0x152f3b62bfe8cb09u}, /* + hl_option_info.collected_only (in kind's padding); + function
                                 * hl_heap_set_wait_hook (9be38c0, added under 4) */
    {6, 0xb15bbfd7e110bd97u}, /* + function hl_env_var_kind, enum hl_env_kind (layout as 5) */
};

static int failures;
/* A fingerprint of every pinned value (FNV-1a over what, name and number):
 * the table of a version, once released, is never edited -- a new layout is
 * a new version, and its fingerprint a new line of `history` below. */
static uint64_t fingerprint = 0xcbf29ce484222325u;
static void mix(const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) fingerprint = (fingerprint ^ b[i]) * 0x100000001b3u;
}
static void pinned_value(const char *what, const char *name, long long pinned) {
  mix(what, strlen(what) + 1);
  mix(name, strlen(name) + 1);
  mix(&pinned, sizeof pinned);
}
static void differs(const char *what, const char *name, long long now, long long pinned) {
  fprintf(stderr,
          "public_layout_is_pinned: %s %s is %lld, pinned at %lld for HL_ABI_VERSION %d: the "
          "binary interface changed -- bump HL_ABI_VERSION in core/include/heaplab.h (the "
          "soname follows it) and update the tables of tests/c/public_layout_is_pinned.c "
          "(and PINNED_ABI) to the new layout, together (docs/clients.md)\n",
          what, name, now, pinned, HL_ABI_VERSION);
  failures++;
}
#define SAME(what, name, now, pinned)                                          \
  do {                                                                         \
    pinned_value(what, name, (long long)(pinned));                             \
    if ((long long)(now) != (long long)(pinned))                               \
      differs(what, name, (long long)(now), (long long)(pinned));              \
  } while (0)

typedef struct pin {
  const char *name;
  size_t offset;
} pin;

/* hl_options and hl_stats: every field, in order (HL_OPTIONS, HL_STATS) */
static const pin options_pin[] = {
    {"mode", 0},
    {"page_size", 8},
    {"small_max", 16},
    {"reserve_bytes", 24},
    {"thp", 32},
    {"thp_prefault", 40},
    {"page_release", 48},
    {"warm_pages", 56},
    {"warm_demand_trims", 64},
    {"release_per_sweep", 72},
    {"release_advice", 80},
    {"fallback_advice", 88},
    {"upgrade_per_sweep", 96},
    {"upgrade_budget_counts", 104},
    {"reuse_attempts", 112},
    {"reuse_failed_order", 120},
    {"dump_toggle", 128},
    {"dump_unused", 136},
    {"syscall_retry_max", 144},
    {"syscall_retry_backoff_us", 152},
    {"sweep", 160},
    {"major_sweep", 168},
    {"quiet_bytes", 176},
    {"quiet_counts_large", 184},
    {"major_backstop_cycles", 192},
    {"gc_trigger_bytes", 200},
    {"gc_trigger_min_bytes", 208},
    {"gc_trigger_max_bytes", 216},
    {"adaptive_trigger", 224},
    {"gc_live_ratio", 232},
    {"gc_growth_ratio", 240},
    {"generational", 248},
    {"young_bytes", 256},
    {"young_min_bytes", 264},
    {"young_survival_factor", 272},
    {"full_growth_ratio", 280},
    {"mark_threads", 288},
    {"conservative_interior", 296},
    {"tenure_full_marks", 304},
    {"large_trigger_bytes", 312},
    {"large_pacing", 320},
    {"large_map_bytes", 328},
    {"heap_limit_bytes", 336},
    {"pacing_max_wait_ms", 344},
    {"pacing_give_up_cycles", 352},
    {"collector", 360},
    {"min_cycle_interval_ms", 368},
    {"subpage_release", 376},
    {"compact", 384},
    {"compact_live_pct", 392},
    {"verify", 400},
    {"events_capacity", 408},
    {"tcache_blocks", 416},
    {"tcache_bytes", 424},
    {"tcache_gc_events", 432},
    {"record_refused_release", 440},
    {"init_page_state", 448},
    {"restore_before_format", 456},
};
static const pin stats_pin[] = {
    {"cycles", 0},
    {"major_sweeps", 8},
    {"major_quiet", 16},
    {"major_pressure", 24},
    {"major_backstop", 32},
    {"major_forced", 40},
    {"major_full_mark", 48},
    {"major_growth", 56},
    {"minor_cycles", 64},
    {"promoted_bytes", 72},
    {"dirty_pages_scanned", 80},
    {"whole_marks", 88},
    {"tenured_pages", 96},
    {"remembered_pages_scanned", 104},
    {"verify_failures", 112},
    {"mark_threads_used", 120},
    {"mark_steals", 128},
    {"mark_helper_bytes", 136},
    {"marked_objects", 144},
    {"marked_bytes", 152},
    {"gc_trigger_bytes", 160},
    {"small_bytes_since_cycle", 168},
    {"large_bytes_since_cycle", 176},
    {"small_allocated_bytes", 184},
    {"large_allocated_bytes", 192},
    {"small_live_bytes", 200},
    {"large_live_bytes", 208},
    {"large_objects", 216},
    {"objects_allocated", 224},
    {"objects_freed", 232},
    {"swept_pages", 240},
    {"major_swept_pages", 248},
    {"handles", 256},
    {"total_pages", 264},
    {"reserved_bytes", 272},
    {"owned_pages", 280},
    {"retired_pool_pages", 288},
    {"partial_pool_pages", 296},
    {"free_pool_pages", 304},
    {"released_pool_pages", 312},
    {"reuse_failed_pool_pages", 320},
    {"in_flight_pages", 328},
    {"fallback_pool_pages", 336},
    {"fresh_pages", 344},
    {"reused_pages", 352},
    {"warm_reused_pages", 360},
    {"populated_pages", 368},
    {"released_pages", 376},
    {"release_calls", 384},
    {"rejected_pages", 392},
    {"fallback_pages", 400},
    {"upgraded_pages", 408},
    {"upgrade_attempts", 416},
    {"upgrade_calls", 424},
    {"restore_calls", 432},
    {"restore_failed_pages", 440},
    {"trims", 448},
    {"trim_ns", 456},
    {"trim_backoffs", 464},
    {"trim_backoff_ns", 472},
    {"reuse_backoffs", 480},
    {"syscall_stall_ns", 488},
    {"syscalls", 496},
    {"syscall_retries", 504},
    {"syscall_gave_up", 512},
    {"faults_fired", 520},
    {"pacing_waits", 528},
    {"pacing_wait_ns", 536},
    {"pacing_timeouts", 544},
    {"pacing_gave_up", 552},
    {"cycle_requests", 560},
    {"memory_cycles", 568},
    {"collector_wakeups", 576},
    {"gc_ns", 584},
    {"mark_ns", 592},
    {"minor_gc_ns", 600},
    {"max_pause_ns", 608},
    {"events_dropped", 616},
    {"manual_mallocs", 624},
    {"manual_frees", 632},
    {"tcache_refills", 640},
    {"tcache_flushes", 648},
    {"tcache_gc_visits", 656},
    {"tcache_gc_flushes", 664},
    {"tcache_gc_bytes", 672},
    {"subpage_released_bytes", 680},
    {"subpage_fallback_bytes", 688},
    {"subpage_pages", 696},
    {"subpage_runs", 704},
    {"subpage_rejected_runs", 712},
    {"subpage_upgraded_runs", 720},
    {"subpage_restores", 728},
    {"subpage_restore_failed", 736},
    {"compactions", 744},
    {"evacuated_pages", 752},
    {"evacuated_objects", 760},
    {"evacuated_bytes", 768},
    {"pinned_objects", 776},
    {"compact_ns", 784},
    {"thp_disabled", 792},
    {"thp_enabled", 800},
    {"thp_errno", 808},
    {"thp_chunks_released", 816},
    {"thp_splits", 824},
    {"thp_subpage_splits", 832},
    {"thp_prefault_chunks", 840},
    {"thp_prefault_waits", 848},
    {"thp_prefault_wait_ns", 856},
    {"thp_prefault_unused", 864},
    {"thp_populated_chunks", 872},
    {"thp_populate_refused", 880},
};
#define NPIN(t) (sizeof t / sizeof t[0])

static void list_pinned(const char *what, const pin *pinned, size_t npinned, const char *const *names,
                        const size_t *offsets, size_t n) {
  SAME(what, "field count", n, npinned);
  for (size_t i = 0; i < npinned; i++) pinned_value(what, pinned[i].name, (long long)pinned[i].offset);
  for (size_t i = 0; i < n && i < npinned; i++) {
    if (strcmp(names[i], pinned[i].name)) {
      char at[96];
      snprintf(at, sizeof at, "field %zu (%s, pinned: %s)", i, names[i], pinned[i].name);
      differs(what, at, 1, 0);
      return;
    }
    SAME(what, names[i], offsets[i], pinned[i].offset);
  }
}

static const char *const option_names[] = {
#define ON(name, kind, heaps, def, lo, hi, choices, desc) #name,
    HL_OPTIONS(ON)
#undef ON
};
static const size_t option_offsets[] = {
#define OO(name, kind, heaps, def, lo, hi, choices, desc) offsetof(hl_options, name),
    HL_OPTIONS(OO)
#undef OO
};
static const char *const stat_names[] = {
#define SN(name, desc) #name,
    HL_STATS(SN)
#undef SN
};
static const size_t stat_offsets[] = {
#define SO(name, desc) offsetof(hl_stats, name),
    HL_STATS(SO)
#undef SO
};

#define FIELD(type, field, off) SAME(#type, #field, offsetof(type, field), off)
#define SIZE(type, bytes) SAME(#type, "size", sizeof(type), bytes)

int main(void) {
  SAME("HL_ABI_VERSION", "(the version this table pins)", HL_ABI_VERSION, PINNED_ABI);
  SAME("hl_abi_version()", "(the library's)", hl_abi_version(), HL_ABI_VERSION);

  SIZE(hl_options, 464);
  list_pinned("hl_options", options_pin, NPIN(options_pin), option_names, option_offsets,
              sizeof option_names / sizeof option_names[0]);
  SIZE(hl_stats, 888);
  list_pinned("hl_stats", stats_pin, NPIN(stats_pin), stat_names, stat_offsets,
              sizeof stat_names / sizeof stat_names[0]);

  FIELD(hl_option_info, name, 0);
  FIELD(hl_option_info, kind, 8);
  FIELD(hl_option_info, collected_only, 12);
  FIELD(hl_option_info, def, 16);
  FIELD(hl_option_info, min, 24);
  FIELD(hl_option_info, max, 32);
  FIELD(hl_option_info, choices, 40);
  SIZE(hl_option_info, 56);
  FIELD(hl_option_info, description, 48);

  SIZE(hl_event, 104);
  FIELD(hl_event, kind, 0);
  FIELD(hl_event, nfields, 4);
  FIELD(hl_event, cycle, 8);
  FIELD(hl_event, time_ns, 16);
  FIELD(hl_event, fields, 24);
  SAME("hl_event", "fields[] length", HL_EVENT_MAX_FIELDS, 10);

  SIZE(hl_fault_state, 40);
  FIELD(hl_fault_state, site, 0);
  FIELD(hl_fault_state, mode, 4);
  FIELD(hl_fault_state, arg, 8);
  FIELD(hl_fault_state, err, 16);
  FIELD(hl_fault_state, pad, 20);
  FIELD(hl_fault_state, calls, 24);
  FIELD(hl_fault_state, fired, 32);

  SIZE(hl_footprint, 48);
  FIELD(hl_footprint, rss, 0);
  FIELD(hl_footprint, anonymous, 8);
  FIELD(hl_footprint, lazyfree, 16);
  FIELD(hl_footprint, swap, 24);
  FIELD(hl_footprint, phys_footprint, 32);
  FIELD(hl_footprint, anon_huge, 40);

  SIZE(hl_sample, 32);
  FIELD(hl_sample, t_ns, 0);
  FIELD(hl_sample, phys_footprint, 8);
  FIELD(hl_sample, rss, 16);
  FIELD(hl_sample, lazyfree, 24);

  SIZE(hl_sampler_summary, 80);
  FIELD(hl_sampler_summary, samples, 0);
  FIELD(hl_sampler_summary, min_phys, 8);
  FIELD(hl_sampler_summary, max_phys, 16);
  FIELD(hl_sampler_summary, min_phys_after_mark, 24);
  FIELD(hl_sampler_summary, max_phys_after_mark, 32);
  FIELD(hl_sampler_summary, min_rss, 40);
  FIELD(hl_sampler_summary, max_rss, 48);
  FIELD(hl_sampler_summary, mark_ns, 56);
  FIELD(hl_sampler_summary, interval_us, 64);
  FIELD(hl_sampler_summary, stored, 72);

  SIZE(hl_object_info, 40);
  FIELD(hl_object_info, size, 0);
  FIELD(hl_object_info, refs, 8);
  FIELD(hl_object_info, address, 16);
  FIELD(hl_object_info, object, 24);
  FIELD(hl_object_info, large, 32);
  FIELD(hl_object_info, pad, 36);

  SIZE(hl_churn_result, 56);
  FIELD(hl_churn_result, allocated_bytes, 0);
  FIELD(hl_churn_result, allocations, 8);
  FIELD(hl_churn_result, cycles, 16);
  FIELD(hl_churn_result, pacing_waits, 24);
  FIELD(hl_churn_result, pacing_wait_ns, 32);
  FIELD(hl_churn_result, elapsed_ns, 40);
  FIELD(hl_churn_result, peak_large_live_bytes, 48);

  /* the object header compiled into callers (hl_obj_slots, hl_obj_data) */
  SAME("HL_OBJ_HEADER_BYTES", "", HL_OBJ_HEADER_BYTES, 8);

  /* the enums and lists a caller passes or reads as numbers */
  SAME("hl_error", "HL_ERROR_COUNT", HL_ERROR_COUNT, 14);
  SAME("hl_error", "HL_EINTR", HL_EINTR, 13);
  SAME("hl_event_kind", "HL_EV_COUNT", HL_EV_COUNT, 15);
  SAME("hl_event_kind", "HL_EV_nursery_adapted", HL_EV_nursery_adapted, 12);
  SAME("hl_event_kind", "HL_EV_large_unmap_pending", HL_EV_large_unmap_pending, 13);
  SAME("hl_event_kind", "HL_EV_verify_failed", HL_EV_verify_failed, 14);
  SAME("hl_fault_site", "HL_SITE_COUNT", HL_SITE_COUNT, 9);
  SAME("hl_fault_site", "HL_SITE_any", HL_SITE_any, 8);
  SAME("hl_fault_mode", "HL_FAULT_MODE_COUNT", HL_FAULT_MODE_COUNT, 5);
  SAME("hl_value_type", "HL_VALUE_OTHER", HL_VALUE_OTHER, 3);
  SAME("hl_option_kind", "HL_OPT_ENUM", HL_OPT_ENUM, 3);
  SAME("enum hl_thp", "HL_THP_POPULATE", HL_THP_POPULATE, 2);
  SAME("enum hl_compact", "HL_COMPACT_ALWAYS", HL_COMPACT_ALWAYS, 2);
  SAME("enum hl_major", "HL_MAJOR_ALWAYS", HL_MAJOR_ALWAYS, 2);
  SAME("enum hl_fallback", "HL_FALLBACK_FREE", HL_FALLBACK_FREE, 2);
  SAME("enum hl_mode", "HL_MODE_MANUAL", HL_MODE_MANUAL, 1);
  for (int k = 0; k < HL_EV_COUNT; k++) {
    static const char *const kinds[] = {"heap_created", "cycle", "major_sweep", "trim",
        "restore_failed", "syscall_gave_up", "pacing_wait", "trigger_adapted", "subpage_trim",
        "compact", "thp_split", "mark", "nursery_adapted", "large_unmap_pending",
        "verify_failed"};
    if (k < (int)(sizeof kinds / sizeof kinds[0]) && strcmp(hl_event_name(k), kinds[k]))
      differs("hl_event_kind", kinds[k], k, -1);
  }

  /* the library this process loaded is the one of this version: by its soname */
  char soname[64];
  snprintf(soname, sizeof soname, "libheaplab.so.%d", HL_ABI_VERSION);
  void *self = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
  CHECK(self != NULL, "%s is not loaded (the soname does not follow HL_ABI_VERSION?): %s",
        soname, dlerror());
  dlclose(self);

  bool recorded = false;
  for (size_t i = 0; i < sizeof history / sizeof history[0]; i++) {
    if (history[i].abi != PINNED_ABI) continue;
    recorded = true;
    CHECK(history[i].fingerprint == fingerprint,
          "the pinned table of HL_ABI_VERSION %d was edited (fingerprint 0x%016" PRIx64
          ", recorded 0x%016" PRIx64 "): a released version's layout never changes -- a new "
          "layout is HL_ABI_VERSION %d, with its own table and a new line of history",
          PINNED_ABI, fingerprint, history[i].fingerprint, PINNED_ABI + 1);
  }
  CHECK(recorded, "no line of history for HL_ABI_VERSION %d: add {%d, 0x%016" PRIx64 "}",
        PINNED_ABI, PINNED_ABI, fingerprint);
  CHECK(failures == 0, "%d differences from the pinned layout of HL_ABI_VERSION %d", failures,
        PINNED_ABI);
  puts("ok");
  return 0;
}
