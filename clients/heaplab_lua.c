/*
 * heaplab-lua -- a Lua 5.4 interpreter (Debian's liblua5.4) whose state is
 * created with lua_newstate over heaplab's manual mode, so every byte Lua
 * allocates lives on heaplab's pages, pools and release machinery.
 *
 * It runs scripts the way the stock lua5.4 does -- the `arg` table, -e, -l,
 * -i, -v, -E, -W, `--`, `-` (stdin), LUA_INIT_5_4 / LUA_INIT, exit status
 * 1 on an error with its traceback on stderr, the generational collector
 * switched on as lua.c 5.4 does -- but it is our own program, built around
 * the allocator.  HEAPLAB_ALLOCATOR=libc runs the same binary on the C
 * library's realloc/free: the baseline of every comparison.
 *
 * Lua tells its allocator the exact old size of every block, so blocks need
 * no header: a free is hl_free_sized(ptr, osize), a resize hl_realloc(ptr,
 * osize, nsize).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "client.h"

int luaopen_heaplab_client(lua_State *L);

static const char *progname = "heaplab-lua";

/* ---- the two allocators (lua_Alloc) ---- */

static void *alloc_heaplab(void *ud, void *ptr, size_t osize, size_t nsize) {
  hl_heap *h = ud;
  if (nsize == 0) {
    if (ptr) hl_free_sized(h, ptr, osize);
    return NULL;
  }
  /* with ptr NULL, osize is the kind of object being made, not a size */
  if (!ptr) return hl_malloc(h, nsize);
  return hl_realloc(h, ptr, osize, nsize);
}

static void *alloc_libc(void *ud, void *ptr, size_t osize, size_t nsize) {
  (void)ud, (void)osize;
  if (nsize == 0) {
    free(ptr);
    return NULL;
  }
  return realloc(ptr, nsize);
}

/* ---- what luaL_newstate would have installed: panic and warnings ---- */

static int on_panic(lua_State *L) {
  const char *msg = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "error object is not a string";
  fprintf(stderr, "%s: PANIC: unprotected error in call to Lua API (%s)\n", progname, msg);
  fflush(stderr);
  return 0; /* Lua aborts */
}

/* Warnings start off.  "@on" / "@off" (sent as one piece) switch them; a
 * message may come in pieces (tocont) and ends with a newline. */
enum { WARN_OFF, WARN_ON, WARN_CONT };
static int warn_state = WARN_OFF;

static void on_warning(void *ud, const char *msg, int tocont) {
  (void)ud;
  if (warn_state != WARN_CONT && !tocont && msg[0] == '@') {
    if (strcmp(msg, "@on") == 0) warn_state = WARN_ON;
    else if (strcmp(msg, "@off") == 0) warn_state = WARN_OFF;
    return;
  }
  if (warn_state == WARN_OFF) return;
  if (warn_state == WARN_ON) fputs("Lua warning: ", stderr);
  fputs(msg, stderr);
  if (tocont) {
    warn_state = WARN_CONT;
  } else {
    fputs("\n", stderr);
    warn_state = WARN_ON;
  }
  fflush(stderr);
}

/* ---- running chunks ---- */

static lua_State *running;

static void stop_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  luaL_error(L, "interrupted!");
}

/* Ctrl-C while Lua runs: make the running code raise an error at its next
 * call, return or instruction count (lua_sethook is safe in a handler). */
static void on_sigint(int sig) {
  signal(sig, SIG_DFL);
  lua_sethook(running, stop_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

/* Message handler: a traceback under the message; a non-string error object
 * is shown through its __tostring, or named by its type. */
static int traceback(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (!msg) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

/* Call the function below narg arguments with the message handler and
 * Ctrl-C handling. */
static int call(lua_State *L, int narg, int nres) {
  int base = lua_gettop(L) - narg;
  lua_pushcfunction(L, traceback);
  lua_insert(L, base);
  running = L;
  signal(SIGINT, on_sigint);
  int status = lua_pcall(L, narg, nres, base);
  signal(SIGINT, SIG_DFL);
  lua_remove(L, base);
  return status;
}

/* Print an error (the message on top) and pop it. */
static int report(lua_State *L, int status) {
  if (status != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    fprintf(stderr, "%s: %s\n", progname, msg ? msg : "(error object is not a string)");
    fflush(stderr);
    lua_pop(L, 1);
  }
  return status;
}

static int run_loaded(lua_State *L, int status) {
  if (status == LUA_OK) status = call(L, 0, 0);
  return report(L, status);
}

static int run_file(lua_State *L, const char *path) {
  return run_loaded(L, luaL_loadfile(L, path));
}

static int run_string(lua_State *L, const char *code, const char *name) {
  return run_loaded(L, luaL_loadbuffer(L, code, strlen(code), name));
}

/* -l mod  or  -l g=mod: require mod and store it in global g (or mod). */
static int require_into_global(lua_State *L, char *spec) {
  char *eq = strchr(spec, '=');
  const char *global = spec, *mod = spec;
  if (eq) {
    *eq = 0;
    mod = eq + 1;
  }
  lua_getglobal(L, "require");
  lua_pushstring(L, mod);
  int status = call(L, 1, 1);
  if (status == LUA_OK) lua_setglobal(L, global);
  if (eq) *eq = '=';
  return report(L, status);
}

/* The script: argv[script] ("-" = stdin unless after "--"), with the
 * arguments after it as `...`. */
static int run_script(lua_State *L, char **argv, int script) {
  const char *fname = argv[script];
  if (strcmp(fname, "-") == 0 && strcmp(argv[script - 1], "--") != 0) fname = NULL;
  int status = luaL_loadfile(L, fname);
  if (status == LUA_OK) {
    int n = 0;
    for (char **a = argv + script + 1; *a; a++, n++) {
      luaL_checkstack(L, 1, "too many arguments to script");
      lua_pushstring(L, *a);
    }
    status = call(L, n, LUA_MULTRET);
  }
  return report(L, status);
}

/* arg[0] = the script (or the program when there is none), arg[-k] the
 * interpreter and its options, arg[1..n] the script's arguments. */
static void make_arg_table(lua_State *L, int argc, char **argv, int script) {
  int zero = script ? script : 0;
  lua_createtable(L, argc - zero - 1 > 0 ? argc - zero - 1 : 0, zero + 1);
  for (int i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - zero);
  }
  lua_setglobal(L, "arg");
}

static int run_lua_init(lua_State *L) {
  const char *name = "=LUA_INIT_5_4";
  const char *init = getenv(name + 1);
  if (!init) {
    name = "=LUA_INIT";
    init = getenv(name + 1);
  }
  if (!init) return LUA_OK;
  if (init[0] == '@') return run_file(L, init + 1);
  return run_string(L, init, name);
}

/* ---- interactive mode: a plain line reader ---- */

static int incomplete(lua_State *L, int status) {
  if (status != LUA_ERRSYNTAX) return 0;
  size_t len;
  const char *msg = lua_tolstring(L, -1, &len);
  return len >= 5 && strcmp(msg + len - 5, "<eof>") == 0;
}

static void repl(lua_State *L) {
  char line[4096];
  for (;;) {
    fputs("> ", stdout);
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin)) break;
    lua_pushstring(L, line);
    /* an expression first ("return <line>"), then a statement that may span
     * several lines */
    const char *ret = lua_pushfstring(L, "return %s", line);
    int status = luaL_loadbuffer(L, ret, strlen(ret), "=stdin");
    lua_remove(L, -2); /* the "return" string */
    if (status != LUA_OK) {
      lua_pop(L, 1);
      for (;;) {
        size_t len;
        const char *code = lua_tolstring(L, -1, &len);
        status = luaL_loadbuffer(L, code, len, "=stdin");
        if (!incomplete(L, status)) break;
        lua_pop(L, 1);
        fputs(">> ", stdout);
        fflush(stdout);
        if (!fgets(line, sizeof line, stdin)) break;
        lua_pushstring(L, line);
        lua_concat(L, 2);
      }
    }
    lua_remove(L, -2); /* the source line(s) */
    int base = lua_gettop(L);
    if (status == LUA_OK) status = call(L, 0, LUA_MULTRET);
    if (status == LUA_OK) {
      int n = lua_gettop(L) - base + 1;
      if (n > 0) {
        luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
        lua_getglobal(L, "print");
        lua_insert(L, -n - 1);
        if (lua_pcall(L, n, 0, 0) != LUA_OK)
          fprintf(stderr, "%s: error calling 'print' (%s)\n", progname, lua_tostring(L, -1));
      }
    } else {
      report(L, status);
    }
    lua_settop(L, 0);
  }
  fputs("\n", stdout);
  fflush(stdout);
}

/* ---- the command line ---- */

typedef struct cmdline {
  int script;        /* index of the script in argv, 0 if none */
  int interactive, version, noenv, has_exec;
  int bad;           /* index of a bad argument, 0 if none */
  int missing_value; /* ... which is -e or -l without its value */
} cmdline;

static void usage(const char *badarg, int missing_value) {
  if (badarg && missing_value) fprintf(stderr, "%s: '%s' needs argument\n", progname, badarg);
  else if (badarg) fprintf(stderr, "%s: unrecognized option '%s'\n", progname, badarg);
  fprintf(stderr,
          "usage: %s [options] [script [args]]\n"
          "Available options are:\n"
          "  -e stat   execute string 'stat'\n"
          "  -i        enter interactive mode after executing 'script'\n"
          "  -l mod    require library 'mod' into global 'mod'\n"
          "  -l g=mod  require library 'mod' into global 'g'\n"
          "  -v        show version information\n"
          "  -E        ignore environment variables\n"
          "  -W        turn warnings on\n"
          "  --        stop handling options\n"
          "  -         stop handling options and execute stdin\n"
          "Environment: HEAPLAB_ALLOCATOR=heaplab|libc, HEAPLAB_<OPTION>=value,\n"
          "  HEAPLAB_FAULT_<SITE>=mode[:N][:ERRNO], HEAPLAB_STATS=report.json\n",
          progname);
  fflush(stderr);
}

static cmdline parse_args(char **argv) {
  cmdline c = {0};
  int i = 1;
  for (; argv[i] && argv[i][0] == '-'; i++) {
    const char *a = argv[i];
    switch (a[1]) {
    case '\0': /* "-": the script is stdin */
      c.script = i;
      return c;
    case '-':
      if (a[2]) goto bad;
      c.script = argv[i + 1] ? i + 1 : 0;
      return c;
    case 'E': case 'W': case 'i': case 'v':
      if (a[2]) goto bad;
      if (a[1] == 'E') c.noenv = 1;
      if (a[1] == 'i') c.interactive = c.version = 1;
      if (a[1] == 'v') c.version = 1;
      break;
    case 'e': case 'l':
      if (a[1] == 'e') c.has_exec = 1;
      if (!a[2]) {
        if (!argv[i + 1] || argv[i + 1][0] == '-') {
          c.bad = i;
          c.missing_value = 1;
          return c;
        }
        i++;
      }
      break;
    default:
      goto bad;
    }
  }
  c.script = argv[i] ? i : 0;
  return c;
bad:
  c.bad = i;
  return c;
}

/* -e, -l and -W, in the order given. */
static int run_options(lua_State *L, char **argv, int last) {
  for (int i = 1; i < last; i++) {
    const char *a = argv[i];
    if (a[0] != '-') continue;
    if (a[1] == 'W') {
      lua_warning(L, "@on", 0);
      continue;
    }
    if (a[1] != 'e' && a[1] != 'l') continue;
    char *value = a[2] ? argv[i] + 2 : argv[++i];
    int status = a[1] == 'e' ? run_string(L, value, "=(command line)")
                             : require_into_global(L, value);
    if (status != LUA_OK) return 0;
  }
  return 1;
}

typedef struct run_args {
  int argc;
  char **argv;
  cmdline cmd;
} run_args;

/* Everything that touches Lua runs here, protected, so even an allocation
 * failure while opening the libraries is reported, not a panic. */
static int protected_main(lua_State *L) {
  run_args *ra = lua_touserdata(L, 1);
  char **argv = ra->argv;
  cmdline *c = &ra->cmd;
  if (c->version) {
    fputs(LUA_COPYRIGHT " on heaplab (", stdout);
    fputs(client.allocator, stdout);
    fputs(" allocator)\n", stdout);
    fflush(stdout);
  }
  if (c->noenv) {
    /* tells the package library to ignore LUA_PATH / LUA_CPATH */
    lua_pushboolean(L, 1);
    lua_setfield(L, LUA_REGISTRYINDEX, "LUA_NOENV");
  }
  lua_gc(L, LUA_GCSTOP);
  luaL_openlibs(L);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, luaopen_heaplab_client);
  lua_setfield(L, -2, "heaplab.client");
  lua_pop(L, 1);
  make_arg_table(L, ra->argc, argv, c->script);
  lua_gc(L, LUA_GCRESTART);
  lua_gc(L, LUA_GCGEN, 0, 0); /* as the stock 5.4 interpreter does */
  if (!c->noenv && run_lua_init(L) != LUA_OK) return 0;
  if (!run_options(L, argv, c->script ? c->script : ra->argc)) return 0;
  if (c->script && run_script(L, argv, c->script) != LUA_OK) return 0;
  if (c->interactive) {
    repl(L);
  } else if (!c->script && !c->has_exec && !c->version) {
    if (isatty(0)) {
      fputs(LUA_COPYRIGHT " on heaplab (", stdout);
      fputs(client.allocator, stdout);
      fputs(" allocator)\n", stdout);
      repl(L);
    } else if (run_file(L, NULL) != LUA_OK) {
      return 0;
    }
  }
  lua_pushboolean(L, 1);
  return 1;
}

int main(int argc, char **argv) {
  if (argv[0] && argv[0][0]) progname = argv[0];
  int rc = client_start("heaplab-lua");
  if (rc) return rc;
  run_args ra = {argc, argv, parse_args(argv)};
  if (ra.cmd.bad) {
    usage(argv[ra.cmd.bad], ra.cmd.missing_value);
    return EXIT_FAILURE;
  }
  lua_State *L = client.heap ? lua_newstate(alloc_heaplab, client.heap)
                             : lua_newstate(alloc_libc, NULL);
  if (!L) {
    fprintf(stderr, "%s: cannot create state: not enough memory\n", progname);
    return EXIT_FAILURE;
  }
  lua_atpanic(L, on_panic);
  lua_setwarnf(L, on_warning, NULL);
  lua_pushcfunction(L, protected_main);
  lua_pushlightuserdata(L, &ra);
  int status = lua_pcall(L, 1, 1, 0);
  int ok = status == LUA_OK && lua_toboolean(L, -1);
  report(L, status);
  lua_close(L);
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
