#!/usr/bin/python3
"""bench/master_cpu.py — the master's CPU per request (issue 24), run after
run, as medians: the ingress scenarios of bench/suite.py (invoke and
single-event publish over TCP or TLS with wrk at 8 connections, invoke on
the unix socket with bench/http_rtt), each on a fresh daemon after its
1 s warm-up (suite.py's), optionally under `perf record` of the master.

    bench/master_cpu.py [--rounds N] [--seconds S] [--perf DIR]
                        [--daemon A --daemon B ...] BUILDDIR SCENARIO...

SCENARIO is ENGINE:KIND:INGRESS, e.g. native:invoke:tcp, native:pub:tls,
native:rtt:unix, python:invoke:tcp (engines: native, inprocess, python).
Each --daemon names a workmanagerd binary to measure in turn in every
round (an A/B of two builds: the binary is copied over BUILDDIR's before
each run, and BUILDDIR's own put back at the end); without one,
BUILDDIR's own.  Prints one line per run and the median and range per
scenario and binary.  Figures only: on a shared machine they are noisy,
which is why the binaries alternate within each round.
"""

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import suite  # noqa: E402

ENGINES = {"native": suite.NativeEngine, "inprocess": suite.InProcessEngine,
           "python": suite.PythonEngine}


def run_one(builddir, engine, kind, ingress, seconds, perf_out):
    eng = ENGINES[engine](builddir)
    cfg = suite.Config(True)
    with tempfile.TemporaryDirectory(prefix="wm-bench-cpu-") as tmp:
        extra = {}
        if ingress == "tls":
            cert, key = suite.self_signed(tmp)
            extra = {"listen_plaintext": "no", "tls_cert_file": cert,
                     "tls_key_file": key}
        d = suite.start_daemon(builddir, tmp, eng, **extra)
        try:
            if kind == "rtt":
                fn = (lambda c: suite.invoke_rtt(c, d, eng, tmp))
            else:
                wrk = suite.invoke_wrk if kind == "invoke" else \
                    suite.publish_wrk
                # Each warms its new worker up with a second of wrk.
                fn = (lambda c: wrk(c, d, eng, tmp, 8))
            cfg.wrk_s = seconds
            perf = None
            if perf_out:
                perf = subprocess.Popen(
                    ["perf", "record", "-F", "2000", "--call-graph",
                     "dwarf,16384", "-o", str(perf_out), "-p",
                     str(d.proc.pid)], stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL)
                time.sleep(0.3)
            r = fn(cfg)
            if perf:
                perf.send_signal(2)
                perf.wait()
            return r
        finally:
            d.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=2)
    ap.add_argument("--perf", help="a perf.data per run into this dir")
    ap.add_argument("--daemon", action="append", default=[])
    ap.add_argument("builddir")
    ap.add_argument("scenario", nargs="+")
    a = ap.parse_args()
    builddir = Path(a.builddir).resolve()
    target = builddir / "master" / "workmanagerd"
    binaries = a.daemon or [None]
    saved = None
    if a.daemon:
        saved = Path(tempfile.mkdtemp(prefix="wm-bench-cpu-bin-")) / "wmd"
        shutil.copy2(target, saved)
    got = {}
    try:
        for rnd in range(a.rounds):
            for b in binaries:
                if b:
                    shutil.copy2(b, target)
                for sc in a.scenario:
                    engine, kind, ingress = sc.split(":")
                    perf_out = (Path(a.perf) / f"{sc.replace(':', '-')}-"
                                f"{Path(b or 'wmd').name}-r{rnd}.data"
                                if a.perf else None)
                    r = run_one(builddir, engine, kind, ingress, a.seconds,
                                perf_out)
                    v = r["values"]
                    ok = "ok" if r["check"]["ok"] else "check failed"
                    print(f"r{rnd} {b or 'built'} {sc}: master_cpu_us "
                          f"{v['master_cpu_us']} ({ok}) {v}", flush=True)
                    got.setdefault((sc, b), []).append(v["master_cpu_us"])
    finally:
        if saved:
            shutil.copy2(saved, target)
    for (sc, b), xs in got.items():
        print(f"{sc} {b or 'built'}: median {statistics.median(xs):.1f} µs "
              f"({min(xs):.1f}–{max(xs):.1f}, {len(xs)} runs)")


if __name__ == "__main__":
    main()
