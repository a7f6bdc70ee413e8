#!/usr/bin/env bash
# Thread churn with handed-over blocks: 10,000 short-lived threads in two lanes, each taking over
# the live set that exited threads allocated, freeing and replacing a third of it (thread_handoff).
# Under the preload the oomtrace_get_totals() delta must equal the program's own account exactly,
# drop back to zero once it frees everything (no record lost), and VmRSS must stay bounded while
# threads come and go (their records and nurseries are reused): with the default stacks and with a
# stack for every allocation. Without the preload the program works the same.
. "$(dirname "$0")/lib.sh"
BIN=$OT_BUILD/targets/thread_handoff
for f in "$OT_LIB" "$BIN"; do
    [ -e "$f" ] || { fail thread_handoff "missing $f (run make tests)"; exit 1; }
done
RSS_SLACK_KIB=16384 # growth allowed from a tenth of the threads to the end

handoff_case() {
    local name=$1 extra=$2 d
    d=$(newdir "$name")
    OT_TIMEOUT=120 OOMTRACE_OPTIONS_EXTRA=$extra run_preloaded "$d" "$BIN" 5000
    if [ "$RC" -ne 0 ]; then
        fail "$name" "exit status $RC; stdout: $(head -c 400 "$d/out.txt"); stderr: $(head -c 400 "$d/err.txt")"
        return
    fi
    local exp delta after threads rss
    exp=$(sed -n 's/^expected \(count=[0-9]* bytes=[0-9]*\)$/\1/p' "$d/out.txt")
    delta=$(sed -n 's/^delta \(count=-\{0,1\}[0-9]* bytes=-\{0,1\}[0-9]*\)$/\1/p' "$d/out.txt")
    after=$(sed -n 's/^after_free \(.*\)$/\1/p' "$d/out.txt")
    threads=$(sed -n 's/^threads \([0-9]*\)$/\1/p' "$d/out.txt")
    rss=$(sed -n 's/^rss_kib tenth=\([0-9]*\) end=\([0-9]*\)$/\1 \2/p' "$d/out.txt")
    if [ -z "$exp" ] || [ -z "$delta" ] || [ -z "$after" ] || [ -z "$rss" ] || [ "${threads:-0}" -lt 10000 ]; then
        fail "$name" "could not parse the output: $(head -c 400 "$d/out.txt")"
        return
    fi
    if [ "$exp" != "$delta" ]; then
        fail "${name}_exact" "oomtrace_get_totals delta $delta, but the program holds exactly $exp"
    else
        pass "${name}_exact"
    fi
    if [ "$after" != "count=0 bytes=0" ]; then
        fail "${name}_none_lost" "after freeing everything the delta is $after, not zero"
    else
        pass "${name}_none_lost"
    fi
    local r0=${rss% *} r1=${rss#* }
    if [ "$r1" -gt $((r0 + RSS_SLACK_KIB)) ]; then
        fail "${name}_rss_bounded" "VmRSS grew from $r0 KiB at a tenth of the threads to $r1 KiB"
    else
        pass "${name}_rss_bounded"
    fi
    check_silent "$name" "$d"
}

handoff_case thread_handoff_default ""
handoff_case thread_handoff_stacks_all "stacks=all"

d=$(newdir thread_handoff_no_preload)
(cd "$d" && timeout 120 "$BIN" 5000 >"$d/out.txt" 2>"$d/err.txt")
rc=$?
if [ "$rc" -ne 0 ]; then
    fail thread_handoff_no_preload "exit status $rc: $(head -c 300 "$d/err.txt")"
elif ! grep -qx 'oomtrace available: no' "$d/out.txt" || ! grep -qx 'delta unavailable' "$d/out.txt"; then
    fail thread_handoff_no_preload "the weak API looked present without the preload: $(head -c 300 "$d/out.txt")"
else
    pass thread_handoff_no_preload
fi
