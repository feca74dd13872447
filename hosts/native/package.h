/*
 * package.h — a native worker package, as wm-host-native validates it
 * inside its sandbox (DESIGN §4; the master parses no package format).
 *
 * A package is a zip (a .nupkg is one) with, at its root, manifest.json:
 *
 *   {"abi_version": 1, "library": "echo",
 *    "entry_point": "Process", "free_result": "FreeResult"}
 *
 * abi_version must be in the supported set (1); library matches
 * [A-Za-z0-9_.-]{1,128} without ".."; entry_point and free_result are C
 * identifiers (defaults Process and FreeResult).  The library itself is
 * runtimes/<rid>/native/<file>, where <rid> is the running architecture's
 * (linux-x64, linux-arm64) and <file> the platform's name for the library
 * (lib<library>.so on Linux; <library>.dll and lib<library>.dylib are what
 * Windows and macOS builds of a package carry, and are named here for the
 * same rule).
 *
 * Every refusal comes with a message naming the cause, ready for the API
 * caller of a create or reload (`load_failed`): the missing file, the
 * supported ABI versions, the offending value, the supported RIDs.
 */
#ifndef WM_HOSTS_NATIVE_PACKAGE_H
#define WM_HOSTS_NATIVE_PACKAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NATIVE_LIBRARY_MAX 128
#define NATIVE_SYMBOL_MAX 128
/* The ABI versions this host speaks, as the refusal names them. */
#define NATIVE_ABI_SUPPORTED "1"
/* The RIDs a package may carry for this daemon. */
#define NATIVE_RIDS_SUPPORTED "linux-x64, linux-arm64"
/* The most a package or its library may be (they are held in memory). */
#define NATIVE_PACKAGE_MAX (256u << 20)

enum native_os {
    NATIVE_OS_LINUX = 0,
    NATIVE_OS_WINDOWS,
    NATIVE_OS_MACOS,
};

struct native_manifest {
    int abi_version;
    char library[NATIVE_LIBRARY_MAX + 1];
    char entry_point[NATIVE_SYMBOL_MAX + 1];
    char free_result[NATIVE_SYMBOL_MAX + 1];
};

/* A validated package: its manifest and its library's bytes (malloc'd). */
struct native_package {
    struct native_manifest manifest;
    char rid[32];
    char entry[300]; /* runtimes/<rid>/native/<file> */
    uint8_t *library;
    size_t library_len;
};

/* Whether s is a valid library basename: [A-Za-z0-9_.-]{1,128}, no "..". */
bool native_library_name_valid(const char *s);

/* The file name of library `library` on `os`: lib<library>.so,
 * <library>.dll, lib<library>.dylib.  Returns 0, or -1 with a message when
 * the name is invalid or does not fit. */
int native_library_filename(const char *library, enum native_os os, char *out,
                            size_t outlen, char *err, size_t errlen);

/* The RID of the running process (linux-x64, linux-arm64), or NULL on an
 * architecture no package can target. */
const char *native_rid(void);

/* Parses and checks manifest.json.  Returns 0, or -1 with a message. */
int native_manifest_parse(const uint8_t *json, size_t len,
                          struct native_manifest *m, char *err, size_t errlen);

/* Validates the package zip[0..len) for rid on os and extracts its
 * library.  Returns 0 (free with native_package_free), or -1 with a
 * message. */
int native_package_open(const uint8_t *zip, size_t len, const char *rid,
                        enum native_os os, struct native_package *out,
                        char *err, size_t errlen);
void native_package_free(struct native_package *p);

#endif /* WM_HOSTS_NATIVE_PACKAGE_H */
