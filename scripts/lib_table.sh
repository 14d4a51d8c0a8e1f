# shellcheck shell=bash
# lib_table.sh - what the CPU table scripts (scripts/cpu_table_*.sh) share,
# sourced by each: the real matrices of the MANIFEST, one stored run per
# solve (RAW/TAG.csv, .err, .rc) and the Python that reads those runs back.
# Sourcing it only defines functions.

# table_settings NAME [OUTPUT.md]: the settings cpu_table_NAME.sh takes from
# the environment (its header lists them) with their defaults: GPUSOLVE,
# MATRICES, OUT_MD, RAW, TIMEOUT, REPEAT, OMP_NUM_THREADS (exported); then RAW
# made and the program checked (the script exits without it).
# shellcheck disable=SC2034 # the variables are the sourcing script's
table_settings() {
    GPUSOLVE=${GPUSOLVE:-build/gpusolve}
    MATRICES=${GS_MATRICES:-../shared/matrices}
    OUT_MD=${2:-docs/results-cpu-$1.md}
    RAW=${RAW:-build/cpu_table_$1}
    TIMEOUT=${TIMEOUT:-600}
    REPEAT=${REPEAT:-3}
    export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
    mkdir -p "$RAW"
    [ -x "$GPUSOLVE" ] || { echo "no $GPUSOLVE: run make CUDA=0 first" >&2; exit 1; }
}

# table_real_matrices MANIFEST.tsv: its rows without the header and without
# the complex matrices (the field column is the sixth).
table_real_matrices() {
    tail -n +2 "$1" | awk -F'\t' '$6 != "complex"'
}

# table_run TAG SECONDS COMMAND...: COMMAND under a time limit, its CSV in
# $RAW/TAG.csv, its stderr in $RAW/TAG.err and its exit status in $RAW/TAG.rc.
table_run() {
    local tag=$1 seconds=$2; shift 2
    timeout "$seconds" "$@" >"$RAW/$tag.csv" 2>"$RAW/$tag.err"
    echo $? >"$RAW/$tag.rc"
}

# table_python ARGS...: python3 on the helpers below followed by the program
# on stdin (a heredoc), with ARGS as sys.argv[1:].
table_python() {
    { table_python_helpers; cat; } | python3 - "$@"
}

table_python_helpers() {
    cat <<'EOF'
import csv, os

def stored_runs(raw):
    """result(tag) for the runs table_run stored in the folder raw"""
    def result(tag):
        """(first CSV row as a dict or None, exit status or None if not run,
        last stderr line)"""
        base = os.path.join(raw, tag)
        if not os.path.exists(base + ".rc"):
            return None, None, ""
        rc = int(open(base + ".rc").read().strip() or -1)
        rows = list(csv.DictReader(open(base + ".csv"))) if os.path.getsize(base + ".csv") else []
        err = open(base + ".err").read().strip().splitlines()
        return (rows[0] if rows else None), rc, (err[-1] if err else "")
    return result

def real_manifest(path):
    """the MANIFEST rows (dicts) of the real, i.e. non-complex, matrices"""
    return [r for r in csv.DictReader(open(path), delimiter="\t") if r["field"] != "complex"]

def program_message(msg):
    """a gpusolve error line without its 'gpusolve: INPUT: ' start"""
    return msg.split(": ", 2)[-1] if msg.startswith("gpusolve:") else msg
EOF
}
