/*
 * netrange.h — which kind of network an IP address belongs to, and CIDR
 * networks (for code sources fetched from URLs: fetch.c refuses addresses
 * that are not public unless the operator allows their network).
 *
 * Pure functions over struct sockaddr and strings: no allocation, no I/O,
 * usable from any thread.
 */
#ifndef WM_MASTER_NETRANGE_H
#define WM_MASTER_NETRANGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sockaddr;

/* The kinds of address a code source may not have (everything but
 * NETRANGE_PUBLIC), one per range family of RFC 6890 that reaches a
 * machine of the daemon's own network or no single machine at all. */
enum netrange_kind {
    NETRANGE_PUBLIC = 0,
    NETRANGE_UNSPECIFIED,  /* 0.0.0.0/8, ::/128 */
    NETRANGE_LOOPBACK,     /* 127.0.0.0/8, ::1/128 */
    NETRANGE_PRIVATE,      /* 10/8, 172.16/12, 192.168/16 */
    NETRANGE_LINK_LOCAL,   /* 169.254/16, fe80::/10 */
    NETRANGE_CGNAT,        /* 100.64.0.0/10 (RFC 6598 shared space) */
    NETRANGE_MULTICAST,    /* 224.0.0.0/4, ff00::/8 */
    NETRANGE_RESERVED,     /* 240.0.0.0/4 (broadcast included), ::/96 */
    NETRANGE_IPV4_MAPPED,  /* ::ffff:0:0/96 */
    NETRANGE_UNIQUE_LOCAL, /* fc00::/7 */
    NETRANGE_SITE_LOCAL,   /* fec0::/10 (deprecated, still routed inside) */
    NETRANGE_NAT64,        /* 64:ff9b::/96 embedding a non-public IPv4 */
};

/* An IPv4 or IPv6 network: family AF_INET or AF_INET6, the address in
 * network order (IPv4 in the first 4 bytes), the prefix length. */
struct netrange_net {
    int family;
    uint8_t addr[16];
    unsigned prefix;
};

/* The kind of addr (AF_INET or AF_INET6; any other family is
 * NETRANGE_RESERVED) and, when not public, the range it fell in as text
 * ("10.0.0.0/8") in range (at least 48 bytes; may be NULL). */
enum netrange_kind netrange_classify(const struct sockaddr *addr, char *range,
                                     size_t rangelen);

/* "private", "loopback", ... for messages. */
const char *netrange_kind_name(enum netrange_kind kind);

/* Parses "a.b.c.d/n", "v6addr/n", or an address alone (the /32 or /128 of
 * it).  Host bits past the prefix must be zero ("10.0.0.1/8" is an error:
 * it most likely means something else).  Returns 0, or -1 with what is
 * wrong in why. */
int netrange_net_parse(const char *text, struct netrange_net *out, char *why,
                       size_t whylen);

/* Whether addr lies in net.  An IPv4-mapped IPv6 address is not in an
 * IPv4 network: the mapping itself is what a rule must name. */
bool netrange_net_contains(const struct netrange_net *net,
                           const struct sockaddr *addr);

/* Writes addr's numeric form ("192.0.2.1", "2001:db8::1") into out
 * (INET6_ADDRSTRLEN bytes suffice); "?" for another family. */
void netrange_addr_format(const struct sockaddr *addr, char *out,
                          size_t outlen);

#endif /* WM_MASTER_NETRANGE_H */
