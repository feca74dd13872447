/*
 * test_pyhost_convert.c — CloudEvents to and from the dicts of Python
 * workers (hosts/python/convert.h), in an embedded interpreter: the dict
 * form, each data rule, each return form, the filling, propagation, and
 * the errors that name the key or the type.
 */
#include "config.h"

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "hosts/python/convert.h"
#include "tests/unit/check.h"

/* Under --enable-asan: CPython does not free all it allocated at exit,
 * not even after Py_FinalizeEx() (about 68 KB of 3.11's own here), so
 * LeakSanitizer is told to leave libpython's allocations alone.  A
 * reference leak in convert.c would not show as a leak anyway (the
 * object stays reachable from the interpreter's heap). */
const char *__lsan_default_suppressions(void);

const char *
__lsan_default_suppressions(void)
{
    return "leak:libpython3\n";
}

/* The Python value of expression `expr` with `d` bound to obj. */
static PyObject *
eval(const char *expr, PyObject *obj)
{
    PyObject *g = PyDict_New();
    PyDict_SetItemString(g, "__builtins__", PyEval_GetBuiltins());
    if (obj)
        PyDict_SetItemString(g, "d", obj);
    PyObject *r = PyRun_String(expr, Py_eval_input, g, g);
    Py_DECREF(g);
    if (r == NULL)
        PyErr_Print();
    return r;
}

static bool
truthy(const char *expr, PyObject *obj)
{
    PyObject *r = eval(expr, obj);
    bool t = r && PyObject_IsTrue(r) == 1;
    Py_XDECREF(r);
    if (!t)
        FAIL("not true: %s", expr);
    return t;
}

static const struct ipc_pair exts[] = {
    { { "correlationid", 13 }, { "c-1", 3 } },
    { { "traceparent", 11 }, { "00-ab-cd-01", 11 } },
    { { "tenant", 6 }, { "t1", 2 } },
};

static struct ipc_cloudevent
input(const char *ct, const char *data)
{
    struct ipc_cloudevent ce = {
        .id = ipc_str_c("e1"),
        .type = ipc_str_c("t.in"),
        .source = ipc_str_c("src"),
        .specversion = ipc_str_c("1.0"),
        .datacontenttype = ipc_str_c(ct),
        .data = { (const uint8_t *)data, data ? (uint32_t)strlen(data) : 0 },
        .extensions = { .n = 3, .items = exts },
    };
    return ce;
}

static void
test_event_dict(void)
{
    struct ipc_cloudevent ce = input(NULL, "{\"n\": [1, 2]}");
    PyObject *d = pyhost_event_dict(&ce);

    REQUIRE(d != NULL);
    truthy("d['id'] == 'e1' and d['type'] == 't.in' and d['source'] == 'src'",
           d);
    truthy("d['specversion'] == '1.0' and d['datacontenttype'] is None", d);
    truthy("d['subject'] is None and d['time'] is None", d);
    truthy("'dataschema' not in d", d);
    truthy("d['data'] == {'n': [1, 2]}", d);
    truthy("d['correlationid'] == 'c-1' and d['tenant'] == 't1'", d);
    Py_DECREF(d);

    static const struct {
        const char *ct, *data, *want;
    } rules[] = {
        { "application/json", "[1, \"x\"]", "d['data'] == [1, 'x']" },
        { "application/cloudevents+json; charset=utf-8", "{\"a\": null}",
          "d['data'] == {'a': None}" },
        { "Application/JSON", "3.5", "d['data'] == 3.5" },
        { "text/plain", "h\xc3\xa9llo", "d['data'] == 'h\\u00e9llo'" },
        { "text/csv; charset=utf-8", "a,b", "d['data'] == 'a,b'" },
        { "application/octet-stream", "\x01\x02",
          "d['data'] == b'\\x01\\x02'" },
        { "image/png", "PNG", "d['data'] == b'PNG'" },
        /* JSON that is not JSON after all: its text */
        { "application/json", "not json", "d['data'] == 'not json'" },
        { NULL, NULL, "d['data'] is None" },
    };
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        ce = input(rules[i].ct, rules[i].data);
        d = pyhost_event_dict(&ce);
        REQUIRE(d != NULL);
        if (!truthy(rules[i].want, d))
            FAIL("content type %s", rules[i].ct ? rules[i].ct : "(none)");
        Py_DECREF(d);
    }
}

/* The outputs of the Python expression ret for the standard input. */
static int
outputs(const char *ret, struct pyhost_outputs *o, char *err, size_t len)
{
    struct ipc_cloudevent in = input(NULL, "{}");
    PyObject *r = eval(ret, NULL);
    if (r == NULL)
        return -2;
    int rc =
        pyhost_outputs_make(r, &in, "urn:workmanager:worker:w1", o, err, len);
    Py_DECREF(r);
    return rc;
}

static bool
str_is(struct ipc_str s, const char *want)
{
    if (ipc_str_eq(s, want))
        return true;
    FAIL("'%.*s' is not '%s'", (int)s.len, s.ptr ? s.ptr : "(null)", want);
    return false;
}

static void
test_return_forms(void)
{
    struct pyhost_outputs o;
    char err[512];

    CHECK_EQ(outputs("None", &o, err, sizeof err), 0);
    CHECK_EQ(o.n, 0);
    pyhost_outputs_free(&o);

    /* a dict: the filling, the propagation, an extension, JSON data */
    REQUIRE(outputs("{'type': 'out', 'data': {'a': 1}, 'shard': 7, "
                    "'flag': True, 'gone': None}",
                    &o, err, sizeof err) == 0);
    REQUIRE(o.n == 1);
    struct ipc_cloudevent *e = &o.v[0];
    str_is(e->type, "out");
    CHECK(e->id.len == 36 && e->id.ptr[14] == '4');
    CHECK(e->time.len == 27 && e->time.ptr[26] == 'Z');
    str_is(e->specversion, "1.0");
    str_is(e->source, "urn:workmanager:worker:w1");
    str_is(e->datacontenttype, "application/json");
    CHECK(e->data.len == 8 && memcmp(e->data.ptr, "{\"a\": 1}", 8) == 0);
    str_is(ipc_cloudevent_extension(e, "shard"), "7");
    str_is(ipc_cloudevent_extension(e, "flag"), "true");
    CHECK(ipc_cloudevent_extension(e, "gone").ptr == NULL);
    str_is(ipc_cloudevent_extension(e, "correlationid"), "c-1");
    str_is(ipc_cloudevent_extension(e, "traceparent"), "00-ab-cd-01");
    /* the input's other extensions do not */
    CHECK(ipc_cloudevent_extension(e, "tenant").ptr == NULL);
    CHECK_EQ(e->extensions.n, 4);
    pyhost_outputs_free(&o);

    /* a list; set attributes kept; each data type */
    REQUIRE(outputs("[{'type': 'a', 'id': 'x1', 'source': 's', "
                    "'time': '2026-01-01T00:00:00Z', 'data': 'text', "
                    "'correlationid': 'mine'},"
                    " {'type': 'b', 'data': b'\\x00\\x01'},"
                    " {'type': 'c', 'datacontenttype': 'text/csv', "
                    "'data': 'a,b', 'subject': 'sub'},"
                    " {'type': 'd', 'data': [1, None]}]",
                    &o, err, sizeof err) == 0);
    REQUIRE(o.n == 4);
    str_is(o.v[0].id, "x1");
    str_is(o.v[0].source, "s");
    str_is(o.v[0].time, "2026-01-01T00:00:00Z");
    str_is(o.v[0].datacontenttype, "text/plain; charset=utf-8");
    CHECK(o.v[0].data.len == 4 && memcmp(o.v[0].data.ptr, "text", 4) == 0);
    str_is(ipc_cloudevent_extension(&o.v[0], "correlationid"), "mine");
    str_is(o.v[1].datacontenttype, "application/octet-stream");
    CHECK(o.v[1].data.len == 2 && o.v[1].data.ptr[0] == 0);
    str_is(o.v[2].datacontenttype, "text/csv");
    str_is(o.v[2].subject, "sub");
    CHECK(o.v[2].data.len == 3);
    str_is(o.v[3].datacontenttype, "application/json");
    CHECK(o.v[3].data.len == 9 && memcmp(o.v[3].data.ptr, "[1, null]", 9) == 0);
    /* different ids for each filled one */
    CHECK(!(o.v[1].id.len == o.v[3].id.len &&
            memcmp(o.v[1].id.ptr, o.v[3].id.ptr, o.v[1].id.len) == 0));
    pyhost_outputs_free(&o);

    CHECK_EQ(outputs("[]", &o, err, sizeof err), 0);
    CHECK_EQ(o.n, 0);
    pyhost_outputs_free(&o);
}

static void
test_errors(void)
{
    static const struct {
        const char *ret;
        const char *want[3];
    } bad[] = {
        { "42", { "Process returned a int", "None, a dict or a list", NULL } },
        { "[{'type': 'a'}, 3]", { "item 1 is a int", NULL } },
        { "{'data': 1}", { "no type", NULL } },
        { "{'type': 'a', 'BadName': 1}",
          { "extension name 'BadName'", "[a-z0-9]{1,20}", NULL } },
        { "{'type': 'a', 'waytoolongextensionname': 1}",
          { "'waytoolongextensionname'", NULL } },
        { "{'type': 'a', 'x_y': 1}", { "'x_y'", NULL } },
        { "{'type': 'a', 'ext': 1.5}", { "extension ext is a float", NULL } },
        { "{'type': 'a', 'subject': 3}",
          { "attribute subject is a int", NULL } },
        { "{'type': 'a', 'data': {1, 2}}",
          { "not JSON-serialisable", "set", NULL } },
        { "{'type': 'a', 'datacontenttype': 'text/plain', 'data': {}}",
          { "data is a dict", "text/plain", NULL } },
        { "[{'type': 'a'}, {'type': 'b', 'X': 1}]",
          { "output 1:", "'X'", NULL } },
        { "{1: 2, 'type': 'a'}", { "not a str", NULL } },
    };
    struct pyhost_outputs o;
    char err[512];

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        if (outputs(bad[i].ret, &o, err, sizeof err) != -1)
            FAIL("%s was accepted", bad[i].ret);
        for (size_t k = 0; bad[i].want[k]; k++)
            if (strstr(err, bad[i].want[k]) == NULL)
                FAIL("%s: '%s' lacks '%s'", bad[i].ret, err, bad[i].want[k]);
        CHECK(!PyErr_Occurred());
        pyhost_outputs_free(&o);
    }
}

static void
test_structured(void)
{
    struct pyhost_outputs o;
    char err[512];

    REQUIRE(outputs("[{'type': 'a', 'data': {'k': [1]}, 'ext': 'v'},"
                    " {'type': 'b', 'data': b'\\xff'}]",
                    &o, err, sizeof err) == 0);
    PyObject *d = pyhost_event_structured(&o.v[0]);
    REQUIRE(d != NULL);
    truthy("d['data'] == {'k': [1]} and d['ext'] == 'v' and "
           "d['correlationid'] == 'c-1' and d['specversion'] == '1.0'",
           d);
    Py_DECREF(d);
    d = pyhost_event_structured(&o.v[1]);
    REQUIRE(d != NULL);
    truthy("d['data_base64'] == '/w==' and 'data' not in d", d);
    Py_DECREF(d);
    pyhost_outputs_free(&o);
}

int
main(void)
{
    PyConfig c;

    PyConfig_InitIsolatedConfig(&c);
    c.site_import = 0;
    c.write_bytecode = 0;
    if (PyStatus_Exception(Py_InitializeFromConfig(&c))) {
        fprintf(stderr, "cannot initialise Python\n");
        return 99;
    }
    PyConfig_Clear(&c);
    if (pyhost_convert_init() < 0) {
        PyErr_Print();
        return 99;
    }
    RUN(test_event_dict);
    RUN(test_return_forms);
    RUN(test_errors);
    RUN(test_structured);
    return check_result();
}
