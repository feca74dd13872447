/*
 * check.h — the assertion helpers of the C unit tests.
 *
 * A test program is a list of test functions run by RUN(); CHECK() records
 * a failure and carries on, so that one run reports every broken
 * expectation, while REQUIRE() stops the current test function when what
 * follows would read through a bad pointer.  main() returns check_result(),
 * which the automake harness reads as PASS (0) or FAIL (1).
 */
#ifndef WM_TESTS_CHECK_H
#define WM_TESTS_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned check_failures;
static unsigned check_count;
static const char *check_test = "";

#define CHECK(cond)                                                            \
    do {                                                                       \
        check_count++;                                                         \
        if (!(cond)) {                                                         \
            check_failures++;                                                  \
            fprintf(stderr, "%s:%d: %s: CHECK(%s) failed\n", __FILE__,         \
                    __LINE__, check_test, #cond);                              \
        }                                                                      \
    } while (0)

/* Like CHECK, but leaves the test function (which returns void). */
#define REQUIRE(cond)                                                          \
    do {                                                                       \
        check_count++;                                                         \
        if (!(cond)) {                                                         \
            check_failures++;                                                  \
            fprintf(stderr, "%s:%d: %s: REQUIRE(%s) failed\n", __FILE__,       \
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
            fprintf(                                                           \
                stderr, "%s:%d: %s: CHECK_EQ(%s, %s) failed: %lld != %lld\n",  \
                __FILE__, __LINE__, check_test, #a, #b, check_a_, check_b_);   \
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

#endif /* WM_TESTS_CHECK_H */
