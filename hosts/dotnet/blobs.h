/*
 * blobs.h — the assemblies embedded in wm-host-dotnet (blobs.c).
 */
#ifndef WM_HOSTS_DOTNET_BLOBS_H
#define WM_HOSTS_DOTNET_BLOBS_H

#include <stdint.h>

extern const uint8_t wm_dn_devkit[], wm_dn_devkit_end[];
extern const uint8_t wm_dn_bridge[], wm_dn_bridge_end[];

#endif /* WM_HOSTS_DOTNET_BLOBS_H */
