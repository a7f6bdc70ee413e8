#!/usr/bin/env bash
# The CFI walker (unwind.c) against libunwind on real programs: the checking build of the library
# (build/verify/liboomtrace.so, stack.c with OT_UNWIND_VERIFY) recomputes every stack the walker
# returns with libunwind and counts the stacks that differ in any frame. With stacks=all that is
# every allocation of python3, perl, gcc (cc1 and as), a C++ program that throws, threads, and a
# dlopen/dlclose loop. Each must report 0 differing stacks, a floor of stacks compared (so the
# check cannot pass by comparing nothing), and few libunwind fallbacks (at most 4 per process or 1%
# of the stacks: a capture racing with a dlopen, or with another thread's rebuild of the module
# table, is handed to libunwind). Where libunwind's fast trace
# disagrees, its exact walk referees: the fast trace's per-thread cache is not flushed by dlclose
# and misreads code mapped again at the same address (the dlclose loop shows it).
. "$(dirname "$0")/lib.sh"

V=$OT_BUILD/verify/liboomtrace.so
[ -e "$V" ] || { fail unwind_verify "missing $V (run make tests)"; exit 1; }
unset LD_PRELOAD
export LC_ALL=C PYTHONDONTWRITEBYTECODE=1 HOME=$OT_TMP
PY=$(python3 -c 'import sys; print(sys.executable)')

# verify NAME MIN_STACKS CMD...: runs CMD with the checking library and checks its summaries
# (one per process; a program that spawns others prints several). A stack the walker recognised
# as the thread's last one hands back the call site noted for it instead of frames: the checking
# build compares that site's stack with libunwind's too ("noted sites"). MIN_NOTED (environment,
# default 0) is the least number of those the run must have checked.
verify() {
    local name=$1 min=$2; shift 2
    local d; d=$(newdir "$name")
    ( cd "$d" && LD_PRELOAD=$V OOMTRACE_OPTIONS=stacks=all:report=none:log=none${VERIFY_OPTS:+:$VERIFY_OPTS} \
        timeout "${OT_TIMEOUT:-120}" "$@" >"$d/out.txt" 2>"$d/err.txt" )
    local rc=$?
    local sums compared differ falls stale noted
    sums=$(grep '^oomtrace-verify: [0-9]* stacks compared' "$d/err.txt")
    compared=$(printf '%s\n' "$sums" | awk '{s += $2} END {print s + 0}')
    differ=$(printf '%s\n' "$sums" | awk '{s += $5} END {print s + 0}')
    falls=$(printf '%s\n' "$sums" | awk '{s += $7} END {print s + 0}')
    stale=$(printf '%s\n' "$sums" | awk '{s += $13} END {print s + 0}')
    noted=$(printf '%s\n' "$sums" | awk 'NF > 2 {s += $(NF - 2)} END {print s + 0}')
    local procs; procs=$(printf '%s\n' "$sums" | grep -c .)
    if [ "$rc" -ne 0 ]; then
        fail "unwind_verify_$name" "exit status $rc: $(tail -n 3 "$d/err.txt")"
    elif [ "$procs" -eq 0 ] || [ "$compared" -lt "$min" ]; then
        fail "unwind_verify_$name" "only $compared stacks compared in $procs processes (want >= $min)"
    elif [ "$noted" -lt "${MIN_NOTED:-0}" ]; then
        fail "unwind_verify_$name" "only $noted noted call sites checked (want >= $MIN_NOTED)"
    elif [ "$differ" -ne 0 ]; then
        fail "unwind_verify_$name" "$differ of $compared stacks differ from libunwind: $(grep -m3 'frames differ' "$d/err.txt" | tr '\n' ' ')"
    elif [ $((falls * 100)) -gt "$compared" ] && [ "$falls" -gt $((procs * 4)) ]; then
        fail "unwind_verify_$name" "$falls libunwind fallbacks for $compared stacks in $procs processes"
    else
        echo "  $name: $compared stacks in $procs processes identical to libunwind's ($noted of them as a" \
            "noted call site); $falls fallbacks; $stale where libunwind's fast trace was wrong and its exact" \
            "walk agreed with the CFI walker"
        pass "unwind_verify_$name"
    fi
}

cat >"$OT_TMP/walk.py" <<'PYEOF'
import json, re
d = {str(i): [i, {'k': str(i) * 3}] for i in range(60000)}
s = json.dumps(d)
print(len(json.loads(s)), len(re.findall(r'"\d+"', s)))
PYEOF
cat >"$OT_TMP/walk.c" <<'CEOF'
#include <stdio.h>
struct node { int v; struct node *next; };
static int sum(struct node *n) { return n ? n->v + sum(n->next) : 0; }
int main(void) { struct node a = {1, 0}, b = {2, &a}; printf("%d\n", sum(&b)); return 0; }
CEOF

MIN_NOTED=1000 verify python3 100000 "$PY" "$OT_TMP/walk.py"
verify perl 50000 perl -e 'my %h; $h{$_} = [$_, "x" x ($_ % 40)] for 1 .. 50000; my @k = sort keys %h; print scalar(@k), "\n"'
if command -v gcc >/dev/null 2>&1; then
    verify gcc 2000 gcc -O2 -c "$OT_TMP/walk.c" -o "$OT_TMP/walk.o"
else
    skip unwind_verify_gcc "gcc is not installed"
fi
verify cxx_new_handler 5 "$OT_BUILD/targets/new_handler" recover
MIN_NOTED=1000 verify threads 1000 "$OT_BUILD/targets/thr_totals"
# Random depths up to 150 frames: joins at every depth, walks longer than the walker keeps and cut
# at the depth limit, at the default limit and at a small one.
MIN_NOTED=1000 verify deep_random 100000 "$OT_BUILD/targets/deep_random" 20000
VERIFY_OPTS=stack_depth=5 MIN_NOTED=1000 verify deep_random_depth5 100000 "$OT_BUILD/targets/deep_random" 20000
# Allocations from ~2,000 distinct recursive stacks (tests/bench/recursive_stacks.c), more than the
# walker's sixteen walks: most of them found again in its stack memo, each such site compared too.
if [ -x "$OT_BUILD/bench/recursive_stacks" ]; then
    MIN_NOTED=50000 verify recursive_stacks 70000 "$OT_BUILD/bench/recursive_stacks" 1000
else
    fail unwind_verify_recursive_stacks "$OT_BUILD/bench/recursive_stacks is not built (make tests builds it)"
fi
# The same built with frame pointers: its frames' CFA is rbp-based, stepped through the step
# cache's rbp table, and every key frame's saved rbp is checked.
if [ -x "$OT_BUILD/bench/recursive_stacks_fp" ]; then
    MIN_NOTED=50000 verify recursive_stacks_fp 70000 "$OT_BUILD/bench/recursive_stacks_fp" 1000
else
    fail unwind_verify_recursive_stacks_fp "$OT_BUILD/bench/recursive_stacks_fp is not built (make tests builds it)"
fi
verify dlclose_loop 1000 "$OT_BUILD/targets/dlc_loop" "$OT_BUILD/targets/libdlca.so" "$OT_BUILD/targets/libdlcb.so" 200
# Start-up: the warm-up in ot_stack_init walks only its own frames with the CFI walker. Past them
# lie the loader's start-up frames, which the walker hands to unw_backtrace, whose first call maps
# and fills a 16,384-frame trace cache: a third of what oomtrace added to every process's start.
# A program that allocates nothing (/bin/true) therefore makes no fallback at all.
d=$(newdir startup)
LD_PRELOAD=$V OOMTRACE_OPTIONS=report=none:log=none /bin/true 2>"$d/err.txt"
falls=$(awk '/^oomtrace-verify: [0-9]* stacks compared/ {print $7}' "$d/err.txt")
check unwind_verify_startup_no_fallback bash -c '[ "$1" = 0 ]' _ "${falls:-missing}"
