/*
 * test_log.c — unit tests of master/core/log.c: the line format with and
 * without the journal, levels and the threshold, alerts, errno, escaping
 * of control characters and of everything a host sends, truncation at
 * LOG_LINE_MAX on a character boundary, and whole lines from concurrent
 * threads.
 *
 * stderr is redirected to a temporary file that each test reads back; the
 * failures are reported on the original stderr, through check.h's
 * check_stream.  The exit status is the verdict.
 */
#include "config.h"

#include "master/core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/unit/check.h"

static char path[512];

/* Empties the capture file. */
static void
reset(void)
{
    if (ftruncate(STDERR_FILENO, 0) < 0 ||
        lseek(STDERR_FILENO, 0, SEEK_SET) < 0) {
        perror("reset");
        exit(2);
    }
}

/* What was logged since reset() (static; NUL-terminated). */
static const char *
captured(size_t *len)
{
    static char buf[4 << 20];
    int fd = open(path, O_RDONLY);
    ssize_t n;

    if (fd < 0 || (n = read(fd, buf, sizeof(buf) - 1)) < 0) {
        perror(path);
        exit(2);
    }
    close(fd);
    buf[n] = '\0';
    if (len != NULL)
        *len = (size_t)n;
    return buf;
}

static bool
expect_line(const char *want)
{
    const char *got = captured(NULL);

    if (strcmp(got, want) != 0) {
        fprintf(check_out(), "  logged \"%s\"\n  wanted \"%s\"\n", got, want);
        return false;
    }
    return true;
}

/* Journal mode: no timestamp, so exact lines can be compared. */
static void
journal_mode(int level)
{
    struct stat st;
    char js[64];

    if (fstat(STDERR_FILENO, &st) < 0) {
        perror("fstat");
        exit(2);
    }
    snprintf(js, sizeof(js), "%llu:%llu", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino);
    setenv("JOURNAL_STREAM", js, 1);
    log_init(level, "test");
}

static void
test_terminal_format(void)
{
    const char *got;
    char pid[64];

    unsetenv("JOURNAL_STREAM");
    log_init(LOG_INFO, "testident");
    reset();
    log_info("hello %d", 42);
    got = captured(NULL);
    /* <6>YYYY-MM-DDTHH:MM:SS.mmmZ testident[pid]: hello 42\n */
    CHECK(strncmp(got, "<6>", 3) == 0);
    CHECK(strlen(got) > 28 && got[7] == '-' && got[10] == '-' &&
          got[13] == 'T' && got[16] == ':' && got[19] == ':' &&
          got[22] == '.' && got[26] == 'Z' && got[27] == ' ');
    snprintf(pid, sizeof(pid), " testident[%ld]: hello 42\n", (long)getpid());
    CHECK(strstr(got, pid) == got + 27);
    /* a JOURNAL_STREAM naming another file is not the journal */
    setenv("JOURNAL_STREAM", "1:1", 1);
    log_init(LOG_INFO, NULL);
    reset();
    log_warning("x");
    CHECK(strncmp(captured(NULL), "<4>2", 4) == 0);
}

static void
test_levels(void)
{
    journal_mode(LOG_INFO);
    reset();
    log_debug("hidden");
    log_info("info");
    log_notice("notice");
    log_warning("warning");
    log_err("error");
    log_alert("cannot happen");
    CHECK(expect_line("<6>info\n<5>notice\n<4>warning\n<3>error\n"
                      "<1>ALERT: cannot happen\n"));
    log_set_level(LOG_DEBUG);
    CHECK(log_get_level() == LOG_DEBUG);
    reset();
    log_debug("shown %s", "now");
    CHECK(expect_line("<7>shown now\n"));
    /* the threshold never hides alerts */
    log_set_level(LOG_ALERT);
    CHECK(log_get_level() == LOG_ERR);
    reset();
    log_warning("hidden");
    log_err("err");
    log_alert("alert");
    CHECK(expect_line("<3>err\n<1>ALERT: alert\n"));
    log_set_level(LOG_INFO);

    CHECK(log_level_parse("debug") == LOG_DEBUG);
    CHECK(log_level_parse("info") == LOG_INFO);
    CHECK(log_level_parse("notice") == LOG_NOTICE);
    CHECK(log_level_parse("Warning") == LOG_WARNING);
    CHECK(log_level_parse("error") == LOG_ERR);
    CHECK(log_level_parse("loud") == -1);
    CHECK(log_level_parse("") == -1);
    CHECK(strcmp(log_level_name(LOG_WARNING), "warning") == 0);
    CHECK(strcmp(log_level_name(LOG_ALERT), "alert") == 0);
}

static void
test_errno(void)
{
    journal_mode(LOG_INFO);
    reset();
    errno = ENOENT;
    log_errno_err("open %s", "/x");
    CHECK(errno == ENOENT);
    CHECK(expect_line("<3>open /x: No such file or directory\n"));
    reset();
    errno = EACCES;
    log_info("plain");
    CHECK(errno == EACCES);
}

static void
test_escaping(void)
{
    static const char host_msg[] = "red \x1b[31m\\ line\nbreak \xff bad "
                                   "\xc3\xa9 ok \xc2\x9b c1 \xe2\x82 cut";

    journal_mode(LOG_DEBUG);
    reset();
    log_info("two\nlines\tand \x7f");
    CHECK(expect_line("<6>two\\x0alines\\x09and \\x7f\n"));
    reset();
    log_host(LOG_INFO, "w1", host_msg, sizeof(host_msg) - 1);
    CHECK(expect_line("<6>worker w1: red \\x1b[31m\\x5c line\\x0abreak \\xff "
                      "bad \xc3\xa9 ok \\xc2\\x9b c1 \\xe2\\x82 cut\n"));
    /* NUL bytes and no terminator */
    reset();
    log_host(LOG_WARNING, "w2", "a\0b", 3);
    CHECK(expect_line("<4>worker w2: a\\x00b\n"));
    /* a host cannot raise an alert, nor go below debug */
    reset();
    log_host(LOG_ALERT, "w3", "boom", 4);
    log_host(99, "w3", "deep", 4);
    CHECK(expect_line("<3>worker w3: boom\n<7>worker w3: deep\n"));
    /* nor forge its worker id */
    reset();
    log_host(LOG_INFO, "w\n4", "x", 1);
    CHECK(expect_line("<6>worker w\\x0a4: x\n"));
}

static void
test_truncation(void)
{
    static char big[10000];
    const char *got;
    size_t len;

    journal_mode(LOG_INFO);
    memset(big, 'a', sizeof(big) - 1);
    reset();
    log_info("%s", big);
    got = captured(&len);
    CHECK(len == LOG_LINE_MAX);
    CHECK(len >= 4 && memcmp(got + len - 4, "\xe2\x80\xa6\n", 4) == 0);
    CHECK(memchr(got, '\n', len - 1) == NULL);

    /* cut between characters: a run of 2-byte characters */
    for (size_t i = 0; i + 2 < sizeof(big); i += 2)
        memcpy(big + i, "\xc3\xa9", 2);
    big[sizeof(big) - 2] = '\0';
    reset();
    log_host(LOG_INFO, "w", big, strlen(big));
    got = captured(&len);
    CHECK(len <= LOG_LINE_MAX);
    CHECK(len >= 6 && memcmp(got + len - 4, "\xe2\x80\xa6\n", 4) == 0);
    /* the byte before the mark ends an é */
    CHECK(len >= 6 && (unsigned char)got[len - 5] == 0xa9 &&
          (unsigned char)got[len - 6] == 0xc3);

    /* cut between escapes: never half an \xNN */
    memset(big, 0x01, sizeof(big) - 1);
    reset();
    log_host(LOG_INFO, "w", big, sizeof(big) - 1);
    got = captured(&len);
    CHECK(len <= LOG_LINE_MAX);
    CHECK(len >= 8 && memcmp(got + len - 8, "\\x01", 4) == 0);
}

#define THREADS 8
#define LINES 500

static void *
writer(void *arg)
{
    long id = (long)arg;
    char pad[300];

    memset(pad, 'a' + (int)id, sizeof(pad) - 1);
    pad[sizeof(pad) - 1] = '\0';
    for (int i = 0; i < LINES; i++)
        log_info("t%ld %d %s", id, i, pad);
    return NULL;
}

static void
test_threads(void)
{
    pthread_t t[THREADS];
    const char *got;
    size_t len, lines = 0;

    journal_mode(LOG_INFO);
    reset();
    for (long i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, writer, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    got = captured(&len);
    for (const char *p = got; *p != '\0';) {
        const char *nl = strchr(p, '\n');
        long id;
        int i, n = 0;

        if (nl == NULL) {
            CHECK(!"a line without its newline");
            break;
        }
        if (sscanf(p, "<6>t%ld %d %n", &id, &i, &n) != 2 || n == 0 || id < 0 ||
            id >= THREADS || (size_t)(nl - p - n) != 299) {
            FAIL("mangled line: %.60s...", p);
        } else {
            for (const char *c = p + n; c < nl; c++)
                if (*c != 'a' + id) {
                    FAIL("interleaved line: %.60s...", p);
                    break;
                }
        }
        lines++;
        p = nl + 1;
    }
    CHECK(lines == THREADS * LINES);
}

int
main(void)
{
    const char *base = getenv("TMPDIR");
    int fd, saved;

    saved = dup(STDERR_FILENO);
    check_stream = saved >= 0 ? fdopen(saved, "w") : NULL;
    if (check_stream == NULL) {
        perror("dup");
        return 2;
    }
    setvbuf(check_stream, NULL, _IONBF, 0);
    snprintf(path, sizeof(path), "%s/test_log.XXXXXX",
             base != NULL && base[0] != '\0' ? base : "/tmp");
    fd = mkstemp(path);
    if (fd < 0 || dup2(fd, STDERR_FILENO) < 0) {
        perror("mkstemp");
        return 2;
    }
    close(fd);
    RUN(test_terminal_format);
    RUN(test_levels);
    RUN(test_errno);
    RUN(test_escaping);
    RUN(test_truncation);
    RUN(test_threads);
    unlink(path);
    return check_result();
}
