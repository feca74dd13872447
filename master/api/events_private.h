/*
 * events_private.h — what the two structured-mode readers of master/api/
 * share: the draft of an event (events.c) that both the jansson path
 * (events_from_json()) and the scanner (events_scan.c) fill, so that the
 * rules, the defaults and the encoding live once and the two readers
 * cannot drift apart.  Included only inside master/api/.
 *
 * A draft holds views (pointer and length) into memory that must outlive
 * events_draft_finish(): the caller's input, or scratch memory it owns.
 */
#ifndef WM_MASTER_EVENTS_PRIVATE_H
#define WM_MASTER_EVENTS_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipc/cloudevent.h"
#include "lib/uuid.h"
#include "master/api/events.h"

struct draft {
    struct ipc_cloudevent ce;
    struct ipc_pair ext[EVENTS_MAX_EXTENSIONS];
    /* One more than ext[]: the text is written before the count check. */
    char num[EVENTS_MAX_EXTENSIONS + 1][EVENTS_JSON_NUMBER_SIZE];
    char id[UUID_SIZE];
    char *err;
    size_t errlen;
    /* Binary mode: specversion and id are required too, never filled in
     * (the HTTP binding puts every required attribute in a header). */
    bool binary;
};

/* An empty draft whose messages go to err[0..errlen). */
void events_draft_init(struct draft *d, char *err, size_t errlen);
/* Sets the context attribute called name[0..nlen) to v[0..len) after its
 * rules (non-empty, text, its own rule).  Returns 0; 1 when name is no
 * context attribute; -1 with the message when v breaks a rule. */
int events_draft_attr_named(struct draft *d, const char *name, size_t nlen,
                            const char *v, size_t len);
/* Whether name[0..nlen) is a context attribute's name. */
bool events_draft_is_attr(const char *name, size_t nlen);
/* Appends extension name[0..nlen) = value[0..vlen) (value in its text
 * form).  Returns 0, or -1 with the message (name, repeat, count, text). */
int events_draft_ext(struct draft *d, const char *name, size_t nlen,
                     const char *value, size_t vlen);
/* Sets the data to p[0..len).  Returns 0, or -1 over 2 GiB. */
int events_draft_data(struct draft *d, const void *p, size_t len);
/* Whether data of the draft's datacontenttype is written as JSON text
 * (absent, application/json, *+json) rather than given as a string. */
bool events_draft_data_is_json(const struct draft *d);
/* Checks the required attributes, fills in the defaults, puts
 * correlationid first and appends the buffer to out.  Returns 0, or -1
 * with the message. */
int events_draft_finish(struct draft *d, struct ipc_fb_builder *out);

/* Decodes the UTF-8 sequence at s[0..len) (len > 0) into *cp; returns its
 * length, or 0 when it is not well-formed (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF). */
size_t events_utf8_next(const uint8_t *s, size_t len, uint32_t *cp);
/* Whether s[0..len) is well-formed UTF-8 (NUL bytes included). */
bool events_utf8_valid(const uint8_t *s, size_t len);
/* Writes s[0..len) into out (room for 3 * len bytes) with each byte of an
 * ill-formed sequence replaced by U+FFFD, as a host's text is shown in
 * JSON; returns the length written. */
size_t events_utf8_fix(const uint8_t *s, size_t len, char *out);

/* The scanner's JSON reader for the answer writer (events_answer.c):
 * json[0..len) read as data_json() in events.c reads a host's JSON data
 * (json_loadb() with JSON_DECODE_ANY | JSON_ALLOW_NUL), its compact text
 * as events_json_dumps() writes that value in *text and *tlen (scratch
 * memory, valid until the next call of this or events_scan_body()).
 * Returns EVENTS_SCAN_OK, EVENTS_SCAN_REJECT when jansson refuses the text
 * (the data is then shown as data_base64), or EVENTS_SCAN_FALLBACK for a
 * shape left to jansson (events.h lists them; a repeated member name too,
 * where jansson keeps the last value). */
enum events_scan_result events_scan_json(const uint8_t *json, size_t len,
                                         const char **text, size_t *tlen);

#endif /* WM_MASTER_EVENTS_PRIVATE_H */
