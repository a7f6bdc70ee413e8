#!/usr/bin/env bash
# The examples: the Caffe-like host OOM (the second field report) and the opt-in API.
. "$(dirname "$0")/lib.sh"
EX=$OT_BUILD/examples

d=$(newdir host_oom)
( cd "$d" && exec timeout 30 "$EX/host_oom" --limit >plain.txt 2>plain_err.txt ) 2>/dev/null; prc=$?
run_preloaded "$d" "$EX/host_oom" --limit
check host_oom_status_unchanged [ "$prc" = "$RC" ]
# The first line reports the cap, computed from VmSize, which the library itself enlarges.
check host_oom_stdout_unchanged cmp -s <(grep -v "address space capped" "$d/plain.txt") <(grep -v "address space capped" "$d/out.txt")
check host_oom_glog_line_unchanged grep -q "Check failed: \*ptr host allocation of size 3763200 failed" "$d/err.txt"
R=$(first_report "$d")
if [ -n "$R" ]; then
    check host_oom_size [ "$(json_get "$R" 'r["failure"]["size"]')" = 3763200 ]
    check host_oom_diagnosis_rlimit [ "$(json_get "$R" 'any(x.startswith("RLIMIT_AS") and "3.6 MiB requested" in x for x in r["diagnosis"])')" = True ]
    fns=$(json_get "$R" '" ".join(f["function"] or "?" for f in r["failure"]["stack"][:6])')
    case "$fns" in "CaffeMallocHost SyncedMemory_mutable_cpu_data Blob_mutable_cpu_data PoolingLayer_Forward_cpu Net_ForwardFromTo Classifier_Predict") pass host_oom_failing_stack;;
        *) fail host_oom_failing_stack "$fns";; esac
    check host_oom_top_site_is_weights [ "$(json_get "$R" 'any(f["function"]=="Net_CopyTrainedLayersFrom" for f in r["sites"][0]["stack"])')" = True ]
else
    fail host_oom_report "no JSON report in $d ($(head -c 300 "$d/err.txt"))"
fi

d=$(newdir api_plain)
out=$(cd "$d" && "$EX/api_snapshot")
check api_without_library [ "$out" = "oomtrace not loaded" ]
d=$(newdir api_preloaded)
run_preloaded "$d" "$EX/api_snapshot"
check api_with_library_totals grep -Eq "^oomtrace [0-9.]+: [0-9]+ live host blocks" "$d/out.txt"
n=$(sed -n 's/.* \([0-9]*\) live host blocks, \([0-9]*\) bytes.*/\1 \2/p' "$d/out.txt")
set -- $n
if [ "${1:-0}" -ge 1000 ] && [ "${2:-0}" -ge 1024000 ]; then pass api_totals_count_the_blocks; else fail api_totals_count_the_blocks "got '$n'"; fi
R=$(first_report "$d")
if [ -n "$R" ] && [ "$(json_get "$R" 'r["event"], r["reason"]')" = "snapshot after allocating the lookup tables" ]; then
    pass api_snapshot_report
else
    fail api_snapshot_report "report '${R:-none}'"
fi
