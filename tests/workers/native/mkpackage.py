#!/usr/bin/env python3
"""mkpackage.py — wrap a native worker library in a package zip (DESIGN §4).

    mkpackage.py OUT.zip LIB.so [--library NAME] [--abi N] [--rid RID]
                 [--no-manifest]

writes manifest.json {"abi_version": N, "library": NAME} and
runtimes/<RID>/native/lib<NAME>.so (defaults: echo, 1, linux-x64).  The
options exist to build the packages wm-host-native must refuse (a wrong
ABI, a foreign RID, no manifest).  Importable:

    make_package(lib_path, library="echo", abi=1, rid="linux-x64",
                 manifest=True) -> bytes

Stdlib only.  Entries carry a fixed timestamp so that equal inputs give
equal bytes.
"""

import argparse
import io
import json
import sys
import zipfile

# zip's earliest representable date: fixed, so packages are reproducible.
_EPOCH = (1980, 1, 1, 0, 0, 0)


def _add(zf, name, data):
    info = zipfile.ZipInfo(name, date_time=_EPOCH)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    zf.writestr(info, data)


def make_package(lib_path, library="echo", abi=1, rid="linux-x64",
                 manifest=True):
    """Returns the bytes of a package holding lib_path as lib<library>.so."""
    with open(lib_path, "rb") as f:
        lib = f.read()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        if manifest:
            _add(zf, "manifest.json",
                 json.dumps({"abi_version": abi, "library": library}))
        _add(zf, f"runtimes/{rid}/native/lib{library}.so", lib)
    return buf.getvalue()


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Write a native worker package zip.")
    ap.add_argument("out", help="the package to write (OUT.zip)")
    ap.add_argument("lib", help="the worker library (LIB.so)")
    ap.add_argument("--library", default="echo",
                    help="the manifest's library name (default echo)")
    ap.add_argument("--abi", type=int, default=1,
                    help="the manifest's abi_version (default 1)")
    ap.add_argument("--rid", default="linux-x64",
                    help="the runtime identifier (default linux-x64)")
    ap.add_argument("--no-manifest", action="store_true",
                    help="leave manifest.json out")
    args = ap.parse_args(argv)
    data = make_package(args.lib, library=args.library, abi=args.abi,
                        rid=args.rid, manifest=not args.no_manifest)
    with open(args.out, "wb") as f:
        f.write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
