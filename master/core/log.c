/*
 * log.c — levelled logging to stderr (see log.h).
 *
 * Why stderr and not syslog(3): under systemd stderr is the journal, and
 * the `<N>` prefix gives each line its priority without a library; in a
 * terminal or a test the same lines are readable and timestamped.
 *
 * Invariants: a line is built whole in a stack buffer of LOG_LINE_MAX bytes
 * and written with one write(2) — no lock, no allocation, so logging works
 * from any thread and never interleaves; whatever a message holds, the line
 * holds no control character but its final newline, and it is cut only
 * between characters (never inside a UTF-8 sequence or an escape).
 */
#include "config.h"

#include "master/core/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* "…" in UTF-8 then the newline: what ends a cut line. */
#define CUT_MARK "\xe2\x80\xa6\n"
#define CUT_MARK_LEN 4

static atomic_int threshold = LOG_INFO;
/* Written by log_init() only, before other threads exist. */
static bool to_journal;
static char ident[64] = "workmanagerd";

static const struct {
    const char *name;
    int level;
} level_names[] = {
    { "debug", LOG_DEBUG },     { "info", LOG_INFO }, { "notice", LOG_NOTICE },
    { "warning", LOG_WARNING }, { "error", LOG_ERR },
};

/* One line under construction; the last CUT_MARK_LEN bytes of buf stay
 * free for the newline or the cut mark. */
struct line {
    char buf[LOG_LINE_MAX];
    size_t len;
    bool cut;
};

static int
clamp_level(int level, int lowest)
{
    if (level < lowest)
        return lowest;
    if (level > LOG_DEBUG)
        return LOG_DEBUG;
    return level;
}

/* Whether stderr is the stream that JOURNAL_STREAM ("dev:ino") names, as
 * systemd.exec(5) tells services to check. */
static bool
stderr_is_journal(void)
{
    const char *js = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat st;
    char tail;

    if (js == NULL || sscanf(js, "%llu:%llu%c", &dev, &ino, &tail) != 2)
        return false;
    if (fstat(STDERR_FILENO, &st) < 0)
        return false;
    return (unsigned long long)st.st_dev == dev &&
           (unsigned long long)st.st_ino == ino;
}

void
log_init(int level, const char *id)
{
    log_set_level(level);
    if (id != NULL)
        snprintf(ident, sizeof(ident), "%s", id);
    to_journal = stderr_is_journal();
}

void
log_set_level(int level)
{
    atomic_store_explicit(&threshold, clamp_level(level, LOG_ERR),
                          memory_order_relaxed);
}

int
log_get_level(void)
{
    return atomic_load_explicit(&threshold, memory_order_relaxed);
}

int
log_level_parse(const char *name)
{
    for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++)
        if (strcasecmp(name, level_names[i].name) == 0)
            return level_names[i].level;
    return -1;
}

const char *
log_level_name(int level)
{
    if (level == LOG_ALERT)
        return "alert";
    for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++)
        if (level_names[i].level == level)
            return level_names[i].name;
    return "?";
}

bool
log_enabled(int level)
{
    return level <= atomic_load_explicit(&threshold, memory_order_relaxed);
}

/* Appends n bytes whole, or marks the line cut when they do not fit. */
static void
append(struct line *l, const char *s, size_t n)
{
    if (l->cut)
        return;
    if (n > sizeof(l->buf) - CUT_MARK_LEN - l->len) {
        l->cut = true;
        return;
    }
    memcpy(l->buf + l->len, s, n);
    l->len += n;
}

static void
append_hex(struct line *l, unsigned char c)
{
    char esc[5];

    snprintf(esc, sizeof(esc), "\\x%02x", c);
    append(l, esc, 4);
}

/* The length of the valid UTF-8 sequence of a printable character at s
 * (at most n bytes), or 0 when the bytes there are not one: a truncated,
 * overlong or surrogate sequence, one past U+10FFFF, or a C1 control. */
static size_t
utf8_char_len(const unsigned char *s, size_t n)
{
    uint32_t cp;
    size_t len;

    if (s[0] >= 0xc2 && s[0] <= 0xdf) {
        len = 2;
        cp = s[0] & 0x1fu;
    } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
        len = 3;
        cp = s[0] & 0x0fu;
    } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        len = 4;
        cp = s[0] & 0x07u;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3fu);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) ||
        (cp >= 0x80 && cp <= 0x9f))
        return 0;
    return len;
}

/* Appends n bytes of s with every byte that is not part of a printable
 * character written as \xNN; with `backslash`, '\\' too. */
static void
append_escaped(struct line *l, const char *s, size_t n, bool backslash)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;

    while (i < n && !l->cut) {
        unsigned char c = u[i];
        size_t run = i;

        /* The common case: a run of printable ASCII. */
        while (run < n && u[run] >= 0x20 && u[run] < 0x7f &&
               !(backslash && u[run] == '\\'))
            run++;
        if (run > i) {
            size_t fit = sizeof(l->buf) - CUT_MARK_LEN - l->len;

            if (run - i > fit) {
                append(l, s + i, fit);
                l->cut = true;
                return;
            }
            append(l, s + i, run - i);
            i = run;
            continue;
        }
        if (c >= 0x80) {
            size_t len = utf8_char_len(u + i, n - i);

            if (len > 0) {
                append(l, s + i, len);
                i += len;
                continue;
            }
        }
        append_hex(l, c);
        i++;
    }
}

/* `<N>`, and unless stderr is the journal the time and ident[pid]. */
static void
append_prefix(struct line *l, int level)
{
    char buf[128];
    int n;

    if (to_journal) {
        n = snprintf(buf, sizeof(buf), "<%d>", level);
    } else {
        struct timespec ts;
        struct tm tm;

        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        n = snprintf(
            buf, sizeof(buf),
            "<%d>%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s[%ld]: ", level,
            tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
            tm.tm_sec, ts.tv_nsec / 1000000, ident, (long)getpid());
    }
    if (n > 0)
        append(l, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
    if (level == LOG_ALERT)
        append(l, "ALERT: ", 7);
}

/* Ends the line and writes it with one write(2); a failure is dropped, as
 * there is nowhere left to report it. */
static void
emit(struct line *l)
{
    const char *p = l->buf;
    size_t left;

    if (l->cut) {
        memcpy(l->buf + l->len, CUT_MARK, CUT_MARK_LEN);
        l->len += CUT_MARK_LEN;
    } else {
        l->buf[l->len++] = '\n';
    }
    left = l->len;
    while (left > 0) {
        ssize_t w = write(STDERR_FILENO, p, left);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        left -= (size_t)w;
    }
}

static void vlog(int level, int saved_errno, bool with_errno, const char *fmt,
                 va_list ap) LOG_PRINTF(4, 0);

static void
vlog(int level, int saved_errno, bool with_errno, const char *fmt, va_list ap)
{
    char msg[LOG_LINE_MAX];
    struct line l;
    int n;

    l.len = 0;
    l.cut = false;
    append_prefix(&l, level);
    n = vsnprintf(msg, sizeof(msg), fmt, ap);
    if (n < 0)
        n = 0;
    append_escaped(
        &l, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1, false);
    if ((size_t)n >= sizeof(msg))
        l.cut = true;
    if (with_errno) {
        char ebuf[256];
        const char *e = strerror_r(saved_errno, ebuf, sizeof(ebuf));

        append(&l, ": ", 2);
        append_escaped(&l, e, strlen(e), false);
    }
    emit(&l);
}

void
log_write(int level, const char *fmt, ...)
{
    int saved_errno = errno;
    va_list ap;

    if (!log_enabled(level))
        return;
    va_start(ap, fmt);
    vlog(level, saved_errno, false, fmt, ap);
    va_end(ap);
    errno = saved_errno;
}

void
log_write_errno(int level, const char *fmt, ...)
{
    int saved_errno = errno;
    va_list ap;

    if (!log_enabled(level))
        return;
    va_start(ap, fmt);
    vlog(level, saved_errno, true, fmt, ap);
    va_end(ap);
    errno = saved_errno;
}

void
log_host(int level, const char *worker, const char *msg, size_t len)
{
    int saved_errno = errno;
    struct line l;

    level = clamp_level(level, LOG_ERR);
    if (!log_enabled(level))
        return;
    l.len = 0;
    l.cut = false;
    append_prefix(&l, level);
    append(&l, "worker ", 7);
    if (worker == NULL)
        worker = "?";
    append_escaped(&l, worker, strlen(worker), true);
    append(&l, ": ", 2);
    append_escaped(&l, msg, len, true);
    emit(&l);
    errno = saved_errno;
}

size_t
log_escape(char *out, size_t cap, const char *msg, size_t len)
{
    struct line l;

    l.len = 0;
    l.cut = false;
    append_escaped(&l, msg, len, true);
    if (l.cut) { /* "…" without the mark's newline */
        memcpy(l.buf + l.len, CUT_MARK, CUT_MARK_LEN - 1);
        l.len += CUT_MARK_LEN - 1;
    }
    if (cap == 0)
        return 0;
    if (l.len >= cap)
        l.len = cap - 1;
    memcpy(out, l.buf, l.len);
    out[l.len] = '\0';
    return l.len;
}
