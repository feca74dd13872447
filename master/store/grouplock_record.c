/*
 * grouplock_record.c — the group lock's record and its rule (grouplock.h):
 * the pure decision of what an acquisition may do with the record it read,
 * the record's protobuf encoding in the store, and the store key of a
 * group.  Kept apart from grouplock.c, which drives requests, leases and
 * the store, so that the rule and the format can be read (and unit-tested)
 * alone.
 *
 * Invariants: a record that decodes is one the rules can trust (known
 * format, holder shorter than GROUPLOCK_HOLDER_MAX, a holder never under
 * token 0, last_write_token never beyond token); a key names exactly one
 * tenant segment and one group segment.
 */
#include "config.h"

#include "master/store/grouplock.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/errbuf.h"
#include "lib/name.h"
#include "master/store/records.pb-c.h"
#include "master/store/store.h"

#define GL_FORMAT 1

/* ---- the record ------------------------------------------------------- */

uint64_t
grouplock_record_age(const struct grouplock_record *r, int64_t now_ms)
{
    /* A clock that went back makes a lock young, never stale. */
    if (now_ms <= r->acquired_ms)
        return 0;
    return (uint64_t)now_ms - (uint64_t)r->acquired_ms;
}

enum grouplock_decision
grouplock_decide(const struct grouplock_record *cur, int64_t now_ms,
                 uint64_t max_age_ms)
{
    if (cur == NULL || cur->holder[0] == '\0')
        return GROUPLOCK_ACQUIRE;
    if (grouplock_record_age(cur, now_ms) <= max_age_ms)
        return GROUPLOCK_HELD;
    return cur->last_write_token == cur->token ? GROUPLOCK_ABORT_STEAL
                                               : GROUPLOCK_STEAL;
}

int
grouplock_record_encode(const struct grouplock_record *r, uint8_t **out,
                        size_t *len)
{
    Workmanager__GroupLock m = WORKMANAGER__GROUP_LOCK__INIT;

    *out = NULL;
    *len = 0;
    if (memchr(r->holder, '\0', sizeof r->holder) == NULL)
        return -1;
    m.format = GL_FORMAT;
    /* protobuf-c wants char * even for a string it only reads. */
    m.holder = (char *)(uintptr_t)r->holder;
    m.token = r->token;
    m.acquired_ms = r->acquired_ms;
    m.last_write_token = r->last_write_token;
    *len = workmanager__group_lock__get_packed_size(&m);
    *out = malloc(*len > 0 ? *len : 1);
    if (*out == NULL)
        return -1;
    workmanager__group_lock__pack(&m, *out);
    return 0;
}

int
grouplock_record_decode(const uint8_t *data, size_t len,
                        struct grouplock_record *r, char *err, size_t errlen)
{
    static const uint8_t empty;
    Workmanager__GroupLock *m;
    int rc = -1;

    if (data == NULL && len > 0)
        return errbuf_set(err, errlen, "group lock record: no data");
    m = workmanager__group_lock__unpack(NULL, len,
                                        data != NULL ? data : &empty);
    if (m == NULL)
        return errbuf_set(
            err, errlen, "group lock record of %zu bytes does not decode", len);
    /* What the rules rely on, so that a damaged record is an error here
     * rather than a wrong decision later. */
    if (m->format != GL_FORMAT)
        errbuf_set(err, errlen, "group lock record: unknown format %" PRIu32,
                   m->format);
    else if (strlen(m->holder) >= GROUPLOCK_HOLDER_MAX)
        errbuf_set(err, errlen,
                   "group lock record: holder longer than %d bytes",
                   GROUPLOCK_HOLDER_MAX - 1);
    else if (m->holder[0] != '\0' && m->token == 0)
        errbuf_set(err, errlen, "group lock record: held by %s under token 0",
                   m->holder);
    else if (m->last_write_token > m->token)
        errbuf_set(err, errlen,
                   "group lock record: last write under token %" PRIu64
                   ", beyond its token %" PRIu64,
                   m->last_write_token, m->token);
    else {
        memset(r, 0, sizeof *r);
        memcpy(r->holder, m->holder, strlen(m->holder) + 1);
        r->token = m->token;
        r->acquired_ms = m->acquired_ms;
        r->last_write_token = m->last_write_token;
        rc = 0;
    }
    workmanager__group_lock__free_unpacked(m, NULL);
    return rc;
}

/* A tenant or group name is one key segment. */
static bool
name_ok(const char *s)
{
    return s != NULL && name_word_valid(s, SIZE_MAX) && strcmp(s, ".") != 0 &&
           strcmp(s, "..") != 0;
}

int
grouplock_key(const char *tenant, const char *group, char *out, size_t outlen)
{
    int n;

    if (!name_ok(tenant) || !name_ok(group))
        return -1;
    n = snprintf(out, outlen, GROUPLOCK_KEY_PREFIX "%s/%s" GROUPLOCK_KEY_SUFFIX,
                 tenant, group);
    if (n < 0 || (size_t)n >= outlen || n > STORE_KEY_MAX)
        return -1;
    return 0;
}
