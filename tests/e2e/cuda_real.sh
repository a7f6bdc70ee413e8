#!/usr/bin/env bash
# Against the real CUDA toolkit, where it is installed (skipped with the reason otherwise):
#  - every wrapper's prototype and every type we define match cuda.h / cudaTypedefs.h /
#    cuda_runtime_api.h / nvml.h (scripts/check-cuda-headers.sh);
#  - the examples' .cu files build with nvcc;
#  - a program linked with the real libcudart, on this GPU-less machine, gets exactly the runtime's
#    own error back under oomtrace, with a report that says why the device is unavailable;
#  - the real runtime (static, as nvcc links it, and shared) reaches the driver only through our
#    cuGetProcAddress wrapper: checked against the driver double, which logs who asks.
source "$(dirname "$0")/lib.sh"
bash "$OT_ROOT/scripts/check-cuda-headers.sh" "$OT_BUILD" || true

if ! command -v nvcc >/dev/null 2>&1; then
    skip cuda_real_nvcc_builds "nvcc not on PATH (CUDA toolkit not installed)"
    exit 0
fi
CUDA_HOME=$(cd "$(dirname "$(command -v nvcc)")/.." && pwd)
N=$OT_BUILD/nvcc
mkdir -p "$N"
nv() { # OUT SRC FLAGS...: build once per source change
    local out=$1 src=$2; shift 2
    [ "$out" -nt "$src" ] && return 0
    nvcc -O2 -g -I"$OT_ROOT/include" "$@" "$src" -o "$out" >"$out.log" 2>&1
}
ok=1
nv "$N/cuda_oom_static" "$OT_ROOT/examples/cuda_oom.cu" || ok=0
nv "$N/cuda_oom_shared" "$OT_ROOT/examples/cuda_oom.cu" -cudart shared || ok=0
nv "$N/cuda_driver_oom" "$OT_ROOT/examples/cuda_driver_oom.cu" -L"$CUDA_HOME/lib64/stubs" -lcuda || ok=0
if [ $ok = 1 ]; then pass cuda_real_nvcc_builds; else fail cuda_real_nvcc_builds "$(cat "$N"/*.log | grep -m3 -i error)"; exit 0; fi

if [ -e /dev/nvidia0 ] || ldconfig -p 2>/dev/null | grep -q 'libcuda.so.1 '; then
    skip cuda_real_gpuless "this machine has a CUDA driver: run scripts/gpu-check instead"
else
    # The runtime's own error, with and without us; the CHECK line carries the number and text.
    rtlib=$CUDA_HOME/lib64
    for kind in shared static; do
        d=$(newdir "real_$kind")
        ( cd "$d" && LD_LIBRARY_PATH=$rtlib "$N/cuda_oom_$kind" >plain.out 2>plain.err; echo $? >plain.rc ) 2>/dev/null
        LD_LIBRARY_PATH=$rtlib run_preloaded "$d" "$N/cuda_oom_$kind"
        want=$(grep -o 'Check failed: .*' "$d/plain.err")
        got=$(grep -o 'Check failed: .*' "$d/err.txt")
        if [ -n "$want" ] && [ "$want" = "$got" ] && [ "$RC" = "$(cat "$d/plain.rc")" ]; then
            pass "cuda_real_${kind}_runtime_error_unchanged"
        else
            fail "cuda_real_${kind}_runtime_error_unchanged" "without: '$want' rc $(cat "$d/plain.rc"); with: '$got' rc $RC"
        fi
        echo "# real libcudart ($kind), no driver: $got"
    done
    d=$OT_TMP/real_shared
    f=$(first_report "$d")
    if [ -n "$f" ]; then
        u=$(json_get "$f" "r['failure']['api'] + ' ' + r['failure']['error'] + ': ' + (r['devices'][0]['unavailable'] or '')")
        echo "# report: $u"
        case "$u" in "cudaMalloc cudaErrorInsufficientDriver: "*libcuda.so.1*) pass cuda_real_shared_report_says_why ;;
            *) fail cuda_real_shared_report_says_why "$u" ;; esac
    else
        fail cuda_real_shared_report_says_why "no report"
    fi
fi

# The real runtime against the driver double: every lookup it makes must come through our wrapper.
DBL=$OT_BUILD/doubles
if [ -e "$DBL/libcuda.so.1" ]; then
    for kind in static shared; do
        d=$(newdir "real_on_double_$kind")
        ( cd "$d" && LD_LIBRARY_PATH=$DBL:$CUDA_HOME/lib64 "$N/cuda_oom_$kind" >plain.out 2>plain.err ) 2>/dev/null
        LD_LIBRARY_PATH=$DBL:$CUDA_HOME/lib64 OT_FAKE_CUDA_TRACE=1 run_preloaded "$d" "$N/cuda_oom_$kind"
        total=$(grep -c 'cuGetProcAddress(' "$d/err.txt")
        ours=$(grep -c 'cuGetProcAddress(.* from liboomtrace.so$' "$d/err.txt")
        if [ "$total" -gt 0 ] && [ "$total" = "$ours" ]; then pass "cuda_real_${kind}_runtime_lookups_through_us"
        else fail "cuda_real_${kind}_runtime_lookups_through_us" "$ours of $total lookups came through our wrapper"; fi
        check "cuda_real_${kind}_runtime_same_result" test "$(grep -o 'Check failed: .*' "$d/plain.err")" = "$(grep -o 'Check failed: .*' "$d/err.txt")"
    done
    # nvcc-built driver program (cuda.h's cuMemAlloc -> cuMemAlloc_v2) on the double.
    d=$(newdir real_driver_example)
    LD_LIBRARY_PATH=$DBL OT_FAKE_GPU_TOTAL=2G run_preloaded "$d" "$N/cuda_driver_oom"
    f=$(first_report "$d")
    check cuda_real_driver_example_reported test -n "$f"
    [ -n "$f" ] && check cuda_real_driver_example_api test "$(json_get "$f" "r['failure']['api']")" = cuMemAlloc_v2
fi
exit 0
