/*
 * exit_in_handler.c -- a Lua C module for the clients scenario
 * lua_exit_in_signal_handler (tests/clients/run.py): Lua has no FFI, so the
 * C signal handler that calls exit() -- as a C extension's would -- comes
 * from here.  Built against Lua's headers only (the interpreter that loads
 * it, heaplab-lua or lua5.4, has the lua_* symbols).
 *
 *   m.arm(seconds)     SIGALRM's handler calls exit(14); the alarm in seconds
 *   m.glibc_churn(n)   never returns: n threads (this one and n - 1 more)
 *                      call the C library's malloc and free in a loop --
 *                      any C code's allocations, which heaplab-lua does not
 *                      interpose (20 KiB blocks: glibc's heap top grows and
 *                      is trimmed, sysmalloc and systrim, over and over)
 *   m.slow_unlock()    arms modules/slow_unlock.c when it is preloaded (every
 *                      mutex held 300 us longer: Lua cannot reach its
 *                      slow_unlock_armed as ctypes does); false when it is not
 */
#ifndef _GNU_SOURCE /* (meson.build passes -D_GNU_SOURCE) */
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <lauxlib.h>
#include <lua.h>

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

static void on_alarm(int sig) {
  (void)sig;
  exit(14);
}

static int m_arm(lua_State *L) {
  double s = luaL_checknumber(L, 1);
  luaL_argcheck(L, s > 0 && s < 3600, 1, "seconds in (0, 3600)");
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGALRM, &sa, NULL) != 0) return luaL_error(L, "sigaction failed");
  struct itimerval it = {{0, 0}, {(time_t)s, (suseconds_t)((s - (double)(time_t)s) * 1e6)}};
  if (it.it_value.tv_sec == 0 && it.it_value.tv_usec == 0) it.it_value.tv_usec = 1;
  if (setitimer(ITIMER_REAL, &it, NULL) != 0) return luaL_error(L, "setitimer failed");
  return 0;
}

static void *churn(void *arg) {
  unsigned seed = (unsigned)(size_t)arg;
  for (;;) {
    void *blocks[64];
    for (unsigned k = 0; k < 64; k++) {
      blocks[k] = malloc(20000 + (seed + k) % 64 * 64);
      if (blocks[k]) *(volatile char *)blocks[k] = 1;
    }
    for (unsigned k = 0; k < 64; k++) free(blocks[k]);
  }
  return NULL;
}

static int m_glibc_churn(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  luaL_argcheck(L, n >= 1 && n <= 64, 1, "threads in [1, 64]");
  for (lua_Integer t = 1; t < n; t++) {
    pthread_t th;
    if (pthread_create(&th, NULL, churn, (void *)(size_t)t) != 0)
      return luaL_error(L, "pthread_create failed");
    pthread_detach(th);
  }
  churn(NULL);
  return 0;
}

static int m_slow_unlock(lua_State *L) {
  int *armed = dlsym(RTLD_DEFAULT, "slow_unlock_armed");
  if (armed) __atomic_store_n(armed, 1, __ATOMIC_RELAXED);
  lua_pushboolean(L, armed != NULL);
  return 1;
}

int luaopen_exit_in_handler(lua_State *L) {
  static const luaL_Reg fns[] = {
      {"arm", m_arm}, {"glibc_churn", m_glibc_churn}, {"slow_unlock", m_slow_unlock}, {NULL, NULL}};
  luaL_newlib(L, fns);
  return 1;
}
