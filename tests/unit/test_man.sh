#!/bin/sh
# test_man.sh — the man pages: each one clean under `mandoc -Tlint -W
# warning`; workmanager.conf(5) documents every key that `workmanagerd
# --print-config` prints, with its WM_<KEY> variable; wmctl(1) documents
# every wmctl command and shows each one in its EXAMPLES.
# Run by `make check` from the top build directory; the pages are read
# from $srcdir (exported by automake's test harness), so that a VPATH
# build and `make distcheck` (read-only sources) work.

set -u
srcdir=${srcdir:-$(dirname "$0")/../..}
man="$srcdir/man"
daemon=./master/workmanagerd
pages="workmanagerd.8 wmctl.1 workmanager.conf.5 wm-host.8 workmanager-workers.7"
commands="create list show start stop suspend resume delete reload history
rollback tags invoke publish subscribe engines health recover pack"
failed=0

fail() {
    echo "FAIL: $*" >&2
    failed=1
}

if ! command -v mandoc >/dev/null 2>&1; then
    echo "FAIL: mandoc is not installed (Debian package mandoc, listed in" \
        "scripts/debian-packages)" >&2
    exit 1
fi
if [ ! -x "$daemon" ]; then
    echo "FAIL: $daemon not built" >&2
    exit 1
fi

# 1. Every page lints clean.
for p in $pages; do
    if [ ! -r "$man/$p" ]; then
        fail "$man/$p is missing"
        continue
    fi
    out=$(mandoc -Tlint -W warning "$man/$p" 2>&1)
    rc=$?
    if [ $rc -ne 0 ] || [ -n "$out" ]; then
        fail "mandoc -Tlint -W warning $p (status $rc):"
        printf '%s\n' "$out" >&2
    fi
done

# 2. Every configuration key, and its WM_<KEY> variable, in
# workmanager.conf(5).  A clean environment and --config /dev/null, so
# that neither a system file nor the caller's WM_* variables interfere.
conf="$man/workmanager.conf.5"
keys=$(env -i PATH="$PATH" "$daemon" --config /dev/null --print-config |
    sed -n 's/^\([a-z_][a-z0-9_]*\) = .*/\1/p')
if [ -z "$keys" ]; then
    fail "$daemon --config /dev/null --print-config printed no key"
fi
nkeys=0
for k in $keys; do
    nkeys=$((nkeys + 1))
    if ! grep -Eq "^\.It Cm $k( |$)" "$conf"; then
        fail "workmanager.conf.5 does not document key $k (.It Cm $k)"
    fi
    env=WM_$(printf '%s' "$k" | tr 'a-z' 'A-Z')
    if ! grep -Eq "^\.Ev (.* )?$env( |$)" "$conf"; then
        fail "workmanager.conf.5 does not name $env (.Ev $env)"
    fi
done

# 3. Every wmctl command in wmctl(1), described and in its EXAMPLES.
wmctl="$man/wmctl.1"
examples=$(sed -n '/^\.Sh EXAMPLES/,/^\.Sh /p' "$wmctl" 2>/dev/null)
for c in $commands; do
    if ! grep -Eq "^\.(It )?Ic $c( |$)" "$wmctl"; then
        fail "wmctl.1 does not describe command $c (.It Ic $c)"
    fi
    if ! printf '%s\n' "$examples" | grep -Eq "wmctl( --[a-z-]+( [^ -][^ ]*)?)* $c( |$)"; then
        fail "wmctl.1 has no example of wmctl $c"
    fi
done

if [ $failed -eq 0 ]; then
    echo "ok: $(echo $pages | wc -w) pages lint clean, $nkeys keys and" \
        "$(echo $commands | wc -w) wmctl commands documented"
fi
exit $failed
