/*
 * test_engines.c — unit tests of master/core/engines.c: valid descriptors and
 * lookup by each MIME type, every kind of malformed descriptor stopping the
 * load at its file:line, engines made unavailable (missing or
 * non-executable host, another protocol, a failed probe) with a reason
 * naming what is missing and where it was looked for, the probe's `$VAR`,
 * `@cmd` and version choice, and the engines.d files shipped in the tree.
 *
 * Runs in a fresh temporary directory; prints each failed check; the exit
 * status is the verdict.
 */
#include "config.h"

#include "master/core/engines.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/unit/check.h"

static char tmpdir[256];

/* <tmpdir>/<rel>, in one of a few rotating static buffers. */
static const char *at(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static const char *
at(const char *fmt, ...)
{
    static char bufs[8][700];
    static int next;
    char rel[400];
    va_list ap;
    char *b = bufs[next++ % 8];

    va_start(ap, fmt);
    vsnprintf(rel, sizeof(rel), fmt, ap);
    va_end(ap);
    snprintf(b, sizeof(bufs[0]), "%s/%s", tmpdir, rel);
    return b;
}

static void
mkdirs(const char *path)
{
    char p[512];

    snprintf(p, sizeof(p), "%s", path);
    for (char *s = p + 1; *s != '\0'; s++)
        if (*s == '/') {
            *s = '\0';
            mkdir(p, 0755);
            *s = '/';
        }
    if (mkdir(p, 0755) < 0 && errno != EEXIST) {
        perror(p);
        exit(2);
    }
}

static void
write_file(const char *path, mode_t mode, const char *text)
{
    FILE *f = fopen(path, "w");

    if (f == NULL) {
        perror(path);
        exit(2);
    }
    fputs(text, f);
    fclose(f);
    chmod(path, mode);
}

static void
rm_rf(const char *path)
{
    char cmd[600];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", path);
}

static const char *const good_native = "# a comment\n"
                                       "name = native\n"
                                       "description = Native workers\n"
                                       "language = C\n"
                                       "mime_type = application/x-native-dll\n"
                                       "host = wm-host-native\n"
                                       "spawn = exec\n"
                                       "protocol = 1\n";

static const char *const good_dotnet =
    "name = dotnet\n"
    "mime_type = application/x-dotnet-dll, text/x-csharp\n"
    "host = wm-host-dotnet\n"
    "spawn = exec\n"
    "protocol = 1\n";

static const char *const good_python = "name = python\n"
                                       "mime_type = text/x-python\n"
                                       "mime_type = application/x-python-code\n"
                                       "host = wm-host-python\n"
                                       "spawn = zygote\n"
                                       "concurrency = processes\n"
                                       "warm = 2\n"
                                       "protocol = 1\n";

static void
test_valid(void)
{
    struct engines list;
    const struct engines_entry *e;
    char err[1024], dir[700], lx[700];

    snprintf(dir, sizeof(dir), "%s", at("valid/engines.d"));
    snprintf(lx, sizeof(lx), "%s", at("valid/libexec"));

    mkdirs(dir);
    mkdirs(lx);
    write_file(at("valid/engines.d/native.engine"), 0644, good_native);
    write_file(at("valid/engines.d/dotnet.engine"), 0644, good_dotnet);
    write_file(at("valid/engines.d/python.engine"), 0644, good_python);
    /* ignored: hidden, other suffixes */
    write_file(at("valid/engines.d/.hidden.engine"), 0644, "garbage\n");
    write_file(at("valid/engines.d/old.engine.dpkg-old"), 0644, "garbage\n");
    write_file(at("valid/engines.d/README"), 0644, "garbage\n");
    /* hosts: native present, dotnet not executable, python missing */
    write_file(at("valid/libexec/wm-host-native"), 0755, "#!/bin/sh\n");
    write_file(at("valid/libexec/wm-host-dotnet"), 0644, "#!/bin/sh\n");

    if (engines_load(dir, lx, &list, err, sizeof(err)) != 0) {
        FAIL("load: %s", err);
        return;
    }
    CHECK(list.n == 3);
    /* sorted by file name */
    CHECK(list.n == 3 && strcmp(list.v[0].name, "dotnet") == 0 &&
          strcmp(list.v[1].name, "native") == 0 &&
          strcmp(list.v[2].name, "python") == 0);

    e = engines_find_mime(&list, "application/x-native-dll");
    CHECK(e != NULL && strcmp(e->name, "native") == 0);
    if (e != NULL) {
        CHECK(e->available);
        CHECK(e->reason == NULL);
        CHECK(strcmp(e->host_path, at("valid/libexec/wm-host-native")) == 0);
        CHECK(e->spawn == ENGINES_SPAWN_EXEC);
        /* concurrency defaults to threads */
        CHECK(e->concurrency == ENGINES_CONCURRENCY_THREADS);
        CHECK(e->protocol == 1);
        CHECK(strcmp(e->language, "C") == 0);
        CHECK(strcmp(e->description, "Native workers") == 0);
        CHECK(check_has_all(e->file, "valid/engines.d/native.engine", NULL));
    }

    e = engines_find_mime(&list, "application/x-dotnet-dll");
    CHECK(e != NULL && strcmp(e->name, "dotnet") == 0);
    CHECK(engines_find_mime(&list, "text/x-csharp") == e);
    /* case-insensitive, parameters ignored */
    CHECK(engines_find_mime(&list, " Text/X-CSharp ; charset=utf-8") == e);
    if (e != NULL) {
        CHECK(!e->available);
        CHECK(check_has_all(e->reason, "host binary",
                            at("valid/libexec/wm-host-dotnet"),
                            "is not executable", NULL));
        /* language defaults to the name; no pool by default */
        CHECK(strcmp(e->language, "dotnet") == 0);
        CHECK(e->warm == 0);
        CHECK(e->nmime_types == 2);
    }

    e = engines_find_mime(&list, "text/x-python");
    CHECK(e != NULL && strcmp(e->name, "python") == 0);
    CHECK(engines_find_mime(&list, "application/x-python-code") == e);
    if (e != NULL) {
        char want[800];

        CHECK(!e->available);
        CHECK(e->spawn == ENGINES_SPAWN_ZYGOTE);
        CHECK(e->concurrency == ENGINES_CONCURRENCY_PROCESSES);
        CHECK(e->warm == 2);
        snprintf(want, sizeof(want),
                 "host binary wm-host-python not found in %s", lx);
        CHECK(e->reason != NULL && strcmp(e->reason, want) == 0);
    }

    CHECK(engines_find_mime(&list, "text/x-ruby") == NULL);
    CHECK(engines_find_mime(&list, "text/x-python-extra") == NULL);
    CHECK(engines_find_mime(&list, "") == NULL);
    CHECK(engines_find_name(&list, "python") == e);
    CHECK(engines_find_name(&list, "ruby") == NULL);
    CHECK(strcmp(engines_spawn_name(ENGINES_SPAWN_EXEC), "exec") == 0);
    CHECK(strcmp(engines_concurrency_name(ENGINES_CONCURRENCY_PROCESSES),
                 "processes") == 0);
    CHECK(strcmp(engines_concurrency_name(ENGINES_CONCURRENCY_THREADS),
                 "threads") == 0);
    CHECK(!e->in_process);

    /* a host installed later: engines_probe() sees it */
    write_file(at("valid/libexec/wm-host-python"), 0755, "#!/bin/sh\n");
    engines_probe(&list);
    e = engines_find_name(&list, "python");
    CHECK(e != NULL && e->available && e->reason == NULL);

    engines_log(&list);
    engines_free(&list);
    engines_free(&list); /* idempotent */
    CHECK(list.n == 0 && list.v == NULL);
}

/* One malformed descriptor: the load fails naming file:line and `what`. */
static void
bad(const char *name, const char *text, const char *line, const char *what)
{
    struct engines list;
    char err[1024], want[800], dir[700], file[700];

    snprintf(dir, sizeof(dir), "%s", at("bad"));
    snprintf(file, sizeof(file), "%s", at("bad/%s", name));

    rm_rf(dir);
    mkdirs(dir);
    write_file(file, 0644, text);
    snprintf(want, sizeof(want), "%s%s", file, line);
    if (engines_load(dir, "/nonexistent", &list, err, sizeof(err)) == 0) {
        FAIL("%s was accepted:\n%s", name, text);
        engines_free(&list);
        return;
    }
    CHECK(list.n == 0 && list.v == NULL);
    if (!check_has_all(err, want, what, NULL))
        FAIL("the message for %s lacks what is listed above", name);
}

static void
test_malformed(void)
{
    bad("a.engine", "name = a\nmime_type = a/b\nbogus = 1\n",
        ":3:", "unknown key 'bogus'");
    bad("a.engine", "name = a\nspawn exec\n", ":2:", "expected key = value");
    bad("a.engine", "name = a\nname = b\n",
        ":2:", "name is already set at line 1");
    bad("a.engine", "name = A B\n", ":1:", "name 'A B'");
    bad("a.engine", "name = a\nmime_type = text\n",
        ":2:", "'text' is not a MIME type");
    bad("a.engine", "name = a\nmime_type = a/b, a/b\n",
        ":2:", "mime_type a/b given twice");
    bad("a.engine", "name = a\nspawn = fork\n",
        ":2:", "'fork' is not one of: zygote, exec");
    bad("a.engine", "name = a\nconcurrency = fibers\n",
        ":2:", "concurrency 'fibers' is not one of: threads, processes");
    bad("a.engine", "name = a\nrole = ../x\n", ":2:", "role '../x'");
    bad("a.engine", "name = a\nin_process = maybe\n",
        ":2:", "in_process 'maybe' is not yes or no");
    bad("a.engine", "name = a\nwarm = 17\n",
        ":2:", "warm '17' is not a number of hosts (0 to 16)");
    bad("a.engine", "name = a\nwarm = -1\n",
        ":2:", "warm '-1' is not a number of hosts");
    bad("a.engine", "name = a\nwarm = one\n",
        ":2:", "warm 'one' is not a number of hosts");
    bad("a.engine", "name = a\nwarm = 1\nwarm = 1\n",
        ":3:", "warm is already set at line 2");
    bad("a.engine", "name = a\nprotocol = one\n",
        ":2:", "not a version number");
    bad("a.engine", "name = a\nhost = bin/wm-host\n",
        ":2:", "a file name (looked up in libexec_dir) or an absolute path");
    bad("a.engine", "name = a\nprobe_path = relative/dir\n",
        ":2:", "must start with");
    bad("a.engine", "name = a\nmime_type = a/b\nhost = h\nprotocol = 1\n", ":",
        "missing key spawn");
    bad("a.engine", "mime_type = a/b\nhost = h\nspawn = exec\nprotocol = 1\n",
        ":", "missing key name");
    bad("a.engine", "name = a\nmime_type = a/b\nspawn = exec\nprotocol = 1\n",
        ":", "missing key host");
    bad("a.engine",
        "name = a\nmime_type = a/b\nhost = h\nspawn = exec\nprotocol = 1\n"
        "probe_path = /x\n",
        ":6:", "probe_path without probe");
    bad("a.engine", "name = a\ndescription = \"unterminated\n",
        ":2:", "unterminated quote");
}

/* Two files claiming one name or one MIME type. */
static void
test_conflicts(void)
{
    struct engines list;
    char err[1024], dir[700];

    snprintf(dir, sizeof(dir), "%s", at("conflict"));

    mkdirs(dir);
    write_file(at("conflict/a.engine"), 0644, good_native);
    write_file(at("conflict/b.engine"), 0644,
               "name = other\nspawn = exec\nhost = h\nprotocol = 1\n"
               "mime_type = text/plain, APPLICATION/X-NATIVE-DLL\n");
    CHECK(engines_load(dir, "/nonexistent", &list, err, sizeof(err)) == -1);
    CHECK(
        check_has_all(err, "conflict/b.engine:5:",
                      "mime_type APPLICATION/X-NATIVE-DLL is already served by "
                      "engine native",
                      "conflict/a.engine", NULL));
    write_file(at("conflict/b.engine"), 0644, "spawn = exec\nname = native\n");
    CHECK(engines_load(dir, "/nonexistent", &list, err, sizeof(err)) == -1);
    CHECK(check_has_all(
        err, "conflict/b.engine:2:", "engine name native is already used by",
        "a.engine", NULL));
    rm_rf(dir);
}

static void
test_dirs(void)
{
    struct engines list;
    char err[1024];

    CHECK(engines_load(at("nowhere"), "/x", &list, err, sizeof(err)) == -1);
    CHECK(check_has_all(err, "engines_dir", at("nowhere"),
                        "No such file or directory", NULL));
    mkdirs(at("empty"));
    CHECK(engines_load(at("empty"), "/x", &list, err, sizeof(err)) == 0);
    CHECK(list.n == 0);
    CHECK(engines_find_mime(&list, "text/x-python") == NULL);
    engines_free(&list);
}

static void
test_unavailable(void)
{
    struct engines list;
    const struct engines_entry *e;
    char err[1024], dir[700];

    snprintf(dir, sizeof(dir), "%s", at("unavail"));

    mkdirs(dir);
    /* another protocol version */
    write_file(at("unavail/p2.engine"), 0644,
               "name = p2\nmime_type = x/p2\nhost = /bin/sh\nspawn = exec\n"
               "protocol = 2\n");
    /* an absolute host that is missing */
    write_file(at("unavail/abs.engine"), 0644,
               "name = abs\nmime_type = x/abs\nhost = /nonexistent/wm-host\n"
               "spawn = exec\nprotocol = 1\n");
    /* an engine whose workers may run in the master */
    write_file(at("unavail/inproc.engine"), 0644,
               "name = inproc\nmime_type = x/inproc\nhost = /bin/sh\n"
               "spawn = exec\nin_process = yes\nprotocol = 1\n");
    /* a sandbox role this build has not */
    write_file(at("unavail/role.engine"), 0644,
               "name = role\nmime_type = x/role\nhost = /bin/sh\n"
               "spawn = exec\nrole = cobol\nprotocol = 1\n");
    if (engines_load(dir, "/nonexistent", &list, err, sizeof(err)) != 0) {
        FAIL("load: %s", err);
        return;
    }
    e = engines_find_name(&list, "p2");
    CHECK(e != NULL && !e->available &&
          check_has_all(e->reason, "frame protocol 2", "this master speaks 1",
                        NULL));
    e = engines_find_name(&list, "abs");
    CHECK(e != NULL && !e->available && e->reason != NULL &&
          strcmp(e->reason, "host binary /nonexistent/wm-host not found") == 0);
    e = engines_find_name(&list, "inproc");
    CHECK(e != NULL && e->available && e->in_process &&
          strcmp(e->role, "native") == 0);
    e = engines_find_name(&list, "role");
    CHECK(e != NULL && !e->available &&
          check_has_all(e->reason, "no sandbox role 'cobol'", "native", NULL));
    engines_log(&list);
    engines_free(&list);
    rm_rf(dir);
}

static void
test_probe(void)
{
    struct engines list;
    const struct engines_entry *e;
    char err[1024], dir[700], *old_path = NULL;

    snprintf(dir, sizeof(dir), "%s", at("probe/engines.d"));

    if (getenv("PATH") != NULL)
        old_path = strdup(getenv("PATH"));
    mkdirs(dir);
    mkdirs(at("probe/root/host/fxr/6.0.1"));
    mkdirs(at("probe/root/host/fxr/8.0.0"));
    mkdirs(at("probe/root/host/fxr/10.0.2"));
    mkdirs(at("probe/root/host/fxr/9.0.0"));
    write_file(at("probe/root/host/fxr/6.0.1/libfx.so"), 0644, "");
    write_file(at("probe/root/host/fxr/8.0.0/libfx.so"), 0644, "");
    write_file(at("probe/root/host/fxr/10.0.2/libfx.so"), 0644, "");
    /* 9.0.0 has no library: not a match */
    /* a `dotnet`-like command on PATH through a symlink */
    mkdirs(at("probe/bin"));
    mkdirs(at("probe/real/host/fxr/7.0.0"));
    write_file(at("probe/real/host/fxr/7.0.0/libfx.so"), 0644, "");
    write_file(at("probe/real/fakecmd"), 0755, "#!/bin/sh\n");
    CHECK(symlink(at("probe/real/fakecmd"), at("probe/bin/fakecmd")) == 0);
    write_file(at("probe/engines.d/rt.engine"), 0644,
               "name = rt\nmime_type = x/rt\nhost = /bin/sh\nspawn = exec\n"
               "protocol = 1\nprobe = libfx.so\nprobe_what = the runtime\n"
               "probe_path = ${WM_TEST_ROOT}/host/fxr/[0-9]*\n"
               "probe_path = /nonexistent/fxr/*, @fakecmd/host/fxr/[0-9]*\n");
    write_file(at("probe/engines.d/cmd.engine"), 0644,
               "name = cmd\nmime_type = x/cmd\nhost = /bin/sh\nspawn = exec\n"
               "protocol = 1\nprobe = fakecmd\n");
    write_file(at("probe/engines.d/abs.engine"), 0644,
               "name = abs\nmime_type = x/abs\nhost = /bin/sh\nspawn = exec\n"
               "protocol = 1\nprobe = /nonexistent/lib*.so\n");

    /* $VAR set: the highest version under it */
    setenv("WM_TEST_ROOT", at("probe/root"), 1);
    setenv("PATH", at("probe/bin"), 1);
    if (engines_load(dir, "/nonexistent", &list, err, sizeof(err)) != 0) {
        FAIL("load: %s", err);
        goto out;
    }
    e = engines_find_name(&list, "rt");
    CHECK(e != NULL && e->available && e->probe_found != NULL &&
          strcmp(e->probe_found, at("probe/root/host/fxr/10.0.2/libfx.so")) ==
              0);
    e = engines_find_name(&list, "cmd");
    CHECK(e != NULL && e->available && e->probe_found != NULL &&
          strcmp(e->probe_found, at("probe/bin/fakecmd")) == 0);
    e = engines_find_name(&list, "abs");
    CHECK(e != NULL && !e->available &&
          check_has_all(e->reason,
                        "the engine's runtime (/nonexistent/lib*.so) "
                        "not found; searched /nonexistent/lib*.so",
                        NULL));

    /* $VAR unset: the entry is skipped, @cmd leads to the real directory */
    unsetenv("WM_TEST_ROOT");
    engines_probe(&list);
    e = engines_find_name(&list, "rt");
    CHECK(e != NULL && e->available && e->probe_found != NULL &&
          strcmp(e->probe_found, at("probe/real/host/fxr/7.0.0/libfx.so")) ==
              0);

    /* nothing found: every place searched is named */
    setenv("PATH", "/nonexistent", 1);
    engines_probe(&list);
    e = engines_find_name(&list, "rt");
    CHECK(e != NULL && !e->available && e->probe_found == NULL);
    if (e != NULL)
        CHECK(check_has_all(
            e->reason,
            "the runtime (libfx.so) not found; searched "
            "${WM_TEST_ROOT}/host/fxr/[0-9]* (WM_TEST_ROOT is not "
            "set), /nonexistent/fxr/*, @fakecmd/host/fxr/[0-9]* "
            "(fakecmd is not on PATH)",
            NULL));
    e = engines_find_name(&list, "cmd");
    CHECK(e != NULL && !e->available &&
          check_has_all(e->reason,
                        "(fakecmd) not found; searched PATH=/nonexistent",
                        NULL));
    engines_log(&list);
    engines_free(&list);
out:
    if (old_path != NULL)
        setenv("PATH", old_path, 1);
    else
        unsetenv("PATH");
    free(old_path);
}

/* The descriptors of the tree: three engines, every MIME type of DESIGN
 * §5, and (no host being installed in an empty libexec_dir) the reason
 * that names the missing binary. */
static void
test_shipped(void)
{
    static const struct {
        const char *mime, *engine, *host;
    } want[] = {
        { "application/x-native-dll", "native", "wm-host-native" },
        { "text/x-python", "python", "wm-host-python" },
        { "application/x-dotnet-dll", "dotnet", "wm-host-dotnet" },
        { "text/x-csharp", "dotnet", "wm-host-dotnet" },
    };
    const char *srcdir;
    char dir[600], err[1024], lx[700];
    struct engines list;

    snprintf(lx, sizeof(lx), "%s", at("shipped-libexec"));

    srcdir = check_srcdir();
    if (srcdir == NULL) {
        FAIL("neither WM_TOP_SRCDIR nor srcdir: cannot find "
             "engines.d");
        return;
    }
    snprintf(dir, sizeof(dir), "%s/engines.d", srcdir);
    mkdirs(lx);
    if (engines_load(dir, lx, &list, err, sizeof(err)) != 0) {
        FAIL("load: %s", err);
        return;
    }
    CHECK(list.n == 3);
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const struct engines_entry *e = engines_find_mime(&list, want[i].mime);
        char reason[800];

        if (e == NULL) {
            FAIL("no engine serves %s", want[i].mime);
            continue;
        }
        CHECK(strcmp(e->name, want[i].engine) == 0);
        CHECK(strcmp(e->host, want[i].host) == 0);
        CHECK(e->protocol == 1);
        CHECK(!e->available);
        snprintf(reason, sizeof(reason), "host binary %s not found in %s",
                 want[i].host, lx);
        CHECK(check_has_all(e->reason, reason, NULL));
    }
    {
        const struct engines_entry *py = engines_find_name(&list, "python");
        const struct engines_entry *dn = engines_find_name(&list, "dotnet");

        /* forked from its zygote (sandbox/zygote.h), confined as python;
         * a worker's concurrency is its number of hosts (DESIGN §2) */
        CHECK(py != NULL && py->spawn == ENGINES_SPAWN_ZYGOTE &&
              strcmp(py->role, "python") == 0 &&
              py->concurrency == ENGINES_CONCURRENCY_PROCESSES);
        /* one pool host kept warm for its next worker (supervise.h) */
        CHECK(py != NULL && py->warm == 1);
        CHECK(dn != NULL && dn->warm == 0);
        CHECK(dn != NULL && dn->concurrency == ENGINES_CONCURRENCY_PROCESSES);
        CHECK(dn != NULL && dn->spawn == ENGINES_SPAWN_EXEC &&
              dn->probe != NULL && strcmp(dn->probe, "libhostfxr.so") == 0);
        /* Whether .NET is installed here or not, the outcome is explicit. */
        if (dn != NULL && dn->probe_found == NULL)
            CHECK(check_has_all(dn->reason,
                                "the .NET runtime (libhostfxr.so) not found; "
                                "searched $DOTNET_ROOT/host/fxr/[0-9]*",
                                "/usr/share/dotnet/host/fxr/[0-9]*",
                                "/usr/lib/dotnet/host/fxr/[0-9]*",
                                "@dotnet/host/fxr/[0-9]*", NULL));
    }
    engines_log(&list);
    engines_free(&list);
}

int
main(void)
{
    const char *base = getenv("TMPDIR");

    snprintf(tmpdir, sizeof(tmpdir), "%s/test_engines.XXXXXX",
             base != NULL && base[0] != '\0' ? base : "/tmp");
    if (mkdtemp(tmpdir) == NULL) {
        perror("mkdtemp");
        return 2;
    }
    RUN(test_valid);
    RUN(test_malformed);
    RUN(test_conflicts);
    RUN(test_dirs);
    RUN(test_unavailable);
    RUN(test_probe);
    RUN(test_shipped);
    rm_rf(tmpdir);
    return check_result();
}
