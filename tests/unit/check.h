/*
 * check.h — the assertion helpers of the C unit tests.
 *
 * A test program is a list of test functions run by RUN(); CHECK() records
 * a failure and carries on, so that one run reports every broken
 * expectation, while REQUIRE() stops the current test function when what
 * follows would read through a bad pointer.  main() returns check_result(),
 * which the automake harness reads as PASS (0) or FAIL (1).
 *
 * Every failure is reported as "file:line: test: what", on stderr unless
 * check_stream names another stream (a test that captures its own stderr
 * points it at a copy of the original).  FAIL() records a failure the
 * macros cannot phrase; check_has_all() is the predicate of the tests that
 * look for the parts of an error message.
 */
#ifndef WM_TESTS_CHECK_H
#define WM_TESTS_CHECK_H

#include <dirent.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static unsigned check_failures;
static unsigned check_count;
static const char *check_test = "";
static FILE *check_stream; /* NULL: stderr */

/* Where failures are reported. */
static inline FILE *
check_out(void)
{
    return check_stream != NULL ? check_stream : stderr;
}

#define CHECK(cond)                                                            \
    do {                                                                       \
        check_count++;                                                         \
        if (!(cond)) {                                                         \
            check_failures++;                                                  \
            fprintf(check_out(), "%s:%d: %s: CHECK(%s) failed\n", __FILE__,    \
                    __LINE__, check_test, #cond);                              \
        }                                                                      \
    } while (0)

/* Like CHECK, but leaves the test function (which returns void). */
#define REQUIRE(cond)                                                          \
    do {                                                                       \
        check_count++;                                                         \
        if (!(cond)) {                                                         \
            check_failures++;                                                  \
            fprintf(check_out(), "%s:%d: %s: REQUIRE(%s) failed\n", __FILE__,  \
                    __LINE__, check_test, #cond);                              \
            return;                                                            \
        }                                                                      \
    } while (0)

/* Integer equality that prints both sides when it fails. */
#define CHECK_EQ(a, b)                                                         \
    do {                                                                       \
        long long check_a_ = (long long)(a), check_b_ = (long long)(b);        \
        check_count++;                                                         \
        if (check_a_ != check_b_) {                                            \
            check_failures++;                                                  \
            fprintf(check_out(),                                               \
                    "%s:%d: %s: CHECK_EQ(%s, %s) failed: %lld != %lld\n",      \
                    __FILE__, __LINE__, check_test, #a, #b, check_a_,          \
                    check_b_);                                                 \
        }                                                                      \
    } while (0)

#define RUN(fn)                                                                \
    do {                                                                       \
        unsigned check_before_ = check_failures;                               \
        check_test = #fn;                                                      \
        fn();                                                                  \
        printf("%s %s\n", check_failures == check_before_ ? "ok  " : "FAIL",   \
               #fn);                                                           \
    } while (0)

/* Records one failed check, described by a printf-style message. */
#define FAIL(...) check_fail(__FILE__, __LINE__, __VA_ARGS__)

static inline void check_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static inline void
check_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;

    check_count++;
    check_failures++;
    fprintf(check_out(), "%s:%d: %s: ", file, line, check_test);
    va_start(ap, fmt);
    vfprintf(check_out(), fmt, ap);
    va_end(ap);
    fputc('\n', check_out());
}

/* String equality that prints both sides when it fails; got may be NULL
 * (a failure). */
#define CHECK_STR(got, want) check_str(__FILE__, __LINE__, #got, (got), (want))

static inline void
check_str(const char *file, int line, const char *what, const char *got,
          const char *want)
{
    if (got == NULL || strcmp(got, want) != 0)
        check_fail(file, line, "%s is \"%s\", expected \"%s\"", what,
                   got ? got : "(null)", want);
    else
        check_count++;
}

/* True when text (which may be NULL) contains every one of the
 * NULL-terminated strings; reports each one it lacks. */
static inline bool check_has_all(const char *text, ...)
    __attribute__((sentinel));

static inline bool
check_has_all(const char *text, ...)
{
    va_list ap;
    const char *s;
    bool ok = true;

    va_start(ap, text);
    while ((s = va_arg(ap, const char *)) != NULL)
        if (text == NULL || strstr(text, s) == NULL) {
            fprintf(check_out(), "  \"%s\" lacks \"%s\"\n",
                    text != NULL ? text : "(null)", s);
            ok = false;
        }
    va_end(ap);
    return ok;
}

static inline int
check_result(void)
{
    printf("%u checks, %u failed\n", check_count, check_failures);
    return check_failures ? 1 : 0;
}

/* A heap copy of exactly len bytes, so that AddressSanitizer catches any
 * read past the end of a buffer under test.  Aborts when out of memory. */
static inline unsigned char *
check_dup(const void *p, size_t len)
{
    unsigned char *d = malloc(len ? len : 1);
    if (d == NULL) {
        perror("malloc");
        abort();
    }
    if (len)
        memcpy(d, p, len);
    return d;
}

/* The source tree: WM_TOP_SRCDIR when the test's build defines it, else
 * automake's $srcdir, else NULL. */
static inline const char *
check_srcdir(void)
{
#ifdef WM_TOP_SRCDIR
    return WM_TOP_SRCDIR;
#else
    return getenv("srcdir");
#endif
}

/* The whole of a small file (procfs, sysfs) in a static buffer,
 * NUL-terminated, or NULL; the next call overwrites it. */
static inline const char *
check_slurp(const char *path)
{
    static char buf[16384];
    size_t off = 0, n;
    FILE *f = fopen(path, "re");

    if (f == NULL)
        return NULL;
    while (off < sizeof buf - 1 &&
           (n = fread(buf + off, 1, sizeof buf - 1 - off, f)) > 0)
        off += n;
    fclose(f);
    buf[off] = '\0';
    return buf;
}

/* A whole file, malloc'd (one byte more than *len, not terminated), or
 * NULL. */
static inline char *
check_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;

    if (f == NULL)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
        fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) != NULL &&
        fread(buf, 1, (size_t)n, f) == (size_t)n) {
        *len = (size_t)n;
    } else {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

/* Calls fn with the contents of every file of dir (names beginning with
 * "." skipped), in readdir() order; a directory or a file that cannot be
 * read fails the test.  Returns the number of files given to fn. */
static inline size_t
check_each_file(const char *dir,
                void (*fn)(const char *body, size_t len, const char *name,
                           void *arg),
                void *arg)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t n = 0;
    char path[4096];

    if (d == NULL) {
        FAIL("cannot open %s", dir);
        return 0;
    }
    while ((e = readdir(d)) != NULL) {
        size_t len;
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        char *body = check_read_file(path, &len);
        if (body == NULL) {
            FAIL("cannot read %s", path);
            continue;
        }
        fn(body, len, e->d_name, arg);
        free(body);
        n++;
    }
    closedir(d);
    return n;
}

/* The descriptors this process has open (the leak checks of tests that
 * open and close files, sockets and processes), or -1. */
static inline int
check_count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;

    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory's own descriptor */
}

static inline int
check_rm_entry(const char *path, const struct stat *sb, int flag,
               struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Removes the tree at path (a test's temporary directory). */
static inline void
check_rmtree(const char *path)
{
    (void)nftw(path, check_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

#endif /* WM_TESTS_CHECK_H */
