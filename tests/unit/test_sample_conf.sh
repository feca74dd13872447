#!/bin/sh
# test_sample_conf.sh — the sample workmanager.conf (contrib/mkconf) names
# every key of the daemon once, commented out, and is true: with every key
# uncommented the daemon accepts it and every value is the built-in
# default.  Run by `make check` from the top build directory.

set -u
sample=./contrib/workmanager.conf
daemon=./master/workmanagerd
for p in "$sample" "$daemon"; do
    if [ ! -f "$p" ]; then
        echo "FAIL: $p not built" >&2
        exit 1
    fi
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_sample_conf.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
failed=0

fail() {
    echo "FAIL: $*" >&2
    failed=1
}

# The defaults, as the daemon prints them: "key = value  # origin".
env -i "$daemon" --print-config --config /dev/null >"$tmp/defaults" ||
    fail "--print-config --config /dev/null failed"
sed 's/ = .*//' "$tmp/defaults" >"$tmp/keys"
[ -s "$tmp/keys" ] || fail "--print-config printed no key"

# Every key once as "#key = ", nothing set.
sed -n 's/^#\([a-z0-9_]*\) = .*/\1/p' "$sample" >"$tmp/sample-keys"
if ! cmp -s "$tmp/keys" "$tmp/sample-keys"; then
    fail "the sample's keys differ from --print-config's:"
    diff "$tmp/keys" "$tmp/sample-keys" >&2
fi
grep -v -e '^#' -e '^$' "$sample" && fail "the sample sets a key"

# Uncommented, it is a valid configuration of the defaults.
sed 's/^#\([a-z0-9_]* = \)/\1/' "$sample" >"$tmp/all.conf"
if ! env -i "$daemon" --print-config --config "$tmp/all.conf" \
    >"$tmp/from-sample" 2>"$tmp/err"; then
    fail "the uncommented sample is refused: $(cat "$tmp/err")"
fi
# Values only: the origins differ (file ... instead of default).
sed 's/[[:space:]]*# .*//' "$tmp/defaults" >"$tmp/a"
sed 's/[[:space:]]*# .*//' "$tmp/from-sample" >"$tmp/b"
if ! cmp -s "$tmp/a" "$tmp/b"; then
    fail "the uncommented sample changes values:"
    diff "$tmp/a" "$tmp/b" >&2
fi
grep -q '# file ' "$tmp/from-sample" ||
    fail "no value of the uncommented sample came from the file"

[ "$failed" -eq 0 ] && echo "ok   test_sample_conf"
exit "$failed"
