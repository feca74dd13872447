/*
 * package.c — native worker packages (see package.h), read from memory
 * with libzip: nothing touches the disk.
 */
#include "config.h"

#include "hosts/native/package.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <zip.h>

#include "lib/errbuf.h"
#include "lib/name.h"

/* The most entries a package may have (a zip bomb of names is refused). */
#define MAX_ENTRIES 10000
/* manifest.json is small. */
#define MANIFEST_MAX (64u << 10)

static int
bad_library(const char *name, char *err, size_t errlen)
{
    return errbuf_set(err, errlen,
                      "manifest.json: library \"%.*s\" is not a library name "
                      "([A-Za-z0-9_.-], 1 to %d characters, no \"..\")",
                      NATIVE_LIBRARY_MAX, name, NATIVE_LIBRARY_MAX);
}

bool
native_library_name_valid(const char *s)
{
    return name_word_valid(s, NATIVE_LIBRARY_MAX) && strstr(s, "..") == NULL;
}

int
native_library_filename(const char *library, enum native_os os, char *out,
                        size_t outlen, char *err, size_t errlen)
{
    /* Prefix and suffix per platform (the NuGet convention). */
    static const char *const pre[] = { [NATIVE_OS_LINUX] = "lib",
                                       [NATIVE_OS_WINDOWS] = "",
                                       [NATIVE_OS_MACOS] = "lib" };
    static const char *const suf[] = { [NATIVE_OS_LINUX] = ".so",
                                       [NATIVE_OS_WINDOWS] = ".dll",
                                       [NATIVE_OS_MACOS] = ".dylib" };
    int n;

    if (!native_library_name_valid(library))
        return bad_library(library, err, errlen);
    if ((unsigned)os > NATIVE_OS_MACOS)
        return errbuf_set(err, errlen, "unknown platform %d", (int)os);
    n = snprintf(out, outlen, "%s%s%s", pre[os], library, suf[os]);
    if (n < 0 || (size_t)n >= outlen)
        return errbuf_set(err, errlen, "library name %s is too long", library);
    return 0;
}

const char *
native_rid(void)
{
#if defined(__x86_64__)
    return "linux-x64";
#elif defined(__aarch64__)
    return "linux-arm64";
#else
    return NULL;
#endif
}

static bool
symbol_valid(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > NATIVE_SYMBOL_MAX || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_'))
            return false;
    }
    return true;
}

/* Member key of the manifest as a checked symbol name, or its default. */
static int
take_symbol(json_t *root, const char *key, const char *def, char *out,
            size_t outlen, char *err, size_t errlen)
{
    json_t *v = json_object_get(root, key);
    const char *s = def;

    if (v != NULL) {
        if (!json_is_string(v))
            return errbuf_set(err, errlen, "manifest.json: %s must be a string",
                              key);
        s = json_string_value(v);
        if (!symbol_valid(s) || strlen(s) >= outlen)
            return errbuf_set(
                err, errlen,
                "manifest.json: %s \"%.64s\" is not a C symbol name", key, s);
    }
    snprintf(out, outlen, "%s", s);
    return 0;
}

int
native_manifest_parse(const uint8_t *json, size_t len,
                      struct native_manifest *m, char *err, size_t errlen)
{
    json_error_t je;
    json_t *root = json_loadb((const char *)json, len, 0, &je);
    int rc = -1;

    memset(m, 0, sizeof *m);
    if (root == NULL)
        return errbuf_set(err, errlen, "manifest.json is not JSON: line %d: %s",
                          je.line, je.text);
    if (!json_is_object(root)) {
        errbuf_set(err, errlen, "manifest.json must hold a JSON object");
        goto out;
    }
    json_t *abi = json_object_get(root, "abi_version");
    if (!json_is_integer(abi)) {
        errbuf_set(err, errlen,
                   "manifest.json: abi_version (an integer) is required; "
                   "supported: %s",
                   NATIVE_ABI_SUPPORTED);
        goto out;
    }
    if (json_integer_value(abi) != 1) {
        errbuf_set(
            err, errlen,
            "manifest.json: abi_version %lld is not supported; supported: "
            "%s",
            (long long)json_integer_value(abi), NATIVE_ABI_SUPPORTED);
        goto out;
    }
    m->abi_version = 1;
    json_t *lib = json_object_get(root, "library");
    const char *name = json_string_value(lib);
    if (name == NULL) {
        errbuf_set(err, errlen,
                   "manifest.json: library (a string) is required");
        goto out;
    }
    if (!native_library_name_valid(name)) {
        bad_library(name, err, errlen);
        goto out;
    }
    snprintf(m->library, sizeof m->library, "%s", name);
    if (take_symbol(root, "entry_point", "Process", m->entry_point,
                    sizeof m->entry_point, err, errlen) ||
        take_symbol(root, "free_result", "FreeResult", m->free_result,
                    sizeof m->free_result, err, errlen))
        goto out;
    rc = 0;
out:
    json_decref(root);
    return rc;
}

/* Reads entry idx of za whole (at most max bytes) into *data. */
static int
read_entry(zip_t *za, zip_int64_t idx, const char *name, size_t max,
           uint8_t **data, size_t *len, char *err, size_t errlen)
{
    zip_stat_t st;
    zip_file_t *f;

    if (zip_stat_index(za, (zip_uint64_t)idx, 0, &st) != 0 ||
        !(st.valid & ZIP_STAT_SIZE))
        return errbuf_set(err, errlen,
                          "%s: cannot read its size in the package", name);
    if (st.size > max)
        return errbuf_set(err, errlen, "%s: %llu bytes, over the limit of %zu",
                          name, (unsigned long long)st.size, max);
    *data = malloc(st.size ? (size_t)st.size : 1);
    if (*data == NULL)
        return errbuf_set(err, errlen, "%s: out of memory", name);
    f = zip_fopen_index(za, (zip_uint64_t)idx, 0);
    zip_int64_t n = f ? zip_fread(f, *data, st.size) : -1;
    if (f)
        zip_fclose(f);
    if (n < 0 || (zip_uint64_t)n != st.size) {
        free(*data);
        *data = NULL;
        return errbuf_set(err, errlen,
                          "%s: cannot be read from the package (%s)", name,
                          f ? "short read or bad data" : zip_strerror(za));
    }
    *len = (size_t)st.size;
    return 0;
}

/* The RIDs the package carries, for the refusal's message. */
static void
list_rids(zip_t *za, char *out, size_t outlen)
{
    zip_int64_t n = zip_get_num_entries(za, 0);
    size_t k = 0;

    out[0] = '\0';
    for (zip_int64_t i = 0; i < n && i < MAX_ENTRIES; i++) {
        const char *name = zip_get_name(za, (zip_uint64_t)i, 0);
        const char *rid, *end;
        if (name == NULL || strncmp(name, "runtimes/", 9) != 0)
            continue;
        rid = name + 9;
        end = strchr(rid, '/');
        if (end == NULL || strncmp(end, "/native/", 8) != 0 || end == rid)
            continue;
        char one[64];
        snprintf(one, sizeof one, "%.*s", (int)(end - rid), rid);
        if (strstr(out, one) != NULL)
            continue;
        int w = snprintf(out + k, outlen - k, "%s%s", k ? ", " : "", one);
        if (w < 0 || (size_t)w >= outlen - k)
            break;
        k += (size_t)w;
    }
    if (k == 0)
        snprintf(out, outlen, "none");
}

int
native_package_open(const uint8_t *zip, size_t len, const char *rid,
                    enum native_os os, struct native_package *out, char *err,
                    size_t errlen)
{
    zip_error_t ze;
    zip_source_t *src;
    zip_t *za = NULL;
    uint8_t *manifest = NULL;
    size_t mlen = 0;
    char file[NATIVE_LIBRARY_MAX + 16], have[256];
    int rc = -1;

    memset(out, 0, sizeof *out);
    if (rid == NULL)
        return errbuf_set(
            err, errlen,
            "this machine's architecture has no RID; supported: %s",
            NATIVE_RIDS_SUPPORTED);
    if (len > NATIVE_PACKAGE_MAX)
        return errbuf_set(err, errlen, "the package has %zu bytes, over %u",
                          len, NATIVE_PACKAGE_MAX);
    zip_error_init(&ze);
    src = zip_source_buffer_create(zip, len, 0, &ze);
    if (src != NULL)
        za = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze);
    if (za == NULL) {
        errbuf_set(err, errlen, "the package is not a zip archive: %s",
                   zip_error_strerror(&ze));
        if (src)
            zip_source_free(src);
        zip_error_fini(&ze);
        return -1;
    }
    zip_error_fini(&ze);
    if (zip_get_num_entries(za, 0) > MAX_ENTRIES) {
        errbuf_set(err, errlen, "the package has over %d entries", MAX_ENTRIES);
        goto out;
    }
    zip_int64_t mi = zip_name_locate(za, "manifest.json", 0);
    if (mi < 0) {
        errbuf_set(err, errlen,
                   "manifest.json is missing at the root of the package");
        goto out;
    }
    if (read_entry(za, mi, "manifest.json", MANIFEST_MAX, &manifest, &mlen, err,
                   errlen) ||
        native_manifest_parse(manifest, mlen, &out->manifest, err, errlen) ||
        native_library_filename(out->manifest.library, os, file, sizeof file,
                                err, errlen))
        goto out;
    snprintf(out->rid, sizeof out->rid, "%s", rid);
    snprintf(out->entry, sizeof out->entry, "runtimes/%s/native/%s", rid, file);
    zip_int64_t li = zip_name_locate(za, out->entry, 0);
    if (li < 0) {
        list_rids(za, have, sizeof have);
        errbuf_set(err, errlen,
                   "not supported on this architecture: the package has no %s "
                   "(its RIDs: %s; supported: %s)",
                   out->entry, have, NATIVE_RIDS_SUPPORTED);
        goto out;
    }
    if (read_entry(za, li, out->entry, NATIVE_PACKAGE_MAX, &out->library,
                   &out->library_len, err, errlen))
        goto out;
    rc = 0;
out:
    free(manifest);
    zip_discard(za); /* frees the source too */
    if (rc != 0)
        native_package_free(out);
    return rc;
}

void
native_package_free(struct native_package *p)
{
    free(p->library);
    p->library = NULL;
    p->library_len = 0;
}
