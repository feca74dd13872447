/*
 * ce_body.h — the CloudEvent the figures are measured on (233
 * bytes, issue 24) and a batch of 100 of it, for ce_parse.c and
 * ce_answer.c; header-only so that each program stays one file.
 */
#ifndef WM_BENCH_CE_BODY_H
#define WM_BENCH_CE_BODY_H

#include <stdlib.h>
#include <string.h>

static const char ce_event[] =
    "{\"specversion\":\"1.0\",\"id\":\"7f3c2a9e-0001\",\"source\":"
    "\"/bench/producer\",\"type\":\"com.example.bench.ping\","
    "\"datacontenttype\":\"application/json\",\"time\":"
    "\"2025-01-01T00:00:00Z\",\"data\":{\"user\":\"alice\",\"action\":"
    "\"click\",\"item\":\"sku-42\",\"qty\":3}}";

/* A JSON array of 100 copies of ce_event, ids 7f3c2a9e-0000 to -0099,
 * malloc'd, its length in *len; NULL when out of memory. */
static inline char *
ce_batch_body(size_t *len)
{
    size_t one = strlen(ce_event), n = 0;
    char *body = malloc(100 * (one + 1) + 2);

    if (body == NULL)
        return NULL;
    body[n++] = '[';
    for (int i = 0; i < 100; i++) {
        if (i)
            body[n++] = ',';
        memcpy(body + n, ce_event, one);
        /* "7f3c2a9e-0001" -> "7f3c2a9e-00NN" */
        char *id = strstr(body + n, "-0001");
        id[3] = (char)('0' + i / 10);
        id[4] = (char)('0' + i % 10);
        n += one;
    }
    body[n++] = ']';
    *len = n;
    return body;
}

#endif /* WM_BENCH_CE_BODY_H */
