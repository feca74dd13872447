/*
 * audit.h — the audit trail: one JSON line per API mutation (who, what,
 * result) appended to <state_dir>/audit.log (DESIGN §8).
 */
#ifndef WM_MASTER_AUDIT_H
#define WM_MASTER_AUDIT_H

#include <stddef.h>

struct daemon;

/* Opens <state_dir>/audit.log for appending; -1 with a message. */
int audit_open(const char *state_dir, char *err, size_t errlen);
void audit_close(void);
/* Appends {"at","peer","method","path","worker","status","code"}. */
void audit_write(struct daemon *d, const char *peer, const char *method,
                 const char *path, const char *worker, int status,
                 const char *code);

#endif /* WM_MASTER_AUDIT_H */
