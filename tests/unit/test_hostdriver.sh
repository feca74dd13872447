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

# Text, JSON (reals in their short form) and binary data, an error, a log
# line, and an event whose id and specversion events.c fills in.
cat >"$tmp/events" <<'JSON'
{"id":"e1","type":"t","source":"/s","datacontenttype":"text/plain","data":"hello","corr":"x","log":"hello from e1"}
{"id":"e2","type":"t","source":"/s","data":{"a":[1,2],"price":19.99}}

{"id":"e3","type":"bin","source":"/s","data_base64":"AAEC/w=="}
{"id":"e4","type":"fail","source":"/s"}
{"type":"t","source":"/s","n":3}
JSON

# The filled-in id is a fresh UUIDv4: <uuid> below, checked apart.
cat >"$tmp/want" <<'JSON'
{"event":"e1","outputs":[{"specversion":"1.0","id":"e1","source":"/s","type":"t.out","datacontenttype":"text/plain","corr":"x","log":"hello from e1","data":"hello"}]}
{"event":"e2","outputs":[{"specversion":"1.0","id":"e2","source":"/s","type":"t.out","data":{"a":[1,2],"price":19.99}}]}
{"event":"e3","outputs":[{"specversion":"1.0","id":"e3","source":"/s","type":"bin.out","data_base64":"AAEC/w=="}]}
{"event":"e4","outputs":[],"error":{"type":"worker_error","message":"asked to fail","exception_type":"EchoError"}}
{"event":"<uuid>","outputs":[{"specversion":"1.0","id":"<uuid>","source":"/s","type":"t.out","n":"3"}]}
JSON
hex='[0-9a-f]'
uuid="$hex\{8\}-$hex\{4\}-4$hex\{3\}-[89ab]$hex\{3\}-$hex\{12\}"

# 1. the whole exchange
"$driver" --mime text/x-python --code "$tmp/code.py" --events "$tmp/events" \
    --config greeting=hi -- "$host" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 0 ] || fail "driver exited $rc: $(cat "$tmp/err")"
sed "s/$uuid/<uuid>/g" "$tmp/out" >"$tmp/out.uuid"
if ! cmp -s "$tmp/want" "$tmp/out.uuid"; then
    fail "Result lines differ:"
    diff "$tmp/want" "$tmp/out.uuid" >&2
fi
grep -q "^{\"event\":\"\($uuid\)\",.*\"id\":\"\1\"" "$tmp/out" ||
    fail "the filled-in id is not the event's: $(tail -n 1 "$tmp/out")"
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
    --event '{"type":"t","source":"/s","Bad":"x"}' -- "$host"
grep -q '^wm-hostdriver: --event: extension name "Bad" is not' "$tmp/err" ||
    fail "bad extension name: $(cat "$tmp/err")"
# A bad event in a file is reported with its line, before the host starts.
printf '{"type":"t","source":"/s"}\n\n{"type":"t"}\n' >"$tmp/bad-events"
expect_exit 2 "event without source" \
    "$driver" --mime m --code "$tmp/code.py" --events "$tmp/bad-events" \
    -- "$host"
grep -q '^wm-hostdriver: line 3: attribute "source" is required$' \
    "$tmp/err" || fail "event without source: $(cat "$tmp/err")"
grep -q 'host pid' "$tmp/err" && fail "event without source: host started"
[ -s "$tmp/out" ] && fail "event without source: unexpected output"

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
