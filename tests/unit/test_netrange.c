/*
 * test_netrange.c — the rules of code URLs that need no network: the
 * address classifier (every refused range at its edges, and the public
 * addresses beside them), CIDR networks, and fetch_url_check's syntax,
 * scheme, credentials and allowlist rules.  The network rules (resolution,
 * pinning, redirects, limits) are proven against real servers by
 * tests/integration/test_url_sources.py.
 */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "master/core/netrange.h"
#include "master/workers/fetch.h"
#include "tests/unit/check.h"

/* A sockaddr of text, IPv4 or IPv6. */
static struct sockaddr_storage
sa(const char *text)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, text, &s4->sin_addr) == 1)
        s4->sin_family = AF_INET;
    else if (inet_pton(AF_INET6, text, &s6->sin6_addr) == 1)
        s6->sin6_family = AF_INET6;
    else
        fprintf(stderr, "test: %s is no address\n", text);
    return ss;
}

static enum netrange_kind
kind(const char *text)
{
    struct sockaddr_storage ss = sa(text);
    char range[64];
    return netrange_classify((struct sockaddr *)&ss, range, sizeof range);
}

#define KIND(text, k)                                                          \
    do {                                                                       \
        enum netrange_kind got_ = kind(text);                                  \
        if (got_ != (k))                                                       \
            fprintf(stderr, "  %s is %s\n", text, netrange_kind_name(got_));   \
        CHECK_EQ(got_, k);                                                     \
    } while (0)

static void
test_ipv4(void)
{
    KIND("0.0.0.0", NETRANGE_UNSPECIFIED);
    KIND("0.255.255.255", NETRANGE_UNSPECIFIED);
    KIND("1.0.0.0", NETRANGE_PUBLIC);
    KIND("9.255.255.255", NETRANGE_PUBLIC);
    KIND("10.0.0.0", NETRANGE_PRIVATE);
    KIND("10.255.255.255", NETRANGE_PRIVATE);
    KIND("11.0.0.0", NETRANGE_PUBLIC);
    KIND("100.63.255.255", NETRANGE_PUBLIC);
    KIND("100.64.0.0", NETRANGE_CGNAT);
    KIND("100.127.255.255", NETRANGE_CGNAT);
    KIND("100.128.0.0", NETRANGE_PUBLIC);
    KIND("126.255.255.255", NETRANGE_PUBLIC);
    KIND("127.0.0.1", NETRANGE_LOOPBACK);
    KIND("127.255.255.254", NETRANGE_LOOPBACK);
    KIND("128.0.0.0", NETRANGE_PUBLIC);
    KIND("169.253.255.255", NETRANGE_PUBLIC);
    KIND("169.254.169.254", NETRANGE_LINK_LOCAL); /* cloud metadata */
    KIND("169.255.0.0", NETRANGE_PUBLIC);
    KIND("172.15.255.255", NETRANGE_PUBLIC);
    KIND("172.16.0.0", NETRANGE_PRIVATE);
    KIND("172.31.255.255", NETRANGE_PRIVATE);
    KIND("172.32.0.0", NETRANGE_PUBLIC);
    KIND("192.167.255.255", NETRANGE_PUBLIC);
    KIND("192.168.0.1", NETRANGE_PRIVATE);
    KIND("192.169.0.0", NETRANGE_PUBLIC);
    KIND("223.255.255.255", NETRANGE_PUBLIC);
    KIND("224.0.0.1", NETRANGE_MULTICAST);
    KIND("239.255.255.255", NETRANGE_MULTICAST);
    KIND("240.0.0.1", NETRANGE_RESERVED);
    KIND("255.255.255.255", NETRANGE_RESERVED);
    KIND("93.184.216.34", NETRANGE_PUBLIC);
    KIND("8.8.8.8", NETRANGE_PUBLIC);
}

static void
test_ipv6(void)
{
    KIND("::", NETRANGE_UNSPECIFIED);
    KIND("::1", NETRANGE_LOOPBACK);
    KIND("::2", NETRANGE_RESERVED);
    KIND("::127.0.0.1", NETRANGE_RESERVED); /* IPv4-compatible */
    KIND("::ffff:127.0.0.1", NETRANGE_IPV4_MAPPED);
    KIND("::ffff:8.8.8.8", NETRANGE_IPV4_MAPPED); /* whatever it embeds */
    KIND("::1:0:0:0", NETRANGE_PUBLIC);
    KIND("64:ff9b::10.0.0.1", NETRANGE_NAT64);
    KIND("64:ff9b::169.254.169.254", NETRANGE_NAT64);
    KIND("64:ff9b::8.8.8.8", NETRANGE_PUBLIC);
    KIND("fbff:ffff::1", NETRANGE_PUBLIC);
    KIND("fc00::1", NETRANGE_UNIQUE_LOCAL);
    KIND("fd12:3456::1", NETRANGE_UNIQUE_LOCAL);
    KIND("fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", NETRANGE_UNIQUE_LOCAL);
    KIND("fe00::1", NETRANGE_PUBLIC);
    KIND("fe80::1", NETRANGE_LINK_LOCAL);
    KIND("febf:ffff::1", NETRANGE_LINK_LOCAL);
    KIND("fec0::1", NETRANGE_SITE_LOCAL);
    KIND("feff::1", NETRANGE_SITE_LOCAL);
    KIND("ff02::1", NETRANGE_MULTICAST);
    KIND("ff00::", NETRANGE_MULTICAST);
    KIND("2001:db8::1", NETRANGE_PUBLIC);
    KIND("2606:4700:4700::1111", NETRANGE_PUBLIC);
}

static void
test_range_text(void)
{
    struct sockaddr_storage ss = sa("172.20.1.2");
    char range[64], text[64];
    CHECK_EQ(netrange_classify((struct sockaddr *)&ss, range, sizeof range),
             NETRANGE_PRIVATE);
    CHECK(strcmp(range, "172.16.0.0/12") == 0);
    netrange_addr_format((struct sockaddr *)&ss, text, sizeof text);
    CHECK(strcmp(text, "172.20.1.2") == 0);
    ss = sa("::ffff:10.0.0.1");
    netrange_classify((struct sockaddr *)&ss, range, sizeof range);
    CHECK(strcmp(range, "::ffff:0:0/96") == 0);
    CHECK(strcmp(netrange_kind_name(NETRANGE_CGNAT), "CGNAT shared") == 0);
    struct sockaddr unix_sa = { .sa_family = AF_UNIX };
    CHECK_EQ(netrange_classify(&unix_sa, range, sizeof range),
             NETRANGE_RESERVED);
}

static void
test_nets(void)
{
    struct netrange_net n;
    char why[256];
    struct sockaddr_storage a;

    REQUIRE(netrange_net_parse("10.1.0.0/16", &n, why, sizeof why) == 0);
    a = sa("10.1.200.3");
    CHECK(netrange_net_contains(&n, (struct sockaddr *)&a));
    a = sa("10.2.0.0");
    CHECK(!netrange_net_contains(&n, (struct sockaddr *)&a));
    /* An IPv4 network does not cover the IPv4-mapped form. */
    a = sa("::ffff:10.1.0.1");
    CHECK(!netrange_net_contains(&n, (struct sockaddr *)&a));

    REQUIRE(netrange_net_parse("127.0.0.1", &n, why, sizeof why) == 0);
    CHECK_EQ(n.prefix, 32);
    a = sa("127.0.0.1");
    CHECK(netrange_net_contains(&n, (struct sockaddr *)&a));
    a = sa("127.0.0.2");
    CHECK(!netrange_net_contains(&n, (struct sockaddr *)&a));

    REQUIRE(netrange_net_parse("fd00::/8", &n, why, sizeof why) == 0);
    a = sa("fd12::1");
    CHECK(netrange_net_contains(&n, (struct sockaddr *)&a));
    a = sa("fc00::1");
    CHECK(!netrange_net_contains(&n, (struct sockaddr *)&a));
    REQUIRE(netrange_net_parse("fc00::/7", &n, why, sizeof why) == 0);
    a = sa("fdff::1");
    CHECK(netrange_net_contains(&n, (struct sockaddr *)&a));
    REQUIRE(netrange_net_parse("0.0.0.0/0", &n, why, sizeof why) == 0);
    a = sa("8.8.8.8");
    CHECK(netrange_net_contains(&n, (struct sockaddr *)&a));
    a = sa("::1");
    CHECK(!netrange_net_contains(&n, (struct sockaddr *)&a));

    CHECK(netrange_net_parse("10.0.0.1/8", &n, why, sizeof why) == -1);
    CHECK(check_has_all(why, "10.0.0.1/8", "past its /8", NULL));
    CHECK(netrange_net_parse("10.0.0.0/33", &n, why, sizeof why) == -1);
    CHECK(check_has_all(why, "0 to 32", NULL));
    CHECK(netrange_net_parse("::/129", &n, why, sizeof why) == -1);
    CHECK(netrange_net_parse("10.0.0.0/", &n, why, sizeof why) == -1);
    CHECK(netrange_net_parse("10.0.0.0/8x", &n, why, sizeof why) == -1);
    CHECK(netrange_net_parse("/8", &n, why, sizeof why) == -1);
    CHECK(netrange_net_parse("example.com", &n, why, sizeof why) == -1);
    CHECK(check_has_all(why, "example.com", "not an IPv4 or IPv6", NULL));
    CHECK(netrange_net_parse("", &n, why, sizeof why) == -1);
}

static void
test_url_rules(void)
{
    char h1[] = "code.example.com", h2[] = "Files.Example.org.";
    char *hosts[] = { h1, h2 };
    struct fetch_policy open = { 0 };
    struct fetch_policy strict = { .allowed_hosts = hosts,
                                   .nallowed_hosts = 2 };
    struct fetch_policy http = { .allow_http = true };
    struct fetch_url u;
    char why[512];

    CHECK_EQ(fetch_url_check(&open, "https://code.example.com/w.zip", &u, why,
                             sizeof why),
             FETCH_OK);
    CHECK(strcmp(u.scheme, "https") == 0);
    CHECK(strcmp(u.host, "code.example.com") == 0);
    CHECK_EQ(u.port, 443);
    CHECK_EQ(
        fetch_url_check(&open, "https://[::1]:8443/x", &u, why, sizeof why),
        FETCH_OK);
    CHECK(strcmp(u.host, "::1") == 0);
    CHECK_EQ(u.port, 8443);

    /* http: refused unless allowed */
    CHECK_EQ(fetch_url_check(&open, "http://code.example.com/w", &u, why,
                             sizeof why),
             FETCH_REFUSED);
    CHECK(
        check_has_all(why, "http is refused", "code_source_allow_http", NULL));
    CHECK_EQ(fetch_url_check(&http, "http://code.example.com/w", &u, why,
                             sizeof why),
             FETCH_OK);
    CHECK_EQ(u.port, 80);

    /* other schemes, relative URLs, credentials, blanks */
    CHECK_EQ(
        fetch_url_check(&http, "ftp://code.example.com/w", &u, why, sizeof why),
        FETCH_INVALID);
    CHECK(check_has_all(why, "scheme ftp", NULL));
    CHECK_EQ(fetch_url_check(&http, "file:///etc/passwd", &u, why, sizeof why),
             FETCH_INVALID);
    CHECK_EQ(fetch_url_check(&open, "/w.zip", &u, why, sizeof why),
             FETCH_INVALID);
    CHECK_EQ(
        fetch_url_check(&open, "code.example.com/w.zip", &u, why, sizeof why),
        FETCH_INVALID);
    CHECK_EQ(fetch_url_check(&open, "https://u:p@code.example.com/w", &u, why,
                             sizeof why),
             FETCH_INVALID);
    CHECK(check_has_all(why, "user:password", "code_source_credentials_file",
                        NULL));
    CHECK_EQ(fetch_url_check(&open, "https://u@code.example.com/w", &u, why,
                             sizeof why),
             FETCH_INVALID);
    CHECK_EQ(fetch_url_check(&open, "https://code.example.com/a b", &u, why,
                             sizeof why),
             FETCH_INVALID);
    CHECK_EQ(fetch_url_check(&open, "https://code.example.com/\n", &u, why,
                             sizeof why),
             FETCH_INVALID);
    /* a percent-encoded host decodes to something no name is */
    CHECK_EQ(
        fetch_url_check(&open, "https://o%de.example/w", &u, why, sizeof why),
        FETCH_INVALID);
    CHECK(check_has_all(why, "not a DNS name", NULL));

    /* the allowlist: exact names, any case, a final dot ignored */
    CHECK_EQ(fetch_url_check(&strict, "https://CODE.example.com/w", &u, why,
                             sizeof why),
             FETCH_OK);
    CHECK_EQ(fetch_url_check(&strict, "https://files.example.org/w", &u, why,
                             sizeof why),
             FETCH_OK);
    CHECK_EQ(fetch_url_check(&strict, "https://evil.example.com/w", &u, why,
                             sizeof why),
             FETCH_REFUSED);
    CHECK(check_has_all(why, "evil.example.com", "allowed_code_source_hosts",
                        NULL));
    CHECK_EQ(fetch_url_check(&strict, "https://code.example.com.evil.net/w", &u,
                             why, sizeof why),
             FETCH_REFUSED);
    CHECK_EQ(
        fetch_url_check(&strict, "https://127.0.0.1/w", &u, why, sizeof why),
        FETCH_REFUSED);

    char big[FETCH_URL_MAX + 10];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    memcpy(big, "https://", 8);
    CHECK_EQ(fetch_url_check(&open, big, &u, why, sizeof why), FETCH_INVALID);
}

static void
test_sha256(void)
{
    char out[65];
    const char *upper =
        "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855";
    CHECK(fetch_sha256_parse(upper, out) == 0);
    CHECK(strcmp(out, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca4959"
                      "91b7852b855") == 0);
    CHECK(fetch_sha256_parse("e3b0", out) == -1);
    CHECK(fetch_sha256_parse("g3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934c"
                             "a495991b7852b855",
                             out) == -1);
}

int
main(void)
{
    RUN(test_ipv4);
    RUN(test_ipv6);
    RUN(test_range_text);
    RUN(test_nets);
    RUN(test_url_rules);
    RUN(test_sha256);
    return check_result();
}
