/*
 * fuzz_fetch_url.c — libFuzzer target over fetch_url_check(), the rules a
 * code URL meets before any network (a request's code.url, a server's
 * Location: both untrusted).
 *
 * The input's first byte picks the policy (http allowed or not, an
 * allowlist or none); the rest is the URL.  Besides the sanitizers'
 * findings, it aborts when a property breaks:
 * - a verdict is one of OK, INVALID, REFUSED, and a refusal says why in
 *   printable ASCII (it goes into a JSON answer as it is);
 * - an accepted URL has a scheme of https (or http when allowed), a
 *   non-empty host without brackets and a port from 1 to 65535;
 * - with an allowlist, an accepted host is one of its names.
 *
 * Run: tests/fuzz/fuzz_fetch_url -runs=200000 [corpus dir]
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "master/workers/fetch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
broken(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_fetch_url: %s%s%s\n", what, detail ? ": " : "",
            detail ? detail : "");
    abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char h1[] = "code.example.com", h2[] = "::1", h3[] = "10.0.0.1";
    static char *hosts[] = { h1, h2, h3 };
    struct fetch_policy p = { 0 };
    struct fetch_url u;
    char why[512] = "";
    char *url;

    if (size == 0)
        return 0;
    p.allow_http = data[0] & 1;
    if (data[0] & 2) {
        p.allowed_hosts = hosts;
        p.nallowed_hosts = sizeof hosts / sizeof hosts[0];
    }
    url = malloc(size);
    if (url == NULL)
        return 0;
    memcpy(url, data + 1, size - 1);
    url[size - 1] = '\0';

    enum fetch_status st = fetch_url_check(&p, url, &u, why, sizeof why);
    if (st == FETCH_OK) {
        if (strcmp(u.scheme, "https") != 0 &&
            !(p.allow_http && strcmp(u.scheme, "http") == 0))
            broken("a scheme the policy refuses was accepted", u.scheme);
        if (u.host[0] == '\0' || strchr(u.host, '[') || strchr(u.host, ']'))
            broken("an accepted host is empty or bracketed", u.host);
        if (u.port == 0 || u.port > 65535)
            broken("an accepted port is out of range", url);
        if (p.nallowed_hosts) {
            bool ok = false;
            for (size_t i = 0; i < p.nallowed_hosts; i++) {
                size_t n = strlen(u.host);
                if (n && u.host[n - 1] == '.')
                    n--;
                ok = ok || (strlen(hosts[i]) == n &&
                            strncasecmp(hosts[i], u.host, n) == 0);
            }
            if (!ok)
                broken("a host outside the allowlist was accepted", u.host);
        }
    } else if (st == FETCH_INVALID || st == FETCH_REFUSED) {
        if (why[0] == '\0')
            broken("a verdict without a message", url);
        for (const char *c = why; *c; c++)
            if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e)
                broken("a message that is not printable ASCII", why);
    } else if (st != FETCH_FAILED) { /* FAILED: out of memory only */
        broken("an unexpected verdict", why);
    }
    free(url);
    return 0;
}
