/*
 * test_pyhost_allow.c — the Python import allowlist (hosts/python/allow.h):
 * the safe set, packages added, modules blocked, submodules and parent
 * packages, the switch, and bad entries refused with their name.
 */
#include "config.h"

#include "hosts/python/allow.h"
#include "tests/unit/check.h"

static void
test_default_set(void)
{
    struct pyhost_allow a;
    char err[256];

    REQUIRE(pyhost_allow_init(&a, NULL, NULL, NULL, NULL, err, sizeof err) ==
            0);
    CHECK(a.guard);
    CHECK(pyhost_allow_check(&a, "json"));
    CHECK(pyhost_allow_check(&a, "json.decoder"));
    CHECK(pyhost_allow_check(&a, "math"));
    CHECK(pyhost_allow_check(&a, "workmanager"));
    CHECK(pyhost_allow_check(&a, "collections.abc"));
    /* a package above an entry: only what it holds loaded */
    CHECK(pyhost_allow_check(&a, "urllib"));
    CHECK(pyhost_allow_check(&a, "urllib.parse"));
    CHECK(!pyhost_allow_check(&a, "urllib.request"));
    static const char *const never[] = {
        "os",         "posix",     "sys",       "socket", "ctypes",
        "subprocess", "importlib", "builtins",  "io",     "_posixsubprocess",
        "jsonx",      "signal",    "threading", ""
    };
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++)
        if (pyhost_allow_check(&a, never[i]))
            FAIL("%s is allowed", never[i]);
    /* not module names */
    CHECK(!pyhost_allow_check(&a, "json."));
    CHECK(!pyhost_allow_check(&a, ".json"));
    CHECK(!pyhost_allow_check(&a, "json..decoder"));
    pyhost_allow_free(&a);
}

static void
test_packages_and_blocks(void)
{
    struct pyhost_allow a;
    char err[256];

    REQUIRE(pyhost_allow_init(&a, "numpy, xml.etree  email", "random,json.tool",
                              "on", "socket", err, sizeof err) == 0);
    CHECK(pyhost_allow_check(&a, "numpy"));
    CHECK(pyhost_allow_check(&a, "numpy.linalg"));
    CHECK(pyhost_allow_check(&a, "xml.etree.ElementTree"));
    CHECK(pyhost_allow_check(&a, "xml"));
    CHECK(!pyhost_allow_check(&a, "xml.dom"));
    CHECK(pyhost_allow_check(&a, "email"));
    /* blocked: the entry and beneath it, even from the default set */
    CHECK(!pyhost_allow_check(&a, "random"));
    CHECK(pyhost_allow_check(&a, "json"));
    CHECK(!pyhost_allow_check(&a, "json.tool"));
    /* a preload is imported, not allowed */
    CHECK(!pyhost_allow_check(&a, "socket"));
    CHECK_EQ(a.npreload, 1u);
    for (size_t i = 0; i < a.nallowed; i++)
        CHECK(strcmp(a.allowed[i], "random") != 0);
    pyhost_allow_free(&a);

    /* blocking a package blocks what is under it */
    REQUIRE(pyhost_allow_init(&a, "numpy", "numpy", NULL, NULL, err,
                              sizeof err) == 0);
    CHECK(!pyhost_allow_check(&a, "numpy"));
    CHECK(!pyhost_allow_check(&a, "numpy.linalg"));
    pyhost_allow_free(&a);
}

static void
test_switch_off(void)
{
    static const char *const offs[] = { "off", "OFF", "0", "false", "no" };
    struct pyhost_allow a;
    char err[256];

    for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
        REQUIRE(pyhost_allow_init(&a, NULL, "json", offs[i], NULL, err,
                                  sizeof err) == 0);
        CHECK(!a.guard);
        CHECK(pyhost_allow_check(&a, "os"));
        CHECK(pyhost_allow_check(&a, "json"));
        pyhost_allow_free(&a);
    }
    REQUIRE(pyhost_allow_init(&a, NULL, NULL, "on", NULL, err, sizeof err) ==
            0);
    CHECK(a.guard);
    pyhost_allow_free(&a);
}

static void
test_bad_entries(void)
{
    struct pyhost_allow a;
    char err[256];

    CHECK(pyhost_allow_init(&a, "numpy, ../x", NULL, NULL, NULL, err,
                            sizeof err) < 0);
    CHECK(check_has_all(err, "python_allowed_packages", "'../x'",
                        "not a module name", NULL));
    pyhost_allow_free(&a);
    CHECK(pyhost_allow_init(&a, NULL, "1abc", NULL, NULL, err, sizeof err) < 0);
    CHECK(check_has_all(err, "python_blocked_modules", "'1abc'", NULL));
    pyhost_allow_free(&a);
    CHECK(pyhost_allow_init(&a, NULL, NULL, NULL, "os;rm", err, sizeof err) <
          0);
    CHECK(check_has_all(err, "python_preload", NULL));
    pyhost_allow_free(&a);
}

int
main(void)
{
    RUN(test_default_set);
    RUN(test_packages_and_blocks);
    RUN(test_switch_off);
    RUN(test_bad_entries);
    return check_result();
}
