#!/usr/bin/env bash
# Exact live totals under threads: 8 threads allocate, reallocate and free at random, a consumer
# frees (and grows) blocks that a producer allocated; the target keeps its own account of what is
# still live and prints it next to the oomtrace_get_totals() delta, which must match exactly — with
# the default (sampled) stacks, with a stack for every allocation, and with no stacks. Without the
# preload the weak API is absent and the program works the same.
. "$(dirname "$0")/lib.sh"
T=$OT_BUILD/targets
BIN=$T/thr_totals

for f in "$OT_LIB" "$BIN"; do
    [ -e "$f" ] || { fail host_threads "missing $f (run make tests)"; exit 1; }
done

# expected_line / delta_line FILE: the target's own account and the tracker's delta
expected_of() { sed -n 's/^expected count=\([0-9]*\) bytes=\([0-9]*\)$/\1 \2/p' "$1"; }
delta_of() { sed -n 's/^delta count=\(-\{0,1\}[0-9]*\) bytes=\(-\{0,1\}[0-9]*\)$/\1 \2/p' "$1"; }

REF_EXPECTED=""
totals_case() {
    local name=$1 extra=$2
    local d
    d=$(newdir "$name")
    OOMTRACE_OPTIONS_EXTRA=$extra run_preloaded "$d" "$BIN"
    if [ "$RC" -ne 0 ]; then
        fail "$name" "exit status $RC; stdout: $(head -c 400 "$d/out.txt"); stderr: $(head -c 400 "$d/err.txt")"
        return
    fi
    if ! grep -qx 'oomtrace available: yes' "$d/out.txt"; then
        fail "$name" "the weak API was not found under the preload: $(head -c 300 "$d/out.txt")"
        return
    fi
    local exp delta
    exp=$(expected_of "$d/out.txt")
    delta=$(delta_of "$d/out.txt")
    if [ -z "$exp" ] || [ -z "$delta" ]; then
        fail "$name" "could not parse the output: $(head -c 400 "$d/out.txt")"
        return
    fi
    # The account must be a real one (hundreds of blocks, megabytes), else the check says nothing.
    if [ "${exp%% *}" -lt 100 ] || [ "${exp#* }" -lt 100000 ]; then
        fail "$name" "the target's expected live set is too small to mean anything: $exp"
        return
    fi
    if [ "$exp" != "$delta" ]; then
        fail "$name" "oomtrace_get_totals delta (count bytes) = $delta, but the program holds exactly $exp"
    else
        pass "$name"
    fi
    [ -z "$REF_EXPECTED" ] && REF_EXPECTED=$exp
    if [ "$exp" != "$REF_EXPECTED" ]; then
        fail "${name}_deterministic" "the target's own account changed between runs ($REF_EXPECTED vs $exp)"
    fi
    # Nothing failed, so nothing may be written: no report, no log, nothing on stderr.
    check_silent "$name" "$d"
}

totals_case threads_totals_default ""
totals_case threads_totals_default_again ""
totals_case threads_totals_stacks_all "stacks=all"
totals_case threads_totals_stacks_none "stacks=none"
totals_case threads_totals_sample_every_byte "sample_bytes=1"

# Without the preload: oomtrace_available() == 0, the program runs the same and holds the same.
d=$(newdir no_preload)
(cd "$d" && timeout 60 "$BIN" >"$d/out.txt" 2>"$d/err.txt")
rc=$?
if [ "$rc" -ne 0 ]; then
    fail threads_no_preload "exit status $rc: $(head -c 300 "$d/err.txt")"
elif ! grep -qx 'oomtrace available: no' "$d/out.txt" || ! grep -qx 'delta unavailable' "$d/out.txt"; then
    fail threads_no_preload "the weak API looked present without the preload: $(head -c 300 "$d/out.txt")"
elif [ -n "$REF_EXPECTED" ] && [ "$(expected_of "$d/out.txt")" != "$REF_EXPECTED" ]; then
    fail threads_no_preload "the program's live set differs without the preload: $(expected_of "$d/out.txt") vs $REF_EXPECTED"
else
    pass threads_no_preload
fi
