#!/usr/bin/env bash
# deps.sh - make sure the Debian (and Python) packages a make target needs are installed.
# Quiet when all are there; installs the missing ones through apt-get (pip for
# the pip kind) when run as root; otherwise stops with the one command to run.
#
# usage: scripts/dev/deps.sh [--dry-run] PACKAGE:KIND:WHAT ...
#   KIND header   WHAT is a C header that $CC (default cc) must find
#        command  WHAT is a program that must be on PATH
#        fuzzer   WHAT is a compiler that must link -fsanitize=fuzzer; when the
#                 compiler is there but cannot, the package is its runtime,
#                 libclang-rt-<major>-dev
#        pip      WHAT is a Python module that $PYTHON (default python3) must
#                 import; PACKAGE is its name on PyPI, installed with pip
#   --dry-run     say what would be installed, change nothing
# Example: scripts/dev/deps.sh zlib1g-dev:header:zlib.h pkg-config:command:pkg-config
#          scripts/dev/deps.sh matplotlib:pip:matplotlib pytest:pip:pytest
set -uo pipefail

dry_run=0
if [ "${1:-}" = --dry-run ]; then dry_run=1; shift; fi
cc=${CC:-cc}
python=${PYTHON:-python3}
command -v "$cc" >/dev/null 2>&1 || cc=cc
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

has_header() { printf '#include <%s>\n' "$1" | "$cc" -E -x c - >/dev/null 2>&1; }

# Prints the package that supplies a libFuzzer-capable $1, or nothing if $1 is fine.
fuzzer_package() {
    local compiler=$1 package=$2
    command -v "$compiler" >/dev/null 2>&1 || { echo "$package"; return; }
    printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return d && n; }\n' \
        >"$scratch/f.c"
    "$compiler" -fsanitize=fuzzer,address,undefined "$scratch/f.c" -o "$scratch/f" \
        >/dev/null 2>&1 && return
    local major
    major=$("$compiler" -dumpversion 2>/dev/null | cut -d. -f1)
    echo "libclang-rt-${major:-14}-dev"
}

has_module() { "$python" -c "import $1" >/dev/null 2>&1; }

# The packages among the specs whose test fails, each once; the pip kind's
# packages come from a different installer, so $1 picks: debian or pip.
missing_packages() {
    local want=$1 spec package kind what need
    shift
    for spec in "$@"; do
        IFS=: read -r package kind what <<<"$spec"
        need=
        if [ "$kind" = pip ]; then [ "$want" = pip ] || continue
        else [ "$want" = debian ] || continue; fi
        case $kind in
        header) has_header "$what" || need=$package ;;
        command) command -v "$what" >/dev/null 2>&1 || need=$package ;;
        fuzzer) need=$(fuzzer_package "$what" "$package") ;;
        pip) has_module "$what" || need=$package ;;
        esac
        [ -n "$need" ] && echo "$need"
    done | awk '!seen[$0]++' | tr '\n' ' ' | sed 's/ $//'
}

for spec in "$@"; do
    case $spec in
    *:header:?* | *:command:?* | *:fuzzer:?* | *:pip:?*) ;;
    *) echo "deps.sh: bad requirement '$spec' (PACKAGE:header|command|fuzzer|pip:WHAT)" >&2; exit 2 ;;
    esac
done

# pip packages: the same rule as the Debian ones below (root installs, anyone
# else is told the command), through the interpreter that must import them.
pip_missing=$(missing_packages pip "$@")
if [ -n "$pip_missing" ]; then
    command="$python -m pip install $pip_missing"
    if [ "$(id -u)" != 0 ]; then
        echo "Missing Python packages: $pip_missing. Install them with:" >&2
        echo "    $python -m pip install --user $pip_missing" >&2
        [ $dry_run = 1 ] || exit 1
    elif [ $dry_run = 1 ]; then
        echo "deps.sh: missing: $pip_missing; would run: $command"
    else
        echo "deps.sh: installing missing Python packages: $pip_missing"
        $python -m pip install -q $pip_missing >"$scratch/pip.log" 2>&1 ||
            { cat "$scratch/pip.log" >&2; echo "deps.sh: could not install: $pip_missing" >&2; exit 1; }
        still=$(missing_packages pip "$@")
        [ -n "$still" ] && { echo "deps.sh: installed, but still missing: $still" >&2; exit 1; }
    fi
fi

missing=$(missing_packages debian "$@")
[ -z "$missing" ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    command="apt-get update && apt-get install -y $missing"
    if [ $dry_run = 1 ]; then
        echo "deps.sh: missing: $missing; would run: $command"
        exit 0
    fi
    echo "deps.sh: installing missing Debian packages: $missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >"$scratch/apt.log" 2>&1 &&
        apt-get install -y -qq $missing >>"$scratch/apt.log" 2>&1 ||
        { cat "$scratch/apt.log" >&2; echo "deps.sh: could not install: $missing" >&2; exit 1; }
    still=$(missing_packages debian "$@")
    [ -z "$still" ] && exit 0
    echo "deps.sh: installed, but still missing: $still" >&2
    exit 1
fi

if command -v apt-get >/dev/null 2>&1; then
    echo "Missing Debian packages: $missing. Install them with:" >&2
    echo "    sudo apt-get install -y $missing" >&2
else
    echo "Missing (Debian package names): $missing. Install them with your system's package manager." >&2
fi
[ $dry_run = 1 ] && exit 0
exit 1
