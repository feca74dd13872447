/*
 * convert.c — CloudEvents to and from Python dicts (convert.h).
 *
 * Decoded events are views into the frame's buffer; the dict gets copies.
 * Outputs point into Python objects instead (the str and bytes objects
 * of the dict, or made here), all held by one list until the Result is
 * encoded, so that nothing is copied twice.
 */
#include "config.h"

#include "hosts/python/convert.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "lib/media.h"
#include "lib/name.h"
#include "lib/uuid.h"

static PyObject *json_loads, *json_dumps;

int
pyhost_convert_init(void)
{
    PyObject *json = PyImport_ImportModule("json");

    if (json == NULL)
        return -1;
    json_loads = PyObject_GetAttrString(json, "loads");
    json_dumps = PyObject_GetAttrString(json, "dumps");
    Py_DECREF(json);
    return json_loads && json_dumps ? 0 : -1;
}

bool
pyhost_media_json(struct ipc_str ct)
{
    return media_is_json(ct.ptr, ct.len);
}

/* ---- in ----------------------------------------------------------------- */

static PyObject *
str_or_none(struct ipc_str s)
{
    if (s.ptr == NULL)
        Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8(s.ptr, s.len, "replace");
}

/* data as the worker sees it (convert.h). */
static PyObject *
data_value(const struct ipc_cloudevent *ce)
{
    const char *p = (const char *)ce->data.ptr;

    if (p == NULL)
        Py_RETURN_NONE;
    if (media_is_text(ce->datacontenttype.ptr, ce->datacontenttype.len))
        return PyUnicode_DecodeUTF8(p, ce->data.len, "replace");
    if (!pyhost_media_json(ce->datacontenttype))
        return PyBytes_FromStringAndSize(p, ce->data.len);
    PyObject *text = PyUnicode_DecodeUTF8(p, ce->data.len, "strict");
    if (text == NULL) {
        PyErr_Clear();
        return PyBytes_FromStringAndSize(p, ce->data.len);
    }
    PyObject *v = PyObject_CallOneArg(json_loads, text);
    if (v == NULL && PyErr_ExceptionMatches(PyExc_ValueError)) {
        PyErr_Clear();
        return text; /* not JSON after all: its text */
    }
    Py_DECREF(text);
    return v;
}

/* d[key] = v, taking v. */
static int
put(PyObject *d, const char *key, PyObject *v)
{
    if (v == NULL)
        return -1;
    int rc = PyDict_SetItemString(d, key, v);
    Py_DECREF(v);
    return rc;
}

PyObject *
pyhost_event_dict(const struct ipc_cloudevent *ce)
{
    PyObject *d = PyDict_New();

    if (d == NULL)
        return NULL;
    if (put(d, "id", str_or_none(ce->id)) < 0 ||
        put(d, "type", str_or_none(ce->type)) < 0 ||
        put(d, "source", str_or_none(ce->source)) < 0 ||
        put(d, "specversion", str_or_none(ce->specversion)) < 0 ||
        put(d, "datacontenttype", str_or_none(ce->datacontenttype)) < 0 ||
        put(d, "subject", str_or_none(ce->subject)) < 0 ||
        put(d, "time", str_or_none(ce->time)) < 0 ||
        (ce->dataschema.ptr &&
         put(d, "dataschema", str_or_none(ce->dataschema)) < 0) ||
        put(d, "data", data_value(ce)) < 0)
        goto fail;
    for (uint32_t i = 0; i < ce->extensions.n; i++) {
        struct ipc_pair p;
        ipc_pair_list_get(&ce->extensions, i, &p);
        PyObject *k = PyUnicode_DecodeUTF8(p.name.ptr, p.name.len, "replace");
        PyObject *v = str_or_none(p.value);
        int rc = k && v ? PyDict_SetItem(d, k, v) : -1;
        Py_XDECREF(k);
        Py_XDECREF(v);
        if (rc < 0)
            goto fail;
    }
    return d;

fail:
    Py_DECREF(d);
    return NULL;
}

/* ---- out ---------------------------------------------------------------- */

/* The attributes of an output, in struct ipc_cloudevent. */
static const struct {
    const char *name;
    size_t offset;
} attrs[] = {
    { "id", offsetof(struct ipc_cloudevent, id) },
    { "type", offsetof(struct ipc_cloudevent, type) },
    { "source", offsetof(struct ipc_cloudevent, source) },
    { "specversion", offsetof(struct ipc_cloudevent, specversion) },
    { "datacontenttype", offsetof(struct ipc_cloudevent, datacontenttype) },
    { "dataschema", offsetof(struct ipc_cloudevent, dataschema) },
    { "subject", offsetof(struct ipc_cloudevent, subject) },
    { "time", offsetof(struct ipc_cloudevent, time) },
};

#define NATTRS (sizeof attrs / sizeof attrs[0])

void
pyhost_exception_text(char *buf, size_t len)
{
    PyObject *t, *e, *tb;

    PyErr_Fetch(&t, &e, &tb);
    PyErr_NormalizeException(&t, &e, &tb);
    PyObject *s = e ? PyObject_Str(e) : NULL;
    const char *m = s ? PyUnicode_AsUTF8(s) : NULL;

    PyErr_Clear();
    snprintf(buf, len, "%s: %s", t ? ((PyTypeObject *)t)->tp_name : "error",
             m ? m : "?");
    Py_XDECREF(s);
    Py_XDECREF(t);
    Py_XDECREF(e);
    Py_XDECREF(tb);
}

/* obj's UTF-8 in *out, obj kept in o->keep.  -1 with a Python error. */
static int
keep_str(struct pyhost_outputs *o, PyObject *obj, struct ipc_str *out)
{
    Py_ssize_t n;
    const char *p = PyUnicode_AsUTF8AndSize(obj, &n);

    if (p == NULL || PyList_Append(o->keep, obj) < 0)
        return -1;
    if ((size_t)n > UINT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "string too long");
        return -1;
    }
    *out = (struct ipc_str){ p, (uint32_t)n };
    return 0;
}

/* A C string kept as a Python str (the filled values). */
static int
keep_cstr(struct pyhost_outputs *o, const char *s, struct ipc_str *out)
{
    PyObject *v = PyUnicode_FromString(s);
    int rc = v ? keep_str(o, v, out) : -1;
    Py_XDECREF(v);
    return rc;
}

/* Random bytes for the ids, taken from the kernel 4 KiB at a time (a
 * getrandom() per event was a tenth of the round trip's system calls).
 * Emptied by pyhost_convert_reseed() as each host starts, so that hosts
 * forked from one zygote never share bytes. */
static struct {
    unsigned char b[4096];
    size_t used; /* sizeof b: empty */
} pool = { .used = sizeof pool.b };

void
pyhost_convert_reseed(void)
{
    explicit_bzero(pool.b, sizeof pool.b);
    pool.used = sizeof pool.b;
}

/* A version 4 UUID of the pool's next 16 bytes (getrandom is allowed by
 * the python role). */
static void
uuid4(char out[UUID_SIZE])
{
    if (pool.used + 16 > sizeof pool.b) {
        size_t got = 0;
        while (got < sizeof pool.b) {
            ssize_t n = getrandom(pool.b + got, sizeof pool.b - got, 0);
            if (n <= 0)
                break;
            got += (size_t)n;
        }
        pool.used = 0;
    }
    uuid_from_random(pool.b + pool.used, out);
    pool.used += 16;
}

/* Now, RFC 3339 in UTC with microseconds. */
static void
now_rfc3339(char out[64])
{
    struct timespec ts;
    struct tm tm;

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    snprintf(out, 64, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
             ts.tv_nsec / 1000);
}

/* data of one output into ce->data, its content type set when absent. */
static int
out_data(struct pyhost_outputs *o, PyObject *v, struct ipc_cloudevent *ce,
         char *err, size_t errlen)
{
    PyObject *bytes = NULL;
    const char *fill = NULL;

    if (v == Py_None)
        return 0;
    if (PyBytes_Check(v) || PyByteArray_Check(v)) {
        bytes = PyBytes_FromObject(v);
        fill = "application/octet-stream";
    } else if (PyUnicode_Check(v) && ce->datacontenttype.ptr == NULL) {
        bytes = PyUnicode_AsUTF8String(v);
        fill = "text/plain; charset=utf-8";
    } else if (pyhost_media_json(ce->datacontenttype)) {
        PyObject *s = PyObject_CallOneArg(json_dumps, v);
        if (s == NULL) {
            char why[256];
            pyhost_exception_text(why, sizeof why);
            snprintf(err, errlen, "data is not JSON-serialisable: %s", why);
            return -1;
        }
        bytes = PyUnicode_AsUTF8String(s);
        Py_DECREF(s);
        fill = "application/json";
    } else if (PyUnicode_Check(v)) {
        bytes = PyUnicode_AsUTF8String(v);
    } else {
        snprintf(err, errlen,
                 "data is a %s, but datacontenttype %.*s takes str or bytes",
                 Py_TYPE(v)->tp_name, (int)ce->datacontenttype.len,
                 ce->datacontenttype.ptr);
        return -1;
    }
    if (bytes == NULL || PyList_Append(o->keep, bytes) < 0) {
        Py_XDECREF(bytes);
        pyhost_exception_text(err, errlen);
        return -1;
    }
    Py_DECREF(bytes);
    if ((size_t)PyBytes_GET_SIZE(bytes) > UINT32_MAX) {
        snprintf(err, errlen, "data of %zd bytes is too large",
                 PyBytes_GET_SIZE(bytes));
        return -1;
    }
    ce->data = (struct ipc_bytes){ (const uint8_t *)PyBytes_AS_STRING(bytes),
                                   (uint32_t)PyBytes_GET_SIZE(bytes) };
    if (ce->datacontenttype.ptr == NULL &&
        keep_cstr(o, fill, &ce->datacontenttype) < 0) {
        pyhost_exception_text(err, errlen);
        return -1;
    }
    return 0;
}

/* An extension's value as a str (NULL: leave it out; -1 on error). */
static int
ext_value(PyObject *v, PyObject **out)
{
    *out = NULL;
    if (v == Py_None)
        return 0;
    if (PyBool_Check(v))
        *out = PyUnicode_FromString(v == Py_True ? "true" : "false");
    else if (PyLong_Check(v))
        *out = PyObject_Str(v);
    else if (PyUnicode_Check(v))
        *out = Py_NewRef(v);
    else
        return -1;
    return *out ? 0 : -1;
}

/* One output event from dict d into o->v[i]; its extensions at
 * o->pairs[*np...]. */
static int
out_event(struct pyhost_outputs *o, PyObject *d, uint32_t i, size_t *np,
          size_t npmax, const struct ipc_cloudevent *in, const char *source,
          char *err, size_t errlen)
{
    struct ipc_cloudevent *ce = &o->v[i];
    PyObject *k, *v, *data = Py_None;
    Py_ssize_t pos = 0;
    size_t first = *np;
    char buf[64];

    memset(ce, 0, sizeof *ce);
    while (PyDict_Next(d, &pos, &k, &v)) {
        Py_ssize_t kn;
        const char *key =
            PyUnicode_Check(k) ? PyUnicode_AsUTF8AndSize(k, &kn) : NULL;
        size_t a;
        if (key == NULL) {
            PyErr_Clear();
            snprintf(err, errlen, "a key of the output event is not a str");
            return -1;
        }
        if (strcmp(key, "data") == 0) {
            data = v;
            continue;
        }
        for (a = 0; a < NATTRS && strcmp(key, attrs[a].name) != 0; a++)
            ;
        if (a < NATTRS) {
            if (v == Py_None)
                continue;
            if (!PyUnicode_Check(v)) {
                snprintf(err, errlen, "attribute %s is a %s, not a str", key,
                         Py_TYPE(v)->tp_name);
                return -1;
            }
            if (keep_str(o, v,
                         (struct ipc_str *)((char *)ce + attrs[a].offset)) <
                0) {
                pyhost_exception_text(err, errlen);
                return -1;
            }
            continue;
        }
        if (!name_ext_valid(key, (size_t)kn)) {
            snprintf(err, errlen,
                     "extension name '%.40s' is not " NAME_EXT_RULE " (an "
                     "output key that is no CloudEvents attribute is an "
                     "extension)",
                     key);
            return -1;
        }
        PyObject *s;
        if (ext_value(v, &s) < 0) {
            PyErr_Clear();
            snprintf(err, errlen,
                     "extension %s is a %s; extensions take str, int or bool",
                     key, Py_TYPE(v)->tp_name);
            return -1;
        }
        if (s == NULL)
            continue;
        if (*np == npmax) {
            Py_DECREF(s);
            snprintf(err, errlen, "more than 128 extensions");
            return -1;
        }
        struct ipc_pair *p = &o->pairs[(*np)++];
        int rc = keep_str(o, k, &p->name) < 0 || keep_str(o, s, &p->value) < 0;
        Py_DECREF(s);
        if (rc) {
            pyhost_exception_text(err, errlen);
            return -1;
        }
    }
    if (ce->type.ptr == NULL || ce->type.len == 0) {
        snprintf(err, errlen, "the output event has no type");
        return -1;
    }
    /* Propagated from the input unless set. */
    static const char *const carry[] = { "correlationid", "traceparent" };
    for (size_t c = 0; in && c < sizeof carry / sizeof carry[0]; c++) {
        struct ipc_str val = ipc_cloudevent_extension(in, carry[c]);
        bool have = false;
        for (size_t j = first; j < *np; j++)
            have = have || ipc_str_eq(o->pairs[j].name, carry[c]);
        if (val.ptr == NULL || have)
            continue;
        if (*np == npmax) {
            snprintf(err, errlen, "more than 128 extensions");
            return -1;
        }
        struct ipc_pair *p = &o->pairs[(*np)++];
        p->name = ipc_str_c(carry[c]);
        p->value = val; /* the input outlives the Result */
    }
    ce->extensions.n = (uint32_t)(*np - first);
    ce->extensions.items = &o->pairs[first];
    int rc = 0;
    if (ce->id.ptr == NULL || ce->id.len == 0) {
        uuid4(buf);
        rc |= keep_cstr(o, buf, &ce->id);
    }
    if (ce->time.ptr == NULL) {
        now_rfc3339(buf);
        rc |= keep_cstr(o, buf, &ce->time);
    }
    if (ce->specversion.ptr == NULL || ce->specversion.len == 0)
        ce->specversion = ipc_str_c("1.0");
    if (ce->source.ptr == NULL || ce->source.len == 0)
        rc |= keep_cstr(o, source, &ce->source);
    if (rc) {
        pyhost_exception_text(err, errlen);
        return -1;
    }
    if (out_data(o, data, ce, err, errlen) < 0)
        return -1;
    struct ipc_fb_error fe;
    if (ipc_cloudevent_check(ce, &fe) < 0) {
        snprintf(err, errlen, "the output event is not a CloudEvent: %s",
                 fe.detail ? fe.detail : "?");
        return -1;
    }
    return 0;
}

int
pyhost_outputs_make(PyObject *ret, const struct ipc_cloudevent *in,
                    const char *source, struct pyhost_outputs *o, char *err,
                    size_t errlen)
{
    Py_ssize_t n;

    memset(o, 0, sizeof *o);
    if (ret == Py_None)
        return 0;
    if (PyDict_Check(ret)) {
        n = 1;
    } else if (PyList_Check(ret)) {
        n = PyList_GET_SIZE(ret);
        if (n > PYHOST_OUTPUTS_MAX) {
            snprintf(err, errlen, "Process returned %zd events, over %d", n,
                     PYHOST_OUTPUTS_MAX);
            return -1;
        }
        for (Py_ssize_t i = 0; i < n; i++)
            if (!PyDict_Check(PyList_GET_ITEM(ret, i))) {
                snprintf(err, errlen,
                         "Process returned a list whose item %zd is a %s, "
                         "not a dict",
                         i, Py_TYPE(PyList_GET_ITEM(ret, i))->tp_name);
                return -1;
            }
    } else {
        snprintf(err, errlen,
                 "Process returned a %s; it returns None, a dict or a list "
                 "of dicts",
                 Py_TYPE(ret)->tp_name);
        return -1;
    }
    if (n == 0)
        return 0;
    /* Each event's keys bound its extensions, plus the two carried. */
    size_t npmax = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *d = PyDict_Check(ret) ? ret : PyList_GET_ITEM(ret, i);
        size_t k = (size_t)PyDict_GET_SIZE(d) + 2;
        npmax += k < 128 ? k : 128;
    }
    o->v = PyMem_Calloc((size_t)n, sizeof *o->v);
    o->pairs = PyMem_Calloc(npmax ? npmax : 1, sizeof *o->pairs);
    o->keep = PyList_New(0);
    if (o->v == NULL || o->pairs == NULL || o->keep == NULL) {
        PyErr_Clear();
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    size_t np = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *d = PyDict_Check(ret) ? ret : PyList_GET_ITEM(ret, i);
        /* the per-event cap of 128 extensions within the shared array */
        size_t cap = np + 128 < npmax ? np + 128 : npmax;
        char why[1024];
        if (out_event(o, d, (uint32_t)i, &np, cap, in, source, why,
                      sizeof why) < 0) {
            if (n == 1)
                snprintf(err, errlen, "%s", why);
            else
                snprintf(err, errlen, "output %zd: %s", i, why);
            return -1;
        }
    }
    o->n = (uint32_t)n;
    return 0;
}

void
pyhost_outputs_free(struct pyhost_outputs *o)
{
    PyMem_Free(o->v);
    PyMem_Free(o->pairs);
    Py_XDECREF(o->keep);
    memset(o, 0, sizeof *o);
}

/* ---- the gateway's structured form -------------------------------------- */

PyObject *
pyhost_event_structured(const struct ipc_cloudevent *ce)
{
    PyObject *d = PyDict_New();

    if (d == NULL)
        return NULL;
    for (size_t a = 0; a < NATTRS; a++) {
        const struct ipc_str *s =
            (const struct ipc_str *)((const char *)ce + attrs[a].offset);
        if (s->ptr && put(d, attrs[a].name, str_or_none(*s)) < 0)
            goto fail;
    }
    for (uint32_t i = 0; i < ce->extensions.n; i++) {
        struct ipc_pair p;
        char name[32];
        ipc_pair_list_get(&ce->extensions, i, &p);
        snprintf(name, sizeof name, "%.*s", (int)p.name.len, p.name.ptr);
        if (put(d, name, str_or_none(p.value)) < 0)
            goto fail;
    }
    if (ce->data.ptr) {
        const char *p = (const char *)ce->data.ptr;
        struct ipc_str ct = ce->datacontenttype;
        if (media_is_json(ct.ptr, ct.len) || media_is_text(ct.ptr, ct.len)) {
            /* the JSON value, or the text, as the worker gave it */
            PyObject *v = data_value(ce);
            if (put(d, "data", v) < 0)
                goto fail;
        } else {
            PyObject *b = PyBytes_FromStringAndSize(p, ce->data.len);
            PyObject *b64 = NULL,
                     *mod = b ? PyImport_ImportModule("base64") : NULL;
            if (mod)
                b64 = PyObject_CallMethod(mod, "b64encode", "O", b);
            Py_XDECREF(mod);
            Py_XDECREF(b);
            PyObject *s =
                b64 ? PyUnicode_FromEncodedObject(b64, "ascii", "strict")
                    : NULL;
            Py_XDECREF(b64);
            if (put(d, "data_base64", s) < 0)
                goto fail;
        }
    }
    return d;

fail:
    Py_DECREF(d);
    return NULL;
}
