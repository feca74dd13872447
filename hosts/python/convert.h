/*
 * convert.h — a CloudEvent as the dict a Python worker's Process(event)
 * gets, and Process's return value as the CloudEvents of a Result
 * (DESIGN §5; issue 8).
 *
 * In: id, type, source, specversion, datacontenttype, subject, time and
 * data always (None when absent), dataschema when present, and each
 * extension as a key of its own (a str).  data is the JSON value when the
 * content type is absent, application/json or a +json type (the text, or
 * the bytes, when it is not JSON after all); a str for text types; bytes
 * otherwise.
 *
 * Out: None (no output), a dict, or a list of dicts.  Each dict's type is
 * required; id (a random UUID), time (now), specversion ("1.0") and source
 * (the host's, "urn:workmanager:worker:<id>") are filled when missing or
 * None; correlationid and traceparent come from the input unless set.
 * Attribute values are str; any other key is an extension, named
 * [a-z0-9]{1,20}, its value a str, an int or a bool (None leaves it out).
 * data: under a JSON content type, or none, any JSON value (serialised,
 * and application/json set when none was given); a str is text
 * ("text/plain; charset=utf-8" when no type was given); bytes are bytes
 * ("application/octet-stream" when none was given).
 *
 * Needs an initialised interpreter and the GIL (pyhost_convert_init()
 * first); pure otherwise, for the unit test (tests/unit/test_pyhost_convert.c).
 */
#ifndef WM_HOSTS_PYTHON_CONVERT_H
#define WM_HOSTS_PYTHON_CONVERT_H

#include <Python.h>

#include "ipc/cloudevent.h"

/* Largest number of events one Process may return. */
#define PYHOST_OUTPUTS_MAX 1024

/* Takes json.loads and json.dumps (json imported already).  0, or -1 with
 * a Python exception. */
int pyhost_convert_init(void);

/* Forgets the random bytes kept for output ids: every host calls it as it
 * starts, so that hosts forked from one zygote draw their own. */
void pyhost_convert_reseed(void);

/* The dict of ce (a new reference), or NULL with a Python exception. */
PyObject *pyhost_event_dict(const struct ipc_cloudevent *ce);

/* The events made of a return value.  The strings and data point into
 * Python objects held by `keep`, valid until pyhost_outputs_free(). */
struct pyhost_outputs {
    struct ipc_cloudevent *v;
    uint32_t n;
    struct ipc_pair *pairs; /* every event's extensions, one array */
    PyObject *keep;
};

/*
 * Fills *o from ret, the return value of Process for the input `in` (NULL
 * for none: nothing propagates), with `source` for events that have none.
 * Returns 0, or -1 with err saying what is wrong with ret (naming the key,
 * the attribute or the type) and no Python exception left set.
 * pyhost_outputs_free() is safe on *o either way.
 */
int pyhost_outputs_make(PyObject *ret, const struct ipc_cloudevent *in,
                        const char *source, struct pyhost_outputs *o, char *err,
                        size_t errlen);

void pyhost_outputs_free(struct pyhost_outputs *o);

/* The structured JSON form of ce (a dict ready for json.dumps: data as
 * its JSON value, its text, or data_base64), as the gateway's publish
 * takes it.  A new reference, or NULL with a Python exception. */
PyObject *pyhost_event_structured(const struct ipc_cloudevent *ce);

/* The pending Python exception as "Type: message" in buf, cleared. */
void pyhost_exception_text(char *buf, size_t len);

/* Whether a content type (NULL: absent) means JSON data. */
bool pyhost_media_json(struct ipc_str ct);

#endif /* WM_HOSTS_PYTHON_CONVERT_H */
