/*
 * python_client_module.c -- `import _heaplab_client` inside heaplab-python:
 * the launcher's own heap and the process footprint seen from Python, so a
 * real program can measure itself (E8 records its phases with it).  The same
 * functions as heaplab-lua's `heaplab.client`:
 *
 *   allocator()                "heaplab" or "libc"
 *   stats(), options()         dicts by name (None on libc)
 *   resident_bytes(), vma_count()   the heap's reservation (None on libc)
 *   footprint()                {rss, anonymous, lazyfree, swap, phys_footprint, anon_huge}
 *   trim(), flush(), now(), peak_rss(), report()
 *   sampler_start(interval_s=0.002), sampler_mark(), sampler_reset(),
 *   sampler_summary(), sampler_series(), sampler_stop()   (one per process)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "client.h"

static hl_sampler *sampler;
/* +1 at every start and stop: sampler_series sees a finalizer that stopped
 * (or stopped and started again) the sampler while it built its list */
static unsigned long sampler_generation;

static PyObject *m_allocator(PyObject *self, PyObject *args) {
  (void)self, (void)args;
  return PyUnicode_FromString(client.allocator);
}

/* d[key] = v, taking v (which may be NULL: a failed conversion).  On a
 * failure d is released and set to NULL, so a loop can stop on !d. */
static void put(PyObject **d, const char *key, PyObject *v) {
  if (!v || PyDict_SetItemString(*d, key, v)) Py_CLEAR(*d);
  Py_XDECREF(v);
}

static PyObject *m_stats(PyObject *self, PyObject *args) {
  (void)self, (void)args;
  if (!client.heap) Py_RETURN_NONE;
  hl_stats st;
  hl_stats_get(client.heap, &st);
  const uint64_t *field = (const uint64_t *)&st;
  PyObject *d = PyDict_New();
  for (int i = 0; d && i < hl_stat_count(); i++)
    put(&d, hl_stat_name(i), PyLong_FromUnsignedLongLong(field[i]));
  return d;
}

static PyObject *m_options(PyObject *self, PyObject *args) {
  (void)self, (void)args;
  if (!client.heap) Py_RETURN_NONE;
  hl_options o;
  hl_heap_options(client.heap, &o);
  PyObject *d = PyDict_New();
  for (int i = 0; d && i < hl_option_count(); i++) {
    hl_option_info info;
    int64_t v = 0;
    hl_option_info_get(i, &info);
    hl_options_get(&o, info.name, &v);
    put(&d, info.name, info.kind == HL_OPT_BOOL   ? PyBool_FromLong(v != 0)
                       : info.kind == HL_OPT_ENUM ? PyUnicode_FromString(hl_option_choice(i, v))
                                                  : PyLong_FromLongLong(v));
  }
  return d;
}

static PyObject *m_resident_bytes(PyObject *self, PyObject *args) {
  (void)self, (void)args;
  uint64_t v;
  if (!client.heap || hl_resident_bytes(client.heap, &v)) Py_RETURN_NONE;
  return PyLong_FromUnsignedLongLong(v);
}

static PyObject *m_vma_count(PyObject *self, PyObject *args) {
  (void)self, (void)args;
  uint64_t v;
  if (!client.heap || hl_vma_count(client.heap, &v)) Py_RETURN_NONE;
  return PyLong_FromUnsignedLongLong(v);
}

static PyObject *m_footprint(PyObject *self, PyObject *args) {
  (void)self, (void)args;
  hl_footprint f;
  if (hl_footprint_get(&f)) {
    PyErr_SetString(PyExc_OSError, hl_heap_error(NULL)); /* (names the file and the reason) */
    return NULL;
  }
  return Py_BuildValue("{sKsKsKsKsKsK}", "rss", (unsigned long long)f.rss, "anonymous",
                       (unsigned long long)f.anonymous, "lazyfree",
                       (unsigned long long)f.lazyfree, "swap", (unsigned long long)f.swap,
                       "phys_footprint", (unsigned long long)f.phys_footprint, "anon_huge",
                       (unsigned long long)f.anon_huge);
}

static PyObject *m_trim(PyObject *self, PyObject *args) {
  (void)self, (void)args;
  if (!client.heap) Py_RETURN_NONE;
  hl_thread_flush(client.heap);
  Py_BEGIN_ALLOW_THREADS
  hl_trim(client.heap);
  Py_END_ALLOW_THREADS
  Py_RETURN_TRUE;
}

static PyObject *m_flush(PyObject *self, PyObject *args) {
  (void)self, (void)args;
  if (client.heap) hl_thread_flush(client.heap);
  Py_RETURN_NONE;
}

static PyObject *m_now(PyObject *self, PyObject *args) {
  (void)self, (void)args;
  return PyFloat_FromDouble(client_now_ns() / 1e9);
}

static PyObject *m_peak_rss(PyObject *self, PyObject *args) {
  (void)self, (void)args;
  return PyLong_FromUnsignedLongLong(client_peak_rss());
}

static PyObject *m_report(PyObject *self, PyObject *args) {
  (void)self, (void)args;
  client_out out = {0};
  if (client_write_report(&out) != 0) {
    client_out_free(&out);
    return PyErr_NoMemory();
  }
  PyObject *s = PyUnicode_FromStringAndSize(out.buf, (Py_ssize_t)out.len);
  client_out_free(&out);
  return s;
}

/* ---- the footprint sampler (a C thread; one per process) ---- */

static int need_sampler(void) {
  if (sampler) return 1;
  PyErr_SetString(PyExc_RuntimeError, "no sampler running (call sampler_start first)");
  return 0;
}

static PyObject *m_sampler_start(PyObject *self, PyObject *args) {
  (void)self;
  double interval = 0.002;
  long long cap = 1 << 16;
  PyObject *iv = NULL, *cv = NULL;
  if (!PyArg_ParseTuple(args, "|OO:sampler_start", &iv, &cv)) return NULL;
  /* named as the bindings name them (heaplab.Sampler: "interval_s must be a
   * number, not str"; Lua's heaplab.client.sampler the same): the parse's
   * "must be real number, not str" named no argument, and a bool was an
   * interval (True: 1 s) -- session 43 */
  if (iv) {
    if (PyBool_Check(iv) || !PyNumber_Check(iv))
      return PyErr_Format(PyExc_TypeError, "sampler_start: interval_s must be a number, not %s",
                          Py_TYPE(iv)->tp_name);
    interval = PyFloat_AsDouble(iv);
    if (interval == -1.0 && PyErr_Occurred()) return NULL;
  }
  if (cv) {
    if (PyBool_Check(cv) || !PyIndex_Check(cv))
      return PyErr_Format(PyExc_TypeError, "sampler_start: capacity must be an int, not %s",
                          Py_TYPE(cv)->tp_name);
    PyObject *n = PyNumber_Index(cv);
    if (!n) return NULL;
    int beyond = 0;
    cap = PyLong_AsLongLongAndOverflow(n, &beyond);
    if (beyond) { /* (never reaches hl_sampler_open: its range, as heaplab.Sampler says it;
                   * it was OverflowError's "Python int too large to convert") */
      PyErr_Format(PyExc_ValueError, "sampler_start: capacity %S out of range [%d, %d]", n,
                   HL_SAMPLER_MIN_CAPACITY, HL_SAMPLER_MAX_CAPACITY);
      Py_DECREF(n);
      return NULL;
    }
    Py_DECREF(n);
    if (cap == -1 && PyErr_Occurred()) return NULL;
  }
  if (sampler) {
    PyErr_SetString(PyExc_RuntimeError, "sampler_start: a sampler is already running");
    return NULL;
  }
  int rc = hl_sampler_open(&sampler, interval, (int64_t)cap);
  if (rc) {
    sampler = NULL;
    PyErr_SetString(rc == HL_EINVAL ? PyExc_ValueError : PyExc_OSError, hl_heap_error(NULL));
    return NULL;
  }
  sampler_generation++;
  Py_RETURN_NONE;
}

static PyObject *m_sampler_mark(PyObject *self, PyObject *args) {
  (void)self, (void)args;
  if (!need_sampler()) return NULL;
  hl_sampler_mark(sampler);
  Py_RETURN_NONE;
}

static PyObject *m_sampler_reset(PyObject *self, PyObject *args) {
  (void)self, (void)args;
  if (!need_sampler()) return NULL;
  hl_sampler_reset(sampler);
  Py_RETURN_NONE;
}

static PyObject *m_sampler_summary(PyObject *self, PyObject *args) {
  (void)self, (void)args;
  if (!need_sampler()) return NULL;
  hl_sampler_summary m;
  if (hl_sampler_summary_get(sampler, &m)) {
    PyErr_SetString(PyExc_OSError, hl_heap_error(NULL));
    return NULL;
  }
  return Py_BuildValue(
      "{sKsKsKsKsKsKsKsKsKsK}", "samples", (unsigned long long)m.samples, "min_phys",
      (unsigned long long)m.min_phys, "max_phys", (unsigned long long)m.max_phys,
      "min_phys_after_mark", (unsigned long long)m.min_phys_after_mark, "max_phys_after_mark",
      (unsigned long long)m.max_phys_after_mark, "min_rss", (unsigned long long)m.min_rss,
      "max_rss", (unsigned long long)m.max_rss, "mark_ns", (unsigned long long)m.mark_ns,
      "interval_us", (unsigned long long)m.interval_us, "stored", (unsigned long long)m.stored);
}

/* [(t_ns, phys_footprint, rss, lazyfree), ...] */
static PyObject *m_sampler_series(PyObject *self, PyObject *args) {
  (void)self, (void)args;
  if (!need_sampler()) return NULL;
  PyObject *out = PyList_New(0);
  hl_sample buf[256];
  size_t from = 0, n;
  unsigned long generation = sampler_generation;
  /* (a tuple made here may run the cyclic collector, and a finalizer may
   * stop the sampler: the list came back cut short without a word, or went
   * on with another sampler's samples -- the Lua module raises, h37mutcl) */
  while (out && sampler_generation == generation &&
         hl_sampler_read(sampler, from, buf, 256, &n) == 0 && n > 0) {
    for (size_t i = 0; i < n; i++) {
      PyObject *t = Py_BuildValue("(KKKK)", (unsigned long long)buf[i].t_ns,
                                  (unsigned long long)buf[i].phys_footprint,
                                  (unsigned long long)buf[i].rss,
                                  (unsigned long long)buf[i].lazyfree);
      if (!t || PyList_Append(out, t)) {
        Py_XDECREF(t);
        Py_CLEAR(out);
        break;
      }
      Py_DECREF(t);
    }
    from += n;
  }
  if (out && sampler_generation != generation) {
    Py_CLEAR(out);
    PyErr_SetString(PyExc_RuntimeError,
                    "sampler_series: the sampler was stopped while its series was read "
                    "(by a finalizer)");
  }
  return out;
}

static PyObject *m_sampler_stop(PyObject *self, PyObject *args) {
  (void)self, (void)args;
  if (sampler) {
    hl_sampler *s = sampler;
    sampler = NULL;
    sampler_generation++;
    Py_BEGIN_ALLOW_THREADS
    hl_sampler_stop(s);
    Py_END_ALLOW_THREADS
  }
  Py_RETURN_NONE;
}

#define FN(name, doc) {#name, m_##name, METH_NOARGS, doc}
static PyMethodDef methods[] = {
  FN(allocator, "'heaplab' or 'libc'"),
  FN(stats, "the launcher heap's stats by name (None on libc)"),
  FN(options, "the launcher heap's options by name (None on libc)"),
  FN(resident_bytes, "bytes of the heap's reservation the kernel charges now (resident_bytes)"),
  FN(vma_count, "VMAs over the heap's reservation"),
  FN(footprint, "the process footprint (smaps_rollup), bytes"),
  FN(trim, "return this thread's cached blocks and run a trim pass"),
  FN(flush, "return this thread's cached blocks"),
  FN(now, "CLOCK_MONOTONIC in seconds"),
  FN(peak_rss, "peak RSS of the process, bytes"),
  FN(report, "the HEAPLAB_STATS report as a JSON string"),
  {"sampler_start", m_sampler_start, METH_VARARGS, "start the footprint sampler thread"},
  FN(sampler_mark, "start the lowest-after-mark window now"),
  FN(sampler_reset, "start a new phase now: min/max and the count restart, the mark ends"),
  FN(sampler_summary, "the sampler's figures"),
  FN(sampler_series, "the sampled series [(t_ns, phys, rss, lazyfree)]"),
  FN(sampler_stop, "stop the sampler"),
  {NULL, NULL, 0, NULL},
};
#undef FN

static struct PyModuleDef module = {
  PyModuleDef_HEAD_INIT, "_heaplab_client",
  "heaplab-python's own heap and the process footprint, seen from Python", -1, methods,
};

PyObject *PyInit__heaplab_client(void) { return PyModule_Create(&module); }
