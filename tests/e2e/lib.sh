# Shared helpers for end-to-end tests: each test script sources this, runs target programs under
# the preload and prints PASS/FAIL/SKIP lines that tests/run.sh counts.
set -u
OT_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OT_BUILD=${OT_BUILD:-$OT_ROOT/build}
OT_LIB=$OT_BUILD/liboomtrace.so
OT_LAUNCHER=$OT_BUILD/oomtrace
OT_TMP=$(mktemp -d "${TMPDIR:-/tmp}/oomtrace-e2e.XXXXXX")
trap 'rm -rf "$OT_TMP"' EXIT

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: ${2:-}"; }
skip() { echo "SKIP $1: ${2:-no reason given}"; }

# check_silent NAME DIR: a run where nothing failed wrote nothing: no file in DIR but its out.txt and
# err.txt, and nothing on stderr (no report, no log line)
check_silent() {
    local extra_files
    extra_files=$(cd "$2" && ls -A | grep -vx -e out.txt -e err.txt)
    if [ -n "$extra_files" ] || [ -s "$2/err.txt" ]; then
        fail "${1}_silent" "files: [$extra_files] stderr: $(head -c 300 "$2/err.txt")"
    else
        pass "${1}_silent"
    fi
}

# newdir NAME: a fresh directory for one test's reports
newdir() { local d="$OT_TMP/$1"; rm -rf "$d"; mkdir -p "$d"; echo "$d"; }

# run_preloaded OUTDIR CMD...: runs CMD in OUTDIR with the library preloaded, JSON reports to
# OUTDIR/oomtrace.<pid>.<n>.json and the text log to OUTDIR/log.txt. Extra options come from
# OOMTRACE_OPTIONS_EXTRA. Sets RC to the exit status; stdout/stderr go to OUTDIR/out.txt, err.txt.
run_preloaded() {
    local dir=$1; shift
    local opts="report=$dir/oomtrace.%p.%n.json:log=$dir/log.txt"
    [ -n "${OOMTRACE_OPTIONS_EXTRA:-}" ] && opts="$opts:$OOMTRACE_OPTIONS_EXTRA"
    ( cd "$dir" && LD_PRELOAD="$OT_LIB${LD_PRELOAD:+:$LD_PRELOAD}" OOMTRACE_OPTIONS="$opts" \
        timeout "${OT_TIMEOUT:-60}" "$@" >"$dir/out.txt" 2>"$dir/err.txt" )
    RC=$?
    return 0
}

# first_report DIR: path of the first JSON report in DIR (empty if none), not counting pressure
# reports (pressure.c: a program near RLIMIT_AS gets one before its failure's; pressure.sh tests them)
first_report() {
    local f
    for f in $(ls "$1"/oomtrace.*.json 2>/dev/null); do
        grep -q '"event":"pressure"' "$f" || { echo "$f"; return; }
    done
}

# json_get FILE EXPR: evaluates a Python expression on the parsed report `r`
json_get() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"; }

# check NAME CONDITION-COMMAND... : PASS when the command succeeds, else FAIL with context
check() {
    local name=$1; shift
    if "$@"; then pass "$name"; else fail "$name" "failed: $*"; fi
}
# check_report NAME DIR CMD...: check NAME CMD where DIR holds a report; with no report, NAME
# fails (a check of a report's fields must not vanish when the report does).
check_report() {
    local name=$1 dir=$2; shift 2
    if [ -n "$(first_report "$dir")" ]; then check "$name" "$@"; else fail "$name" "no report written in $dir"; fi
}
