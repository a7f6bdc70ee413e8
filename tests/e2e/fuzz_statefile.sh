#!/usr/bin/env bash
# The state-file reader against hostile input: the seed corpus (tests/fuzz/corpus: valid, torn,
# truncated files) replayed under ASan/UBSan, and a short bounded libFuzzer run from it (a fixed
# number of runs) as a regression test. Longer runs: README, "The supervisor and post-mortems".
. "$(dirname "$0")/lib.sh"
R=$OT_BUILD/tests/fuzz/replay_statefile
F=$OT_BUILD/tests/fuzz/fuzz_statefile
C=$OT_ROOT/tests/fuzz/corpus
if [ ! -x "$R" ]; then
    fail fuzz_replay "missing $R (run make tests)"
else
    out=$(ASAN_OPTIONS=detect_leaks=1 "$R" "$C"/* 2>&1); rc=$?
    n=$(printf '%s\n' "$out" | grep -c '^ok ')
    want=$(ls "$C" | wc -l)
    if [ "$rc" -eq 0 ] && [ "$n" -eq "$want" ] && printf '%s\n' "$out" | grep -q ': valid, pid' &&
        printf '%s\n' "$out" | grep -q ': torn: neither frame' && printf '%s\n' "$out" | grep -q ': truncated: '; then
        pass fuzz_replay_corpus
    else
        fail fuzz_replay_corpus "status $rc, $n of $want files: $(printf '%s\n' "$out" | tail -n 5 | tr '\n' '|')"
    fi
fi
if [ ! -x "$F" ]; then
    why="no libFuzzer here"
    command -v "${FUZZ_CC:-clang}" >/dev/null 2>&1 || why="clang is not installed"
    skip fuzz_statefile_run "$why (Debian: apt-get install clang libclang-rt-14-dev; scripts/deps.sh tries it)"
    exit 0
fi
W=$(newdir fuzz)
cp "$C"/* "$W/"
runs=${OT_FUZZ_RUNS:-100000}
out=$(cd "$W" && "$F" -runs="$runs" -max_total_time=120 -timeout=5 -rss_limit_mb=1024 -malloc_limit_mb=128 \
    -max_len=65536 "$W" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && printf '%s\n' "$out" | grep -q '^Done [0-9]* runs'; then
    pass fuzz_statefile_run
else
    crash=$(ls "$W"/crash-* "$W"/timeout-* "$W"/oom-* 2>/dev/null | head -n 1)
    [ -n "$crash" ] && cp "$crash" "$OT_BUILD/tests/fuzz/" && crash=$OT_BUILD/tests/fuzz/${crash##*/}
    fail fuzz_statefile_run "status $rc after $(printf '%s\n' "$out" | grep -o '#[0-9]*' | tail -n 1) runs; ${crash:+input $crash; }$(printf '%s\n' "$out" | grep -m 3 -E 'ERROR|SUMMARY|deadly' | tr '\n' '|')"
fi
