#!/bin/sh
# test_man.sh — the man pages against the code: each page clean under
# `mandoc -Tlint -W warning`; workmanager.conf(5) documents every key that
# `workmanagerd --print-config` prints (the key table of
# master/core/conf_keys.c), with its WM_<KEY> variable and its default,
# and no key that is not one; wmctl(1) documents every command of wmctl's
# command table (as `wmctl --help` lists it), and no other, shows each in
# its EXAMPLES, and `wmctl help CMD` knows each; what the pages say of an
# engine descriptor (`descriptor says KEY = VALUE`, and which engine does)
# is what engines.d says; no page calls an engine unavailable outright
# (every engine of engines.d is available where its runtime is); and none
# repeats a statement the code has made false (the list below says why).
# The routes are checked against a running daemon by
# tests/integration/test_docs.py.
# Run by `make check` from the top build directory; the pages are read
# from $srcdir (exported by automake's test harness), so that a VPATH
# build and `make distcheck` (read-only sources) work.

set -u
srcdir=${srcdir:-$(dirname "$0")/../..}
man="$srcdir/man"
daemon=./master/workmanagerd
wmctl_bin=./cli/wmctl
engines_d="$srcdir/engines.d"
pages="workmanagerd.8 wmctl.1 workmanager.conf.5 wm-host.8
workmanager-workers.7 workmanager-clients.7"
failed=0

fail() {
    echo "FAIL: $*" >&2
    failed=1
}

# A page as one line of plain text (overstrikes removed, blanks squeezed).
text_of() {
    mandoc -Tascii "$1" 2>/dev/null | sed 's/.\x08//g' | tr -s '[:space:]' ' '
}

if ! command -v mandoc >/dev/null 2>&1; then
    echo "FAIL: mandoc is not installed (Debian package mandoc, listed in" \
        "scripts/debian-packages)" >&2
    exit 1
fi
for b in "$daemon" "$wmctl_bin"; do
    if [ ! -x "$b" ]; then
        echo "FAIL: $b not built" >&2
        exit 1
    fi
done

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

# ... and every key conf(5) describes is one, with the default the code
# has.  Paths are compared as installed with --prefix=/usr
# --sysconfdir=/etc (the pages' paths); "empty" is "".
printed=$(env -i PATH="$PATH" "$daemon" --config /dev/null --print-config)
for k in $(sed -n 's/^\.It Cm \([a-z_][a-z0-9_]*\) No = .*/\1/p' "$conf"); do
    if ! printf '%s\n' "$keys" | grep -qx "$k"; then
        fail "workmanager.conf.5 describes $k, which is no key of" \
            "master/core/conf_keys.c"
    fi
done
ndefaults=0
for k in $keys; do
    line=$(printf '%s\n' "$printed" | grep "^$k = ")
    case $line in *"# default") ;; *) continue ;; esac # derived
    code=$(printf '%s\n' "$line" |
        sed 's/^[^=]*= \(.*[^ ]\) *# default$/\1/')
    code=$(printf '%s\n' "$code" | sed 's|^/usr/local/etc/|/etc/|;
        s|^/usr/local/|/usr/|; s|^""$|empty|')
    doc=$(awk -v k="$k" '
        $0 ~ "^\\.It Cm " k " " { on = 1; next }
        on && /^\.It Cm / { exit }
        on && /^Default: empty/ { print "empty"; exit }
        on && /^Default:$/ { want = 1; next }
        on && want { sub(/^\.(Li|Pa) /, ""); sub(/ \.$/, ""); print; exit }
    ' "$conf")
    if [ -z "$doc" ]; then
        fail "workmanager.conf.5 gives no default for $k (Default: ...)"
    elif [ "$doc" != "$code" ]; then
        fail "workmanager.conf.5 says $k defaults to '$doc'; the code has" \
            "'$code'"
    else
        ndefaults=$((ndefaults + 1))
    fi
done

# 3. Every command of wmctl's command table in wmctl(1), described and in
# its EXAMPLES, and known to `wmctl help CMD`; no other command described.
wmctl="$man/wmctl.1"
commands=$("$wmctl_bin" --help |
    sed -n '/^Commands:$/,/^$/s/^  \([a-z]*\).*/\1/p')
if [ -z "$commands" ]; then
    fail "$wmctl_bin --help lists no command"
fi
examples=$(sed -n '/^\.Sh EXAMPLES/,/^\.Sh /p' "$wmctl" 2>/dev/null)
for c in $commands; do
    if ! grep -Eq "^\.(It )?Ic $c( |$)" "$wmctl"; then
        fail "wmctl.1 does not describe command $c (.It Ic $c)"
    fi
    if ! printf '%s\n' "$examples" |
        grep -Eq "wmctl( --[a-z-]+( [^ -][^ ]*)?)* $c( |$)"; then
        fail "wmctl.1 has no example of wmctl $c"
    fi
    if ! "$wmctl_bin" help "$c" | grep -q "^usage: wmctl $c"; then
        fail "wmctl help $c does not print its usage"
    fi
done
# (an entry is `.It Ic CMD ...`, or `.It Xo` then `.Ic CMD ...`)
for c in $(awk '/^\.Sh COMMANDS/ { on = 1; next } on && /^\.Sh / { exit }
        on && /^\.It Ic / { print $3 } on && xo && /^\.Ic / { print $2 }
        { xo = on && /^\.It Xo/ }' "$wmctl"); do
    if ! printf '%s\n' "$commands" | grep -qx "$c"; then
        fail "wmctl.1 describes command $c, which wmctl does not have"
    fi
done

# 4. What a page says an engine descriptor says is in engines.d:
#   An engine whose descriptor says
#   .Cm KEY No = Cm|Li VALUE          (some descriptor has KEY = VALUE)
#   .Pq ENGINE ...                     (and ENGINE's does, when named)
# An engine is named by its name or its language (the native engine,
# Python, .NET); a value written .Ar N takes ENGINE's "ENGINE: N".
engine_file() { # the descriptor of an engine named by name or language
    for f in "$engines_d"/*.engine; do
        if grep -qix "name = $1" "$f" ||
            grep -Eqi "^language = (.*, )?$1(,|$| )" "$f"; then
            echo "$f"
            return
        fi
    done
}
ndescriptor=0
for p in $pages; do
    claims=$(awk '
        /descriptor says$/ { getline kv; getline who;
            if (kv ~ /^\.Cm [a-z_]+ No = /) print kv "|" who }
    ' "$man/$p")
    [ -n "$claims" ] || continue
    while IFS='|' read -r kv who; do
        key=$(printf '%s' "$kv" | sed 's/^\.Cm \([a-z_]*\) No = .*/\1/')
        kind=$(printf '%s' "$kv" | sed 's/^.* No = \([A-Za-z]*\) .*/\1/')
        value=$(printf '%s' "$kv" |
            sed 's/^.* No = [A-Za-z]* \([^ ]*\).*/\1/')
        name=$(printf '%s' "$who" |
            sed -n 's/^\.Pq \(the \)\{0,1\}\([A-Za-z.]*\).*/\2/p')
        file=
        [ -n "$name" ] && file=$(engine_file "$name")
        if [ "$kind" = Ar ]; then
            value=$(printf '%s' "$who" |
                sed -n "s/^\.Pq $name: \([^ ;]*\).*/\1/p")
            [ -n "$value" ] || continue
        fi
        if [ -n "$file" ]; then
            grep -Eq "^$key = $value\$" "$file" ||
                fail "$p: the $name engine's descriptor says $key =" \
                    "$value, but $(basename "$file") does not"
        elif ! cat "$engines_d"/*.engine | grep -Eq "^$key = $value\$"; then
            fail "$p: an engine's descriptor says $key = $value, but no" \
                "descriptor of engines.d does"
        fi
        ndescriptor=$((ndescriptor + 1))
    done <<EOF_CLAIMS
$claims
EOF_CLAIMS
done

# 5. No page calls an engine of engines.d unavailable outright: each is
# available where its host and runtime are (GET /v1/engines says why
# not), so a sentence that names one beside "unavailable" must say when.
for f in "$engines_d"/*.engine; do
    name=$(sed -n 's/^name = //p' "$f")
    lang=$(sed -n 's/^language = \([^,]*\).*/\1/p' "$f")
    what=$(sed -n 's/^description = \([^ :]*\).*/\1/p' "$f")
    for p in $pages; do
        hits=$(text_of "$man/$p" | sed 's/\([.;]\) /\1\n/g' |
            grep -Ei "(^|[^_[:alnum:]])unavailable" |
            grep -iwF -e "$lang" -e "$what" -e "$name engine" |
            grep -Eiv "whose|where|when|without|lacks|missing|unless|if ")
        if [ -n "$hits" ]; then
            fail "$p calls the $name engine unavailable outright:" \
                "$(printf '%s' "$hits" | head -1)"
        fi
    done
done

# 6. Statements the code has made false, each with what is true now.
stale() { # page, fixed string, why it is false
    if text_of "$man/$1" | grep -qiF "$2"; then
        fail "$1 says \"$2\": $3"
    fi
}
stale wmctl.1 "not enforced until the sandbox exists" \
    "limits.memory_mb is the host's cgroup memory.max and RLIMIT_AS"
stale wmctl.1 "no engine of this version does" \
    "the native engine's descriptor has in_process = yes"
stale wmctl.1 "and its state keys. Prints nothing." \
    "wmctl delete prints 'deleted WORKER' (cli/cmd_workers.c)"
stale workmanagerd.8 "The Python and .NET engines are listed" \
    "each is available where its runtime is (engines.d probes)"

if [ $failed -eq 0 ]; then
    echo "ok: $(echo $pages | wc -w) pages lint clean, $nkeys keys" \
        "($ndefaults defaults), $(echo $commands | wc -w) wmctl commands and" \
        "$ndescriptor descriptor statements documented as the code has them"
fi
exit $failed
