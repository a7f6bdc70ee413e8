#!/usr/bin/env bash
# Runs every test of the project: unit tests (plain, ASan, TSan builds) and end-to-end scripts.
# Each prints PASS/FAIL/SKIP lines; this script counts them and ends with "N passed, N failed".
# A test that runs past OT_TEST_TIMEOUT seconds (900) is stopped and counted as failed: a lock-free
# structure that livelocks hangs rather than fails, and CI should say which test did.
set -u
cd "$(dirname "$0")/.."
B=${OT_BUILD:-build}
limit=${OT_TEST_TIMEOUT:-900}
case $limit in '' | *[!0-9]* | 0) echo "tests/run.sh: OT_TEST_TIMEOUT wants a whole number of seconds above 0, not '$limit'" >&2; exit 2 ;; esac
passed=0 failed=0 skipped=0
log=$(mktemp)
run_one() {
    local label=$1; shift
    local out rc t0=$SECONDS
    out=$(timeout --kill-after=10 "$limit" "$@" 2>&1); rc=$?
    printf '%s\n' "$out" | sed "s|^|[$label] |" >>"$log"
    local p f s
    p=$(printf '%s\n' "$out" | grep -c '^PASS ')
    f=$(printf '%s\n' "$out" | grep -c '^FAIL ')
    s=$(printf '%s\n' "$out" | grep -c '^SKIP ')
    printf '%s\n' "$out" | grep -E '^(FAIL|SKIP) ' | sed "s|^|  [$label] |"
    local why=""
    if [ "$rc" -eq 124 ] || { [ "$rc" -eq 137 ] && [ $((SECONDS - t0)) -ge "$limit" ]; }; then
        why="did not finish within $limit s (OT_TEST_TIMEOUT); its last lines:"
    elif [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        why="exited with status $rc without a FAIL line:"
    fi
    if [ -n "$why" ]; then
        echo "  [$label] $why"
        printf '%s\n' "$out" | tail -n 15 | sed 's/^/    /'
        f=$((f + 1))
    fi
    if [ $((p + f + s)) -eq 0 ]; then
        echo "  [$label] printed no test result"; f=1
    fi
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
    printf '%-44s %3d passed %3d failed %3d skipped\n' "$label" "$p" "$f" "$s"
}
for t in "$B"/tests/unit/test_*; do [ -x "$t" ] && run_one "unit/$(basename "$t")" "$t"; done
for t in "$B"/tests/asan/test_*; do [ -x "$t" ] && run_one "asan/$(basename "$t")" env ASAN_OPTIONS=detect_leaks=0 "$t"; done
for t in "$B"/tests/tsan/test_*; do [ -x "$t" ] && run_one "tsan/$(basename "$t")" env TSAN_OPTIONS=halt_on_error=1 "$t"; done
# memcheck on the core pieces whose tests do not depend on /proc/self/exe or interpose malloc.
for t in test_fmt test_options test_sites test_stack; do
    if command -v valgrind >/dev/null 2>&1; then
        run_one "valgrind/$t" valgrind -q --suppressions=tests/valgrind.supp --error-exitcode=99 "$B/tests/unit/$t"
    else
        run_one "valgrind/$t" echo "SKIP $t: valgrind is not installed"
    fi
done
for t in tests/e2e/*.sh; do [ "$(basename "$t")" = lib.sh ] && continue; run_one "e2e/$(basename "$t" .sh)" bash "$t"; done
echo "full output: $log"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
