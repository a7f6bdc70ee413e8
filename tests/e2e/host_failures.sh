#!/usr/bin/env bash
# Host allocation failures under the preload: the program sees exactly what it would see without
# oomtrace, and the report names the API, the size, the limit and the program's own functions.
. "$(dirname "$0")/lib.sh"
T=$OT_BUILD/targets/alloc_fail

same_output() { # NAME MODE: stdout and status equal with and without the preload
    local name=$1 mode=$2 d; d=$(newdir "$name")
    ( cd "$d" && timeout 30 "$T" "$mode" >plain.txt 2>/dev/null ); local prc=$?
    run_preloaded "$d" "$T" "$mode"
    if [ "$prc" = "$RC" ] && cmp -s "$d/plain.txt" "$d/out.txt"; then pass "$name"
    else fail "$name" "status $prc vs $RC; $(diff "$d/plain.txt" "$d/out.txt" | head -5 | tr '\n' ' ')"; fi
    LAST=$d
}

same_output rlimit_program_sees_same rlimit
R=$(first_report "$LAST")
if [ -z "$R" ]; then fail rlimit_report_written "no JSON in $LAST"; else
    pass rlimit_report_written
    check rlimit_api_and_size [ "$(json_get "$R" 'r["failure"]["api"], r["failure"]["size"], r["failure"]["error"]')" = "malloc 536870912 ENOMEM" ]
    check rlimit_diagnosis_names_limit grep -q "RLIMIT_AS 256.0 MiB" "$LAST/log.txt"
    check rlimit_json_rlimit [ "$(json_get "$R" 'r["host_memory"]["rlimit_as"]')" = "268435456" ]
    check rlimit_stack_has_target_functions [ "$(json_get "$R" '"load_model_weights" in [f["function"] for f in r["failure"]["stack"][:4]]')" = True ]
    fns=$(json_get "$R" '" ".join(f["function"] or "?" for f in r["failure"]["stack"])')
    case "$fns" in load_model_weights\ mode_rlimit\ main*) pass rlimit_failing_stack_order;; *) fail rlimit_failing_stack_order "$fns";; esac
    check rlimit_top_site_is_live_64MiB [ "$(json_get "$R" 'r["sites"][0]["bytes"], r["sites"][0]["stack"][0]["function"]')" = "67108864 load_model_weights" ]
    check rlimit_text_names_size grep -q "malloc(536870912) failed: ENOMEM (12)" "$LAST/log.txt"
    mod=$(json_get "$R" 'r["failure"]["stack"][0]["module"]'); off=$(json_get "$R" 'r["failure"]["stack"][0]["offset"]')
    if command -v addr2line >/dev/null; then
        check rlimit_addr2line_resolves_frame sh -c "addr2line -f -e '$mod' '$off' | head -1 | grep -q load_model_weights"
    else skip rlimit_addr2line_resolves_frame "addr2line not installed"; fi
fi

# The report's command line comes from the arguments glibc hands the library's constructor (not
# from /proc/self/cmdline, 12 us of every start): the same text, an empty argument and one with a
# space included, and a long one cut at the field's 1023 bytes.
d=$(newdir cmdline_from_argv)
long=$(printf 'x%.0s' $(seq 1100))
run_preloaded "$d" "$T" rlimit "" "two words" "$long"
R=$(first_report "$d")
want="$T rlimit  two words $long"
check report_cmdline_is_argv [ "$(json_get "$R" 'r["process"]["cmdline"]')" = "${want:0:1023}" ]

same_output calloc_overflow_same calloc_overflow
R=$(first_report "$LAST")
check calloc_overflow_reported [ -n "$R" ]
[ -n "$R" ] && check calloc_overflow_fields [ "$(json_get "$R" 'r["failure"]["api"], r["failure"]["size"], r["failure"]["count"]')" = "calloc None 9223372036854775807" ]

# The header shows calloc as the program called it: nmemb and the element size, not the total twice.
OOMTRACE_OPTIONS_EXTRA=max_reports=10 same_output calloc_calls_same calloc_calls
for call in "calloc(536870912, 1)" "calloc(1, 536870912)" "calloc(65536, 8192)" "calloc(9223372036854775807, 4)"; do
    n=$(echo "$call" | tr -c 'a-z0-9\n' _)
    check "calloc_header_$n" grep -qF "$call failed: ENOMEM (12)" "$LAST/log.txt"
done
check calloc_header_not_total_twice sh -c "! grep -q 'calloc(536870912, 536870912)' '$LAST/log.txt'"
check calloc_json_element_size [ "$(python3 -c 'import json,glob,sys; print(sorted(str((r["failure"]["size"], r["failure"]["count"], r["failure"]["element_size"])) for r in (json.load(open(p)) for p in glob.glob(sys.argv[1] + "/oomtrace.*.json"))))' "$LAST")" = "['(536870912, 1, 536870912)', '(536870912, 536870912, 1)', '(536870912, 65536, 8192)', '(None, 9223372036854775807, 4)']" ]

same_output realloc_failure_same realloc
R=$(first_report "$LAST")
check realloc_failure_reported [ -n "$R" ]
check realloc_old_block_still_tracked grep -q "delta during=1/1000 after=0/0" "$LAST/err.txt"

same_output memalign_family_same memalign
check memalign_einval_reported grep -q "posix_memalign(align 3, 64) failed: EINVAL" "$LAST/log.txt"
check memalign_enomem_reported grep -q "posix_memalign(align 64, " "$LAST/log.txt"

# Successful calls keep the program's errno in every stack mode: the record path saves it only
# around a walk, and the walk of a stack seen before (stacks=all) is skipped altogether.
for m in "" stacks=all stacks=none sample_bytes=1; do
    OOMTRACE_OPTIONS_EXTRA=$m same_output "errno_kept_on_success${m:+_${m%%=*}_${m#*=}}" errno_kept
    check "errno_kept_counted${m:+_${m%%=*}_${m#*=}}" grep -q "^errno changed by 0 of 140000 successful calls$" "$LAST/out.txt"
done

# Exact figures per call site with a stack for every allocation: each site is reached 500 to 1000
# times from the same stack, so all but the first go through the record path's noted-stack case
# (inline, counted by the sites' owner thread) and, on a second thread, through pending counts.
site_row() { # REPORT FUNCTION: live bytes, count, peak, total bytes, total count of the site whose
    # innermost frame is FUNCTION, or "none"
    json_get "$1" "' '.join(str(x) for s in r['sites'] if s['stack'] and s['stack'][0]['function'] == '$2' for x in (s['bytes'], s['count'], s['peak_bytes'], s['total_bytes'], s['total_count'], s['estimated'])) or 'none'"
}
for mode in site_figures site_figures_thread; do
    OOMTRACE_OPTIONS_EXTRA=stacks=all same_output "${mode}_program_sees_same" "$mode"
    R=$(first_report "$LAST")
    if [ -z "$R" ]; then fail "${mode}_report" "no JSON in $LAST"; continue; fi
    got=$(site_row "$R" make_token)
    [ "$got" = "24000 500 48000 48000 1000 False" ] && pass "${mode}_make_token_exact" || fail "${mode}_make_token_exact" "$got"
    got=$(site_row "$R" make_node)
    [ "$got" = "50000 500 50000 50000 500 False" ] && pass "${mode}_make_node_exact" || fail "${mode}_make_node_exact" "$got"
done

same_output silent_when_nothing_fails ok
if [ -z "$(ls "$LAST" | grep -v -e out.txt -e err.txt -e plain.txt)" ] && [ ! -s "$LAST/err.txt" ]; then pass silent_no_files_no_stderr
else fail silent_no_files_no_stderr "$(ls "$LAST")"; fi
