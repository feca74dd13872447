/*
 * test_sandbox_creds.c — a host's credentials dropped, and this process's
 * capabilities reported (sandbox/creds.c, libcap), against the kernel's
 * own account of them in /proc/self/status.
 *
 * The drop is tried in forked children as root (it changes the process
 * for good; a skip without root, a failure then with SANDBOX_MUST_WORK=1):
 * with an ambient and an inheritable capability raised first, so that
 * every set has something to lose; with one supplementary group (the
 * master's drop); and refused once the child has lost its root.  Each
 * child exits with the number of the first check that failed.
 */
#include "config.h"

#include "sandbox/creds.h"
#include "sandbox/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/unit/check.h"

/* A uid and gid no account has (the daemon's range is configured). */
#define NOBODY_ID 3999990

/* /proc/self/status, read whole (check.h's static buffer), or NULL. */
static const char *
status(void)
{
    return check_slurp("/proc/self/status");
}

/* The first number of the status line name ("CapEff", "Uid") in base
 * (the Cap* masks are hex), or UINT64_MAX without that line. */
static uint64_t
field(const char *st, const char *name, int base)
{
    char key[16];
    const char *p;

    snprintf(key, sizeof key, "\n%s:\t", name);
    p = st ? strstr(st, key) : NULL;
    return p ? strtoull(p + strlen(key), NULL, base) : UINT64_MAX;
}

static uint64_t
cap_line(const char *st, const char *name)
{
    return field(st, name, 16);
}

/* caps's flag set as a mask, each capability this kernel has. */
static uint64_t
mask_of(cap_t caps, cap_flag_t flag)
{
    uint64_t m = 0;

    for (cap_value_t c = 0; c < cap_max_bits() && c < 64; c++) {
        cap_flag_value_t v = CAP_CLEAR;
        if (cap_get_flag(caps, c, flag, &v) == 0 && v == CAP_SET)
            m |= 1ull << c;
    }
    return m;
}

static bool
must_work(void)
{
    const char *must = getenv("SANDBOX_MUST_WORK");
    return must && strcmp(must, "1") == 0;
}

/* ---- the report ---------------------------------------------------------- */

static void
test_caps_text_is_the_kernels(void)
{
    char text[SANDBOX_CAPS_TEXT];
    const char *st = status();
    uint64_t all =
        cap_max_bits() >= 64 ? UINT64_MAX : (1ull << cap_max_bits()) - 1;

    REQUIRE(st != NULL);
    sandbox_creds_caps(text, sizeof text);
    cap_t caps = cap_from_text(text);
    REQUIRE(caps != NULL);
    CHECK_EQ(mask_of(caps, CAP_EFFECTIVE), cap_line(st, "CapEff"));
    CHECK_EQ(mask_of(caps, CAP_PERMITTED), cap_line(st, "CapPrm"));
    CHECK_EQ(mask_of(caps, CAP_INHERITABLE), cap_line(st, "CapInh"));
    cap_free(caps);
    /* The two shapes an operator meets most, written as getpcaps does. */
    if (cap_line(st, "CapEff") == all && cap_line(st, "CapPrm") == all &&
        cap_line(st, "CapInh") == 0)
        CHECK(strcmp(text, "=ep") == 0);
    if (cap_line(st, "CapEff") == 0 && cap_line(st, "CapPrm") == 0 &&
        cap_line(st, "CapInh") == 0)
        CHECK(strcmp(text, "=") == 0);
    /* Truncated, still a string. */
    sandbox_creds_caps(text, 2);
    CHECK_EQ(strlen(text), 1);
    printf("# capabilities %s\n", sandbox_creds_caps(text, sizeof text));
}

/* libcap's count of capabilities is the kernel's. */
static void
test_max_bits_is_cap_last_cap(void)
{
    const char *last = check_slurp("/proc/sys/kernel/cap_last_cap");

    REQUIRE(last != NULL && last[0] != '\0');
    CHECK_EQ(cap_max_bits(), atoi(last) + 1);
}

/* ---- the drop ------------------------------------------------------------ */

/* Raises CAP_NET_BIND_SERVICE into the inheritable and ambient sets. */
static int
raise_ambient(void)
{
    const cap_value_t nbs[] = { CAP_NET_BIND_SERVICE };
    cap_t caps = cap_get_proc();
    int rc = caps == NULL ||
                     cap_set_flag(caps, CAP_INHERITABLE, 1, nbs, CAP_SET) ||
                     cap_set_proc(caps) ||
                     cap_set_ambient(CAP_NET_BIND_SERVICE, CAP_SET)
                 ? -1
                 : 0;

    cap_free(caps);
    return rc;
}

static void
child_drop(bool groups)
{
    const gid_t group = NOBODY_ID + 1;
    const char *st;

    if (raise_ambient() < 0)
        _exit(2);
    st = status();
    if (cap_line(st, "CapAmb") == 0 || cap_line(st, "CapInh") == 0)
        _exit(3);
    if ((groups ? sandbox_creds_drop_groups(NOBODY_ID, NOBODY_ID, &group, 1)
                : sandbox_creds_drop(NOBODY_ID, NOBODY_ID)) != 0)
        _exit(4);
    st = status();
    static const char *const sets[] = { "CapInh", "CapPrm", "CapEff", "CapBnd",
                                        "CapAmb" };
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
        if (cap_line(st, sets[i]) != 0)
            _exit(10 + (int)i);
    if (field(st, "Uid", 10) != NOBODY_ID || field(st, "Gid", 10) != NOBODY_ID)
        _exit(20);
    uid_t r, e, s;
    if (getresuid(&r, &e, &s) != 0 || r != NOBODY_ID || e != NOBODY_ID ||
        s != NOBODY_ID)
        _exit(21);
    gid_t list[4];
    int n = getgroups(4, list);
    if (groups ? n != 1 || list[0] != group : n != 0)
        _exit(22);
    /* For good: root is not to be had back. */
    if (setuid(0) == 0 || seteuid(0) == 0)
        _exit(23);
    _exit(0);
}

static void
child_refused(void)
{
    if (setresuid(NOBODY_ID, NOBODY_ID, NOBODY_ID) != 0)
        _exit(2);
    errno = 0;
    if (sandbox_creds_drop(NOBODY_ID + 2, NOBODY_ID + 2) != -1)
        _exit(3);
    _exit(errno == EPERM ? 0 : 4);
}

static int
run_child(void (*body)(bool), bool arg)
{
    int st = -1;
    pid_t pid;

    fflush(NULL);
    pid = fork();
    if (pid == 0)
        body(arg);
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}

static void
refused_body(bool unused)
{
    (void)unused;
    child_refused();
}

static void
test_drop_empties_every_set(void)
{
    if (geteuid() != 0) {
        if (must_work())
            FAIL("SANDBOX_MUST_WORK=1, but not root: the drop is untried");
        else
            printf("# SKIP not root: the drop needs it\n");
        return;
    }
    CHECK_EQ(run_child(child_drop, false), 0);
    CHECK_EQ(run_child(child_drop, true), 0);
    CHECK_EQ(run_child(refused_body, false), 0);
}

int
main(void)
{
    RUN(test_max_bits_is_cap_last_cap);
    RUN(test_caps_text_is_the_kernels);
    RUN(test_drop_empties_every_set);
    return check_result();
}
