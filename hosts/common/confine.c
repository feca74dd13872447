/*
 * confine.c — an engine host's own confinement (host.h, host_confine()):
 * the steps of its sandbox role that come after the exec (sandbox.h:
 * no_new_privs, MDWE, the role's filter on every thread), and its strict
 * filter on the loop thread alone when the role has one.
 *
 * In a file of its own so that a host without a role (the test host)
 * links none of it, nor libseccomp.  The order is the role's (DESIGN
 * §10); the only choice here is where a host's hook goes: between the two
 * filters, so that a thread it starts there (the native host's opener,
 * which opens libraries) keeps the first filter and not the strict one.
 *
 * The debug modes (WM_SANDBOX_DEBUG=trap or log) are said in the warning
 * the host logs once connected, with what each does; in log mode nothing
 * is enforced, so the Hello says "none".
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "hosts/common/host.h"
#include "sandbox/sandbox.h"

#ifdef WM_SANDBOX
/* A step that failed: the host must not go on unconfined. */
static void confine_fail(const struct host_ops *ops, const char *err)
    __attribute__((noreturn));

static void
confine_fail(const struct host_ops *ops, const char *err)
{
    fprintf(stderr, "%s[%d]: confinement: %s\n", ops->name, (int)getpid(), err);
    _exit(1);
}
#endif

const char *
host_confine(const struct host_ops *ops, char *warn, size_t len)
{
    warn[0] = '\0';
#ifdef WM_SANDBOX
    const char *debug = getenv(SANDBOX_DEBUG_ENV);
    enum sandbox_mode mode = sandbox_mode_parse(debug);
    const struct sandbox_role *role = ops->role;
    char err[256] = "";
    int level = sandbox_role_enter(role, mode, err, sizeof err);

    if (level < 0)
        confine_fail(ops, err);
    if (ops->confined)
        ops->confined();
    if (level == SANDBOX_LEVEL_NONE) {
        snprintf(warn, len, "running unconfined: %s", err);
        return "none";
    }
    if (role->strict &&
        sandbox_filter_load(role->strict, mode, false, err, sizeof err) < 0)
        confine_fail(ops, err);
    if (mode != SANDBOX_MODE_ENFORCE) {
        snprintf(warn, len, "seccomp in %s mode (%s=%s): %s",
                 sandbox_mode_name(mode), SANDBOX_DEBUG_ENV, debug,
                 mode == SANDBOX_MODE_LOG
                     ? "nothing is killed, the kernel's audit log names "
                       "what would be"
                     : "a refused call is named on stderr");
        if (mode == SANDBOX_MODE_LOG)
            return "none";
    }
    return sandbox_level_name(sandbox_spawned_level((enum sandbox_level)level));
#else
    (void)len;
    if (ops->confined)
        ops->confined();
    return "none";
#endif
}
