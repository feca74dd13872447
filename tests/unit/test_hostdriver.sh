#!/bin/sh
# test_hostdriver.sh — wm-hostdriver against the reference echo host: the
# handshake, Load with a sealed memfd, Process/Result as JSON lines, Log
# forwarding, Shutdown and the exit status; then the driver's failures
# (usage, a host that cannot start, dies before its Hello or stays silent).
# Run by `make check` from the top build directory.

set -u
driver=./tests/hostdriver/wm-hostdriver
host=./tests/hostdriver/echo_host
for p in "$driver" "$host"; do
    if [ ! -x "$p" ]; then
        echo "FAIL: $p not built" >&2
        exit 1
    fi
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_hostdriver.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
failed=0

fail() {
    echo "FAIL: $*" >&2
    failed=1
}

printf 'def Process(event):\n    return event\n' >"$tmp/code.py"

cat >"$tmp/events" <<'JSON'
{"id":"e1","type":"t","source":"/s","data":"hello","corr":"x","log":"hello from e1"}
{"id":"e2","type":"t","source":"/s","data":{"a":[1,2]}}

{"id":"e3","type":"bin","source":"/s","data_base64":"AAEC/w=="}
{"id":"e4","type":"fail","source":"/s"}
{"type":"t","n":3}
JSON

cat >"$tmp/want" <<'JSON'
{"event":"e1","outputs":[{"id":"e1","type":"t.out","source":"/s","specversion":"1.0","corr":"x","log":"hello from e1","data":"hello"}]}
{"event":"e2","outputs":[{"id":"e2","type":"t.out","source":"/s","specversion":"1.0","datacontenttype":"application/json","data":"{\"a\":[1,2]}"}]}
{"event":"e3","outputs":[{"id":"e3","type":"bin.out","source":"/s","specversion":"1.0","data_base64":"AAEC/w=="}]}
{"event":"e4","outputs":[],"error":{"type":"worker_error","message":"asked to fail","exception_type":"EchoError"}}
{"event":"hostdriver-5","outputs":[{"id":"hostdriver-5","type":"t.out","source":"urn:wm-hostdriver","specversion":"1.0","n":"3"}]}
JSON

# 1. the whole exchange
"$driver" --mime text/x-python --code "$tmp/code.py" --events "$tmp/events" \
    --config greeting=hi -- "$host" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 0 ] || fail "driver exited $rc: $(cat "$tmp/err")"
if ! cmp -s "$tmp/want" "$tmp/out"; then
    fail "Result lines differ:"
    diff "$tmp/want" "$tmp/out" >&2
fi
grep -q '^host info: hello from e1$' "$tmp/err" || fail "Log not forwarded"
grep -q 'engine echo, max_inflight 1' "$tmp/err" || fail "Hello not reported"
grep -q 'host exited with status 0' "$tmp/err" || fail "exit not reported"

# 2. one --event, no events at all
"$driver" --mime m --code "$tmp/code.py" \
    --event '{"id":"x","type":"t","source":"/s"}' -- "$host" \
    >"$tmp/out" 2>"$tmp/err" || fail "--event: exit $?: $(cat "$tmp/err")"
grep -q '"event":"x"' "$tmp/out" || fail "--event: no Result line"
"$driver" --mime m --code "$tmp/code.py" -- "$host" >"$tmp/out" 2>"$tmp/err" ||
    fail "no events: exit $?: $(cat "$tmp/err")"
[ -s "$tmp/out" ] && fail "no events: unexpected output"

# 3. usage and input errors exit 2
expect_exit() {
    want=$1
    what=$2
    shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"
    got=$?
    [ "$got" -eq "$want" ] ||
        fail "$what: exit $got, wanted $want: $(cat "$tmp/err")"
}
expect_exit 2 "no arguments" "$driver"
expect_exit 2 "no host" "$driver" --mime m --code "$tmp/code.py"
expect_exit 2 "no --code" "$driver" --mime m -- "$host"
expect_exit 2 "missing code file" \
    "$driver" --mime m --code "$tmp/nonexistent" -- "$host"
expect_exit 2 "bad JSON" \
    "$driver" --mime m --code "$tmp/code.py" --event '{' -- "$host"
expect_exit 2 "bad extension name" \
    "$driver" --mime m --code "$tmp/code.py" \
    --event '{"type":"t","Bad":"x"}' -- "$host"

# 4. host failures exit 1, with the reason
expect_exit 1 "missing host" \
    "$driver" --mime m --code "$tmp/code.py" -- "$tmp/no-such-host"
grep -q 'cannot start' "$tmp/err" || fail "missing host: $(cat "$tmp/err")"
expect_exit 1 "host exits at once" \
    "$driver" --mime m --code "$tmp/code.py" -- /bin/true
grep -q 'before the handshake' "$tmp/err" ||
    fail "host exits at once: $(cat "$tmp/err")"
expect_exit 1 "silent host" \
    "$driver" --timeout-ms 300 --mime m --code "$tmp/code.py" -- sleep 30
grep -q 'handshake timed out after 300 ms' "$tmp/err" ||
    fail "silent host: $(cat "$tmp/err")"
grep -q 'killed by signal 9' "$tmp/err" ||
    fail "silent host not killed: $(cat "$tmp/err")"

[ "$failed" -eq 0 ] && echo "ok   test_hostdriver"
exit "$failed"
