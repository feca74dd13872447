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

#endif /* WM_MASTER_EVENTS_PRIVATE_H */
