/*
 * blobs.c — the managed DevKit and bridge assemblies, built by `make` with
 * the SDK, embedded in wm-host-dotnet (issue 10).  The host runs inside a
 * private root that holds /usr only, and is exec'd through a descriptor:
 * carrying its managed half in its own image means nothing of it has to
 * be found on disk.  WM_DN_DEVKIT_DLL and WM_DN_BRIDGE_DLL are the paths
 * of the built assemblies (Makefile.inc).
 */
#include "config.h"

#include "hosts/dotnet/blobs.h"

#define WM_BLOB(name, path)                                                    \
    __asm__(".section .rodata\n"                                               \
            ".balign 16\n"                                                     \
            ".global " #name "\n" #name ":\n"                                  \
            ".incbin \"" path "\"\n"                                           \
            ".global " #name "_end\n" #name "_end:\n"                          \
            ".previous\n")

WM_BLOB(wm_dn_devkit, WM_DN_DEVKIT_DLL);
WM_BLOB(wm_dn_bridge, WM_DN_BRIDGE_DLL);
