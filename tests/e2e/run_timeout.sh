#!/usr/bin/env bash
# tests/run.sh's time limit, taken out of the script and checked on its own: a test that runs past
# OT_TEST_TIMEOUT is stopped and counted as failed with a message naming it (a livelock in the
# lock-free table hangs instead of failing); one that finishes in time counts as before; a bad
# limit is refused with one message naming it.
. "$(dirname "$0")/lib.sh"
RUN=$OT_ROOT/tests/run.sh
D=$(newdir run_timeout)
sed -n '/^run_one() {/,/^}/p' "$RUN" >"$D/run_one.sh"
if ! grep -q '^run_one()' "$D/run_one.sh"; then
    fail run_timeout_found "run_one not found in tests/run.sh"
    exit 0
fi
pass run_timeout_found

# try LIMIT LOG LABEL CMD...: run_one LABEL CMD... under LIMIT seconds; its output, then "counts P F S".
try() {
    bash -c '. "$1"; limit=$2; log=$3; passed=0 failed=0 skipped=0; shift 3; run_one "$@"
             echo "counts $passed $failed $skipped"' _ "$D/run_one.sh" "$@"
}
out=$(try 1 "$D/log" slow bash -c 'echo "PASS early"; sleep 30')
check run_timeout_stops bash -c '[[ "$1" == *"[slow] did not finish within 1 s"* && "$1" == *"counts 1 1 0"* ]]' _ "$out"
out=$(try 5 "$D/log" quick bash -c 'echo "PASS quick"')
check run_timeout_quick_passes bash -c '[[ "$1" != *"did not finish"* && "$1" == *"counts 1 0 0"* ]]' _ "$out"
out=$(try 5 "$D/log" crash bash -c 'exit 3')
check run_timeout_other_status bash -c '[[ "$1" == *"exited with status 3 without a FAIL line"* && "$1" != *"did not finish"* ]]' _ "$out"
out=$(OT_TEST_TIMEOUT=soon bash "$RUN" 2>&1); rc=$?
check run_timeout_bad_value bash -c '[ "$2" -eq 2 ] && [[ "$1" == *"OT_TEST_TIMEOUT"*"not '"'"'soon'"'"'"* ]]' _ "$out" "$rc"
