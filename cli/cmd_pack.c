/*
 * cmd_pack.c — wmctl pack: a native worker library (LIB.so) and its
 * manifest made into the package zip that `wmctl create` sends (DESIGN §4,
 * workmanager-workers(7)):
 *
 *   manifest.json                         (--manifest FILE, or written
 *                                          from --library and friends)
 *   runtimes/<rid>/native/lib<library>.so (one per --rid; default the
 *                                          RID of this machine)
 *
 * A local command: no daemon is involved.  The rules are the daemon's own,
 * from hosts/native/package.c (libwmnativepkg.a): the manifest is checked
 * by native_manifest_parse(), the entry's file name comes from
 * native_library_filename(), and the written zip is read back with
 * native_package_open() for each RID, as wm-host-native reads it, so that
 * pack never writes a package the daemon would refuse.  libzip writes to a
 * temporary file and renames it on close: a failed pack leaves no partial
 * OUT.zip (a package that fails the read-back is removed).
 */
#include "config.h"

#include <elf.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zip.h>

#include "cli/wmctl.h"
#include "hosts/native/package.h"
#include "workmanager/worker_api.h"

/* RIDs a package may carry; each --rid is one entry. */
#define PACK_MAX_RIDS 8
/* Entries get this time, so that equal inputs give equal packages
 * (1980-01-02, safely after the zip format's 1980-01-01 epoch in any time
 * zone). */
#define PACK_MTIME 315619200

enum {
    OPT_MANIFEST = 0x300,
    OPT_LIBRARY,
    OPT_RID,
    OPT_ENTRY_POINT,
    OPT_FREE_RESULT,
};

struct pack {
    const char *manifest_file;
    const char *library;
    const char *entry_point;
    const char *free_result;
    const char *out;
    const char *lib_file;
    const char *rids[PACK_MAX_RIDS];
    unsigned nrids;
};

/* "wmctl: pack: <message>" on stderr; returns WMCTL_EXIT_FAILED. */
static int pack_fail(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static int
pack_fail(const char *fmt, ...)
{
    va_list ap;

    fputs("wmctl: pack: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return WMCTL_EXIT_FAILED;
}

/* Whether rid is one of NATIVE_RIDS_SUPPORTED ("a, b"). */
static bool
rid_supported(const char *rid)
{
    const char *p = NATIVE_RIDS_SUPPORTED;
    size_t n = strlen(rid);

    while (*p) {
        size_t k = strcspn(p, ",");
        if (k == n && strncmp(p, rid, n) == 0)
            return true;
        p += k;
        p += strspn(p, ", ");
    }
    return false;
}

/* The RID an ELF machine code runs as, or NULL. */
static const char *
rid_of_machine(unsigned machine)
{
    switch (machine) {
    case EM_X86_64:
        return "linux-x64";
    case EM_AARCH64:
        return "linux-arm64";
    default:
        return NULL;
    }
}

/* Checks that data is a 64-bit little-endian ELF shared object; *rid is
 * the RID of its machine (NULL when none).  0, or an exit code
 * (reported). */
static int
elf_check(const char *file, const uint8_t *data, size_t len, const char **rid)
{
    uint16_t type, machine;

    if (len < sizeof(Elf64_Ehdr) || memcmp(data, ELFMAG, SELFMAG) != 0)
        return pack_fail("%s is not an ELF file (a shared library is "
                         "expected)",
                         file);
    if (data[EI_CLASS] != ELFCLASS64 || data[EI_DATA] != ELFDATA2LSB)
        return pack_fail("%s is not a 64-bit little-endian ELF file", file);
    memcpy(&type, data + offsetof(Elf64_Ehdr, e_type), sizeof type);
    memcpy(&machine, data + offsetof(Elf64_Ehdr, e_machine), sizeof machine);
    if (type != ET_DYN)
        return pack_fail("%s is not a shared object (ELF type %u; build it "
                         "with -shared -fPIC)",
                         file, (unsigned)type);
    *rid = rid_of_machine(machine);
    return 0;
}

/* The library name of a file named lib<name>.so (for want of --library),
 * into out; -1 when the file is not named so. */
static int
library_from_file(const char *file, char *out, size_t outlen)
{
    const char *base = strrchr(file, '/');
    size_t n;

    base = base ? base + 1 : file;
    n = strlen(base);
    if (n <= 6 || strncmp(base, "lib", 3) != 0 ||
        strcmp(base + n - 3, ".so") != 0 || n - 6 >= outlen)
        return -1;
    memcpy(out, base + 3, n - 6);
    out[n - 6] = '\0';
    return 0;
}

/* The manifest's text: FILE's bytes, or one written from the options
 * (free() it).  0, or an exit code (reported). */
static int
manifest_text(const struct pack *p, char **text, size_t *len)
{
    char derived[NATIVE_LIBRARY_MAX + 1];
    const char *library = p->library;
    json_t *m;

    if (p->manifest_file != NULL) {
        if (wmctl_file_read(p->manifest_file, text, len) != 0)
            return pack_fail("%s: %s", p->manifest_file, strerror(errno));
        return 0;
    }
    if (library == NULL) {
        if (library_from_file(p->lib_file, derived, sizeof derived) != 0)
            return pack_fail("%s is not named lib<name>.so: give the "
                             "library's name with --library",
                             p->lib_file);
        library = derived;
    }
    m = json_pack("{s:i, s:s}", "abi_version", VIRTUFIN_ABI_VERSION, "library",
                  library);
    if (m != NULL && p->entry_point != NULL)
        json_object_set_new(m, "entry_point", json_string(p->entry_point));
    if (m != NULL && p->free_result != NULL)
        json_object_set_new(m, "free_result", json_string(p->free_result));
    *text = m ? json_dumps(m, JSON_INDENT(2)) : NULL;
    json_decref(m);
    if (*text == NULL)
        return pack_fail("out of memory");
    *len = strlen(*text);
    return 0;
}

/* Adds name with data[0..len) (not copied: it must live until zip_close)
 * to za, with a fixed time and mode 0644.  0, or -1 (reported). */
static int
zip_put(zip_t *za, const char *name, const void *data, size_t len)
{
    zip_source_t *src = zip_source_buffer(za, data, len, 0);
    zip_int64_t idx = src ? zip_file_add(za, name, src, ZIP_FL_ENC_UTF_8) : -1;

    if (idx < 0) {
        if (src)
            zip_source_free(src);
        pack_fail("adding %s: %s", name, zip_strerror(za));
        return -1;
    }
    if (zip_set_file_compression(za, (zip_uint64_t)idx, ZIP_CM_DEFLATE, 0) ||
        zip_file_set_mtime(za, (zip_uint64_t)idx, PACK_MTIME, 0) ||
        zip_file_set_external_attributes(za, (zip_uint64_t)idx, 0,
                                         ZIP_OPSYS_UNIX, 0100644u << 16)) {
        pack_fail("adding %s: %s", name, zip_strerror(za));
        return -1;
    }
    return 0;
}

/* Writes the package; 0, or an exit code (reported). */
static int
pack_write(const struct pack *p, const struct native_manifest *m,
           const char *manifest, size_t mlen, const uint8_t *lib, size_t len)
{
    char file[NATIVE_LIBRARY_MAX + 16], entry[300], err[256];
    int zerr = 0;
    zip_t *za = zip_open(p->out, ZIP_CREATE | ZIP_TRUNCATE, &zerr);

    if (za == NULL) {
        zip_error_t ze;
        zip_error_init_with_code(&ze, zerr);
        pack_fail("%s: %s", p->out, zip_error_strerror(&ze));
        zip_error_fini(&ze);
        return WMCTL_EXIT_FAILED;
    }
    if (native_library_filename(m->library, NATIVE_OS_LINUX, file, sizeof file,
                                err, sizeof err) != 0) {
        zip_discard(za);
        return pack_fail("%s", err);
    }
    if (zip_put(za, "manifest.json", manifest, mlen) != 0)
        goto fail;
    for (unsigned i = 0; i < p->nrids; i++) {
        snprintf(entry, sizeof entry, "runtimes/%s/native/%s", p->rids[i],
                 file);
        if (zip_put(za, entry, lib, len) != 0)
            goto fail;
    }
    if (zip_close(za) != 0) {
        pack_fail("writing %s: %s", p->out, zip_strerror(za));
        goto fail;
    }
    return 0;
fail:
    zip_discard(za);
    return WMCTL_EXIT_FAILED;
}

/* Reads the written package back as wm-host-native does, for each RID:
 * it must open and hold exactly lib.  0, or an exit code (reported, the
 * package removed). */
static int
pack_verify(const struct pack *p, const uint8_t *lib, size_t len)
{
    struct native_package pkg;
    char *zip, err[512];
    size_t zlen;
    int rc = 0;

    if (wmctl_file_read(p->out, &zip, &zlen) != 0)
        return pack_fail("reading %s back: %s", p->out, strerror(errno));
    for (unsigned i = 0; i < p->nrids && rc == 0; i++) {
        if (native_package_open((const uint8_t *)zip, zlen, p->rids[i],
                                NATIVE_OS_LINUX, &pkg, err, sizeof err) != 0) {
            rc =
                pack_fail("%s would be refused by the daemon: %s", p->out, err);
            break;
        }
        if (pkg.library_len != len || memcmp(pkg.library, lib, len) != 0)
            rc = pack_fail("%s: %s does not read back as written", p->out,
                           pkg.entry);
        native_package_free(&pkg);
    }
    free(zip);
    if (rc != 0)
        unlink(p->out);
    return rc;
}

/* Parses pack's arguments into *p.  0, or an exit code (reported). */
static int
pack_args(struct wmctl *ctl, int argc, char **argv, struct pack *p)
{
    static const struct option opts[] = {
        { "manifest", required_argument, NULL, OPT_MANIFEST },
        { "library", required_argument, NULL, OPT_LIBRARY },
        { "rid", required_argument, NULL, OPT_RID },
        { "entry-point", required_argument, NULL, OPT_ENTRY_POINT },
        { "free-result", required_argument, NULL, OPT_FREE_RESULT },
        { "output", required_argument, NULL, 'o' },
        { "json", no_argument, NULL, WMCTL_OPT_JSON },
        { "help", no_argument, NULL, WMCTL_OPT_HELP },
        { NULL, 0, NULL, 0 },
    };
    int c;

    memset(p, 0, sizeof *p);
    while ((c = wmctl_getopt_short(ctl, argc, argv, "ho:", opts)) != -1) {
        switch (c) {
        case OPT_MANIFEST:
            p->manifest_file = optarg;
            break;
        case OPT_LIBRARY:
            p->library = optarg;
            break;
        case OPT_RID:
            if (!rid_supported(optarg))
                return wmctl_usage_error(ctl,
                                         "--rid %s: not a supported RID "
                                         "(%s)",
                                         optarg, NATIVE_RIDS_SUPPORTED);
            if (p->nrids == PACK_MAX_RIDS)
                return wmctl_usage_error(ctl, "at most %d --rid",
                                         PACK_MAX_RIDS);
            for (unsigned i = 0; i < p->nrids; i++)
                if (strcmp(p->rids[i], optarg) == 0)
                    return wmctl_usage_error(ctl, "--rid %s given twice",
                                             optarg);
            p->rids[p->nrids++] = optarg;
            break;
        case OPT_ENTRY_POINT:
            p->entry_point = optarg;
            break;
        case OPT_FREE_RESULT:
            p->free_result = optarg;
            break;
        case 'o':
            p->out = optarg;
            break;
        case WMCTL_OPT_HELP:
            wmctl_usage_command(ctl);
            return -1;
        default:
            return wmctl_usage_error(ctl, "bad option");
        }
    }
    if (optind + 1 != argc)
        return wmctl_usage_error(ctl, optind == argc ? "LIB.so is required"
                                                     : "one LIB.so only");
    p->lib_file = argv[optind];
    if (p->out == NULL)
        return wmctl_usage_error(ctl, "-o OUT.zip is required");
    if (p->manifest_file && (p->library || p->entry_point || p->free_result))
        return wmctl_usage_error(ctl, "--manifest excludes --library, "
                                      "--entry-point and --free-result (the "
                                      "file says them)");
    if (p->nrids == 0) {
        p->rids[0] = native_rid();
        if (p->rids[0] == NULL)
            return wmctl_usage_error(ctl,
                                     "this machine's architecture has "
                                     "no RID: give --rid (%s)",
                                     NATIVE_RIDS_SUPPORTED);
        p->nrids = 1;
    }
    return 0;
}

int
cmd_pack(struct wmctl *ctl, int argc, char **argv)
{
    struct native_manifest m;
    struct pack p;
    char *manifest = NULL, *lib = NULL, err[512];
    size_t mlen = 0, len = 0;
    const char *lib_rid = NULL;
    int rc = pack_args(ctl, argc, argv, &p);

    if (rc != 0)
        return rc < 0 ? WMCTL_EXIT_OK : rc;
    if (wmctl_file_read(p.lib_file, &lib, &len) != 0)
        return pack_fail("%s: %s", p.lib_file, strerror(errno));
    rc = elf_check(p.lib_file, (const uint8_t *)lib, len, &lib_rid);
    if (rc != 0)
        goto out;
    for (unsigned i = 0; i < p.nrids; i++)
        if (lib_rid == NULL || strcmp(lib_rid, p.rids[i]) != 0)
            fprintf(stderr,
                    "wmctl: pack: warning: %s is built for %s, not for %s: "
                    "the daemon will not load it there\n",
                    p.lib_file, lib_rid ? lib_rid : "another architecture",
                    p.rids[i]);
    rc = manifest_text(&p, &manifest, &mlen);
    if (rc != 0)
        goto out;
    /* The daemon's own check: a name it would refuse is refused here. */
    if (native_manifest_parse((const uint8_t *)manifest, mlen, &m, err,
                              sizeof err) != 0) {
        rc = pack_fail("%s%s%s", p.manifest_file ? p.manifest_file : "",
                       p.manifest_file ? ": " : "", err);
        goto out;
    }
    rc = pack_write(&p, &m, manifest, mlen, (const uint8_t *)lib, len);
    if (rc == 0)
        rc = pack_verify(&p, (const uint8_t *)lib, len);
    if (rc == 0 && ctl->json) {
        json_t *j = json_pack("{s:s, s:s, s:[]}", "package", p.out, "library",
                              m.library, "rids");
        for (unsigned i = 0; j && i < p.nrids; i++)
            json_array_append_new(json_object_get(j, "rids"),
                                  json_string(p.rids[i]));
        wmctl_json_print(j);
        json_decref(j);
    } else if (rc == 0) {
        printf("%s: manifest.json (library %s)", p.out, m.library);
        for (unsigned i = 0; i < p.nrids; i++)
            printf(", %s", p.rids[i]);
        printf("\n");
    }
out:
    free(manifest);
    free(lib);
    return rc;
}
