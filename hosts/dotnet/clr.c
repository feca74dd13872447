/*
 * clr.c — the runtime of wm-host-dotnet found and started (clr.h).
 *
 * hostfxr's C API is declared here from its documented signatures
 * (research/flatbuffers-coreclr.md B2): no header or library of the SDK is
 * needed to build the host, and libhostfxr is opened with dlopen() from
 * the root found at run time.  The runtimeconfig is a file in the host's
 * /tmp (hostfxr resolves the path it is given, so a memfd's
 * /proc/self/fd/N will not do), written before the filter refuses
 * creating files and removed once read; the GC's heap limit, known only
 * at the first Load, goes by DOTNET_GCHeapHardLimit instead.  The DevKit and
 * the bridge are loaded from the bytes embedded in the binary (blobs.c) with
 * hdt_load_assembly_bytes, which puts them in the default load context:
 * the bridge's reference to the DevKit then binds to that one copy, which
 * every worker's context shares.
 */
#include "config.h"

#include "hosts/dotnet/clr.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hosts/dotnet/blobs.h"

/* hostfxr.h and coreclr_delegates.h, as documented. */
typedef void *hostfxr_handle;
struct hostfxr_initialize_parameters {
    size_t size;
    const char *host_path;
    const char *dotnet_root;
};
typedef int32_t (*hostfxr_initialize_for_runtime_config_fn)(
    const char *runtime_config_path,
    const struct hostfxr_initialize_parameters *parameters,
    hostfxr_handle *host_context_handle);
typedef int32_t (*hostfxr_get_runtime_delegate_fn)(hostfxr_handle h, int type,
                                                   void **delegate);
typedef int32_t (*hostfxr_close_fn)(hostfxr_handle h);
typedef void (*hostfxr_error_writer_fn)(const char *message);
typedef hostfxr_error_writer_fn (*hostfxr_set_error_writer_fn)(
    hostfxr_error_writer_fn error_writer);
typedef int (*load_assembly_bytes_fn)(const void *assembly, size_t len,
                                      const void *symbols, size_t symbols_len,
                                      void *load_context, void *reserved);
typedef int (*get_function_pointer_fn)(const char *type_name,
                                       const char *method_name,
                                       const char *delegate_type_name,
                                       void *load_context, void *reserved,
                                       void **delegate);
#define HDT_GET_FUNCTION_POINTER 6
#define HDT_LOAD_ASSEMBLY_BYTES 8
#define UNMANAGEDCALLERSONLY_METHOD ((const char *)-1)

#define BRIDGE_TYPE "Workmanager.Bridge.Entry, Workmanager.DotnetBridge"

static void say(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
say(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    size_t used = strlen(buf);

    if (used >= len)
        return;
    va_start(ap, fmt);
    vsnprintf(buf + used, len - used, fmt, ap);
    va_end(ap);
}

/* Compares dotted versions numerically ("10.0.12" > "9.0.3"); a suffix
 * such as "-preview.1" is ignored. */
static int
version_cmp(const char *a, const char *b)
{
    for (;;) {
        char *ea, *eb;
        unsigned long x = strtoul(a, &ea, 10), y = strtoul(b, &eb, 10);
        if (x != y)
            return x < y ? -1 : 1;
        if (*ea != '.' || *eb != '.')
            return (*ea == '.') - (*eb == '.');
        a = ea + 1;
        b = eb + 1;
    }
}

/* The highest root/host/fxr/<version>/libhostfxr.so into fxr; 0 or -1. */
static int
fxr_in(const char *root, char *fxr, size_t fxrlen)
{
    char dir[PATH_MAX], best[256] = "";
    DIR *d;
    struct dirent *e;

    snprintf(dir, sizeof dir, "%s/host/fxr", root);
    if ((d = opendir(dir)) == NULL)
        return -1;
    while ((e = readdir(d)) != NULL) {
        char lib[PATH_MAX];
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        int n =
            snprintf(lib, sizeof lib, "%s/%s/libhostfxr.so", dir, e->d_name);
        if (n > 0 && (size_t)n < sizeof lib && access(lib, R_OK) == 0 &&
            (best[0] == '\0' || version_cmp(e->d_name, best) > 0))
            snprintf(best, sizeof best, "%s", e->d_name);
    }
    closedir(d);
    if (best[0] == '\0')
        return -1;
    int n = snprintf(fxr, fxrlen, "%s/%s/libhostfxr.so", dir, best);
    return n > 0 && (size_t)n < fxrlen ? 0 : -1;
}

/* The directory of the `dotnet` on PATH, symlinks resolved; 0 or -1. */
static int
dotnet_on_path(char *out, size_t len)
{
    const char *path = getenv("PATH");
    char cand[PATH_MAX], real[PATH_MAX];

    while (path && *path) {
        size_t n = strcspn(path, ":");
        snprintf(cand, sizeof cand, "%.*s/dotnet", (int)n, path);
        if (n > 0 && access(cand, X_OK) == 0 && realpath(cand, real)) {
            char *slash = strrchr(real, '/');
            if (slash)
                *slash = '\0';
            snprintf(out, len, "%s", real);
            return 0;
        }
        path += n + (path[n] == ':');
    }
    return -1;
}

int
clr_find(char *root, size_t rootlen, char *fxr, size_t fxrlen, char *why,
         size_t whylen)
{
    const char *env = getenv("DOTNET_ROOT");
    const char *fixed[] = { "/usr/share/dotnet", "/usr/lib/dotnet" };
    char onpath[PATH_MAX];

    /* The packaged runtime first: the bridge was built and tested for it,
     * and a DOTNET_ROOT left in the daemon's environment for other
     * programs must not replace it. */
    if (fxr_in(WM_DN_PRIVATE_ROOT, fxr, fxrlen) == 0) {
        snprintf(root, rootlen, "%s", WM_DN_PRIVATE_ROOT);
        return 0;
    }
    if (env && *env && fxr_in(env, fxr, fxrlen) == 0) {
        snprintf(root, rootlen, "%s", env);
        return 0;
    }
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        if (fxr_in(fixed[i], fxr, fxrlen) == 0) {
            snprintf(root, rootlen, "%s", fixed[i]);
            return 0;
        }
    }
    bool have = dotnet_on_path(onpath, sizeof onpath) == 0;
    if (have && fxr_in(onpath, fxr, fxrlen) == 0) {
        snprintf(root, rootlen, "%s", onpath);
        return 0;
    }
    why[0] = '\0';
    say(why, whylen,
        "the .NET runtime (libhostfxr.so) was not found; searched "
        "host/fxr/<version>/ under: the packaged runtime (%s, package "
        "workmanager-dotnet), DOTNET_ROOT (%s), the system install "
        "(/usr/share/dotnet, /usr/lib/dotnet), the dotnet on PATH (%s)",
        WM_DN_PRIVATE_ROOT, env && *env ? env : "unset",
        have ? onpath : "none");
    return -1;
}

const char *
clr_runtimeconfig(uint64_t heap_limit, char *buf, size_t len)
{
    char limit[64] = "";

    if (heap_limit)
        snprintf(limit, sizeof limit,
                 ",\n      \"System.GC.HeapHardLimit\": %llu",
                 (unsigned long long)heap_limit);
    snprintf(buf, len,
             "{\n"
             "  \"runtimeOptions\": {\n"
             "    \"tfm\": \"net%d.0\",\n"
             "    \"rollForward\": \"Major\",\n"
             "    \"framework\": {\n"
             "      \"name\": \"" CLR_FRAMEWORK "\",\n"
             "      \"version\": \"%d.0.0\"\n"
             "    },\n"
             "    \"configProperties\": {\n"
             "      \"System.GC.Server\": false,\n"
             "      \"System.GC.Concurrent\": false,\n"
             "      \"System.Globalization.Invariant\": true%s\n"
             "    }\n"
             "  }\n"
             "}\n",
             WM_DN_FRAMEWORK_MAJOR, WM_DN_FRAMEWORK_MAJOR, limit);
    return buf;
}

/* The runtimeconfig's file (clr_prepare). */
static char cfg_path[PATH_MAX];

int
clr_prepare(char *why, size_t whylen)
{
    const char *dir = getenv("TMPDIR");
    char cfg[1024];
    int fd;

    if (dir == NULL || dir[0] != '/')
        dir = "/tmp";
    snprintf(cfg_path, sizeof cfg_path,
             "%s/wm-host-dotnet-XXXXXX.runtimeconfig.json", dir);
    if ((fd = mkostemps(cfg_path, 19, O_CLOEXEC)) < 0) {
        snprintf(why, whylen, "cannot write the runtimeconfig in %s: %s", dir,
                 strerror(errno));
        cfg_path[0] = '\0';
        return -1;
    }
    clr_runtimeconfig(0, cfg, sizeof cfg);
    if (write(fd, cfg, strlen(cfg)) != (ssize_t)strlen(cfg)) {
        snprintf(why, whylen, "cannot write %s: %s", cfg_path, strerror(errno));
        close(fd);
        (void)unlink(cfg_path);
        cfg_path[0] = '\0';
        return -1;
    }
    close(fd);
    return 0;
}

/* hostfxr's error messages, gathered for the caller's why. */
static char fxr_errors[1024];

static void
fxr_error(const char *message)
{
    say(fxr_errors, sizeof fxr_errors, "%s%s", fxr_errors[0] ? "; " : "",
        message);
}

static int fail(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
fail(char *why, size_t whylen, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
    if (fxr_errors[0])
        say(why, whylen, " (hostfxr: %s)", fxr_errors);
    return -1;
}

int
clr_start(uint64_t heap_limit, struct dn_bridge *b, char *why, size_t whylen)
{
    char root[PATH_MAX], fxr[PATH_MAX];
    void *lib, *fn;
    hostfxr_handle h = NULL;
    int32_t rc;

    if (clr_find(root, sizeof root, fxr, sizeof fxr, why, whylen) < 0)
        return -1;
    /* Never closed: a runtime is not unloaded (B5). */
    if ((lib = dlopen(fxr, RTLD_NOW | RTLD_LOCAL)) == NULL)
        return fail(why, whylen, "%s: %s", fxr, dlerror());
    hostfxr_initialize_for_runtime_config_fn init =
        (hostfxr_initialize_for_runtime_config_fn)dlsym(
            lib, "hostfxr_initialize_for_runtime_config");
    hostfxr_get_runtime_delegate_fn get =
        (hostfxr_get_runtime_delegate_fn)dlsym(lib,
                                               "hostfxr_get_runtime_delegate");
    hostfxr_close_fn close_fxr = (hostfxr_close_fn)dlsym(lib, "hostfxr_close");
    hostfxr_set_error_writer_fn writer =
        (hostfxr_set_error_writer_fn)dlsym(lib, "hostfxr_set_error_writer");
    if (!init || !get || !close_fxr || !writer)
        return fail(why, whylen, "%s lacks the hostfxr API of .NET 8", fxr);
    writer(fxr_error);

    if (cfg_path[0] == '\0')
        return fail(why, whylen, "no runtimeconfig: clr_prepare() failed");
    if (heap_limit) {
        char hex[32];
        snprintf(hex, sizeof hex, "%llx", (unsigned long long)heap_limit);
        setenv("DOTNET_GCHeapHardLimit", hex, 1);
    }

    /* Our own path means nothing inside a private root (the binary is
     * exec'd through a descriptor): hostfxr is told the root's muxer. */
    char muxer[PATH_MAX + 8];
    snprintf(muxer, sizeof muxer, "%s/dotnet", root);
    const struct hostfxr_initialize_parameters p = {
        .size = sizeof p,
        .host_path = muxer,
        .dotnet_root = root,
    };
    rc = init(cfg_path, &p, &h);
    /* Read: not needed any more (and left behind if this fails). */
    (void)unlink(cfg_path);
    if (rc < 0 || h == NULL) {
        if (h)
            close_fxr(h);
        return fail(why, whylen,
                    "starting .NET from %s failed (hostfxr 0x%08x): no "
                    "runtime " CLR_FRAMEWORK " %d.0 or later?",
                    root, (unsigned)rc, WM_DN_FRAMEWORK_MAJOR);
    }
    load_assembly_bytes_fn load_bytes = NULL;
    get_function_pointer_fn get_fn = NULL;
    rc = get(h, HDT_LOAD_ASSEMBLY_BYTES, &fn);
    if (rc == 0)
        load_bytes = (load_assembly_bytes_fn)fn;
    if (rc == 0 && (rc = get(h, HDT_GET_FUNCTION_POINTER, &fn)) == 0)
        get_fn = (get_function_pointer_fn)fn;
    close_fxr(h);
    if (rc != 0)
        return fail(why, whylen, "the runtime's delegates (0x%08x)",
                    (unsigned)rc);

    if ((rc =
             load_bytes(wm_dn_devkit, (size_t)(wm_dn_devkit_end - wm_dn_devkit),
                        NULL, 0, NULL, NULL)) != 0 ||
        (rc =
             load_bytes(wm_dn_bridge, (size_t)(wm_dn_bridge_end - wm_dn_bridge),
                        NULL, 0, NULL, NULL)) != 0)
        return fail(why, whylen, "loading the bridge (0x%08x)", (unsigned)rc);

    static const struct {
        const char *method;
        size_t off;
    } entries[] = {
        { "Init", offsetof(struct dn_bridge, init) },
        { "Load", offsetof(struct dn_bridge, load) },
        { "Process", offsetof(struct dn_bridge, process) },
        { "GatewayReply", offsetof(struct dn_bridge, gateway_reply) },
        { "RunPosted", offsetof(struct dn_bridge, run_posted) },
    };
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        if ((rc = get_fn(BRIDGE_TYPE, entries[i].method,
                         UNMANAGEDCALLERSONLY_METHOD, NULL, NULL, &fn)) != 0)
            return fail(why, whylen, "the bridge's %s (0x%08x)",
                        entries[i].method, (unsigned)rc);
        memcpy((char *)b + entries[i].off, &fn, sizeof fn);
    }
    return 0;
}
