#!/usr/bin/env bash
# What the flight recorder and the pressure watch add, in instructions (valgrind --tool=callgrind,
# steady on a shared machine where wall time is not), on the bench's everyday programs at the sizes
# `make bench` counts them: cc1 and python3 whole runs, np_loop, small_churn, and start-up (/bin/true).
# Variants: recorder=0 (the reference), the default (a state file from 8 MiB live), and
# recorder_min_bytes=0 (a state file in every process, from its first 256 KiB). Prints a table.
#   usage: scripts/recorder_cost.sh [WORKLOAD...]   (cc1 python3 np_loop small_churn startup)
set -u
cd "$(dirname "$0")/.." || exit 1
make -s all build/bench/small_churn >&2 || exit 1
command -v valgrind >/dev/null || { echo "recorder_cost: valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
IN=$(mktemp -d /tmp/oomtrace-reccost.XXXXXX)
trap 'rm -rf "$IN"' EXIT
# The bench's own input generators, taken from scripts/bench.sh so that the inputs are the same.
for g in gen_big_c alloc_heavy; do
    awk -v g="$g" '$0 ~ "cat >\"\\$IN/" g ".py\" <<.EOF." {f=1; next} f && /^EOF$/ {exit} f' scripts/bench.sh >"$IN/$g.py"
done
python3 "$IN/gen_big_c.py" 25 >"$IN/small.c"   # bench.sh: cc1_funcs / 8
LIB=$PWD/build/liboomtrace.so
CC1=$(gcc -print-prog-name=cc1)
PY=/usr/bin/python3; [ -x $PY ] || PY=$(command -v python3) # not a wrapper script: valgrind counts one process
count() { # OPTIONS CMD...: instructions of the whole run
    local opts=$1; shift
    env PYTHONHASHSEED=0 LD_PRELOAD="$LIB" OOMTRACE_OPTIONS="log=none:report=none${opts:+:$opts}" \
        valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
        sed -n 's/.*Collected : *\([0-9]*\).*/\1/p' | tail -1
}
ws=${*:-cc1 python3 np_loop small_churn startup}
printf '%-12s %14s %14s %8s %14s %8s\n' workload recorder=0 default added min_bytes=0 added
for w in $ws; do
    case $w in
        cc1) cmd=("$CC1" -quiet -O2 "$IN/small.c" -o "$IN/small.s") ;;
        python3) cmd=("$PY" "$IN/alloc_heavy.py" 5) ;;
        np_loop) "$PY" -c 'import numpy' 2>/dev/null || { echo "np_loop: skipped, numpy is not installed for $PY"; continue; }
                 cmd=("$PY" tests/bench/np_loop.py 1000 "$(grep -m1 '^NP_SIZE=' scripts/bench.sh | cut -d= -f2)") ;;
        small_churn) cmd=(build/bench/small_churn 200000) ;;
        startup) cmd=(/bin/true) ;;
        *) echo "unknown workload $w" >&2; continue ;;
    esac
    r=$(count recorder=0 "${cmd[@]}"); d=$(count "" "${cmd[@]}"); z=$(count recorder_min_bytes=0 "${cmd[@]}")
    awk -v w="$w" -v r="$r" -v d="$d" -v z="$z" 'BEGIN { printf "%-12s %14.0f %14.0f %+7.2f%% %14.0f %+7.2f%%\n", w, r, d, (d - r) * 100 / r, z, (z - r) * 100 / r }'
done
