/*
 * heaplab-python -- CPython with heaplab's manual mode as the allocator of
 * all three memory domains (RAW, MEM, OBJ), then the ordinary `python3`
 * command line: scripts, -m, -c, -X dev, the REPL, exit statuses.
 *
 * CPython's documentation requires PyMem_SetAllocator to be called after
 * pre-initialisation (which parses -X dev, -E, -I, PYTHONMALLOC... and
 * allocates nothing that outlives it) and before initialisation, so the
 * launcher does exactly that, instead of Py_BytesMain doing all three at
 * once: Py_PreInitializeFromBytesArgs, PyMem_SetAllocator x 3,
 * Py_InitializeFromConfig with the same argv, Py_RunMain.
 *
 * Replacing the OBJ domain replaces pymalloc: every object lives on heaplab's
 * pages.  The RAW domain is called without the GIL, from any thread: manual
 * mode is thread-safe.  CPython frees without a size, hence hl_free.
 *
 * HEAPLAB_ALLOCATOR=libc leaves CPython's own allocators untouched (pymalloc
 * over malloc, exactly what `python3` does): the baseline.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "client.h"

PyObject *PyInit__heaplab_client(void);

/* Every allocation the heap refuses (hl_set_refusal_hook): out of memory
 * before CPython is initialised, it cannot raise MemoryError yet and would
 * abort with a fatal error (HEAPLAB_RESERVE_BYTES=1m did), so the launcher
 * says what ran out and exits 2, as on a bad option.  Once CPython runs,
 * NULL is its MemoryError as usual, and what ran out is said when the
 * program ends with an error (main).  A hook, not a test of each result:
 * the allocators below are then tail calls (a test kept ctx and the size
 * across the call, 12 instructions a malloc -- 49 M of alloc_heavy.py 1's
 * 2.6 G). */
/* Set once Py_InitializeFromConfig succeeded, and never cleared: not
 * Py_IsInitialized(), which is false again once Py_FinalizeEx is under way
 * -- a refusal there (a __del__ run as the modules are cleared, catching
 * its MemoryError) exited 2 from inside the allocator, "out of memory while
 * CPython starts" (the launchers hunt, session 25). */
static int python_started;

static void starved(hl_heap *h, size_t n, void *arg) {
  (void)arg;
  client_refused();
  if (python_started) return;
  const char *why = client_refusal(); /* (NULL before client_start has the heap) */
  fprintf(stderr, "heaplab-python: out of memory while CPython starts (%zu bytes asked): %s\n",
          n, why ? why : hl_heap_error(h));
  fflush(stderr);
  exit(2);
}

static void *py_malloc(void *ctx, size_t n) { return hl_malloc(ctx, n); }

static void *py_calloc(void *ctx, size_t count, size_t size) {
  return hl_calloc(ctx, count, size);
}

/* PyMem_Realloc(p, 0) resizes to a valid block, it does not free. */
static void *py_realloc(void *ctx, void *ptr, size_t n) {
  return hl_realloc(ctx, ptr, 0, n ? n : 1);
}

static void py_free(void *ctx, void *ptr) { hl_free(ctx, ptr); }

static void install_heaplab(hl_heap *h) {
  /* -X dev / PYTHONMALLOC=debug put debug hooks over the default
   * allocators during pre-initialisation (their context is not NULL; the
   * plain allocators' is).  Keep them, over heaplab. */
  PyMemAllocatorEx current;
  PyMem_GetAllocator(PYMEM_DOMAIN_RAW, &current);
  int debug_hooks = current.ctx != NULL;
  hl_set_refusal_hook(h, starved, NULL);
  PyMemAllocatorEx ours = {h, py_malloc, py_calloc, py_realloc, py_free};
  PyMem_SetAllocator(PYMEM_DOMAIN_RAW, &ours);
  PyMem_SetAllocator(PYMEM_DOMAIN_MEM, &ours);
  PyMem_SetAllocator(PYMEM_DOMAIN_OBJ, &ours);
  if (debug_hooks) PyMem_SetupDebugHooks();
}

/* The uncaught exception the program ended with was a MemoryError: told by
 * the "sys.excepthook" audit event, which CPython raises before it prints
 * an uncaught exception (sys.excepthook itself is left as it is: a program
 * may compare it with sys.__excepthook__).  Without it, a refusal the program
 * caught and went on from was named after any later failure -- a ValueError,
 * a failed assert -- as what ran out. */
static int died_of_memory;
/* ... or a KeyboardInterrupt: then Py_RunMain ends the process by killing
 * it with SIGINT (its exit_sigint, after Py_FinalizeEx), as python3 does so
 * that a shell sees the interrupt -- exit()'s handlers never run, and the
 * HEAPLAB_STATS report was missing.  It is written at the end of
 * Py_FinalizeEx instead (Py_AtExit: report_before_sigint). */
static int died_of_interrupt;

static int is_subtype(PyObject *type, PyObject *of) {
  return type && PyType_Check(type) && PyType_IsSubtype((PyTypeObject *)type, (PyTypeObject *)of);
}

static int on_audit(const char *event, PyObject *args, void *data) {
  (void)data;
  if (strcmp(event, "sys.excepthook") != 0) return 0;
  /* (hook, type, value, traceback) */
  PyObject *type = PyTuple_Check(args) && PyTuple_GET_SIZE(args) > 1 ? PyTuple_GET_ITEM(args, 1)
                                                                      : NULL;
  /* a MemoryError of the heap's is CPython's PyErr_NoMemory: no arguments.
   * One the program raised itself, with a message, is not blamed on a
   * refusal it caught and went on from (the launchers hunt, session 25) */
  PyObject *value = PyTuple_Check(args) && PyTuple_GET_SIZE(args) > 2 ? PyTuple_GET_ITEM(args, 2)
                                                                       : NULL;
  PyObject *a = value && value != Py_None ? PyObject_GetAttrString(value, "args") : NULL;
  if (!a) PyErr_Clear();
  died_of_memory = is_subtype(type, PyExc_MemoryError) &&
                   !(a && PyTuple_Check(a) && PyTuple_GET_SIZE(a) > 0);
  Py_XDECREF(a);
  died_of_interrupt = is_subtype(type, PyExc_KeyboardInterrupt);
  return 0;
}

/* The last thing Py_FinalizeEx does (Py_AtExit), before Py_RunMain's
 * exit_sigint: the report, when the last uncaught exception printed was a
 * KeyboardInterrupt (the REPL prints one typed at the prompt and goes on:
 * then the report is written here too, and exit() does not write it again). */
static void report_before_sigint(void) {
  if (died_of_interrupt) client_report_now();
}

static int exit_with(PyStatus st) {
  if (PyStatus_IsExit(st)) return st.exitcode;
  Py_ExitStatusException(st); /* prints the error, exits 1 */
}

int main(int argc, char **argv) {
  int rc = client_start("heaplab-python", "CPython " PY_VERSION);
  if (rc) return rc;

  PyPreConfig pre;
  PyPreConfig_InitPythonConfig(&pre);
  PyStatus st = Py_PreInitializeFromBytesArgs(&pre, argc, argv);
  if (PyStatus_Exception(st)) return exit_with(st);

  if (client.heap) install_heaplab(client.heap);
  if (PyImport_AppendInittab("_heaplab_client", PyInit__heaplab_client) == -1) {
    fprintf(stderr, "heaplab-python: cannot register the _heaplab_client module\n");
    return 1;
  }

  if ((client.heap || client.stats_path) && PySys_AddAuditHook(on_audit, NULL) != 0) {
    fprintf(stderr, "heaplab-python: cannot add the audit hook\n");
    return 1;
  }
  if (client.stats_path && Py_AtExit(report_before_sigint) != 0) {
    fprintf(stderr, "heaplab-python: cannot register the report at finalisation\n");
    return 1;
  }

  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  st = PyConfig_SetBytesArgv(&config, argc, argv);
  if (!PyStatus_Exception(st)) st = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(st)) return exit_with(st);
  python_started = 1;
  /* runs -c / -m / the script / the REPL, finalises, returns the status;
   * the HEAPLAB_STATS report is written by exit()'s handler after it (at the
   * end of finalisation after an uncaught KeyboardInterrupt: on_audit) */
  int status = Py_RunMain();
  /* a bare "MemoryError" does not say that it was heaplab's heap, nor what
   * ran out: one line after it, when the program died of a MemoryError and
   * the heap had refused an allocation */
  const char *why = status && died_of_memory ? client_refusal() : NULL;
  if (why) fprintf(stderr, "heaplab-python: the heap refused an allocation: %s\n", why);
  return status;
}
