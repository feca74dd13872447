/*
 * fuzz_native_package.c — libFuzzer target over hosts/native/package.c,
 * the reader of untrusted worker packages: the input is given to
 * native_package_open() as a zip and to native_manifest_parse() as
 * manifest.json.  Besides the sanitizers' findings, it aborts when a
 * property breaks: an accepted package names a valid library and an entry
 * under runtimes/linux-x64/native/, and a refusal says why in a non-empty
 * message with no library left allocated.
 *
 * Run: tests/fuzz/fuzz_native_package -runs=100000 [corpus dir]
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hosts/native/package.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
broken(const char *what)
{
    fprintf(stderr, "fuzz_native_package: %s\n", what);
    abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct native_package p;
    struct native_manifest m;
    char err[512];

    err[0] = '\0';
    if (native_package_open(data, size, "linux-x64", NATIVE_OS_LINUX, &p, err,
                            sizeof err) == 0) {
        if (!native_library_name_valid(p.manifest.library) ||
            strncmp(p.entry, "runtimes/linux-x64/native/lib", 29) != 0)
            broken("an accepted package breaks the naming rule");
        native_package_free(&p);
    } else if (err[0] == '\0' || p.library != NULL) {
        broken("a refusal without a message, or with a library");
    }
    err[0] = '\0';
    if (native_manifest_parse(data, size, &m, err, sizeof err) == 0) {
        if (m.abi_version != 1 || !native_library_name_valid(m.library))
            broken("an accepted manifest breaks its rules");
    } else if (err[0] == '\0') {
        broken("a manifest refusal without a message");
    }
    return 0;
}
