/*
 * http_rtt.c — round trips of one HTTP/1.1 request over a unix socket, as
 * a C client sees them (bench/messages.py runs it: a Python client would
 * add its own tens of microseconds to every figure).
 *
 * Usage: http_rtt SOCKET METHOD PATH [BODY-FILE] [N [WARMUP]]
 *
 * Sends the request N times (default 10000, after WARMUP of warm-up,
 * default 500; 0 measures a new worker from its first event) on one
 * keep-alive connection, each after the previous answer was read whole,
 * and prints `p50_us p99_us p999_us status` of the client-side times.
 * Exits 1 when any answer is not 2xx.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define WARMUP 500

static double
now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int
cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Reads one answer (headers, then Content-Length bytes); returns its
 * status, or -1. */
static int
read_answer(int fd, char *buf, size_t cap)
{
    size_t len = 0;
    char *end;

    for (;;) {
        ssize_t n = read(fd, buf + len, cap - 1 - len);
        if (n <= 0)
            return -1;
        len += (size_t)n;
        buf[len] = '\0';
        if ((end = strstr(buf, "\r\n\r\n")) != NULL)
            break;
        if (len + 1 >= cap)
            return -1;
    }
    const char *cl = strcasestr(buf, "Content-Length:");
    size_t body = cl ? strtoul(cl + 15, NULL, 10) : 0;
    size_t have = len - (size_t)(end + 4 - buf);
    while (have < body) {
        char tmp[65536];
        ssize_t n = read(fd, tmp, sizeof tmp);
        if (n <= 0)
            return -1;
        have += (size_t)n;
    }
    return atoi(buf + 9);
}

int
main(int argc, char **argv)
{
    static char req[1 << 20], ans[1 << 16];
    char body[1 << 18] = "";
    size_t blen = 0;
    int n = argc > 5 ? atoi(argv[5]) : 10000, status = 0;
    int warmup = argc > 6 ? atoi(argv[6]) : WARMUP;

    if (argc < 4) {
        fprintf(stderr, "usage: http_rtt SOCKET METHOD PATH [BODY-FILE] "
                        "[N [WARMUP]]\n");
        return 2;
    }
    if (argc > 4 && strcmp(argv[4], "-") != 0) {
        FILE *f = fopen(argv[4], "rb");
        if (f == NULL) {
            perror(argv[4]);
            return 2;
        }
        blen = fread(body, 1, sizeof body - 1, f);
        fclose(f);
    }
    int len = snprintf(req, sizeof req,
                       "%s %s HTTP/1.1\r\nHost: localhost\r\n"
                       "Content-Type: application/json\r\n"
                       "Content-Length: %zu\r\n\r\n%.*s",
                       argv[2], argv[3], blen, (int)blen, body);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", argv[1]);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        perror(argv[1]);
        return 2;
    }
    double *t = calloc((size_t)n, sizeof *t);
    if (t == NULL)
        return 2;
    if (n < 1 || warmup < 0) {
        fprintf(stderr, "http_rtt: N must be at least 1, WARMUP at least 0\n");
        return 2;
    }
    for (int i = 0; i < warmup + n; i++) {
        double t0 = now_us();
        if (write(fd, req, (size_t)len) != len) {
            perror("write");
            return 2;
        }
        status = read_answer(fd, ans, sizeof ans);
        if (status < 200 || status > 299) {
            fprintf(stderr, "answer %d: %.200s\n", status, ans);
            return 1;
        }
        if (i >= warmup)
            t[i - warmup] = now_us() - t0;
    }
    qsort(t, (size_t)n, sizeof *t, cmp);
    printf("%.1f %.1f %.1f %d\n", t[n / 2], t[n * 99 / 100], t[n * 999 / 1000],
           status);
    close(fd);
    free(t);
    return 0;
}
