/*
 * test_native_package.c — native worker packages (hosts/native/package.h):
 * the library naming rule for Linux, Windows and macOS, library name and
 * manifest validation, RID selection, and every refusal's message, over
 * zips built here with libzip.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zip.h>

#include "hosts/native/package.h"

#include "check.h"

static char root[] = "/tmp/test_native_package.XXXXXX";

struct member {
    const char *name;
    const char *data;
};

/* A zip of the members, read back into memory (*len bytes, malloc'd). */
static uint8_t *
make_zip(const struct member *m, size_t n, size_t *len)
{
    char path[300];
    int err = 0;
    static unsigned seq;

    snprintf(path, sizeof path, "%s/p%u.zip", root, ++seq);
    zip_t *za = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &err);
    if (za == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        zip_source_t *s =
            zip_source_buffer(za, m[i].data, strlen(m[i].data), 0);
        if (s == NULL || zip_file_add(za, m[i].name, s, ZIP_FL_OVERWRITE) < 0)
            return NULL;
    }
    if (zip_close(za) != 0)
        return NULL;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    uint8_t *buf = malloc(1 << 20);
    *len = buf ? fread(buf, 1, 1 << 20, f) : 0;
    fclose(f);
    unlink(path);
    return buf;
}

static void
test_filenames(void)
{
    char out[300], err[256];

    /* The spec's three platforms. */
    CHECK_EQ(native_library_filename("echo", NATIVE_OS_LINUX, out, sizeof out,
                                     err, sizeof err),
             0);
    CHECK(strcmp(out, "libecho.so") == 0);
    CHECK_EQ(native_library_filename("echo", NATIVE_OS_WINDOWS, out, sizeof out,
                                     err, sizeof err),
             0);
    CHECK(strcmp(out, "echo.dll") == 0);
    CHECK_EQ(native_library_filename("echo", NATIVE_OS_MACOS, out, sizeof out,
                                     err, sizeof err),
             0);
    CHECK(strcmp(out, "libecho.dylib") == 0);
    CHECK_EQ(native_library_filename("My_Lib-2.0", NATIVE_OS_LINUX, out,
                                     sizeof out, err, sizeof err),
             0);
    CHECK(strcmp(out, "libMy_Lib-2.0.so") == 0);
    /* Names outside [A-Za-z0-9_.-], empty, "..", too long. */
    static const char *const bad[] = { "",    "a/b", "../x", "a..b",
                                       "a b", "é",   "a\\b", "x;rm" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(!native_library_name_valid(bad[i]));
        CHECK_EQ(native_library_filename(bad[i], NATIVE_OS_LINUX, out,
                                         sizeof out, err, sizeof err),
                 -1);
        CHECK(check_has_all(err, "not a library name", NULL));
    }
    char longname[NATIVE_LIBRARY_MAX + 2];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    CHECK(!native_library_name_valid(longname));
    longname[NATIVE_LIBRARY_MAX] = '\0';
    CHECK(native_library_name_valid(longname));
}

static void
test_manifest(void)
{
    struct native_manifest m;
    char err[512];
    const char *j;

    j = "{\"abi_version\": 1, \"library\": \"echo\"}";
    REQUIRE(native_manifest_parse((const uint8_t *)j, strlen(j), &m, err,
                                  sizeof err) == 0);
    CHECK_EQ(m.abi_version, 1);
    CHECK(strcmp(m.library, "echo") == 0);
    CHECK(strcmp(m.entry_point, "Process") == 0);
    CHECK(strcmp(m.free_result, "FreeResult") == 0);
    j = "{\"abi_version\": 1, \"library\": \"e\", \"entry_point\": \"Run\", "
        "\"free_result\": \"Free_2\"}";
    REQUIRE(native_manifest_parse((const uint8_t *)j, strlen(j), &m, err,
                                  sizeof err) == 0);
    CHECK(strcmp(m.entry_point, "Run") == 0);
    CHECK(strcmp(m.free_result, "Free_2") == 0);

    struct {
        const char *json;
        const char *want;
    } bad[] = {
        { "{\"abi_version\": 2, \"library\": \"e\"}",
          "abi_version 2 is not supported; supported: 1" },
        { "{\"library\": \"e\"}", "abi_version (an integer) is required" },
        { "{\"abi_version\": \"1\", \"library\": \"e\"}",
          "abi_version (an integer) is required" },
        { "{\"abi_version\": 1}", "library (a string) is required" },
        { "{\"abi_version\": 1, \"library\": \"\"}", "library \"\" is not" },
        { "{\"abi_version\": 1, \"library\": \"../etc\"}",
          "library \"../etc\" is not a library name" },
        { "{\"abi_version\": 1, \"library\": \"e\", \"entry_point\": \"1x\"}",
          "entry_point \"1x\" is not a C symbol" },
        { "{\"abi_version\": 1, \"library\": \"e\", \"free_result\": 3}",
          "free_result must be a string" },
        { "[1]", "must hold a JSON object" },
        { "{", "manifest.json is not JSON" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ(native_manifest_parse((const uint8_t *)bad[i].json,
                                       strlen(bad[i].json), &m, err,
                                       sizeof err),
                 -1);
        CHECK(check_has_all(err, bad[i].want, NULL));
    }
}

static void
test_package(void)
{
    struct native_package p;
    char err[512];
    size_t len;
    static const char manifest[] =
        "{\"abi_version\": 1, \"library\": \"echo\"}";

    /* Two RIDs; this machine's is picked. */
    struct member good[] = {
        { "manifest.json", manifest },
        { "runtimes/linux-x64/native/libecho.so", "ELF-x64" },
        { "runtimes/linux-arm64/native/libecho.so", "ELF-arm64" },
        { "runtimes/win-x64/native/echo.dll", "MZ" },
    };
    uint8_t *zip = make_zip(good, 4, &len);
    REQUIRE(zip);
    REQUIRE(native_package_open(zip, len, "linux-arm64", NATIVE_OS_LINUX, &p,
                                err, sizeof err) == 0);
    CHECK(p.library_len == 9 && memcmp(p.library, "ELF-arm64", 9) == 0);
    CHECK(strcmp(p.entry, "runtimes/linux-arm64/native/libecho.so") == 0);
    native_package_free(&p);
    REQUIRE(native_package_open(zip, len, "linux-x64", NATIVE_OS_LINUX, &p, err,
                                sizeof err) == 0);
    CHECK(p.library_len == 7 && memcmp(p.library, "ELF-x64", 7) == 0);
    native_package_free(&p);
    REQUIRE(native_package_open(zip, len, "win-x64", NATIVE_OS_WINDOWS, &p, err,
                                sizeof err) == 0);
    CHECK(p.library_len == 2);
    native_package_free(&p);
    /* The running process's own RID. */
    const char *rid = native_rid();
    CHECK(rid != NULL);
    if (rid)
        CHECK(native_package_open(zip, len, rid, NATIVE_OS_LINUX, &p, err,
                                  sizeof err) == 0);
    native_package_free(&p);
    free(zip);

    /* No entry for this architecture: the RIDs it has, the supported. */
    struct member x64only[] = {
        { "manifest.json", manifest },
        { "runtimes/linux-x64/native/libecho.so", "ELF" },
    };
    zip = make_zip(x64only, 2, &len);
    REQUIRE(zip);
    CHECK_EQ(native_package_open(zip, len, "linux-arm64", NATIVE_OS_LINUX, &p,
                                 err, sizeof err),
             -1);
    CHECK(check_has_all(err, "not supported on this architecture",
                        "runtimes/linux-arm64/native/libecho.so",
                        "its RIDs: linux-x64",
                        "supported: linux-x64, linux-arm64", NULL));
    CHECK(p.library == NULL);
    free(zip);

    /* No manifest.json at the root (one deeper does not count). */
    struct member nomanifest[] = {
        { "sub/manifest.json", manifest },
        { "runtimes/linux-x64/native/libecho.so", "ELF" },
    };
    zip = make_zip(nomanifest, 2, &len);
    REQUIRE(zip);
    CHECK_EQ(native_package_open(zip, len, "linux-x64", NATIVE_OS_LINUX, &p,
                                 err, sizeof err),
             -1);
    CHECK(check_has_all(err, "manifest.json is missing at the root", NULL));
    free(zip);

    /* A bad manifest inside a package. */
    struct member badabi[] = {
        { "manifest.json", "{\"abi_version\": 7, \"library\": \"echo\"}" },
    };
    zip = make_zip(badabi, 1, &len);
    REQUIRE(zip);
    CHECK_EQ(native_package_open(zip, len, "linux-x64", NATIVE_OS_LINUX, &p,
                                 err, sizeof err),
             -1);
    CHECK(check_has_all(err, "abi_version 7", "supported: 1", NULL));
    free(zip);

    /* Not a zip at all; no RID. */
    static const uint8_t junk[] = "this is no zip archive";
    CHECK_EQ(native_package_open(junk, sizeof junk, "linux-x64",
                                 NATIVE_OS_LINUX, &p, err, sizeof err),
             -1);
    CHECK(check_has_all(err, "not a zip archive", NULL));
    CHECK_EQ(native_package_open(junk, sizeof junk, NULL, NATIVE_OS_LINUX, &p,
                                 err, sizeof err),
             -1);
    CHECK(check_has_all(err, "supported: linux-x64, linux-arm64", NULL));
}

int
main(void)
{
    if (mkdtemp(root) == NULL) {
        perror("mkdtemp");
        return 99;
    }
    RUN(test_filenames);
    RUN(test_manifest);
    RUN(test_package);
    rmdir(root);
    return check_result();
}
