/*
 * record.h — a worker's persisted record (records.proto, protobuf-c) and
 * its store key.
 */
#ifndef WM_MASTER_RECORD_H
#define WM_MASTER_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "master/workers/worker.h"

#define RECORD_WORKERS_PREFIX "workmanager/workers/"

/* "workmanager/workers/<id>" into out (at least 64 bytes). */
void record_worker_key(const char *id, char *out, size_t outlen);

/* Encodes w's persisted fields; *out is malloc'd.  Returns 0 or -1. */
int record_worker_encode(const struct worker *w, uint8_t **out, size_t *len);

/* Decodes a record into a new worker (observed fields zeroed).  Checks what
 * the rest of the master relies on: an id matching `id` (the key), a name,
 * a tenant, a MIME type, a topic, a history whose versions run 1..n and a
 * current version among them.  Returns NULL with a message in err. */
struct worker *record_worker_decode(const char *id, const uint8_t *data,
                                    size_t len, char *err, size_t errlen);

#endif /* WM_MASTER_RECORD_H */
