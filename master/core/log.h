/*
 * log.h — levelled logging to stderr, one line per message.
 *
 * Every line starts with a syslog priority prefix (`<3>` error, `<4>`
 * warning, `<5>` notice, `<6>` info, `<7>` debug, `<1>` alert), the
 * sd-daemon(3) convention: under systemd, journald reads the prefix as the
 * line's priority.  When stderr is the journal (JOURNAL_STREAM names it)
 * nothing else is added, since journald stamps time and identifier itself;
 * otherwise the prefix is followed by an RFC 3339 UTC timestamp with
 * milliseconds and `ident[pid]: `.
 *
 * Levels are syslog's priorities (<syslog.h>: LOG_ALERT … LOG_DEBUG); a
 * message is written when its priority is at or above the threshold set by
 * log_init() or log_set_level() (numerically at most it).
 *
 * log_alert() means "cannot happen": the line also starts with "ALERT:" and
 * the test suites fail on any such line.  Nothing a host sends can produce
 * one (log_host() clamps the level).
 *
 * Thread safety: any thread may log at any time.  A line is built in a
 * stack buffer and written with a single write(2), so lines of different
 * threads never interleave; a line is at most LOG_LINE_MAX bytes (the
 * atomic size of a pipe write), longer messages are cut and end with "…".
 * Control characters in messages are written as \xNN, so one message is
 * always one line.  Logging preserves errno.
 */
#ifndef WM_MASTER_LOG_H
#define WM_MASTER_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <syslog.h>

/* The longest line written, newline included: PIPE_BUF on Linux, so that a
 * line written to a pipe is never split. */
#define LOG_LINE_MAX 4096

#if defined(__GNUC__)
#define LOG_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define LOG_PRINTF(f, a)
#endif

/*
 * Sets the threshold (a syslog priority, e.g. LOG_INFO) and the identifier
 * written before each message when stderr is not the journal (NULL keeps
 * "workmanagerd"; the string is copied).  Decides once whether stderr is
 * the journal: JOURNAL_STREAM is set and its "device:inode" is stderr's.
 * Call it once at start-up, before other threads exist; logging before it
 * works, at LOG_INFO, with timestamps.
 */
void log_init(int level, const char *ident);

/* Changes the threshold; safe from any thread.  Out-of-range values are
 * clamped to LOG_ERR … LOG_DEBUG (an alert is never filtered out). */
void log_set_level(int level);

/* The current threshold. */
int log_get_level(void);

/* The syslog priority named by `name` (debug, info, notice, warning, error;
 * case-insensitive), or -1 when the name is none of them. */
int log_level_parse(const char *name);

/* The name log_level_parse() accepts for `level` ("alert" for LOG_ALERT,
 * "?" for anything else). */
const char *log_level_name(int level);

/* Whether a message at `level` would be written now. */
bool log_enabled(int level);

/*
 * Writes one line at `level` (a syslog priority) when the threshold lets it
 * through.  The message is formatted with printf rules; control characters
 * in the result are escaped as \xNN.
 */
void log_write(int level, const char *fmt, ...) LOG_PRINTF(2, 3);

/* As log_write(), appending ": " and strerror() of the errno current when
 * the function is entered. */
void log_write_errno(int level, const char *fmt, ...) LOG_PRINTF(2, 3);

/*
 * Writes a message sent by a host: `worker <worker>: ` then the `len`
 * bytes of `msg`, which need not be NUL-terminated nor valid UTF-8.  Bytes
 * that are not printable — control characters, DEL, invalid UTF-8 and the
 * C1 controls — and the backslash are written as \xNN, so that a host
 * cannot forge lines, terminal escapes or other workers' messages.  The
 * level is clamped to LOG_ERR … LOG_DEBUG: a host cannot raise an alert.
 */
void log_host(int level, const char *worker, const char *msg, size_t len);

/*
 * Escapes the len bytes of msg as log_host() writes a host's message (a
 * line of at most LOG_LINE_MAX bytes, cut with "…") into out, NUL-
 * terminated, at most cap - 1 bytes of it; returns the length written.
 * For copies of log lines kept elsewhere (a worker's ring, activity.h).
 */
size_t log_escape(char *out, size_t cap, const char *msg, size_t len);

#define log_debug(...)                                                         \
    do {                                                                       \
        if (log_enabled(LOG_DEBUG))                                            \
            log_write(LOG_DEBUG, __VA_ARGS__);                                 \
    } while (0)
#define log_info(...) log_write(LOG_INFO, __VA_ARGS__)
#define log_notice(...) log_write(LOG_NOTICE, __VA_ARGS__)
#define log_warning(...) log_write(LOG_WARNING, __VA_ARGS__)
#define log_err(...) log_write(LOG_ERR, __VA_ARGS__)
/* "Cannot happen": a bug of the daemon.  Tests fail on it. */
#define log_alert(...) log_write(LOG_ALERT, __VA_ARGS__)
#define log_errno_err(...) log_write_errno(LOG_ERR, __VA_ARGS__)
#define log_errno_warning(...) log_write_errno(LOG_WARNING, __VA_ARGS__)

#endif /* WM_MASTER_LOG_H */
