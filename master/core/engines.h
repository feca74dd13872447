/*
 * engines.h — the engines, read from descriptor files (DESIGN §5).
 *
 * An engine is a host binary plus one descriptor file `<name>.engine` in
 * engines_dir: adding an engine needs no change to the master.  A
 * descriptor has the `key = value` syntax of workmanager.conf:
 *
 *   name        = dotnet              [a-z0-9_-], unique       (required)
 *   mime_type   = application/x-dotnet-dll, text/x-csharp
 *                 repeatable, comma-separated, unique across
 *                 engines                                      (required)
 *   language    = C#                  for people (default: name)
 *   description = one line            for people
 *   host        = wm-host-dotnet      a file name, looked up in
 *                 libexec_dir, or an absolute path             (required)
 *   spawn       = exec                zygote | exec                (required)
 *   concurrency = processes           threads | processes: what a worker's
 *                 limits.concurrency N multiplies: the threads of its
 *                 one host (the native ABI is reentrant), or its host
 *                 processes (an interpreter or runtime that runs one
 *                 event at a time: N hosts, each a full one; the
 *                 supervisor spreads events over them) (default threads)
 *   role        = dotnet              the sandbox role its hosts are
 *                 confined by: their steps and seccomp tables
 *                 (sandbox/role_*.c; default native); a role this build
 *                 lacks makes the engine unavailable
 *   in_process  = no                  yes: the host can validate a package
 *                 for the master's opt-in in-process path (a worker's
 *                 "isolation": "in-process"; allow_in_process_native)
 *   protocol    = 1                   the frame protocol it speaks
 *                                                              (required)
 *   warm        = 1                   hosts the supervisor keeps started,
 *                 confined and handshaken, with no worker, for a worker's
 *                 next new host to take (supervise.h; 0 to
 *                 ENGINES_WARM_MAX, default 0)
 *   probe       = libhostfxr.so       a runtime the engine needs (optional)
 *   probe_what  = the .NET runtime    what the probe looks for, for people
 *   probe_path  = $DOTNET_ROOT/host/fxr/[0-9]*   where to look;
 *                                           repeatable, comma-separated,
 *                                           in order
 *
 * The probe: with probe_path entries, `probe` is looked for under each
 * entry in turn (`<entry>/<probe>`, the first entry with a match wins; of
 * several matches the highest version, by strverscmp(3)).  An entry may
 * hold glob(7) patterns, `$VAR` or `${VAR}` (the daemon's environment; an
 * unset or empty variable skips the entry) and, at its start, `@cmd`: the
 * directory of the real path of the executable `cmd` found on PATH (how
 * `dotnet` on PATH leads to its installation).  Without probe_path, an
 * absolute `probe` (a glob pattern) must exist, and a bare name must be an
 * executable on PATH.
 *
 * Errors and availability: a malformed descriptor (unknown key, bad value,
 * missing key, a name or MIME type claimed twice) stops start-up naming
 * file:line.  A missing host binary, a failed probe or another protocol
 * version only makes the engine unavailable, with a reason naming what is
 * missing and every place searched: it is still listed, and creating a
 * worker for it fails with that reason.
 *
 * Threads: loaded and probed on the loop thread; read-only in between.
 */
#ifndef WM_MASTER_ENGINES_H
#define WM_MASTER_ENGINES_H

#include <stdbool.h>
#include <stddef.h>

/* What a worker's limits.concurrency N gives it (master/supervise/). */
enum engines_concurrency {
    ENGINES_CONCURRENCY_THREADS,   /* one host, N threads in it */
    ENGINES_CONCURRENCY_PROCESSES, /* N host processes */
};

/* The most pool hosts an engine may keep warm (warm = N). */
#define ENGINES_WARM_MAX 16

enum engines_spawn {
    ENGINES_SPAWN_ZYGOTE, /* forked from a zygote exec'd once */
    ENGINES_SPAWN_EXEC,   /* each host exec'd fresh */
};

/* One engine.  Every string is owned by the list; the optional ones are
 * NULL when absent. */
struct engines_entry {
    char *name;
    char **mime_types; /* lowercase */
    size_t nmime_types;
    char *language;
    char *description;
    char *host;      /* as written */
    char *host_path; /* absolute: in libexec_dir unless host was */
    enum engines_spawn spawn;
    enum engines_concurrency concurrency;
    char *role;      /* the sandbox role (sandbox_role_find()) */
    bool in_process; /* workers may run in the master (in_process = yes) */
    unsigned protocol;
    unsigned warm; /* pool hosts kept ready (warm = N) */
    char *probe;
    char *probe_what;
    char **probe_paths;
    size_t nprobe_paths;
    char *file; /* the descriptor, for messages */

    /* Set by engines_probe(); reason and probe_found are valid until the
     * next engines_probe(), every other field for the list's life. */
    bool available;
    char *reason;      /* why not available; NULL when it is */
    char *probe_found; /* the file the probe found, or NULL */
};

struct engines {
    struct engines_entry *v; /* sorted by descriptor file name */
    size_t n;
    char *libexec_dir;
};

/*
 * Reads every `*.engine` file of `dir` (other names and hidden files are
 * ignored) into *list, then probes them (engines_probe()).  `libexec_dir`
 * is where host binaries given by name are looked up.
 *
 * Returns 0, or -1 with a message naming the file, and the line when there
 * is one, in err; *list is then empty.  A directory that cannot be read is
 * an error; an empty one is not (no engine is available then).
 */
int engines_load(const char *dir, const char *libexec_dir, struct engines *list,
                 char *err, size_t errlen);

/*
 * Decides again whether each engine is available — its host binary
 * exists and is executable, its protocol is this master's, its probe finds
 * its runtime — setting available, reason and probe_found (freeing the
 * previous reason and probe_found).  For a runtime installed or removed
 * while the daemon runs; engines_load() has already probed once.
 */
void engines_probe(struct engines *list);

/*
 * The engine serving MIME type `mime` (case-insensitive; parameters after
 * ';' are ignored), available or not, or NULL when none does (the API's
 * unknown_mime_type).
 */
const struct engines_entry *engines_find_mime(const struct engines *list,
                                              const char *mime);

/* The engine called `name`, or NULL. */
const struct engines_entry *engines_find_name(const struct engines *list,
                                              const char *name);

/* "zygote" or "exec". */
const char *engines_spawn_name(enum engines_spawn spawn);

/* "threads" or "processes". */
const char *engines_concurrency_name(enum engines_concurrency c);

/* Logs one line per engine: info when available, warning with the reason
 * when not (start-up's summary). */
void engines_log(const struct engines *list);

/* Frees the list and empties it; idempotent. */
void engines_free(struct engines *list);

#endif /* WM_MASTER_ENGINES_H */
