/*
 * clr.h — CoreCLR in wm-host-dotnet (issue 10; research/flatbuffers-coreclr.md
 * part B): the runtime found as the .NET host finds it, started through
 * hostfxr with a runtimeconfig of our own ("rollForward": "Major"), and
 * the bridge and DevKit (embedded in this binary) loaded into the default
 * load context, their entry points returned.
 */
#ifndef WM_HOSTS_DOTNET_CLR_H
#define WM_HOSTS_DOTNET_CLR_H

#include <stddef.h>
#include <stdint.h>

#include "hosts/dotnet/bridge.h"

/* The framework the bridge is built for; the runtimeconfig rolls forward
 * from it to any later major version. */
#define CLR_FRAMEWORK "Microsoft.NETCore.App"

/*
 * The .NET root holding the highest host/fxr/<version>/libhostfxr.so: the
 * private runtime of the workmanager-dotnet package (WM_DN_PRIVATE_ROOT,
 * <pkglibdir>/dotnet, scripts/dotnet-runtime), $DOTNET_ROOT,
 * /usr/share/dotnet, /usr/lib/dotnet, then the installation of the `dotnet`
 * on PATH (through its symlinks); the first root with one wins.  Returns 0 with
 * root and fxr (the library's path) filled, or -1 with why naming the runtime
 * and every place searched.
 */
int clr_find(char *root, size_t rootlen, char *fxr, size_t fxrlen, char *why,
             size_t whylen);

/* The runtimeconfig the host starts the runtime with; heap_limit bytes
 * (0: none) becomes System.GC.HeapHardLimit (clr_start() passes its
 * limit by DOTNET_GCHeapHardLimit).  Returns buf. */
const char *clr_runtimeconfig(uint64_t heap_limit, char *buf, size_t len);

/* Writes the runtimeconfig (clr_runtimeconfig(0)) to a file of its own
 * in $TMPDIR or /tmp, for clr_start(): before the host's filter, which
 * refuses creating files.  0, or -1 with why set. */
int clr_prepare(char *why, size_t whylen);

/*
 * Finds the runtime, starts it with clr_prepare()'s file and the GC heap
 * limit heap_limit (bytes, 0: none), loads
 * the DevKit and the bridge and fills *b.  Once per process (a runtime
 * never unloads).  0, or -1 with why set.
 */
int clr_start(uint64_t heap_limit, struct dn_bridge *b, char *why,
              size_t whylen);

#endif /* WM_HOSTS_DOTNET_CLR_H */
