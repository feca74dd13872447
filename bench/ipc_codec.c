/*
 * ipc_codec.c — what the CloudEvent codec costs per event (bench/README.md).
 *
 * One CloudEvent as the master builds at ingress: the four required
 * attributes, datacontenttype, subject, time, a 1 KiB payload and three
 * extensions.  Timed separately, in ns per operation: encode (into a
 * reused builder), read (verify + decode, ipc_cloudevent_read), and the
 * three together (encode + verify + decode, the figure the target is
 * about); then the same event inside a Process frame (ipc_frame_encode +
 * ipc_frame_read, which verifies the nested event too).  Each figure is
 * the median of RUNS runs of ITERATIONS operations.
 *
 * Usage: ipc_codec [ITERATIONS [RUNS]]   (defaults 1000000 and 7)
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ipc/frame.h"

static uint8_t payload[1024];
static const struct ipc_pair extensions[] = {
    { { "correlationid", 13 }, { "7f9c2e1a-5b3d-4c8e-9a0f-1d2e3f4a5b6c", 36 } },
    { { "traceparent", 11 },
      { "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", 55 } },
    { { "tenant", 6 }, { "default", 7 } },
};

static void
fill_event(struct ipc_cloudevent *ce)
{
    memset(ce, 0, sizeof *ce);
    ce->id = ipc_str_c("5c0e6a12-8a7b-4f0e-b5d1-3f1f4c9e2a77");
    ce->type = ipc_str_c("com.example.order.created");
    ce->source = ipc_str_c("urn:example:orders");
    ce->specversion = ipc_str_c("1.0");
    ce->datacontenttype = ipc_str_c("application/json");
    ce->subject = ipc_str_c("order-42");
    ce->time = ipc_str_c("2024-05-01T12:00:00.000Z");
    ce->data.ptr = payload;
    ce->data.len = sizeof payload;
    ce->extensions.n = 3;
    ce->extensions.items = extensions;
}

static double
now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum op { OP_ENCODE, OP_READ, OP_ALL, OP_FRAME };

static const char *const op_names[] = {
    [OP_ENCODE] = "CloudEvent encode",
    [OP_READ] = "CloudEvent verify + decode",
    [OP_ALL] = "CloudEvent encode + verify + decode",
    [OP_FRAME] = "Process frame encode + read (nested verify)",
};

/* One run of n operations; ns per operation.  *sink keeps the work. */
static double
run(enum op op, unsigned long n, struct ipc_fb_builder *b,
    const struct ipc_cloudevent *ce, uint64_t *sink)
{
    struct ipc_cloudevent out;
    struct ipc_fb_error err;
    struct ipc_frame f, rf;
    struct ipc_fb_builder fb;
    double t0;

    ipc_fb_builder_init(&fb);
    /* A buffer encoded beforehand, for OP_READ. */
    ipc_fb_builder_reset(b);
    if (ipc_cloudevent_encode(b, ce) < 0)
        exit(1);
    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_PROCESS;
    f.seq = 1;

    t0 = now_ns();
    for (unsigned long i = 0; i < n; i++) {
        switch (op) {
        case OP_ENCODE:
            ipc_fb_builder_reset(b);
            if (ipc_cloudevent_encode(b, ce) < 0)
                exit(1);
            *sink += b->len;
            break;
        case OP_READ:
            if (ipc_cloudevent_read(b->buf, b->len, &out, &err) < 0)
                exit(1);
            *sink += out.data.len;
            break;
        case OP_ALL:
            ipc_fb_builder_reset(b);
            if (ipc_cloudevent_encode(b, ce) < 0 ||
                ipc_cloudevent_read(b->buf, b->len, &out, &err) < 0)
                exit(1);
            *sink += out.data.len;
            break;
        case OP_FRAME:
            ipc_fb_builder_reset(b);
            if (ipc_cloudevent_encode(b, ce) < 0)
                exit(1);
            f.u.process.event.ptr = b->buf;
            f.u.process.event.len = (uint32_t)b->len;
            ipc_fb_builder_reset(&fb);
            if (ipc_frame_encode(&fb, &f, NULL) < 0 ||
                ipc_frame_read(fb.buf, fb.len, &rf, &err) < 0)
                exit(1);
            *sink += rf.u.process.event.len;
            break;
        }
    }
    double ns = (now_ns() - t0) / (double)n;
    ipc_fb_builder_free(&fb);
    return ns;
}

int
main(int argc, char **argv)
{
    unsigned long iterations = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000000;
    unsigned runs = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 7;
    struct ipc_fb_builder b;
    struct ipc_cloudevent ce;
    uint64_t sink = 0;

    if (iterations == 0 || runs == 0 || runs > 100) {
        fprintf(stderr, "usage: ipc_codec [ITERATIONS [RUNS]]\n");
        return 2;
    }
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (uint8_t)('a' + i % 26);
    fill_event(&ce);
    ipc_fb_builder_init(&b);
    ipc_fb_builder_reset(&b);
    if (ipc_cloudevent_encode(&b, &ce) < 0)
        return 1;
    printf("ipc_codec: CloudEvent of %zu bytes (1 KiB data, 3 extensions); "
           "median of %u runs of %lu\n",
           b.len, runs, iterations);
    for (int op = OP_ENCODE; op <= OP_FRAME; op++) {
        double t[100];
        run((enum op)op, iterations / 10 + 1, &b, &ce, &sink); /* warm */
        for (unsigned r = 0; r < runs; r++)
            t[r] = run((enum op)op, iterations, &b, &ce, &sink);
        qsort(t, runs, sizeof t[0], cmp_double);
        printf("  %-45s %8.1f ns/op  (min %.1f, max %.1f)\n", op_names[op],
               t[runs / 2], t[0], t[runs - 1]);
    }
    ipc_fb_builder_free(&b);
    return sink == 0; /* never: keeps the work observable */
}
