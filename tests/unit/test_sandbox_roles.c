/*
 * test_sandbox_roles.c — every role's seccomp filters, rule by rule, against
 * the pinned listing in tests/unit/sandbox-roles.expected.
 *
 * A role's filter (sandbox/role_*.c) is made of rule lists, the blocks
 * every host shares (sandbox/rules.c) and the runtime's own; what a host's
 * kernel enforces is the union of a filter's lists.  This test renders
 * that union for each role and phase (the role's filter, then its strict
 * one where it has one) as one line per rule, sorted, and compares it with
 * the listing: a rule moved between blocks changes nothing here, a rule
 * gained, lost or changed (its verdict, errno or conditions) fails with
 * the lines that differ.  A rule whose verdict is its filter's fallback
 * is left out, as seccomp.c leaves it out of the program; syscall names
 * are rendered as written (not resolved), so the listing is the same on
 * every architecture.  The rest of each descriptor is pinned with it: its
 * steps in order, its Landlock reads, its binary in its root.
 *
 * An intended change of a table: run `tests/unit/test_sandbox_roles
 * --print > tests/unit/sandbox-roles.expected` from the source tree (with
 * the build's binary) and review the diff with the change.
 */
#include "config.h"

#include "sandbox/sandbox.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"

#define LINE_MAX_LEN 200
#define LINES_MAX 2048

/* The roles, in the listing's order. */
static const char *const role_names[] = { "native", "python", "dotnet" };

struct listing {
    char *line[LINES_MAX]; /* "section\trule", heap copies */
    size_t n;
};

static void
listing_add(struct listing *l, const char *section, const char *rule)
{
    char buf[LINE_MAX_LEN * 2];

    if (l->n == LINES_MAX) {
        FAIL("more than %d lines", LINES_MAX);
        return;
    }
    snprintf(buf, sizeof buf, "%s\t%s", section, rule);
    l->line[l->n] = strdup(buf);
    if (l->line[l->n] == NULL)
        abort();
    l->n++;
}

static void
listing_free(struct listing *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->line[i]);
    l->n = 0;
}

static int
cmp_lines(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static const char *
errno_name(int e)
{
    static char num[16];

    switch (e) {
    case EACCES:
        return "EACCES";
    case ENOSYS:
        return "ENOSYS";
    case EPERM:
        return "EPERM";
    case ENOTTY:
        return "ENOTTY";
    default:
        snprintf(num, sizeof num, "%d", e);
        return num;
    }
}

static void
verdict_text(enum sandbox_verdict v, int err, char *buf, size_t len)
{
    switch (v) {
    case SANDBOX_ALLOW:
        snprintf(buf, len, "allow");
        break;
    case SANDBOX_ERRNO:
        snprintf(buf, len, "errno %s", errno_name(err));
        break;
    case SANDBOX_KILL:
    default:
        snprintf(buf, len, "kill");
        break;
    }
}

/* "openat errno EACCES if a2 & 0x443 == 0x0". */
static void
rule_text(const struct sandbox_rule *r, char *buf, size_t len)
{
    char v[32];
    size_t off;

    verdict_text(r->verdict, r->err, v, sizeof v);
    off = (size_t)snprintf(buf, len, "%s %s", r->syscall, v);
    for (unsigned i = 0; i < r->nconds && off < len; i++) {
        const struct sandbox_cond *c = &r->conds[i];
        char value[32];

        if (c->value_is_pid)
            snprintf(value, sizeof value, "self");
        else
            snprintf(value, sizeof value,
                     c->cmp == SANDBOX_CMP_MASKED_EQ ? "%#llx" : "%llu",
                     (unsigned long long)c->value);
        if (c->cmp == SANDBOX_CMP_MASKED_EQ)
            off += (size_t)snprintf(buf + off, len - off,
                                    "%s a%u & %#llx == %s", i ? " and" : " if",
                                    c->arg, (unsigned long long)c->mask, value);
        else
            off += (size_t)snprintf(
                buf + off, len - off, "%s a%u %s %s", i ? " and" : " if",
                c->arg, c->cmp == SANDBOX_CMP_NE ? "!=" : "==", value);
    }
}

/* f's lines under section: its fallback, then each rule that the program
 * keeps (not its fallback's verdict). */
static void
render_filter(struct listing *l, const char *section,
              const struct sandbox_filter *f)
{
    char v[32], line[LINE_MAX_LEN];

    verdict_text(f->fallback, f->fallback_err, v, sizeof v);
    snprintf(line, sizeof line, "fallback %s", v);
    listing_add(l, section, line);
    for (size_t i = 0; i < SANDBOX_FILTER_LISTS && f->lists[i]; i++) {
        for (const struct sandbox_rule *r = f->lists[i]; r->syscall; r++) {
            if (r->verdict == f->fallback &&
                (r->verdict != SANDBOX_ERRNO || r->err == f->fallback_err))
                continue;
            rule_text(r, line, sizeof line);
            listing_add(l, section, line);
        }
    }
}

/* role's descriptor but its filters: its steps in order (numbered, so
 * that sorting keeps the order), its Landlock reads, exe_in_root. */
static void
render_steps(struct listing *l, const struct sandbox_role *role)
{
    char section[96], line[LINE_MAX_LEN];

    snprintf(section, sizeof section, "%s steps", role->name);
    for (size_t i = 0; i < SANDBOX_ROLE_STEPS && role->steps[i]; i++) {
        snprintf(line, sizeof line, "step %02zu %s", i + 1,
                 sandbox_step_name(role->steps[i]));
        listing_add(l, section, line);
    }
    for (size_t i = 0; role->reads && role->reads[i]; i++) {
        snprintf(line, sizeof line, "reads %s", role->reads[i]);
        listing_add(l, section, line);
    }
    if (role->exe_in_root)
        listing_add(l, section, "exe_in_root");
}

/* Every role's descriptor, sorted within each section. */
static void
render_roles(struct listing *l)
{
    for (size_t i = 0; i < sizeof role_names / sizeof role_names[0]; i++) {
        const struct sandbox_role *role = sandbox_role_find(role_names[i]);
        char section[96];

        if (role == NULL) {
            FAIL("no role %s", role_names[i]);
            continue;
        }
        render_steps(l, role);
        snprintf(section, sizeof section, "%s filter: %s", role->name,
                 role->filter->name);
        render_filter(l, section, role->filter);
        if (role->strict) {
            snprintf(section, sizeof section, "%s strict: %s", role->name,
                     role->strict->name);
            render_filter(l, section, role->strict);
        }
    }
    qsort(l->line, l->n, sizeof l->line[0], cmp_lines);
}

/* The listing as the expected file writes it: "[section]" heads. */
static void
print_listing(const struct listing *l)
{
    char last[LINE_MAX_LEN] = "";

    printf("# Every host role's steps and resolved seccomp rules, one line a\n"
           "# rule, sorted: pinned by tests/unit/test_sandbox_roles.c (its\n"
           "# opening comment says how to regenerate this file).\n");
    for (size_t i = 0; i < l->n; i++) {
        const char *tab = strchr(l->line[i], '\t');
        size_t slen = (size_t)(tab - l->line[i]);

        if (strlen(last) != slen || strncmp(last, l->line[i], slen) != 0) {
            snprintf(last, sizeof last, "%.*s", (int)slen, l->line[i]);
            printf("\n[%s]\n", last);
        }
        printf("%s\n", tab + 1);
    }
}

/* The expected file's lines, "section\trule", sorted; 0, or -1. */
static int
read_expected(const char *path, struct listing *l)
{
    FILE *f = fopen(path, "r");
    char buf[LINE_MAX_LEN], section[LINE_MAX_LEN] = "";

    if (f == NULL)
        return -1;
    while (fgets(buf, sizeof buf, f)) {
        buf[strcspn(buf, "\n")] = '\0';
        if (buf[0] == '\0' || buf[0] == '#')
            continue;
        if (buf[0] == '[') {
            snprintf(section, sizeof section, "%.*s", (int)strlen(buf) - 2,
                     buf + 1);
            continue;
        }
        listing_add(l, section, buf);
    }
    fclose(f);
    qsort(l->line, l->n, sizeof l->line[0], cmp_lines);
    return 0;
}

static struct listing expected, actual;

static void
test_roles_match_the_listing(void)
{
    const char *srcdir = check_srcdir();
    char path[512];
    size_t i = 0, j = 0;

    REQUIRE(srcdir != NULL);
    snprintf(path, sizeof path, "%s/tests/unit/sandbox-roles.expected", srcdir);
    REQUIRE(read_expected(path, &expected) == 0);
    render_roles(&actual);
    REQUIRE(expected.n > 0);
    /* A merge of the two sorted lists: each line on one side only. */
    while (i < expected.n || j < actual.n) {
        int c = i == expected.n ? 1
                : j == actual.n ? -1
                                : strcmp(expected.line[i], actual.line[j]);
        if (c == 0) {
            i++, j++;
        } else if (c < 0) {
            FAIL("lost: %s", expected.line[i++]);
        } else {
            FAIL("gained: %s", actual.line[j++]);
        }
    }
    CHECK_EQ(expected.n, actual.n);
    listing_free(&expected);
    listing_free(&actual);
}

/* Shared blocks hold only what every role allows: each role's filters
 * have the channel's and the loop's calls (a role that lost one would
 * kill its host at its first frame). */
static void
test_every_role_has_the_channel(void)
{
    static const char *const need[] = {
        "read allow",    "write allow",      "recvmsg allow",
        "sendmsg allow", "epoll_wait allow", "epoll_ctl allow",
        "close allow",   "exit_group allow", NULL,
    };

    render_roles(&actual);
    for (size_t r = 0; r < sizeof role_names / sizeof role_names[0]; r++) {
        for (size_t k = 0; need[k]; k++) {
            bool found = false;
            for (size_t i = 0; i < actual.n && !found; i++) {
                const char *tab = strchr(actual.line[i], '\t');
                found = strncmp(actual.line[i], role_names[r],
                                strlen(role_names[r])) == 0 &&
                        strcmp(tab + 1, need[k]) == 0;
            }
            if (!found)
                FAIL("role %s lacks \"%s\"", role_names[r], need[k]);
        }
    }
    listing_free(&actual);
}

int
main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--print") == 0) {
        render_roles(&actual);
        print_listing(&actual);
        listing_free(&actual);
        return check_failures ? 1 : 0;
    }
    RUN(test_roles_match_the_listing);
    RUN(test_every_role_has_the_channel);
    return check_result();
}
