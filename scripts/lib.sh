# scripts/lib.sh — build helpers shared by scripts/run and scripts/test
# (sourced, not run).
#
# The source tree is never configured in place: every build lives in its own
# directory (build/ for scripts/run, build-test/<stage>/ for scripts/test),
# configured from the top-level ./configure.  A build directory remembers the
# configure arguments it was made with (.wm-configure); asking for other
# arguments starts it afresh, asking for the same ones only runs make, whose
# automake rules regenerate what the sources' changes require.

# The repository's top directory.
wm_top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Parallel jobs for make: the reference machine has 2 cores.
wm_jobs=${WM_JOBS:-2}

# Generates ./configure and Makefile.in when they are missing or older than
# configure.ac.
wm_autoreconf()
{
    (
        cd "$wm_top" || exit 1
        if [ -f config.status ]; then
            echo "the source tree is configured in place (config.status);" \
                "run 'make distclean' in $wm_top first" >&2
            exit 1
        fi
        # Git keeps no empty directory; aclocal wants the macro directory.
        mkdir -p m4
        if [ ! -x configure ] || [ ! -f Makefile.in ] ||
            [ ! -f build-aux/install-sh ] || [ configure.ac -nt configure ]; then
            echo "+ autoreconf -fi"
            autoreconf -fi
        fi
    )
}

# wm_build DIR [CONFIGURE-ARGUMENT...]: configures DIR (when new or when the
# arguments changed) and runs make there.  Returns make's status.
wm_build()
{
    local dir=$1
    shift
    local want="$*"

    wm_autoreconf || return 1
    if [ ! -f "$dir/Makefile" ] ||
        [ "$(cat "$dir/.wm-configure" 2>/dev/null)" != "$want" ]; then
        # Only a directory these scripts made (.wm-build) is wiped.
        if [ -e "$dir" ] && [ ! -f "$dir/.wm-build" ] &&
            [ -n "$(ls -A "$dir" 2>/dev/null)" ]; then
            echo "$dir is not a build directory of these scripts;" \
                "remove it or choose another" >&2
            return 1
        fi
        rm -rf "$dir"
        mkdir -p "$dir"
        : >"$dir/.wm-build"
        echo "+ (cd $dir && $wm_top/configure $want)"
        (cd "$dir" && "$wm_top/configure" "$@") || return 1
        printf '%s' "$want" >"$dir/.wm-configure"
    fi
    echo "+ make -C $dir -j$wm_jobs"
    make -C "$dir" -j"$wm_jobs"
}
