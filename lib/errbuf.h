/*
 * errbuf.h — the error message of a failed call, formatted into the
 * caller's buffer, part of lib/ (the leaf library: small rules the master,
 * wmctl and the hosts share; it includes nothing of the project but
 * itself).
 *
 * The master's parsers and loaders report a failure as -1 and a message in
 * a (char *err, size_t errlen) pair the caller owns, so that the message
 * reaches the user who caused it (STYLE.md §4).  errbuf_set() is the one
 * place that writes such a message; it returns -1 so that a failure and its
 * message take one statement: `return errbuf_set(err, errlen, "...", ...);`.
 */
#ifndef WM_LIB_ERRBUF_H
#define WM_LIB_ERRBUF_H

#include <stddef.h>

/* Formats the printf-style message into err, cut to errlen bytes with its
 * NUL (a message is for a human: truncation is acceptable).  err NULL or
 * errlen 0 means the caller wants no message: nothing is written.  errno
 * is preserved.  Always returns -1. */
int errbuf_set(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif /* WM_LIB_ERRBUF_H */
