/*
 * audit.h — the audit trail: one JSON line per API mutation (who, what,
 * result) appended to <state_dir>/audit.log (DESIGN §8); publishes only
 * as audit_publishes says.  Reopened by path on SIGHUP, for logrotate.
 */
#ifndef WM_MASTER_AUDIT_H
#define WM_MASTER_AUDIT_H

#include <stddef.h>

struct daemon;

/* Opens <state_dir>/audit.log for appending; -1 with a message. */
int audit_open(const char *state_dir, char *err, size_t errlen);
void audit_close(void);
/*
 * Opens the audit log again by its path (after logrotate renamed it) and
 * writes there from now on: 0; -1 with a message when it cannot, and the
 * trail goes on in the file open before.  0 before audit_open().
 */
int audit_reopen(char *err, size_t errlen);
/* Appends {"at","peer","principal","method","path","worker","status",
 * "code"} (principal: the acting credential, principal.h), unless
 * it is a publish (POST /v1/topics/...) that audit_publishes leaves out.
 * Each byte of a string that is not well-formed UTF-8 is written as
 * U+FFFD (the line is never lost for it). */
void audit_write(struct daemon *d, const char *peer, const char *principal,
                 const char *method, const char *path, const char *worker,
                 int status, const char *code);

#endif /* WM_MASTER_AUDIT_H */
