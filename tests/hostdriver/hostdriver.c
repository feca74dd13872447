/*
 * hostdriver.c — wm-hostdriver: the master's side of the protocol, alone,
 * to test an engine host without the daemon (tests/hostdriver/README.md).
 *
 *   wm-hostdriver [--timeout-ms N] [--grace-ms N] --mime MIME --code FILE
 *                 [--event JSON | --events FILE] [--config k=v]...
 *                 -- HOST_BINARY [ARGS...]
 *
 * It creates the socketpair, starts the host with its end on fd 3 and a
 * scrubbed environment, runs the handshake, sends Load with the code in a
 * sealed memfd, then each event as a Process (one at a time, in order),
 * prints each Result as one JSON line on stdout, forwards Log frames to
 * stderr, answers Heartbeat and GatewayCall, sends Shutdown and reports
 * the host's exit.  Exit status: 0 all went well (worker errors in a
 * Result included: they are printed), 1 the host or the protocol failed,
 * 2 usage or bad input.
 *
 * Events go in and come out as the master's admin API takes and gives
 * them (master/api/events.c): each input is converted, and so checked, while
 * the options are read, before the host starts; Result outputs are
 * printed in the structured form.
 *
 * Everything runs on one event loop through ipc_channel; `step` says what
 * the driver waits for, and a timer of --timeout-ms bounds each wait.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "ipc/channel.h"
#include "master/api/events.h"

#define EXIT_HOST 1
#define EXIT_USAGE 2
/* The host's end of the channel (DESIGN §2). */
#define HOST_FD 3
/* Environment variables passed through the scrub (sanitizer runs). */
static const char *const passthrough_env[] = {
    "ASAN_OPTIONS",
    "UBSAN_OPTIONS",
    "LSAN_OPTIONS",
    "MSAN_OPTIONS",
};

enum step {
    STEP_HELLO,
    STEP_LOADED,
    STEP_RESULT,
    STEP_EXIT, /* Shutdown sent: waiting for the host to close */
    STEP_DONE,
};

static const char *const step_names[] = {
    [STEP_HELLO] = "the host's Hello",
    [STEP_LOADED] = "Loaded",
    [STEP_RESULT] = "a Result",
    [STEP_EXIT] = "the host to exit after Shutdown",
    [STEP_DONE] = "nothing",
};

struct config_pair {
    char *name;
    char *value;
};

/* An input event, converted (and so checked) before the host starts. */
struct driver_event {
    struct ipc_fb_builder fb; /* its ABI CloudEvent buffer */
    char *id;                 /* as given, or the UUID events.c filled in */
};

struct driver {
    /* options */
    unsigned timeout_ms;
    unsigned grace_ms;
    const char *mime;
    const char *code_path;
    struct driver_event *events;
    size_t nevents;
    struct config_pair *config;
    unsigned nconfig;
    char **host_argv;

    /* run */
    struct event_base *base;
    struct ipc_channel *ch;
    struct event *timer;
    pid_t pid;
    enum step step;
    size_t next_event;
    int status;      /* exit status so far */
    bool clean_exit; /* the host closed the channel after Shutdown */
    int code_fd;     /* the sealed memfd, until Load takes it */
    uint64_t code_len;
};

static void
usage(FILE *out)
{
    fprintf(out,
            "usage: wm-hostdriver [--timeout-ms N] [--grace-ms N] --mime MIME"
            " --code FILE\n"
            "                     [--event JSON | --events FILE] "
            "[--config k=v]...\n"
            "                     -- HOST_BINARY [ARGS...]\n");
}

static void
die_usage(const char *what, const char *arg)
{
    fprintf(stderr, "wm-hostdriver: %s%s%s\n", what, arg ? ": " : "",
            arg ? arg : "");
    usage(stderr);
    exit(EXIT_USAGE);
}

/* ---- events ------------------------------------------------------------ */

static json_t *
error_to_json(const struct ipc_error *e)
{
    const struct {
        const char *name;
        struct ipc_str value;
    } fields[] = {
        { "type", e->type },
        { "message", e->message },
        { "exception_type", e->exception_type },
        { "traceback", e->traceback },
    };
    json_t *o = json_object();

    if (o == NULL)
        return NULL;
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
        json_t *v;
        if (fields[i].value.ptr == NULL)
            continue;
        v = json_stringn(fields[i].value.ptr, fields[i].value.len);
        json_object_set_new(o, fields[i].name,
                            v ? v : json_string("(not UTF-8)"));
    }
    return o;
}

/* Writes o as one compact line (numbers in their short form, as the
 * master writes events) and releases it. */
static void
print_line(json_t *o)
{
    char *s = events_json_dumps(o, NULL);

    if (s) {
        printf("%s\n", s);
        fflush(stdout);
    }
    free(s);
    json_decref(o);
}

/* ---- the run ------------------------------------------------------------ */

static void next_event(struct driver *d);

static void
arm(struct driver *d, enum step step, unsigned ms)
{
    struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

    d->step = step;
    if (evtimer_add(d->timer, &tv) < 0) {
        fprintf(stderr, "wm-hostdriver: cannot arm a timer\n");
        exit(EXIT_HOST);
    }
}

/* Ends the run: no more frames; the host gets killed if still there. */
static void
finish(struct driver *d, int status)
{
    if (status > d->status)
        d->status = status;
    d->step = STEP_DONE;
    evtimer_del(d->timer);
    event_base_loopbreak(d->base);
}

static void
on_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct driver *d = arg;

    (void)fd;
    (void)what;
    fprintf(stderr, "wm-hostdriver: timed out after %u ms waiting for %s\n",
            d->step == STEP_EXIT ? d->grace_ms : d->timeout_ms,
            step_names[d->step]);
    finish(d, EXIT_HOST);
}

static void
send_shutdown(struct driver *d)
{
    struct ipc_frame f;

    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_SHUTDOWN;
    f.u.shutdown.grace_ms = d->grace_ms;
    if (ipc_channel_send(d->ch, &f, NULL, 0) < 0) {
        fprintf(stderr, "wm-hostdriver: cannot send Shutdown: %s\n",
                strerror(errno));
        finish(d, EXIT_HOST);
        return;
    }
    arm(d, STEP_EXIT, d->grace_ms);
}

static void
on_result(struct ipc_channel *ch, const struct ipc_frame *r, int *fds,
          unsigned nfds, const char *error, void *arg)
{
    struct driver *d = arg;
    json_t *line, *outs;

    (void)ch;
    (void)fds;
    (void)nfds;
    if (error)
        return; /* on_close reports it */
    evtimer_del(d->timer);
    if (r->type != IPC_BODY_RESULT) {
        fprintf(stderr, "wm-hostdriver: Process answered with %s\n",
                ipc_body_name(r->type));
        finish(d, EXIT_HOST);
        return;
    }
    line = json_object();
    outs = json_array();
    json_object_set_new(line, "event",
                        json_string(d->events[d->next_event - 1].id));
    for (uint32_t i = 0; i < r->u.result.outputs.n; i++) {
        struct ipc_cloudevent ce;
        ipc_cloudevent_list_get(&r->u.result.outputs, i, &ce);
        json_array_append_new(outs, events_to_json(&ce));
    }
    json_object_set_new(line, "outputs", outs);
    if (r->u.result.error.type.ptr)
        json_object_set_new(line, "error", error_to_json(&r->u.result.error));
    print_line(line);
    next_event(d);
}

static void
next_event(struct driver *d)
{
    struct ipc_frame f;
    const struct driver_event *ev;

    if (d->next_event >= d->nevents) {
        send_shutdown(d);
        return;
    }
    ev = &d->events[d->next_event++];
    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_PROCESS;
    f.u.process.event.ptr = ev->fb.buf;
    f.u.process.event.len = (uint32_t)ev->fb.len;
    f.u.process.deadline_ms = d->timeout_ms;
    f.u.process.delivery = 1;
    if (ipc_channel_call(d->ch, &f, NULL, 0, on_result, d) < 0) {
        fprintf(stderr, "wm-hostdriver: cannot send Process: %s\n",
                strerror(errno));
        finish(d, EXIT_HOST);
        return;
    }
    arm(d, STEP_RESULT, d->timeout_ms);
}

static void
on_loaded(struct ipc_channel *ch, const struct ipc_frame *r, int *fds,
          unsigned nfds, const char *error, void *arg)
{
    struct driver *d = arg;

    (void)ch;
    (void)fds;
    (void)nfds;
    if (error)
        return;
    evtimer_del(d->timer);
    if (r->type != IPC_BODY_LOADED) {
        fprintf(stderr, "wm-hostdriver: Load answered with %s\n",
                ipc_body_name(r->type));
        finish(d, EXIT_HOST);
        return;
    }
    if (!r->u.loaded.ok) {
        json_t *line = json_object();
        json_object_set_new(line, "loaded", json_false());
        json_object_set_new(line, "error", error_to_json(&r->u.loaded.error));
        print_line(line);
        d->status = EXIT_HOST;
        send_shutdown(d); /* a host that failed to load still exits */
        return;
    }
    next_event(d);
}

/* Reads FILE into a sealed memfd; -1 with a message on failure. */
static int
code_memfd(const char *path, uint64_t *len)
{
    char buf[65536];
    int in = open(path, O_RDONLY | O_CLOEXEC);
    int fd = -1;
    ssize_t n;

    *len = 0;
    if (in < 0) {
        fprintf(stderr, "wm-hostdriver: %s: %s\n", path, strerror(errno));
        return -1;
    }
    fd = memfd_create("wm-code", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        goto fail;
    while ((n = read(in, buf, sizeof buf)) != 0) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            goto fail;
        }
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(fd, buf + off, (size_t)(n - off));
            if (w < 0) {
                if (errno == EINTR)
                    continue;
                goto fail;
            }
            off += w;
        }
        *len += (uint64_t)n;
    }
    if (fcntl(fd, F_ADD_SEALS,
              F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
        goto fail;
    close(in);
    return fd;
fail:
    fprintf(stderr, "wm-hostdriver: code in a memfd: %s\n", strerror(errno));
    if (fd >= 0)
        close(fd);
    close(in);
    return -1;
}

static void
send_load(struct driver *d)
{
    struct ipc_frame f;
    struct ipc_pair *cfg = NULL;
    int fd = d->code_fd;

    d->code_fd = -1; /* the channel's from here on */
    if (d->nconfig) {
        cfg = calloc(d->nconfig, sizeof *cfg);
        if (cfg == NULL) {
            close(fd);
            finish(d, EXIT_HOST);
            return;
        }
        for (unsigned i = 0; i < d->nconfig; i++) {
            cfg[i].name = ipc_str_c(d->config[i].name);
            cfg[i].value = ipc_str_c(d->config[i].value);
        }
    }
    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_LOAD;
    f.u.load.worker_id = ipc_str_c("wm-hostdriver");
    f.u.load.version = 1;
    f.u.load.mime = ipc_str_c(d->mime);
    f.u.load.code_fd = 0;
    f.u.load.code_len = d->code_len;
    /* sha256 left empty: see README.md. */
    f.u.load.identity.id = ipc_str_c("wm-hostdriver");
    f.u.load.config.n = d->nconfig;
    f.u.load.config.items = cfg;
    if (ipc_channel_call(d->ch, &f, &fd, 1, on_loaded, d) < 0) {
        fprintf(stderr, "wm-hostdriver: cannot send Load: %s\n",
                strerror(errno));
        finish(d, EXIT_HOST);
    } else {
        arm(d, STEP_LOADED, d->timeout_ms);
    }
    free(cfg);
}

static int
on_hello(struct ipc_channel *ch, const struct ipc_hello *h, const char **reason,
         void *arg)
{
    struct driver *d = arg;

    (void)ch;
    (void)reason;
    fprintf(stderr,
            "wm-hostdriver: host pid %d, engine %.*s, max_inflight %u, "
            "confinement %.*s\n",
            (int)h->pid, (int)h->engine.len, h->engine.ptr ? h->engine.ptr : "",
            h->max_inflight, (int)h->confinement.len,
            h->confinement.ptr ? h->confinement.ptr : "");
    evtimer_del(d->timer);
    send_load(d); /* held by the channel until its answer is out */
    return 0;
}

static void
on_frame(struct ipc_channel *ch, const struct ipc_frame *f, int *fds,
         unsigned nfds, void *arg)
{
    struct driver *d = arg;
    static const char *const levels[] = { "trace", "debug", "info", "warn",
                                          "error" };
    struct ipc_frame r;

    (void)fds;
    (void)nfds;
    memset(&r, 0, sizeof r);
    r.reply_to = f->seq;
    switch (f->type) {
    case IPC_BODY_LOG:
        fprintf(stderr, "host %s: %.*s\n", levels[f->u.log.level],
                (int)f->u.log.message.len, f->u.log.message.ptr);
        return;
    case IPC_BODY_HEARTBEAT:
        r.type = IPC_BODY_HEARTBEAT;
        break;
    case IPC_BODY_GATEWAY_CALL:
        r.type = IPC_BODY_GATEWAY_REPLY;
        r.u.gateway_reply.status = 501;
        r.u.gateway_reply.error = ipc_str_c("wm-hostdriver has no gateway");
        break;
    default:
        fprintf(stderr, "wm-hostdriver: the host may not send %s\n",
                ipc_body_name(f->type));
        finish(d, EXIT_HOST);
        return;
    }
    if (ipc_channel_send(ch, &r, NULL, 0) < 0) {
        fprintf(stderr, "wm-hostdriver: cannot answer %s: %s\n",
                ipc_body_name(f->type), strerror(errno));
        finish(d, EXIT_HOST);
    }
}

static void
on_close(struct ipc_channel *ch, enum ipc_channel_status status,
         const char *reason, void *arg)
{
    struct driver *d = arg;

    (void)ch;
    if (d->step == STEP_EXIT && status == IPC_CHANNEL_EOF) {
        d->clean_exit = true;
        finish(d, 0);
        return;
    }
    fprintf(stderr, "wm-hostdriver: channel closed (%s) waiting for %s: %s\n",
            ipc_channel_status_name(status), step_names[d->step], reason);
    finish(d, EXIT_HOST);
}

/* ---- the host process --------------------------------------------------- */

static pid_t
start_host(char **argv, int host_end, int *exec_err_fd)
{
    static char path[] = "PATH=/usr/local/bin:/usr/bin:/bin";
    static char lang[] = "LANG=C.UTF-8";
    char *env[8 + sizeof passthrough_env / sizeof passthrough_env[0]];
    unsigned n = 0;
    int errpipe[2];
    pid_t pid;

    if (pipe2(errpipe, O_CLOEXEC) < 0)
        return -1;
    env[n++] = path;
    env[n++] = lang;
    for (size_t i = 0; i < sizeof passthrough_env / sizeof *passthrough_env;
         i++) {
        static char kv[sizeof passthrough_env / sizeof *passthrough_env][4096];
        const char *v = getenv(passthrough_env[i]);
        if (v) {
            snprintf(kv[i], sizeof kv[i], "%s=%s", passthrough_env[i], v);
            env[n++] = kv[i];
        }
    }
    env[n] = NULL;

    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        close(errpipe[0]);
        close(errpipe[1]);
        return -1;
    }
    if (pid == 0) {
        /* Both descriptors first move above the ones they will replace. */
        int hs = fcntl(host_end, F_DUPFD_CLOEXEC, HOST_FD + 2);
        int ep = fcntl(errpipe[1], F_DUPFD_CLOEXEC, HOST_FD + 2);
        int err;

        if (hs < 0 || ep < 0 || dup2(hs, HOST_FD) < 0 || /* CLOEXEC off */
            dup2(ep, HOST_FD + 1) < 0 ||
            fcntl(HOST_FD + 1, F_SETFD, FD_CLOEXEC) < 0 ||
            close_range(HOST_FD + 2, ~0u, 0) < 0) /* nothing else of ours */
            goto child_fail;
        signal(SIGPIPE, SIG_DFL);
        execvpe(argv[0], argv, env);
child_fail:
        err = errno;
        if (write(HOST_FD + 1, &err, sizeof err) < 0)
            _exit(127);
        _exit(127);
    }
    close(errpipe[1]);
    *exec_err_fd = errpipe[0];
    return pid;
}

/* Waits up to ms for the host, then kills it; reports how it ended. */
static int
reap_host(pid_t pid, unsigned ms)
{
    int st = 0;
    pid_t r = 0;

    for (unsigned waited = 0; waited <= ms; waited += 10) {
        r = waitpid(pid, &st, WNOHANG);
        if (r != 0)
            break;
        usleep(10 * 1000);
    }
    if (r == 0) {
        fprintf(stderr,
                "wm-hostdriver: host %d still running after %u ms: "
                "SIGKILL\n",
                (int)pid, ms);
        kill(pid, SIGKILL);
        while ((r = waitpid(pid, &st, 0)) < 0 && errno == EINTR)
            ;
    }
    if (r < 0) {
        fprintf(stderr, "wm-hostdriver: waitpid: %s\n", strerror(errno));
        return EXIT_HOST;
    }
    if (WIFSIGNALED(st)) {
        fprintf(stderr, "wm-hostdriver: host killed by signal %d (%s)\n",
                WTERMSIG(st), strsignal(WTERMSIG(st)));
        return EXIT_HOST;
    }
    fprintf(stderr, "wm-hostdriver: host exited with status %d\n",
            WEXITSTATUS(st));
    return WEXITSTATUS(st) == 0 ? 0 : EXIT_HOST;
}

/* ---- options ---------------------------------------------------------- */

static unsigned
parse_ms(const char *s)
{
    char *end;
    unsigned long v;

    errno = 0;
    v = strtoul(s, &end, 10);
    if (errno || *end || end == s || v == 0 || v > 3600000)
        die_usage("bad milliseconds", s);
    return (unsigned)v;
}

/* Parses one event and converts it under events_from_json()'s rules, so
 * that a bad event stops the driver before the host starts: exits 2 with
 * where ("--event", "line N") and the rule broken. */
static void
add_event_text(struct driver *d, const char *text, const char *where)
{
    json_error_t jerr;
    json_t *obj = json_loads(text, 0, &jerr);
    struct driver_event *ev;
    struct ipc_cloudevent ce;
    struct ipc_fb_error ferr;
    char err[512]; /* events.c's longest message, quotes included */

    if (obj == NULL) {
        fprintf(stderr, "wm-hostdriver: %s: %s\n", where, jerr.text);
        exit(EXIT_USAGE);
    }
    ev = realloc(d->events, (d->nevents + 1) * sizeof *ev);
    if (ev == NULL) {
        fprintf(stderr, "wm-hostdriver: out of memory\n");
        exit(EXIT_HOST);
    }
    d->events = ev;
    ev += d->nevents++;
    ipc_fb_builder_init(&ev->fb);
    ev->id = NULL;
    if (events_from_json(obj, &ev->fb, err, sizeof err) < 0) {
        fprintf(stderr, "wm-hostdriver: %s: %s\n", where, err);
        exit(EXIT_USAGE);
    }
    json_decref(obj);
    /* Its id for the Result line, read back: events.c may have made it. */
    if (ipc_cloudevent_read(ev->fb.buf, ev->fb.len, &ce, &ferr) < 0) {
        ipc_fb_error_format(&ferr, err, sizeof err);
        fprintf(stderr, "wm-hostdriver: %s: %s\n", where, err);
        exit(EXIT_HOST);
    }
    ev->id = strndup(ce.id.ptr, ce.id.len);
    if (ev->id == NULL) {
        fprintf(stderr, "wm-hostdriver: out of memory\n");
        exit(EXIT_HOST);
    }
}

static void
read_events(struct driver *d, const char *path)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "re");
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    unsigned lineno = 0;

    if (f == NULL) {
        fprintf(stderr, "wm-hostdriver: %s: %s\n", path, strerror(errno));
        exit(EXIT_USAGE);
    }
    while ((n = getline(&line, &cap, f)) >= 0) {
        char where[64];
        lineno++;
        if (strspn(line, " \t\r\n") == (size_t)n)
            continue;
        snprintf(where, sizeof where, "line %u", lineno);
        add_event_text(d, line, where);
    }
    free(line);
    if (f != stdin)
        fclose(f);
}

static void
parse_args(struct driver *d, int argc, char **argv)
{
    enum {
        OPT_TIMEOUT = 256,
        OPT_GRACE,
        OPT_MIME,
        OPT_CODE,
        OPT_EVENT,
        OPT_EVENTS,
        OPT_CONFIG,
        OPT_HELP
    };
    static const struct option opts[] = {
        { "timeout-ms", required_argument, NULL, OPT_TIMEOUT },
        { "grace-ms", required_argument, NULL, OPT_GRACE },
        { "mime", required_argument, NULL, OPT_MIME },
        { "code", required_argument, NULL, OPT_CODE },
        { "event", required_argument, NULL, OPT_EVENT },
        { "events", required_argument, NULL, OPT_EVENTS },
        { "config", required_argument, NULL, OPT_CONFIG },
        { "help", no_argument, NULL, OPT_HELP },
        { NULL, 0, NULL, 0 },
    };
    bool have_events = false;
    int c;

    d->timeout_ms = 5000;
    d->grace_ms = 2000;
    while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
        switch (c) {
        case OPT_TIMEOUT:
            d->timeout_ms = parse_ms(optarg);
            break;
        case OPT_GRACE:
            d->grace_ms = parse_ms(optarg);
            break;
        case OPT_MIME:
            d->mime = optarg;
            break;
        case OPT_CODE:
            d->code_path = optarg;
            break;
        case OPT_EVENT:
        case OPT_EVENTS:
            if (have_events)
                die_usage("give --event or --events once", optarg);
            have_events = true;
            if (c == OPT_EVENT)
                add_event_text(d, optarg, "--event");
            else
                read_events(d, optarg);
            break;
        case OPT_CONFIG: {
            char *eq = strchr(optarg, '=');
            struct config_pair *p;
            if (eq == NULL || eq == optarg)
                die_usage("--config expects k=v", optarg);
            p = realloc(d->config, (d->nconfig + 1) * sizeof *p);
            if (p == NULL)
                exit(EXIT_HOST);
            d->config = p;
            p[d->nconfig].name = strndup(optarg, (size_t)(eq - optarg));
            p[d->nconfig].value = strdup(eq + 1);
            if (!p[d->nconfig].name || !p[d->nconfig].value)
                exit(EXIT_HOST);
            d->nconfig++;
            break;
        }
        case OPT_HELP:
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            exit(EXIT_USAGE);
        }
    }
    if (d->mime == NULL)
        die_usage("--mime is required", NULL);
    if (d->code_path == NULL)
        die_usage("--code is required", NULL);
    if (optind >= argc)
        die_usage("no host binary (after --)", NULL);
    d->host_argv = argv + optind;
}

int
main(int argc, char **argv)
{
    struct driver d;
    struct ipc_channel_callbacks cb = {
        .on_frame = on_frame,
        .on_hello = on_hello,
        .on_close = on_close,
    };
    struct ipc_channel_config cfg = { .role = IPC_CHANNEL_MASTER };
    int sv[2] = { -1, -1 }, errfd = -1, err, status = EXIT_HOST;
    ssize_t n;

    memset(&d, 0, sizeof d);
    d.pid = -1;
    parse_args(&d, argc, argv);
    signal(SIGPIPE, SIG_IGN);
    d.code_fd = code_memfd(d.code_path, &d.code_len);
    if (d.code_fd < 0) {
        status = EXIT_USAGE;
        goto out;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        fprintf(stderr, "wm-hostdriver: socketpair: %s\n", strerror(errno));
        goto out;
    }
    d.pid = start_host(d.host_argv, sv[1], &errfd);
    close(sv[1]);
    if (d.pid < 0) {
        fprintf(stderr, "wm-hostdriver: fork: %s\n", strerror(errno));
        goto out;
    }
    /* The exec's outcome: EOF on success, errno when it failed. */
    while ((n = read(errfd, &err, sizeof err)) < 0 && errno == EINTR)
        ;
    close(errfd);
    if (n == (ssize_t)sizeof err) {
        fprintf(stderr, "wm-hostdriver: cannot start %s: %s\n", d.host_argv[0],
                strerror(err));
        goto out;
    }

    d.base = event_base_new();
    d.timer = d.base ? evtimer_new(d.base, on_timeout, &d) : NULL;
    if (d.timer == NULL) {
        fprintf(stderr, "wm-hostdriver: libevent initialisation failed\n");
        goto out;
    }
    cfg.handshake_timeout_ms = d.timeout_ms;
    d.ch = ipc_channel_new(d.base, sv[0], &cfg, &cb, &d);
    sv[0] = -1; /* the channel's, even when it failed */
    if (d.ch == NULL) {
        fprintf(stderr, "wm-hostdriver: channel: %s\n", strerror(errno));
        goto out;
    }
    d.step = STEP_HELLO; /* the channel's own timer bounds it */
    event_base_dispatch(d.base);
    status = d.status;

out:
    ipc_channel_free(d.ch);
    if (sv[0] >= 0)
        close(sv[0]);
    if (d.pid > 0) {
        if (!d.clean_exit)
            kill(d.pid, SIGKILL); /* no clean Shutdown: do not wait */
        err = reap_host(d.pid, d.grace_ms);
        if (err > status)
            status = err;
    }
    if (d.timer)
        event_free(d.timer);
    if (d.base)
        event_base_free(d.base);
    for (size_t i = 0; i < d.nevents; i++) {
        ipc_fb_builder_free(&d.events[i].fb);
        free(d.events[i].id);
    }
    free(d.events);
    if (d.code_fd >= 0)
        close(d.code_fd);
    for (unsigned i = 0; i < d.nconfig; i++) {
        free(d.config[i].name);
        free(d.config[i].value);
    }
    free(d.config);
    return status;
}
