/*
 * roles.c — the host roles by name (sandbox.h), as engine descriptors
 * name them (`role = native`): a new engine's role is one role_*.c file
 * and one line here.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "sandbox/sandbox.h"

static const struct sandbox_role *const roles[] = {
    &sandbox_role_native,
    &sandbox_role_python,
    &sandbox_role_dotnet,
};

const struct sandbox_role *
sandbox_role_find(const char *name)
{
    for (size_t i = 0; name && i < sizeof roles / sizeof roles[0]; i++)
        if (strcmp(roles[i]->name, name) == 0)
            return roles[i];
    return NULL;
}

const char *
sandbox_role_names(void)
{
    static char names[128];

    if (names[0] == '\0') {
        size_t used = 0;
        for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++) {
            int n = snprintf(names + used, sizeof names - used, "%s%s",
                             i ? ", " : "", roles[i]->name);
            if (n < 0 || (size_t)n >= sizeof names - used)
                break;
            used += (size_t)n;
        }
    }
    return names;
}
