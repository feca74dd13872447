/*
 * test_lib.c — unit tests of lib/ (the leaf library): base64, hex, content
 * types, the alphabets of names, UUIDv4, RFC 3339 timestamps, the error
 * buffer, helper threads' signal masks and the closest name to a typo.
 *
 * Each rule is checked on its edges (the longest name, the first byte
 * outside an alphabet, a padding bit set) and, where a reference exists,
 * against it (timestamps against the C library's gmtime_r()).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/base64.h"
#include "lib/errbuf.h"
#include "lib/hex.h"
#include "lib/media.h"
#include "lib/name.h"
#include "lib/spell.h"
#include "lib/thread.h"
#include "lib/timestamp.h"
#include "lib/uuid.h"
#include "tests/unit/check.h"

/* ---- base64 ----------------------------------------------------------- */

static void
test_base64(void)
{
    /* RFC 4648 §10. */
    static const struct {
        const char *plain, *coded;
    } rfc[] = {
        { "", "" },
        { "f", "Zg==" },
        { "fo", "Zm8=" },
        { "foo", "Zm9v" },
        { "foob", "Zm9vYg==" },
        { "fooba", "Zm9vYmE=" },
        { "foobar", "Zm9vYmFy" },
    };
    static const char *const refused[] = {
        "Zg=",            /* not a multiple of 4 */
        "Zh==",           /* padding bits set */
        "Zm9=",           /* padding bits set */
        "Zg=a",           /* '=' inside */
        "Z===",           /* too much padding */
        "Zm 9",           /* whitespace */
        "Zm9v\n", "Zm-_", /* the URL alphabet */
    };
    uint8_t *out;
    size_t n;

    for (size_t i = 0; i < sizeof rfc / sizeof rfc[0]; i++) {
        char *c =
            base64_encode((const uint8_t *)rfc[i].plain, strlen(rfc[i].plain));
        CHECK_STR(c, rfc[i].coded);
        free(c);
        REQUIRE(base64_decode(rfc[i].coded, strlen(rfc[i].coded), &out, &n) ==
                0);
        CHECK(n == strlen(rfc[i].plain) && memcmp(out, rfc[i].plain, n) == 0);
        free(out);
    }
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        errno = 0;
        CHECK(base64_decode(refused[i], strlen(refused[i]), &out, &n) == -1);
        CHECK(errno == EINVAL);
    }

    /* Every byte value survives the round trip. */
    uint8_t all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (uint8_t)i;
    char *c = base64_encode(all, sizeof all);
    REQUIRE(c != NULL);
    REQUIRE(base64_decode(c, strlen(c), &out, &n) == 0);
    CHECK(n == sizeof all && memcmp(out, all, n) == 0);
    free(out);
    free(c);
}

/* ---- hex -------------------------------------------------------------- */

static void
test_hex(void)
{
    static const uint8_t bytes[] = { 0x00, 0x01, 0x7f, 0x80, 0xab, 0xff };
    char out[2 * sizeof bytes + 1];

    hex_encode(bytes, sizeof bytes, out);
    CHECK_STR(out, "00017f80abff");
    hex_encode(bytes, 0, out);
    CHECK_STR(out, "");

    CHECK(hex_digit_value('0') == 0);
    CHECK(hex_digit_value('9') == 9);
    CHECK(hex_digit_value('a') == 10);
    CHECK(hex_digit_value('F') == 15);
    CHECK(hex_digit_value('g') == -1);
    CHECK(hex_digit_value('/') == -1);
    CHECK(hex_digit_value('\0') == -1);

    uint8_t back[sizeof bytes];
    CHECK(hex_decode("00017F80abFF", sizeof bytes, back) == 0);
    CHECK(memcmp(back, bytes, sizeof bytes) == 0);
    CHECK(hex_decode("0g", 1, back) == -1);
    CHECK(hex_decode("012", 2, back) == -1); /* stops at the NUL */
    CHECK(hex_decode("", 0, back) == 0);

    CHECK(hex_lower_valid("0123456789abcdef", 16));
    CHECK(hex_lower_valid("", 0));
    CHECK(!hex_lower_valid("abcDef", 6));
    CHECK(!hex_lower_valid("12g4", 4));
    CHECK(hex_lower_valid("12g4", 2)); /* only len bytes are read */
}

/* ---- content types ---------------------------------------------------- */

static bool
is_json(const char *ct)
{
    return media_is_json(ct, ct ? strlen(ct) : 0);
}

static bool
is_text(const char *ct)
{
    return media_is_text(ct, ct ? strlen(ct) : 0);
}

static void
test_media(void)
{
    CHECK(is_json(NULL));
    CHECK(is_json("application/json"));
    CHECK(is_json(" Application/JSON ; charset=utf-8"));
    CHECK(is_json("application/cloudevents+json"));
    CHECK(is_json("text/x+JSON"));
    CHECK(!is_json("+json")); /* no type/subtype */
    CHECK(is_json("x/y+json;a=b"));
    CHECK(is_json("x/y+json;"));
    CHECK(!is_json("application/jsonx"));
    CHECK(!is_json("application/json-seq"));
    CHECK(!is_json("text/plain"));
    CHECK(!is_json(""));

    CHECK(!is_text(NULL));
    CHECK(is_text("text/plain"));
    CHECK(is_text("\tTEXT/csv; charset=latin1"));
    CHECK(is_text("text/"));
    CHECK(!is_text("text"));
    CHECK(!is_text("application/json"));
    /* Both: each caller decides which wins. */
    CHECK(is_json("text/x+json") && is_text("text/x+json"));
}

/* ---- names ------------------------------------------------------------ */

static void
test_names(void)
{
    CHECK(name_ext_valid("a", 1));
    CHECK(name_ext_valid("abcdefghij0123456789", 20));
    CHECK(!name_ext_valid("abcdefghij0123456789x", 21));
    CHECK(!name_ext_valid("", 0));
    CHECK(!name_ext_valid(NULL, 0));
    CHECK(!name_ext_valid("Abc", 3));
    CHECK(!name_ext_valid("a_b", 3));
    CHECK(!name_ext_valid("a-b", 3));
    CHECK(name_ext_valid("abc-", 3)); /* only len bytes are read */
    CHECK(!name_ext_valid("a\0b", 3));

    CHECK(name_word_valid("Orders.EU_1-x", 128));
    CHECK(name_word_valid(".", 1));
    CHECK(!name_word_valid("", 128));
    CHECK(!name_word_valid("abc", 2));
    CHECK(!name_word_valid("a/b", 128));
    CHECK(!name_word_valid("a b", 128));
    CHECK(!name_word_valid("caf\xc3\xa9", 128));
    CHECK(name_word_char('Z') && name_word_char('-') && !name_word_char('/'));

    CHECK(name_lower_valid("billing", 64));
    CHECK(name_lower_valid("0a_b.c-d", 64));
    CHECK(!name_lower_valid("_a", 64));
    CHECK(!name_lower_valid(".a", 64));
    CHECK(!name_lower_valid("Billing", 64));
    CHECK(!name_lower_valid("", 64));
    CHECK(!name_lower_valid("abcd", 3));
    CHECK(name_lower_valid("abc", 3));

    CHECK(name_slug_valid("dotnet", 32));
    CHECK(name_slug_valid("_x-1", 32));
    CHECK(!name_slug_valid("a.b", 32));
    CHECK(!name_slug_valid("Dotnet", 32));
    CHECK(!name_slug_valid("", 32));
    CHECK(!name_slug_valid("abc", 2));
}

/* ---- UUIDs ------------------------------------------------------------ */

static bool
is_uuid4(const char *s)
{
    return uuid_valid(s, strlen(s)) && s[14] == '4' &&
           strchr("89ab", s[19]) != NULL;
}

static int
cmp_ids(const void *a, const void *b)
{
    return memcmp(a, b, UUID_SIZE);
}

static void
test_uuid(void)
{
    static const char variant_digits[] = "89ab";
    enum { N = 10000 };
    char(*ids)[UUID_SIZE] = malloc(N * sizeof *ids);
    unsigned ver_ok = 0, variants[4] = { 0 };

    REQUIRE(ids != NULL);
    for (int i = 0; i < N; i++) {
        CHECK(uuid_new(ids[i]) == 0);
        if (is_uuid4(ids[i]))
            ver_ok++;
        const char *at = strchr(variant_digits, ids[i][19]);
        if (at && *at)
            variants[at - variant_digits]++;
    }
    CHECK(ver_ok == N);
    /* The two free bits of the variant nibble are random: each of 8, 9, a,
     * b shows up (p of a miss ~ 4 * 0.75^10000). */
    for (int v = 0; v < 4; v++)
        CHECK(variants[v] > 0);
    qsort(ids, N, sizeof *ids, cmp_ids);
    unsigned dups = 0;
    for (int i = 1; i < N; i++)
        dups += memcmp(ids[i - 1], ids[i], UUID_SIZE) == 0;
    CHECK(dups == 0);
    free(ids);
}

static void
test_uuid_from_random(void)
{
    uint8_t zero[16] = { 0 }, ones[16];
    char out[UUID_SIZE];

    memset(ones, 0xff, sizeof ones);
    uuid_from_random(zero, out);
    CHECK_STR(out, "00000000-0000-4000-8000-000000000000");
    uuid_from_random(ones, out);
    CHECK_STR(out, "ffffffff-ffff-4fff-bfff-ffffffffffff");
    CHECK(zero[6] == 0 && zero[8] == 0); /* its input is left alone */

    CHECK(uuid_valid("123e4567-e89b-12d3-a456-426614174000", 36));
    CHECK(!uuid_valid("123e4567-e89b-12d3-a456-42661417400", 35));
    CHECK(!uuid_valid("123E4567-e89b-12d3-a456-426614174000", 36));
    CHECK(!uuid_valid("123e4567ae89b-12d3-a456-426614174000", 36));
    CHECK(!uuid_valid("123e4567-e89b-12d3-a456-42661417400g", 36));
}

/* ---- timestamps ------------------------------------------------------- */

static void
test_timestamp(void)
{
    static const struct {
        int64_t ms;
        const char *text;
    } known[] = {
        { 0, "1970-01-01T00:00:00.000Z" },
        { 1795317038123LL, "2026-11-22T03:10:38.123Z" },
        { 951825600000LL, "2000-02-29T12:00:00.000Z" },
        { -1, "1969-12-31T23:59:59.999Z" },
        { -2203891200000LL, "1900-03-01T00:00:00.000Z" },
        { 4107542399999LL, "2100-02-28T23:59:59.999Z" },
        { -11670998400000LL, "1600-02-29T00:00:00.000Z" },
        { TIMESTAMP_MIN_MS, "0000-01-01T00:00:00.000Z" },
        { TIMESTAMP_MAX_MS, "9999-12-31T23:59:59.999Z" },
    };
    char out[TIMESTAMP_SIZE];

    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        CHECK(timestamp_format(known[i].ms, out) == 0);
        CHECK_STR(out, known[i].text);
    }
    CHECK(timestamp_format(TIMESTAMP_MAX_MS + 1, out) == -1 && out[0] == 0);
    CHECK(timestamp_format(TIMESTAMP_MIN_MS - 1, out) == -1 && out[0] == 0);
    CHECK(timestamp_format(INT64_MIN, out) == -1);
    CHECK(timestamp_format(INT64_MAX, out) == -1);

    /* Against the C library, over 1834..2106. */
    unsigned bad = 0;
    srand(42);
    for (int i = 0; i < 20000; i++) {
        int64_t ms = ((int64_t)rand() << 31 | rand()) % 8589934592000LL -
                     4294967296000LL;
        int64_t sec = ms / 1000, frac = ms % 1000;
        if (frac < 0) {
            frac += 1000;
            sec--;
        }
        time_t t = (time_t)sec;
        struct tm tm;
        char want[64];
        gmtime_r(&t, &tm);
        snprintf(want, sizeof want, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                 tm.tm_min, tm.tm_sec, (int)frac);
        timestamp_format(ms, out);
        bad += strcmp(out, want) != 0;
    }
    CHECK(bad == 0);

    int64_t now = timestamp_now_ms();
    CHECK(now > 1700000000000LL && now < TIMESTAMP_MAX_MS);
    CHECK((int64_t)time(NULL) - now / 1000 <= 1);
}

/* ---- the error buffer ------------------------------------------------- */

static void
test_errbuf(void)
{
    char err[8];

    errno = EAGAIN;
    CHECK(errbuf_set(err, sizeof err, "%s %d", "abc", 42) == -1);
    CHECK_STR(err, "abc 42");
    CHECK(errno == EAGAIN);
    CHECK(errbuf_set(err, sizeof err, "%s", "a long message") == -1);
    CHECK_STR(err, "a long ");
    CHECK(errbuf_set(NULL, 0, "nothing") == -1);
    err[0] = 'x';
    CHECK(errbuf_set(err, 0, "nothing") == -1);
    CHECK(err[0] == 'x');
}

/* ---- the closest name to a typo --------------------------------------- */

static void
test_spell(void)
{
    static const char *const members[] = { "name", "mime_type",  "topic",
                                           NULL,   "timeout_ms", "memory_mb" };
    static const char *const commands[] = { "create", "list",  "history",
                                            "show",   "start", "stop" };
    char longer[80];

    CHECK(spell_distance("", "") == 0);
    CHECK(spell_distance("abc", "") == 3);
    CHECK(spell_distance("nmae", "name") == 1); /* a swap is one edit */
    CHECK(spell_distance("Name", "name") == 0);
    CHECK(spell_distance("kitten", "sitting") == 3);
    memset(longer, 'a', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    CHECK(spell_distance(longer, "a") == SIZE_MAX);

    CHECK(spell_score("name", "name") == 0);
    CHECK(spell_score("x", "y") == SIZE_MAX); /* as many edits as letters */
    CHECK(spell_score("nmae", "name") == 2);
    CHECK(spell_score("timeout", "timeout_ms") == 3); /* a prefix */
    CHECK(spell_score("ti", "timeout_ms") == SIZE_MAX);
    CHECK(spell_score("colour", "name") == SIZE_MAX);

    CHECK_STR(spell_closest("nmae", members, 6), "name");
    CHECK_STR(spell_closest("timeout", members, 6), "timeout_ms");
    CHECK_STR(spell_closest("mime", members, 6), "mime_type");
    CHECK(spell_closest("colour", members, 6) == NULL);
    CHECK_STR(spell_closest("lsit", commands, 6), "list");
    CHECK_STR(spell_closest("creat", commands, 6), "create");
    CHECK_STR(spell_closest("histroy", commands, 6), "history");
    CHECK_STR(spell_closest("stat", commands, 6), "start"); /* the first */
    CHECK(spell_closest("zzz", commands, 6) == NULL);
    CHECK(spell_closest("list", commands, 0) == NULL);
}

/* ---- threads ---------------------------------------------------------- */

/* The new thread's own mask, read from inside it. */
static void *
read_mask(void *arg)
{
    (void)pthread_sigmask(SIG_SETMASK, NULL, arg);
    return NULL;
}

static void
test_thread_start_quiet(void)
{
    sigset_t before, after, seen;
    pthread_t t;

    CHECK(pthread_sigmask(SIG_SETMASK, NULL, &before) == 0);
    CHECK(!sigismember(&before, SIGTERM));

    sigemptyset(&seen);
    CHECK(thread_start_quiet(&t, read_mask, &seen, false) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(sigismember(&seen, SIGTERM) == 1);
    CHECK(sigismember(&seen, SIGCHLD) == 1);
    CHECK(sigismember(&seen, SIGSEGV) == 1);

    sigemptyset(&seen);
    CHECK(thread_start_quiet(&t, read_mask, &seen, true) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(sigismember(&seen, SIGTERM) == 1);
    CHECK(sigismember(&seen, SIGSEGV) == 0);
    CHECK(sigismember(&seen, SIGABRT) == 0);
    CHECK(sigismember(&seen, SIGSYS) == 0);

    /* The caller's own mask is as it was. */
    CHECK(pthread_sigmask(SIG_SETMASK, NULL, &after) == 0);
    CHECK(sigismember(&after, SIGTERM) == 0);
    CHECK(sigismember(&after, SIGSEGV) == 0);
}

int
main(void)
{
    RUN(test_base64);
    RUN(test_hex);
    RUN(test_media);
    RUN(test_names);
    RUN(test_uuid);
    RUN(test_uuid_from_random);
    RUN(test_timestamp);
    RUN(test_errbuf);
    RUN(test_spell);
    RUN(test_thread_start_quiet);
    return check_result();
}
