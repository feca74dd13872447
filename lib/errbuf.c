/*
 * errbuf.c — errbuf_set(), the one formatter of error messages into a
 * caller's buffer (errbuf.h).
 *
 * It lives in lib/libwm.a, which every program links after its other
 * libraries (static libraries: users before providers).
 */
#include "config.h"

#include "lib/errbuf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

int
errbuf_set(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    int saved = errno;

    if (err == NULL || errlen == 0)
        return -1;
    va_start(ap, fmt);
    /* The result is not checked: a cut message is still a message. */
    (void)vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    errno = saved;
    return -1;
}
