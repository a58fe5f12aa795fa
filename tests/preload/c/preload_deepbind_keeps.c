/* A plugin that brings its own allocator (libpreload_deepbind_own.so,
 * tests/preload/c/preload_deepbind.c): opened with RTLD_DEEPBIND, its malloc
 * and free are that library's, and must stay so. */
#include <stdlib.h>

static void *kept;
void keeps_make(void) { kept = malloc(100); }
void keeps_drop(void) { free(kept); }
