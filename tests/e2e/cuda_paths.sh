#!/usr/bin/env bash
# CUDA allocations, whichever way the program reaches them, against the test doubles: the shared
# runtime, a statically linked runtime (driver reached only through dlsym + cuGetProcAddress), the
# driver API linked directly, PyTorch's dlopen + dlsym, cudaGetDriverEntryPoint[ByVersion]. Each run
# leaves known bytes live per kind at a snapshot (exact, no double counting), frees them all, and
# its failures are reported under the right entry point name. Also: cuda=0 turns all of it off.
source "$(dirname "$0")/lib.sh"
DBL=$OT_BUILD/doubles
CT=$OT_BUILD/cuda_targets
export LD_LIBRARY_PATH=$DBL${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for f in libcuda.so.1 libfakecudart.so libnvidia-ml.so.1; do
    [ -e "$DBL/$f" ] || { skip cuda_paths "test doubles not built (make tests)"; exit 0; }
done

MiB=$((1 << 20))
# report_kinds FILE: "kind=bytes/count ..." of the live table at that report
report_kinds() { json_get "$1" "' '.join('%s=%d/%d' % (k, v['bytes'], v['count']) for k, v in sorted(r['live']['by_kind'].items()) if k != 'host')"; }
nth_report() { ls "$1"/oomtrace.*."$2".json 2>/dev/null | head -n 1; }

# expect_kinds NAME DIR N EXPECTED: the Nth report's device-side totals
expect_kinds() {
    local name=$1 dir=$2 n=$3 want=$4 f got
    f=$(nth_report "$dir" "$n")
    if [ -z "$f" ]; then fail "$name" "no report #$n (rc=$RC; $(tail -n 3 "$dir/err.txt" | tr '\n' ' '))"; return; fi
    got=$(report_kinds "$f")
    if [ "$got" = "$want" ]; then pass "$name"; else fail "$name" "live by kind: got '$got', want '$want'"; fi
}

zero="device=0/0 managed=0/0 pinned=0/0 pool=0/0 vmm=0/0"
# paths.c: device 64 MiB + pitch 1024x100 + 3D 1024x100, managed 32 MiB, pinned 8+4 MiB, pool 16+8 MiB.
paths_live="device=$((64 * MiB + 204800))/3 managed=$((32 * MiB))/1 pinned=$((12 * MiB))/2 pool=$((24 * MiB))/2 vmm=0/0"

for variant in shared static; do
    d=$(newdir "paths_$variant")
    run_preloaded "$d" "$CT/paths_$variant"
    check "cuda_paths_${variant}_runs" test "$RC" -eq 0
    expect_kinds "cuda_paths_${variant}_live_exact" "$d" 1 "$paths_live"
    expect_kinds "cuda_paths_${variant}_all_freed" "$d" 2 "$zero"
done

# The same program without us prints the same thing.
d=$(newdir paths_plain)
( cd "$d" && "$CT/paths_shared" >plain.txt 2>&1 )
d2=$OT_TMP/paths_shared
check cuda_paths_same_output_as_without cmp -s "$d/plain.txt" "$d2/out.txt"

# The site of a runtime allocation starts at the program, not in a runtime or in us.
f=$(nth_report "$OT_TMP/paths_shared" 1)
top=$(json_get "$f" "[s for s in r['sites'] if s['kind']=='device'][0]['stack'][0].get('function')")
check cuda_paths_site_is_callers test "$top" = main

# Driver API linked directly: device, pitch, managed, pinned (+ host-located VMM), VMM, pool.
d=$(newdir drv_paths)
run_preloaded "$d" "$CT/drv_paths"
check cuda_drv_paths_runs test "$RC" -eq 0
expect_kinds cuda_drv_paths_live_exact "$d" 1 \
    "device=$((64 * MiB + 102400))/2 managed=$((16 * MiB))/1 pinned=$((16 * MiB))/3 pool=$((24 * MiB))/3 vmm=$((48 * MiB))/1"
expect_kinds cuda_drv_paths_all_freed "$d" 2 "$zero"

# PyTorch's way: dlopen(libcuda.so.1, RTLD_LOCAL) + dlsym(handle, "cuMemAlloc_v2").
d=$(newdir torchlike)
run_preloaded "$d" "$CT/dl_torchlike"
check cuda_torchlike_runs test "$RC" -eq 0
expect_kinds cuda_torchlike_live_exact "$d" 1 "device=$((250 * MiB))/3 managed=0/0 pinned=0/0 pool=0/0 vmm=0/0"
( cd "$d" && "$CT/dl_torchlike" >plain.txt 2>&1 )
check cuda_torchlike_lookups_unchanged cmp -s "$d/plain.txt" "$d/out.txt"
# Through the wrapper, cuGetProcAddress_v2 still writes the status it is given (documented).
check cuda_torchlike_status_written bash -c 'grep -qx "gpa_self rc=0 st=0" "$1" && grep -qx "gpa_alloc rc=0 st=0" "$1"' _ "$d/out.txt"
check cuda_torchlike_missing_symbol_stays_null grep -qx 'cuMemAllocPitch_v1=null' "$d/out.txt"

# Entry points by version and flags (one of them hidden by the driver).
d=$(newdir entry)
OT_FAKE_CUDA_HIDE=cuMemAllocManaged run_preloaded "$d" "$CT/entry_points"
( cd "$d" && OT_FAKE_CUDA_HIDE=cuMemAllocManaged "$CT/entry_points" >plain.txt 2>&1 )
check cuda_entry_points_answers_unchanged cmp -s "$d/plain.txt" "$d/out.txt"
check cuda_entry_points_hidden_stays_null grep -q '^hidden rc=500 status=1 fn=null' "$d/out.txt"
check cuda_entry_points_v1_abi_canary grep -q '^old rc=0 canary=intact' "$d/out.txt"
# v1 2 MiB + v2 4 MiB device; legacy, per-thread and pool per-thread 4 MiB each.
expect_kinds cuda_entry_points_live_exact "$d" 1 "device=$((6 * MiB))/2 managed=0/0 pinned=0/0 pool=$((12 * MiB))/3 vmm=0/0"

# Failures: each reported under the exact variant the program reached.
# report_apis DIR: the failing API of every report, sorted, space separated
report_apis() { for f in "$1"/oomtrace.*.json; do json_get "$f" "r['failure']['api'] + ':' + str(r['failure']['error_code'])"; done | LC_ALL=C sort | tr '\n' ' '; }
expect_apis() {
    local name=$1 dir=$2 want=$3 got
    got=$(report_apis "$dir")
    if [ "$got" = "$want" ]; then pass "$name"; else fail "$name" "reported '$got', want '$want' (rc=$RC)"; fi
}
export OOMTRACE_OPTIONS_EXTRA=max_reports=20
d=$(newdir entry_oom)
run_preloaded "$d" "$CT/entry_points" oom
expect_apis cuda_entry_points_oom_variants "$d" \
    "cuMemAlloc:2 cuMemAllocAsync:2 cuMemAllocAsync_ptsz:2 cuMemAllocFromPoolAsync_ptsz:2 cuMemAlloc_v2:2 "
for variant in shared static; do
    d=$(newdir "paths_oom_$variant")
    run_preloaded "$d" "$CT/paths_$variant" oom
    if [ $variant = shared ]; then
        want="cudaMalloc3D:2 cudaMalloc:2 cudaMallocAsync_ptsz:2 cudaMallocFromPoolAsync:2 cudaMallocHost:2 cudaMallocManaged:2 cudaMallocPitch:2 "
    else  # the static runtime is only seen where it reaches the driver
        want="cuMemAllocAsync_ptsz:2 cuMemAllocFromPoolAsync:2 cuMemAllocHost_v2:2 cuMemAllocManaged:2 cuMemAllocPitch_v2:2 cuMemAllocPitch_v2:2 cuMemAlloc_v2:2 "
    fi
    expect_apis "cuda_paths_oom_${variant}_apis" "$d" "$want"
done
d=$(newdir drv_oom)
run_preloaded "$d" "$CT/drv_paths" oom
expect_apis cuda_drv_oom_apis "$d" "cuMemAllocFromPoolAsync_ptsz:2 cuMemAlloc_v2:2 cuMemCreate:2 "
f=$(ls "$d"/oomtrace.*.json | head -n 1)
check cuda_drv_oom_error_name test "$(json_get "$f" "r['failure']['error']")" = CUDA_ERROR_OUT_OF_MEMORY
# The fabric-handle probe before them was refused (800), not short of memory: the program saw its
# error and fell back; the log has one line naming it and its caller, and no report was written
# for it (the reports above are the three shortages alone).
check cuda_drv_refusal_passed_through grep -qx 'cuMemCreate fabric 800' "$d/out.txt"
check cuda_drv_refusal_fallback_ran grep -qx 'cuMemAlloc 2' "$d/out.txt"
check cuda_drv_refusal_one_log_line test "$(grep -c 'the request was refused, not short of memory; no report' "$d/log.txt")" = 1
check cuda_drv_refusal_names_call_and_caller grep -q '^oomtrace: cuMemCreate(20971520) returned CUDA_ERROR_NOT_PERMITTED (800) on GPU 0 in main (.*drv_paths+0x[0-9a-f]*): ' "$d/log.txt"
( cd "$d" && "$CT/drv_paths" oom >plain.txt 2>&1 )
check cuda_drv_refusal_same_output cmp -s "$d/plain.txt" "$d/out.txt"
unset OOMTRACE_OPTIONS_EXTRA

# cuda=0: nothing recorded, nothing wrapped, same results.
d=$(newdir cuda_off)
OOMTRACE_OPTIONS_EXTRA=cuda=0 run_preloaded "$d" "$CT/paths_static"
check cuda_off_runs test "$RC" -eq 0
expect_kinds cuda_off_records_nothing "$d" 1 "$zero"
d=$(newdir cuda_off_oom)
OOMTRACE_OPTIONS_EXTRA=cuda=0 run_preloaded "$d" "$CT/paths_shared" oom
check cuda_off_no_reports test -z "$(first_report "$d")"
( cd "$d" && "$CT/paths_shared" oom >plain.txt 2>&1 )
check cuda_off_same_errors cmp -s "$d/plain.txt" "$d/out.txt"
exit 0
