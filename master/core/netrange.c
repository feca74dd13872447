/*
 * netrange.c — address kinds and CIDR networks (see netrange.h).
 *
 * The ranges are one table, most specific first where they nest (the
 * IPv4-mapped /96 before ::/96), so that classifying is a first match.
 * What is refused is what SSRF needs: anything that reaches the daemon
 * itself, its own network or its provider's (private, loopback,
 * link-local with the cloud metadata service at 169.254.169.254, CGNAT,
 * unique-local), or no single machine (unspecified, multicast, the
 * reserved 240/4 with the broadcast address).  IPv4-mapped and
 * IPv4-compatible IPv6 addresses are refused whatever they embed: a socket
 * may reach the embedded IPv4 through them, and a public server has no
 * reason to be named that way.  NAT64 (64:ff9b::/96) is refused only when
 * the IPv4 it embeds is not public, since a NAT64 gateway forwards to it.
 * Documentation and benchmarking ranges are not refused: nothing answers
 * there, so they need no rule.
 */
#include "config.h"

#include "master/core/netrange.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

struct range {
    int family;
    uint8_t addr[16];
    unsigned prefix;
    enum netrange_kind kind;
    const char *text;
};

static const struct range ranges[] = {
    { AF_INET, { 0 }, 8, NETRANGE_UNSPECIFIED, "0.0.0.0/8" },
    { AF_INET, { 10 }, 8, NETRANGE_PRIVATE, "10.0.0.0/8" },
    { AF_INET, { 100, 64 }, 10, NETRANGE_CGNAT, "100.64.0.0/10" },
    { AF_INET, { 127 }, 8, NETRANGE_LOOPBACK, "127.0.0.0/8" },
    { AF_INET, { 169, 254 }, 16, NETRANGE_LINK_LOCAL, "169.254.0.0/16" },
    { AF_INET, { 172, 16 }, 12, NETRANGE_PRIVATE, "172.16.0.0/12" },
    { AF_INET, { 192, 168 }, 16, NETRANGE_PRIVATE, "192.168.0.0/16" },
    { AF_INET, { 224 }, 4, NETRANGE_MULTICAST, "224.0.0.0/4" },
    { AF_INET, { 240 }, 4, NETRANGE_RESERVED, "240.0.0.0/4" },
    { AF_INET6, { 0 }, 128, NETRANGE_UNSPECIFIED, "::/128" },
    { AF_INET6, { [15] = 1 }, 128, NETRANGE_LOOPBACK, "::1/128" },
    { AF_INET6,
      { [10] = 0xff, [11] = 0xff },
      96,
      NETRANGE_IPV4_MAPPED,
      "::ffff:0:0/96" },
    { AF_INET6, { 0 }, 96, NETRANGE_RESERVED, "::/96 (IPv4-compatible)" },
    { AF_INET6, { 0xfc }, 7, NETRANGE_UNIQUE_LOCAL, "fc00::/7" },
    { AF_INET6, { 0xfe, 0x80 }, 10, NETRANGE_LINK_LOCAL, "fe80::/10" },
    { AF_INET6, { 0xfe, 0xc0 }, 10, NETRANGE_SITE_LOCAL, "fec0::/10" },
    { AF_INET6, { 0xff }, 8, NETRANGE_MULTICAST, "ff00::/8" },
};

/* 64:ff9b::/96, the well-known NAT64 prefix (RFC 6052). */
static const uint8_t nat64[12] = { 0, 0x64, 0xff, 0x9b };

static bool
prefix_match(const uint8_t *a, const uint8_t *net, unsigned prefix)
{
    unsigned full = prefix / 8, rest = prefix % 8;
    if (memcmp(a, net, full) != 0)
        return false;
    if (rest == 0)
        return true;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (a[full] & mask) == (net[full] & mask);
}

/* The address bytes of addr (4 or 16), or NULL for another family. */
static const uint8_t *
addr_bytes(const struct sockaddr *addr, int *family)
{
    *family = addr->sa_family;
    if (addr->sa_family == AF_INET)
        return (const uint8_t *)&(
                   (const struct sockaddr_in *)(const void *)addr)
            ->sin_addr;
    if (addr->sa_family == AF_INET6)
        return ((const struct sockaddr_in6 *)(const void *)addr)
            ->sin6_addr.s6_addr;
    return NULL;
}

static enum netrange_kind
classify_bytes(int family, const uint8_t *a, char *range, size_t rangelen)
{
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
        const struct range *r = &ranges[i];
        if (r->family == family && prefix_match(a, r->addr, r->prefix)) {
            if (range)
                snprintf(range, rangelen, "%s", r->text);
            return r->kind;
        }
    }
    if (family == AF_INET6 && memcmp(a, nat64, sizeof nat64) == 0 &&
        classify_bytes(AF_INET, a + 12, NULL, 0) != NETRANGE_PUBLIC) {
        if (range)
            snprintf(range, rangelen, "64:ff9b::/96 embedding %u.%u.%u.%u",
                     a[12], a[13], a[14], a[15]);
        return NETRANGE_NAT64;
    }
    return NETRANGE_PUBLIC;
}

enum netrange_kind
netrange_classify(const struct sockaddr *addr, char *range, size_t rangelen)
{
    int family;
    const uint8_t *a = addr_bytes(addr, &family);
    if (a == NULL) {
        if (range)
            snprintf(range, rangelen, "address family %d", family);
        return NETRANGE_RESERVED;
    }
    return classify_bytes(family, a, range, rangelen);
}

const char *
netrange_kind_name(enum netrange_kind kind)
{
    static const char *const names[] = {
        [NETRANGE_PUBLIC] = "public",
        [NETRANGE_UNSPECIFIED] = "unspecified",
        [NETRANGE_LOOPBACK] = "loopback",
        [NETRANGE_PRIVATE] = "private",
        [NETRANGE_LINK_LOCAL] = "link-local",
        [NETRANGE_CGNAT] = "CGNAT shared",
        [NETRANGE_MULTICAST] = "multicast",
        [NETRANGE_RESERVED] = "reserved",
        [NETRANGE_IPV4_MAPPED] = "IPv4-mapped",
        [NETRANGE_UNIQUE_LOCAL] = "unique-local",
        [NETRANGE_SITE_LOCAL] = "site-local",
        [NETRANGE_NAT64] = "NAT64",
    };
    if ((unsigned)kind >= sizeof names / sizeof names[0])
        return "unknown";
    return names[kind];
}

int
netrange_net_parse(const char *text, struct netrange_net *out, char *why,
                   size_t whylen)
{
    char addr[INET6_ADDRSTRLEN + 1];
    const char *slash = strchr(text, '/');
    size_t alen = slash ? (size_t)(slash - text) : strlen(text);
    unsigned max;

    memset(out, 0, sizeof *out);
    if (alen == 0 || alen >= sizeof addr) {
        snprintf(why, whylen, "%s is not an IPv4 or IPv6 address", text);
        return -1;
    }
    memcpy(addr, text, alen);
    addr[alen] = '\0';
    if (inet_pton(AF_INET, addr, out->addr) == 1) {
        out->family = AF_INET;
        max = 32;
    } else if (inet_pton(AF_INET6, addr, out->addr) == 1) {
        out->family = AF_INET6;
        max = 128;
    } else {
        snprintf(why, whylen, "%s is not an IPv4 or IPv6 address", addr);
        return -1;
    }
    out->prefix = max;
    if (slash) {
        const char *p = slash + 1;
        unsigned long n = 0;
        if (*p == '\0' || strlen(p) > 3)
            goto bad_prefix;
        for (; *p; p++) {
            if (*p < '0' || *p > '9')
                goto bad_prefix;
            n = n * 10 + (unsigned long)(*p - '0');
        }
        if (n > max)
            goto bad_prefix;
        out->prefix = (unsigned)n;
    }
    /* Host bits set: "10.0.0.1/8" is more likely a typo than a network. */
    for (unsigned bit = out->prefix; bit < max; bit++)
        if (out->addr[bit / 8] & (0x80 >> (bit % 8))) {
            snprintf(why, whylen,
                     "%s has bits set past its /%u prefix (a network is "
                     "written with them zero)",
                     text, out->prefix);
            return -1;
        }
    return 0;
bad_prefix:
    snprintf(why, whylen, "%s: the prefix length must be 0 to %u", text, max);
    return -1;
}

bool
netrange_net_contains(const struct netrange_net *net,
                      const struct sockaddr *addr)
{
    int family;
    const uint8_t *a = addr_bytes(addr, &family);
    return a != NULL && family == net->family &&
           prefix_match(a, net->addr, net->prefix);
}

void
netrange_addr_format(const struct sockaddr *addr, char *out, size_t outlen)
{
    int family;
    const uint8_t *a = addr_bytes(addr, &family);
    if (a == NULL || inet_ntop(family, a, out, (socklen_t)outlen) == NULL)
        snprintf(out, outlen, "?");
}
