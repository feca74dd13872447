#!/bin/sh
# test_unit.sh — systemd-analyze verify on the built workmanager.service,
# and on the unit and the tmpfiles.d file as `make install` installs them.
#
# The unit is checked as built, except that ExecStart names the daemon of
# this build tree (verify fails when ExecStart is not executable, and the
# install's sbindir is not populated at `make check` time).  Fails on a
# non-zero exit of verify and on any message it prints about our unit (an
# unknown key or a bad value is only a warning to systemd: the unit would
# silently not mean what it says).  Skips, with the reason, where systemd
# is not installed.  Run by `make check` from the top build directory.

set -u
unit=./contrib/systemd/workmanager.service
daemon=$(pwd)/master/workmanagerd
for p in "$unit" "$daemon"; do
    if [ ! -f "$p" ]; then
        echo "FAIL: $p not built" >&2
        exit 1
    fi
done
if ! command -v systemd-analyze >/dev/null 2>&1; then
    echo "SKIP: systemd-analyze not found (Debian package systemd)"
    exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_unit.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
failed=0

fail() {
    echo "FAIL: $*" >&2
    failed=1
}

# The build substituted every placeholder, and ExecStart is the install's.
grep -n '@[a-z_]*@' "$unit" && fail "placeholders left in $unit"
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
case $exec_start in
/*/workmanagerd\ --foreground) ;;
*) fail "ExecStart is '$exec_start', not <sbindir>/workmanagerd --foreground" ;;
esac

# The settings the daemon relies on (main.c: sd_notify READY, STOPPING and
# WATCHDOG; the sandbox: a delegated cgroup subtree).
for want in Type=notify NotifyAccess=main WatchdogSec=30 Delegate=yes \
    KillMode=mixed OOMPolicy=continue RuntimeDirectory=workmanager \
    RuntimeDirectoryPreserve=yes 'ExecReload=/bin/kill -HUP $MAINPID' \
    StateDirectory=workmanager; do
    grep -qx "$want" "$unit" || fail "$unit: no line $want"
done
# The options that would take from the sandbox what it needs.
for banned in NoNewPrivileges PrivateUsers RestrictNamespaces \
    SystemCallFilter ProtectKernelTunables ProtectControlGroups; do
    grep -q "^$banned=" "$unit" && fail "$unit sets $banned="
done

sed "s|^ExecStart=[^ ]*|ExecStart=$daemon|" "$unit" \
    >"$tmp/workmanager.service"
# --man=no: the man pages of Documentation= are installed with the
# daemon, not present at `make check` time (man/ checks them itself).
systemd-analyze verify --man=no "$tmp/workmanager.service" >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
[ "$rc" -eq 0 ] || fail "systemd-analyze verify exited $rc"
if grep -e 'workmanager\.service' -e "$tmp" "$tmp/out" >/dev/null; then
    fail "systemd-analyze verify has something to say about the unit"
fi

# The installed unit and tmpfiles.d file, as `make install` puts them
# (into a DESTDIR): the unit verifies as the built one does, and
# systemd-tmpfiles makes /run/workmanager and its uids/ from the file.
dest="$tmp/dest"
make -s install-nodist_systemdunitDATA install-dist_tmpfilesDATA \
    DESTDIR="$dest" >"$tmp/install" 2>&1 ||
    fail "make install of the unit and tmpfiles.d file: $(cat "$tmp/install")"
installed=$(find "$dest" -name workmanager.service -type f | head -n 1)
tmpfiles=$(find "$dest" -path '*/tmpfiles.d/workmanager.conf' -type f |
    head -n 1)
if [ -z "$installed" ] || [ -z "$tmpfiles" ]; then
    fail "make install put no workmanager.service or tmpfiles.d file in $dest"
else
    mkdir -p "$tmp/verify"
    sed "s|^ExecStart=[^ ]*|ExecStart=$daemon|" "$installed" \
        >"$tmp/verify/workmanager.service"
    systemd-analyze verify --man=no "$tmp/verify/workmanager.service" \
        >"$tmp/out2" 2>&1 || fail "verify of the installed unit: $(cat "$tmp/out2")"
    grep -e 'workmanager\.service' "$tmp/out2" >/dev/null &&
        fail "systemd-analyze verify on the installed unit: $(cat "$tmp/out2")"
    if command -v systemd-tmpfiles >/dev/null 2>&1; then
        systemd-tmpfiles --create --root="$tmp/root" "$tmpfiles" \
            >"$tmp/out3" 2>&1 || fail "systemd-tmpfiles: $(cat "$tmp/out3")"
        [ -d "$tmp/root/run/workmanager/uids" ] ||
            fail "$tmpfiles does not make /run/workmanager/uids"
    fi
fi

[ "$failed" -eq 0 ] && echo "ok   test_unit (systemd-analyze verify)"
exit "$failed"
