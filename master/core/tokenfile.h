/*
 * tokenfile.h — the bearer token of the TCP listener, made on first start
 * (issue 27 §4): a daemon with `listen` set and no token_file yet writes
 * a new random token there instead of refusing to start, and says where.
 */
#ifndef WM_MASTER_TOKENFILE_H
#define WM_MASTER_TOKENFILE_H

#include <stddef.h>

struct conf;

/*
 * When c->listen is set and c->token_file does not exist: creates it
 * (never over a file that appeared meanwhile) holding 64 random hex
 * digits and a newline, mode 0640, owned by this process's user and the
 * group of c->user when running as root (the master reads it after its
 * drop), else this process's group.  Returns 1 when it made the file, 0
 * when there was nothing to do, -1 with a message naming token_file and
 * the cause.
 */
int tokenfile_ensure(const struct conf *c, char *err, size_t errlen);

#endif /* WM_MASTER_TOKENFILE_H */
