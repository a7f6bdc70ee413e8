#!/usr/bin/env bash
# The CUDA examples against the test doubles, one per diagnosis: the seed-000 case (Caffe's
# "Check failed: error == cudaSuccess (2 vs. 0)  out of memory" while another process holds the
# GPU), a request larger than the device, fragmentation, this process filling the device through
# the driver API, and a device leak seen through the opt-in snapshot.
source "$(dirname "$0")/lib.sh"
DBL=$OT_BUILD/doubles
EX=$OT_BUILD/examples
export LD_LIBRARY_PATH=$DBL${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for f in "$DBL/libcuda.so.1" "$DBL/libnvidia-ml.so.1" "$EX/cuda_oom" "$EX/cuda_driver_oom"; do
    [ -e "$f" ] || { skip cuda_seed "examples or test doubles not built (make tests)"; exit 0; }
done
export OT_FAKE_GPU_NAME="NVIDIA H200 (simulated)" OT_FAKE_GPU_CTX_OVERHEAD=64M
log_has() { grep -qF -- "$2" "$1/log.txt"; }
fj() { json_get "$(first_report "$1")" "$2"; }

# ---- seed 000: python3 (pid 4242) holds 11.5 GiB of the 12 GiB device
d=$(newdir seed000)
OT_FAKE_GPU_TOTAL=12G OT_FAKE_GPU_OTHER_USED=11776M OT_FAKE_GPU_OTHER_PID=4242 OT_FAKE_GPU_OTHER_NAME=python3 \
    run_preloaded "$d" "$EX/cuda_oom"
check seed000_aborts_as_caffe_does test "$RC" -eq 134
check seed000_caffe_message grep -q 'Check failed: error == cudaSuccess (2 vs. 0)  out of memory' "$d/err.txt"
if [ -n "$(first_report "$d")" ]; then
    check seed000_failure_fields test "$(fj "$d" "(r['failure']['api'], r['failure']['size'], r['failure']['error'], r['failure']['error_code'], r['failure']['device'])")" \
        = "('cudaMalloc', 837538000, 'cudaErrorMemoryAllocation', 2, 0)"
    check seed000_device_identity test "$(fj "$d" "(r['devices'][0]['index'], r['devices'][0]['name'], r['devices'][0]['pci_bus_id'], r['devices'][0]['uuid'][:4], r['devices'][0]['total'])")" \
        = "(0, 'NVIDIA H200 (simulated)', '0000:10:00.0', 'GPU-', 12884901888)"
    check seed000_names_other_process test "$(fj "$d" "[(p['pid'], p['name'], p['used']) for p in r['devices'][0]['processes'] if not p['self']]")" \
        = "[(4242, 'python3', 12348030976)]"
    check seed000_failing_stack_in_to_gpu sh -c "python3 -c \"import json,sys; r=json.load(open(sys.argv[1])); fs=[f.get('function') or '' for f in r['failure']['stack']]; sys.exit(0 if 'to_gpu' in fs[0] and any('InnerProductLayer::Forward_gpu' in f for f in fs) else 1)\" '$(first_report "$d")'"
else
    fail seed000_report "no report written (rc=$RC)"
fi
check seed000_diagnosis log_has "$d" "other processes hold 11.5 GiB of 12.0 GiB on GPU 0: pid 4242 (python3) 11.5 GiB"
check seed000_points_away_from_top log_has "$d" "top does not show GPU memory"

# ---- seed 000 as it went on an H200: the other process leaves 255 MiB, less than a context takes,
# so the first cudaMalloc (100 MB, which alone would fit) fails creating the context.
d=$(newdir seed000_no_context)
OT_FAKE_GPU_TOTAL=12G OT_FAKE_GPU_OTHER_USED=$((12 * 1024 - 255))M OT_FAKE_GPU_CTX_OVERHEAD=512M \
    run_preloaded "$d" "$EX/cuda_oom"
check seed000_no_context_aborts_as_caffe_does grep -q 'Check failed: error == cudaSuccess (2 vs. 0)  out of memory' "$d/err.txt"
check_report seed000_no_context_first_blob "$d" test "$(fj "$d" "(r['failure']['api'], r['failure']['size'], r['live']['device']['bytes'])")" \
        = "('cudaMalloc', 100000000, 0)"
check seed000_no_context_names_other log_has "$d" "other processes hold 11.8 GiB of 12.0 GiB on GPU 0: pid 4242"
check seed000_no_context_diagnosis log_has "$d" "this process holds no device memory yet and is not among GPU 0's processes: its first CUDA call creates a context, which takes device memory of its own (hundreds of MiB on recent GPUs), so 255.0 MiB free was too little for the context and the request together"
check seed000_no_context_not_fragmentation sh -c "test -s '$d/log.txt' && ! grep -q fragmentation '$d/log.txt'"

# Without the other process the same program runs.
d=$(newdir seed000_alone)
OT_FAKE_GPU_TOTAL=12G run_preloaded "$d" "$EX/cuda_oom"
check seed000_alone_succeeds test "$RC" -eq 0
check seed000_alone_no_report test -z "$(first_report "$d")"

# ---- a request larger than the device
d=$(newdir huge)
OT_FAKE_GPU_TOTAL=8G run_preloaded "$d" "$EX/cuda_oom" --huge
check huge_diagnosis log_has "$d" "is larger than the device's total memory"

# ---- fragmentation: enough free memory, no block big enough
d=$(newdir fragmented)
OT_FAKE_GPU_TOTAL=12G OT_FAKE_GPU_MAX_BLOCK=512M run_preloaded "$d" "$EX/cuda_oom"
check fragmented_diagnosis log_has "$d" "exceeds the request: fragmentation or a caching allocator's reserve"

# ---- the driver API filling the device itself
d=$(newdir driver_fill)
OT_FAKE_GPU_TOTAL=4G OT_FAKE_GPU_CTX_OVERHEAD=0 run_preloaded "$d" "$EX/cuda_driver_oom"
check driver_fill_exit test "$RC" -eq 1
check driver_fill_program_sees_error grep -q 'cuMemAlloc failed after 4 GiB: CUDA_ERROR_OUT_OF_MEMORY (2)' "$d/out.txt"
check_report driver_fill_api "$d" test "$(fj "$d" "(r['failure']['api'], r['failure']['error'], r['live']['by_kind']['device']['bytes'])")" \
        = "('cuMemAlloc_v2', 'CUDA_ERROR_OUT_OF_MEMORY', 4294967296)"
check driver_fill_diagnosis log_has "$d" "this process holds most of the device: 4.0 GiB of 4.0 GiB"

# ---- a device leak, through the opt-in snapshot
d=$(newdir leak)
OT_FAKE_GPU_TOTAL=4G run_preloaded "$d" "$EX/cuda_driver_oom" --leak 64
check leak_runs test "$RC" -eq 0
check_report leak_live_device "$d" test "$(fj "$d" "(r['live']['device']['bytes'], r['live']['device']['count'])")" = "(33554432, 4)"
exit 0
