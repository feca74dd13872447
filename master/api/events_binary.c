/*
 * events_binary.c — a decoded CloudEvent as an HTTP binary-mode message
 * (CloudEvents HTTP protocol binding 1.0.2 §3.1): its context attributes
 * and extensions as `ce-*` header lines, its data as the body and its
 * datacontenttype as Content-Type.  The reading side is
 * events_from_binary() (events.c).
 *
 * Why this way: the attributes come from events_to_json(), so that both
 * modes leave out the same invalid or repeated extension names and write
 * the same strings (U+FFFD for bad UTF-8 from a host); each value is
 * percent-encoded as §3.1.3.2 asks (space, '"', '%' and every byte
 * outside printable ASCII), which also keeps CR and LF out of the head.
 *
 * Invariant: the lines written hold only printable ASCII, each of the
 * form `ce-<name>: <value>\r\n` with <name> in [a-z0-9].
 */
#include "config.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "master/api/events.h"

static bool
needs_escape(unsigned char c)
{
    return c <= 0x20 || c >= 0x7f || c == '"' || c == '%';
}

size_t
events_header_encode(const char *s, size_t len, char *out)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;

    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (needs_escape(c)) {
            out[n++] = '%';
            out[n++] = hex[c >> 4];
            out[n++] = hex[c & 15];
        } else {
            out[n++] = (char)c;
        }
    }
    out[n] = '\0';
    return n;
}

/* The members of the structured form that are not headers. */
static bool
not_a_header(const char *key)
{
    return strcmp(key, "data") == 0 || strcmp(key, "data_base64") == 0 ||
           strcmp(key, "datacontenttype") == 0;
}

char *
events_to_headers(const struct ipc_cloudevent *ce, size_t *len)
{
    json_t *obj = events_to_json(ce);
    const char *key;
    json_t *v;
    size_t cap = 1, n = 0;
    char *out;

    if (obj == NULL)
        return NULL;
    json_object_foreach(obj, key, v)
    {
        if (!not_a_header(key))
            cap += 3 + strlen(key) + 2 + 3 * json_string_length(v) + 2;
    }
    if ((out = malloc(cap)) == NULL) {
        json_decref(obj);
        return NULL;
    }
    json_object_foreach(obj, key, v)
    {
        if (not_a_header(key))
            continue;
        size_t kl = strlen(key);
        memcpy(out + n, "ce-", 3);
        memcpy(out + n + 3, key, kl);
        memcpy(out + n + 3 + kl, ": ", 2);
        n += 3 + kl + 2;
        n += events_header_encode(json_string_value(v), json_string_length(v),
                                  out + n);
        memcpy(out + n, "\r\n", 2);
        n += 2;
    }
    out[n] = '\0';
    json_decref(obj);
    if (len)
        *len = n;
    return out;
}

const char *
events_binary_content_type(const struct ipc_cloudevent *ce, char *buf,
                           size_t cap)
{
    if (ce->datacontenttype.ptr) {
        size_t n = ce->datacontenttype.len;
        /* A host's output is only verified: nothing but printable ASCII
         * goes into the head. */
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)ce->datacontenttype.ptr[i];
            if (c < 0x20 || c >= 0x7f)
                return "application/octet-stream";
        }
        if (n >= cap)
            return "application/octet-stream";
        memcpy(buf, ce->datacontenttype.ptr, n);
        buf[n] = '\0';
        return buf;
    }
    if (ce->data.ptr == NULL)
        return NULL;
    json_t *j = json_loadb((const char *)ce->data.ptr, ce->data.len,
                           JSON_DECODE_ANY, NULL);
    json_decref(j);
    return j ? "application/json" : "application/octet-stream";
}
