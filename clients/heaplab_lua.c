/*
 * heaplab-lua -- a Lua 5.4 interpreter (Debian's liblua5.4) whose state is
 * created with lua_newstate over heaplab's manual mode, so every byte Lua
 * allocates lives on heaplab's pages, pools and release machinery.
 *
 * Apart from the allocator it behaves as the stock lua5.4 (lua.c 5.4.4)
 * does, down to the details Lua's own test suite checks (testes/main.lua):
 * the options and their errors, the `arg` table and the script's arguments
 * taken from it (so `-e 'arg[1]=100' -` changes `...`), LUA_INIT_5_4 /
 * LUA_INIT, messages prefixed with the program name, the REPL with readline,
 * `=expr`, _PROMPT / _PROMPT2 through tostring, continuation lines, Ctrl-C
 * as an "interrupted!" error, the generational collector.  It is our own
 * program, built around the allocator: HEAPLAB_ALLOCATOR=libc runs the same
 * binary on the C library's realloc/free, the baseline of every comparison.
 * That it runs on heaplab is said in the HEAPLAB_STATS report, not in the
 * banner (docs/clients.md).
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

#ifdef HEAPLAB_LUA_READLINE
#include <readline/history.h>
#include <readline/readline.h>
#endif

#include "client.h"

int luaopen_heaplab_client(lua_State *L);

/* the name errors are prefixed with: argv[0]; NULL inside the REPL */
static const char *progname = "heaplab-lua";

/* ---- the two allocators (lua_Alloc) ---- */

/* ---- a refusal the program went on from is forgotten ---- */

/* Lua raises its memory error as soon as an allocation (and its retry after
 * an emergency collection) is refused, and runs no Lua code of the state
 * before the error reaches report() (only a __close handler could).  So Lua
 * code running after a refusal means the program went on: a pcall caught
 * the error, or the retry worked.  A later memory error is then not that
 * refusal's (error("not enough memory") is one too), and report() must not
 * name it (docs/clients.md, "Out of memory").  A refusal arms a count hook
 * on the main state (lua_sethook is safe anywhere, as in a signal handler);
 * the next instruction it runs forgets the reason.  When the program has a
 * hook of its own, a growing allocation that succeeds forgets it instead.
 * (Code of a coroutine runs on another state: the main state runs again
 * when the coroutine yields or fails, before any error of it reaches the
 * top.) */
static lua_State *main_state;
static int refused; /* a reason is remembered and not yet forgotten */

static void forget_refusal(void) {
  refused = 0;
  client_refusal_clear();
}

static void went_on_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  forget_refusal();
}

static void *alloc_heaplab(void *ud, void *ptr, size_t osize, size_t nsize) {
  hl_heap *h = ud;
  if (nsize == 0) {
    if (ptr) hl_free_sized(h, ptr, osize);
    return NULL;
  }
  /* with ptr NULL, osize is the kind of object being made, not a size; a
   * refusal is remembered by client_start's hook (Lua will say only "not
   * enough memory") */
  void *p = ptr ? hl_realloc(h, ptr, osize, nsize) : hl_malloc(h, nsize);
  if (!p) {
    refused = 1;
    if (main_state && !lua_gethook(main_state))
      lua_sethook(main_state, went_on_hook, LUA_MASKCOUNT, 1);
  } else if (refused && (!ptr || nsize > osize) && main_state &&
             lua_gethook(main_state) != went_on_hook) {
    forget_refusal(); /* (a shrink proves nothing: Lua shrinks while unwinding) */
  }
  return p;
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

static void message(const char *name, const char *msg) {
  if (name) fprintf(stderr, "%s: ", name);
  fprintf(stderr, "%s\n", msg);
  fflush(stderr);
}

static int on_panic(lua_State *L) {
  const char *msg = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1)
                                                   : "error object is not a string";
  fprintf(stderr, "PANIC: unprotected error in call to Lua API (%s)\n", msg);
  fflush(stderr);
  return 0; /* Lua aborts */
}

/* Warnings start off.  A message of one piece starting with '@' is a
 * control message: "@on" / "@off" switch, others are ignored.  A message
 * may come in pieces (tocont) and ends with a newline. */
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

static void on_signal(int sig, void (*handler)(int)) {
  struct sigaction sa;
  sa.sa_handler = handler;
  sa.sa_flags = 0;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, NULL);
}

static void stop_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  luaL_error(L, "interrupted!");
}

/* Ctrl-C while Lua runs: make the running code raise an error at its next
 * call, return or instruction count (lua_sethook is safe in a handler); a
 * second Ctrl-C before that kills the process. */
static void on_sigint(int sig) {
  on_signal(sig, SIG_DFL);
  lua_sethook(running, stop_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

/* Message handler: a traceback under the message; a non-string error object
 * with a __tostring that gives a string is shown as that string alone, any
 * other is named by its type. */
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
  on_signal(SIGINT, on_sigint);
  int status = lua_pcall(L, narg, nres, base);
  on_signal(SIGINT, SIG_DFL);
  lua_remove(L, base);
  return status;
}

/* Print an error (the message on top) and pop it.  When input ends inside
 * an unfinished statement at the prompt there is no message (lua.c 5.4.4
 * then prints what printf makes of a null string, and so do we; it also
 * pops from the empty stack, which we do not). */
static int report(lua_State *L, int status) {
  if (status != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    /* Lua's memory error is a fixed "not enough memory": when it is the
     * heap that refused, say what ran out and how to raise it, on the
     * same line ("not enough memory: malloc: the reservation of 1048576
     * bytes is exhausted (reserve_bytes); raise HEAPLAB_RESERVE_BYTES")
     * (a C buffer: Lua has no memory to format it in, and report runs
     * unprotected too) */
    const char *why = status == LUA_ERRMEM ? client_refusal() : NULL;
    char line[600];
    if (why) {
      snprintf(line, sizeof line, "%s: %s", msg ? msg : "not enough memory", why);
      msg = line;
    }
    message(progname, msg ? msg : "(null)");
    if (lua_gettop(L) > 0) lua_pop(L, 1);
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

/* The script's arguments are what the global `arg` holds when the script
 * starts -- LUA_INIT, -e and -l may have changed it -- not argv: arg[1] ..
 * arg[#arg].  Anything but a table there is an error. */
static int push_script_args(lua_State *L) {
  if (lua_getglobal(L, "arg") != LUA_TTABLE) return luaL_error(L, "'arg' is not a table");
  int n = (int)luaL_len(L, -1);
  luaL_checkstack(L, n + 3, "too many arguments to script");
  for (int i = 1; i <= n; i++) lua_rawgeti(L, -i, i);
  lua_remove(L, -n - 1);
  return n;
}

/* The script argv[script] ("-" = stdin unless it follows "--"). */
static int run_script(lua_State *L, char **argv, int script) {
  const char *fname = argv[script];
  if (strcmp(fname, "-") == 0 && strcmp(argv[script - 1], "--") != 0) fname = NULL;
  int status = luaL_loadfile(L, fname);
  if (status == LUA_OK) {
    int n = push_script_args(L);
    status = call(L, n, LUA_MULTRET);
  }
  return report(L, status);
}

/* arg[0] = the script (or the program when there is none), arg[-k] the
 * interpreter and its options, arg[1..n] the script's arguments. */
static void make_arg_table(lua_State *L, int argc, char **argv, int script) {
  int zero = script < argc ? script : 0;
  lua_createtable(L, argc - zero - 1, zero + 1);
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

/* ---- interactive mode ---- */

/* With readline (as Debian's lua5.4 is built): line editing and history on
 * a terminal; on a pipe readline echoes each line after its prompt, which
 * is what lua5.4 prints too.  Without it: a plain line reader. */
#ifdef HEAPLAB_LUA_READLINE
static void reader_init(void) { rl_readline_name = "lua"; }
static char *read_line(const char *prompt) { return readline(prompt); }
static void keep_line(const char *line) { add_history(line); }
static void free_line(char *line) { free(line); }
#else
enum { LINE_MAX_INPUT = 512 };
static char line_buffer[LINE_MAX_INPUT];
static void reader_init(void) {}
static char *read_line(const char *prompt) {
  fputs(prompt, stdout);
  fflush(stdout);
  return fgets(line_buffer, sizeof line_buffer, stdin);
}
static void keep_line(const char *line) { (void)line; }
static void free_line(char *line) { (void)line; }
#endif

/* The prompt: _PROMPT (first line) or _PROMPT2 (continuation) through
 * tostring when set, else "> " / ">> ".  Left on the stack. */
static const char *push_prompt(lua_State *L, int first) {
  /* unset: the nil stays on the stack, as in lua.c (reported as "(null)"
   * when the input ends inside a statement) */
  if (lua_getglobal(L, first ? "_PROMPT" : "_PROMPT2") == LUA_TNIL) return first ? "> " : ">> ";
  const char *p = luaL_tolstring(L, -1, NULL);
  lua_remove(L, -2);
  return p;
}

/* Read one line and push it without its newline; "=expr" on a first line
 * becomes "return expr".  0 at the end of input, the prompt left on the
 * stack as lua.c leaves it: input that ends inside a statement reports it
 * as the error (lua5.4 prints "_PROMPT2" there; the launcher printed
 * "(null)": the launchers hunt, session 25). */
static int push_line(lua_State *L, int first) {
  const char *prompt = push_prompt(L, first);
  char *line = read_line(prompt);
  if (!line) return 0;
  lua_pop(L, 1);
  size_t len = strlen(line);
  if (len > 0 && line[len - 1] == '\n') line[--len] = 0;
  if (first && line[0] == '=') lua_pushfstring(L, "return %s", line + 1);
  else lua_pushlstring(L, line, len);
  free_line(line);
  return 1;
}

/* A syntax error at <eof>: the statement goes on on the next line.  The
 * message is popped then. */
static int incomplete(lua_State *L, int status) {
  if (status != LUA_ERRSYNTAX) return 0;
  size_t len;
  const char *msg = lua_tolstring(L, -1, &len);
  static const char mark[] = "<eof>";
  if (len < sizeof mark - 1 || strcmp(msg + len - (sizeof mark - 1), mark) != 0) return 0;
  lua_pop(L, 1);
  return 1;
}

/* The line on top as an expression: "return <line>;".  On success the
 * chunk replaces nothing (it is pushed above the line); on failure the
 * stack is as before. */
static int load_as_expression(lua_State *L) {
  const char *line = lua_tostring(L, -1);
  const char *code = lua_pushfstring(L, "return %s;", line);
  int status = luaL_loadbuffer(L, code, strlen(code), "=stdin");
  if (status == LUA_OK) {
    lua_remove(L, -2);
    if (line[0]) keep_line(line);
  } else {
    lua_pop(L, 2);
  }
  return status;
}

/* The line at index 1 as a statement, reading continuation lines while it
 * is incomplete. */
static int load_as_statement(lua_State *L) {
  for (;;) {
    size_t len;
    const char *code = lua_tolstring(L, 1, &len);
    int status = luaL_loadbuffer(L, code, len, "=stdin");
    if (!incomplete(L, status) || !push_line(L, 0)) {
      keep_line(code);
      return status;
    }
    lua_pushliteral(L, "\n");
    lua_insert(L, -2);
    lua_concat(L, 3);
  }
}

/* Leaves one chunk (or an error message) on an empty stack; -1 at the end
 * of input. */
static int load_input(lua_State *L) {
  lua_settop(L, 0);
  if (!push_line(L, 1)) return -1;
  int status = load_as_expression(L);
  if (status != LUA_OK) status = load_as_statement(L);
  lua_remove(L, 1);
  return status;
}

/* Print whatever the chunk returned, with the global print. */
static void print_results(lua_State *L) {
  int n = lua_gettop(L);
  if (n == 0) return;
  luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
  lua_getglobal(L, "print");
  lua_insert(L, 1);
  if (lua_pcall(L, n, 0, 0) != LUA_OK)
    message(progname, lua_pushfstring(L, "error calling 'print' (%s)", lua_tostring(L, -1)));
}

static void repl(lua_State *L) {
  const char *name = progname;
  progname = NULL; /* errors typed at the prompt are not prefixed */
  reader_init();
  int status;
  while ((status = load_input(L)) != -1) {
    if (status == LUA_OK) status = call(L, 0, LUA_MULTRET);
    if (status == LUA_OK) print_results(L);
    else report(L, status);
  }
  lua_settop(L, 0);
  fputs("\n", stdout);
  fflush(stdout);
  progname = name;
}

/* ---- the command line ---- */

enum { OPT_ERROR = 1, OPT_I = 2, OPT_V = 4, OPT_E_STAT = 8, OPT_NOENV = 16 };

/* Options up to the script.  *script is the script's index (argc when there
 * is none), or the bad option's index when OPT_ERROR is returned. */
static int parse_args(char **argv, int *script) {
  int opts = 0, i;
  for (i = 1; argv[i]; i++) {
    const char *a = argv[i];
    *script = i;
    if (a[0] != '-') return opts;
    switch (a[1]) {
    case '\0': /* "-": the script is stdin */
      return opts;
    case '-': /* "--": the script is next */
      if (a[2]) return OPT_ERROR;
      *script = i + 1;
      return opts;
    case 'E': case 'W': case 'i': case 'v':
      if (a[2]) return OPT_ERROR;
      if (a[1] == 'E') opts |= OPT_NOENV;
      if (a[1] == 'i') opts |= OPT_I | OPT_V;
      if (a[1] == 'v') opts |= OPT_V;
      break;
    case 'e': case 'l':
      if (a[1] == 'e') opts |= OPT_E_STAT;
      if (!a[2]) {
        i++;
        if (!argv[i] || argv[i][0] == '-') return OPT_ERROR;
      }
      break;
    default:
      return OPT_ERROR;
    }
  }
  *script = i;
  return opts;
}

static void usage(const char *badarg) {
  fprintf(stderr, "%s: ", progname);
  if (badarg[1] == 'e' || badarg[1] == 'l') fprintf(stderr, "'%s' needs argument\n", badarg);
  else fprintf(stderr, "unrecognized option '%s'\n", badarg);
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

static void print_version(void) {
  fputs(LUA_COPYRIGHT "\n", stdout);
  fflush(stdout);
}

/* -e, -l and -W, in the order given, before the script. */
static int run_options(lua_State *L, char **argv, int script) {
  for (int i = 1; i < script; i++) {
    const char *a = argv[i];
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

/* Everything that touches Lua runs here, protected, so even an allocation
 * failure while opening the libraries is reported, not a panic.  Its two
 * arguments, argc and argv, are lua.c's pmain's: they stay on the stack
 * below everything the program runs, so a recursion reaches the same depth
 * before "stack overflow" as in lua5.4 (with one argument it went one
 * frame deeper). */
static int protected_main(lua_State *L) {
  int argc = (int)lua_tointeger(L, 1);
  char **argv = lua_touserdata(L, 2);
  int script;
  int opts = parse_args(argv, &script);
  luaL_checkversion(L);
  if (opts == OPT_ERROR) {
    usage(argv[script]);
    return 0;
  }
  if (opts & OPT_V) print_version();
  if (opts & OPT_NOENV) {
    /* tells the package library to ignore LUA_PATH / LUA_CPATH */
    lua_pushboolean(L, 1);
    lua_setfield(L, LUA_REGISTRYINDEX, "LUA_NOENV");
  }
  luaL_openlibs(L);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, luaopen_heaplab_client);
  lua_setfield(L, -2, "heaplab.client");
  lua_pop(L, 1);
  make_arg_table(L, argc, argv, script);
  lua_gc(L, LUA_GCGEN, 0, 0); /* as the stock 5.4 interpreter does */
  if (!(opts & OPT_NOENV) && run_lua_init(L) != LUA_OK) return 0;
  if (!run_options(L, argv, script)) return 0;
  if (script < argc && run_script(L, argv, script) != LUA_OK) return 0;
  if (opts & OPT_I) {
    repl(L);
  } else if (script == argc && !(opts & (OPT_E_STAT | OPT_V))) {
    if (isatty(0)) {
      print_version();
      repl(L);
    } else {
      /* lua.c 5.4.4 ignores this status (dofile(L, NULL)): a program read
       * from stdin that fails has its error printed and exits 0 */
      run_file(L, NULL);
    }
  }
  lua_pushboolean(L, 1);
  return 1;
}

int main(int argc, char **argv) {
  if (argv[0] && argv[0][0]) progname = argv[0];
  int rc = client_start("heaplab-lua", LUA_RELEASE);
  if (rc) return rc;
  lua_State *L = client.heap ? lua_newstate(alloc_heaplab, client.heap)
                             : lua_newstate(alloc_libc, NULL);
  if (!L) {
    const char *why = client_refusal();
    if (progname) fprintf(stderr, "%s: ", progname);
    fprintf(stderr, "cannot create state: not enough memory%s%s\n", why ? ": " : "", why ? why : "");
    return EXIT_FAILURE;
  }
  lua_atpanic(L, on_panic);
  lua_setwarnf(L, on_warning, NULL);
  main_state = L;
  lua_pushcfunction(L, protected_main);
  lua_pushinteger(L, argc);
  lua_pushlightuserdata(L, argv);
  int status = lua_pcall(L, 2, 1, 0);
  int ok = status == LUA_OK && lua_toboolean(L, -1);
  report(L, status);
  lua_close(L);
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
