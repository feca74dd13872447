/*
 * native_call.c — what the in-process path's call costs (bench/README.md):
 * hosts/native/loader.c, the code the master runs for a worker created
 * with "isolation": "in-process", measured without the broker or HTTP.
 *
 * The worker is a library that does nothing (bench/noop_worker.c), so that
 * the figures are the call path's, not the worker's.  The event is a
 * realistic ABI CloudEvent (about 300 bytes: the attributes the master
 * stamps, a small JSON payload, a correlation id).
 *
 *   direct     Process called through its function pointer on this
 *              thread: the floor (an indirect call).
 *   pipelined  the loader at saturation: batches of BATCH jobs handed to
 *              one pool thread, their outcomes taken back on this thread
 *              (job copy, queueing, the pool's lock, the eventfd wake-up,
 *              outcome, FreeResult pairing, free); ns per call = wall
 *              time / calls.
 *   ping-pong  one job at a time: submit, wait on the loader's eventfd
 *              (poll), take — the latency of one call, dominated by waking
 *              a sleeping thread twice; p50 and p99.
 *
 * Usage: native_call LIBNOOP.so [CALLS [BATCH]]  (defaults 2000000, 256)
 */
#include "config.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/timing.h"
#include "hosts/native/loader.h"
#include "ipc/cloudevent.h"

/* Takes back what the pool finished; returns how many jobs. */
static unsigned
drain(struct native_loader *nl, int wait)
{
    struct pollfd pfd = { .fd = native_loader_fd(nl), .events = POLLIN };
    struct native_job *jobs;
    struct ipc_worker_response wr;
    char msg[256];
    unsigned n = 0;

    if (wait && poll(&pfd, 1, -1) < 0)
        return 0;
    native_loader_take(nl, &jobs, NULL);
    while (jobs) {
        struct native_job *next = jobs->next;
        if (native_job_outcome(jobs, &wr, msg, sizeof msg) != NULL) {
            fprintf(stderr, "native_call: the worker failed: %s\n", msg);
            exit(1);
        }
        native_job_free(jobs);
        jobs = next;
        n++;
    }
    return n;
}

int
main(int argc, char **argv)
{
    unsigned long calls = argc > 2 ? strtoul(argv[2], NULL, 10) : 2000000;
    unsigned batch = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 10) : 256;
    struct ipc_fb_builder b;
    struct ipc_cloudevent ce;
    const struct ipc_pair ext[] = {
        { { "correlationid", 13 },
          { "7f9c2e1a-5b3d-4c8e-9a0f-1d2e3f4a5b6c", 36 } },
    };
    const char data[] = "{\"order\": 42, \"items\": [1, 2, 3]}";
    char err[512];

    if (argc < 2 || calls == 0 || batch == 0) {
        fprintf(stderr, "usage: native_call LIBNOOP.so [CALLS [BATCH]]\n");
        return 2;
    }
    memset(&ce, 0, sizeof ce);
    ce.id = ipc_str_c("5c0e6a12-8a7b-4f0e-b5d1-3f1f4c9e2a77");
    ce.type = ipc_str_c("com.example.order.created");
    ce.source = ipc_str_c("urn:workmanager:bench");
    ce.specversion = ipc_str_c("1.0");
    ce.datacontenttype = ipc_str_c("application/json");
    ce.time = ipc_str_c("2026-11-22T10:00:00.000Z");
    ce.data.ptr = (const uint8_t *)data;
    ce.data.len = sizeof data - 1;
    ce.extensions.n = 1;
    ce.extensions.items = ext;
    ipc_fb_builder_init(&b);
    if (ipc_cloudevent_encode(&b, &ce) != 0)
        return 1;

    /* direct */
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    virtufin_process_fn process;
    if (h == NULL) {
        fprintf(stderr, "native_call: %s\n", dlerror());
        return 1;
    }
    *(void **)&process = dlsym(h, "Process");
    VirtufinHost api = { .abi_version = VIRTUFIN_ABI_VERSION };
    uint8_t *out;
    int32_t out_len;
    double t0 = now_ns();
    for (unsigned long i = 0; i < calls; i++)
        if (process(&api, b.buf, (int32_t)b.len, &out, &out_len) != 0)
            return 1;
    double direct = (now_ns() - t0) / (double)calls;

    /* the loader, one pool thread */
    struct native_loader *nl = native_loader_new();
    int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
    const struct native_identity id = { "bench", "", "bench" };
    if (nl == NULL || fd < 0 ||
        native_loader_open(nl, fd, argv[1], "Process", "FreeResult", &id, err,
                           sizeof err) != 0 ||
        native_loader_threads(nl, 1) != 0) {
        fprintf(stderr, "native_call: %s\n", err);
        return 1;
    }
    unsigned long done = 0, sent = 0;
    t0 = now_ns();
    while (done < calls) {
        struct native_job *list = NULL, **tail = &list;
        while (sent < calls && sent - done < batch) {
            struct native_job *j = native_job_new(b.buf, b.len);
            if (j == NULL)
                return 1;
            *tail = j;
            tail = &j->next;
            sent++;
        }
        native_loader_submit(nl, list);
        done += drain(nl, 1);
    }
    double pipelined = (now_ns() - t0) / (double)calls;

    unsigned long pings = calls / 20 ? calls / 20 : 1;
    double *lat = malloc(pings * sizeof *lat);
    if (lat == NULL)
        return 1;
    for (unsigned long i = 0; i < pings; i++) {
        double s = now_ns();
        struct native_job *j = native_job_new(b.buf, b.len);
        if (j == NULL)
            return 1;
        native_loader_submit(nl, j);
        while (drain(nl, 1) == 0)
            ;
        lat[i] = now_ns() - s;
    }
    qsort(lat, pings, sizeof *lat, cmp_double);

    printf("native_call: event %zu bytes, %lu calls, batch %u\n", b.len, calls,
           batch);
    printf("  direct     %8.1f ns/call  (Process through its pointer)\n",
           direct);
    printf("  pipelined  %8.1f ns/call  (loader, 1 pool thread, %.2f M "
           "calls/s)\n",
           pipelined, 1e3 / pipelined);
    printf("  ping-pong  p50 %.1f us, p99 %.1f us  (%lu calls, one at a "
           "time)\n",
           lat[pings / 2] / 1e3, lat[pings * 99 / 100] / 1e3, pings);
    native_loader_close(nl);
    dlclose(h);
    free(lat);
    ipc_fb_builder_free(&b);
    return 0;
}
