#!/usr/bin/env bash
# Compile-time proof that oomtrace's CUDA ABI (interpose/cuda_abi.h) matches the official headers:
#  1. every wrapped or called entry point's prototype equals the official one (driver: the
#     PFN_<base>_v<version><sfx> typedef of cudaTypedefs.h, which also proves our version table;
#     runtime: the declaration in cuda_runtime_api.h; NVML: nvml.h);
#  2. every type and constant we define ourselves has the official size, offsets and value.
# Prints PASS/FAIL/SKIP lines. Needs nvcc's toolkit headers; nvml.h is looked for in the toolkit,
# /usr/include, or fetched once from PyPI (nvidia-nvml-dev-cu12, headers only) into build/.
# Usage: scripts/check-cuda-headers.sh [BUILD_DIR]
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${1:-$ROOT/build}/cuda-headers
CC=${CC:-cc}
mkdir -p "$B"

CUDA_HOME=${CUDA_HOME:-}
if [ -z "$CUDA_HOME" ]; then
    if command -v nvcc >/dev/null 2>&1; then CUDA_HOME=$(cd "$(dirname "$(command -v nvcc)")/.." && pwd)
    elif [ -f /usr/local/cuda/include/cuda.h ]; then CUDA_HOME=/usr/local/cuda; fi
fi
if [ -z "$CUDA_HOME" ] || [ ! -f "$CUDA_HOME/include/cuda.h" ] || [ ! -f "$CUDA_HOME/include/cudaTypedefs.h" ]; then
    echo "SKIP cuda_headers_driver: CUDA toolkit headers not found (no nvcc on PATH, no /usr/local/cuda)"
    echo "SKIP cuda_headers_runtime: CUDA toolkit headers not found"
    echo "SKIP cuda_headers_nvml: CUDA toolkit headers not found"
    echo "SKIP cuda_headers_layout: CUDA toolkit headers not found"
    exit 0
fi
INC="$CUDA_HOME/include"

# nvml.h: toolkit, system, or the headers-only wheel cached under build/.
NVML_INC=
for d in "$INC" /usr/include /usr/local/include "$B/nvml/nvidia/nvml_dev/include"; do
    [ -f "$d/nvml.h" ] && { NVML_INC=$d; break; }
done
NVML_WHY="nvml.h not installed (Debian has it only in non-free libnvidia-ml-dev)"
if [ -z "$NVML_INC" ] && [ "${OT_NO_FETCH:-0}" != 1 ] && command -v python3 >/dev/null 2>&1; then
    rm -rf "$B/nvml.dl" && mkdir -p "$B/nvml.dl"
    if timeout 120 python3 -m pip download -q --no-deps --only-binary=:all: -d "$B/nvml.dl" \
        nvidia-nvml-dev-cu12 >/dev/null 2>&1; then
        whl=$(ls "$B"/nvml.dl/*.whl 2>/dev/null | head -n 1)
        [ -n "$whl" ] && python3 -m zipfile -e "$whl" "$B/nvml" >/dev/null 2>&1
    fi
    [ -f "$B/nvml/nvidia/nvml_dev/include/nvml.h" ] && NVML_INC=$B/nvml/nvidia/nvml_dev/include
    [ -z "$NVML_INC" ] && NVML_WHY="$NVML_WHY, and fetching nvidia-nvml-dev-cu12 from PyPI failed"
fi

# ---- 1. prototypes
cat >"$B/protos.c" <<'EOF'
#ifdef OT_PART_DRIVER
/* Declares the pre-_v2 typedefs (PFN_cuMemAlloc_v2000, ...) and stops the _v2 renaming macros. */
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#ifdef OT_HAVE_NVML
#define NVML_NO_UNVERSIONED_FUNC_DEFS
#include <nvml.h>
#endif
#define OT_CUDA_OFFICIAL_HEADERS 1
#include "cuda_abi.h"
#define SAME(a, b) __builtin_types_compatible_p(a, b)
#ifdef OT_PART_DRIVER
#define CU(ret, sym, base, ver, sfx, params, args) \
    _Static_assert(SAME(PFN_##base##_v##ver##sfx, ret (CUDAAPI *) params), \
                   #sym ": prototype differs from PFN_" #base "_v" #ver #sfx);
OT_CU_WRAPPED(CU)
OT_CU_CALLED(CU)
#endif
#ifdef OT_PART_RUNTIME
#define RT(ret, sym, base, params, args) \
    _Static_assert(SAME(__typeof__(&base), ret (CUDARTAPI *) params), #sym ": prototype differs from " #base);
OT_CUDART_WRAPPED(RT)
OT_CUDART_CALLED(RT)
#endif
#ifdef OT_PART_NVML
#define NV(ret, sym, params) _Static_assert(SAME(__typeof__(&sym), ret (DECLDIR *) params), #sym ": prototype differs");
OT_NVML_CALLED(NV)
#endif
int ot_protos_ok;
EOF

part() { # NAME DEFINE EXTRA-FLAGS...
    local name=$1 def=$2; shift 2
    if $CC -std=gnu11 -fsyntax-only -Wno-deprecated-declarations -I"$INC" -I"$ROOT/interpose" "$@" \
        -D"$def" "$B/protos.c" 2>"$B/$name.err"; then
        echo "PASS $name"
    else
        echo "FAIL $name: $(grep -m3 -E 'error' "$B/$name.err" | tr '\n' ' ')"
        RC=1
    fi
}
RC=0
part cuda_headers_driver OT_PART_DRIVER
part cuda_headers_runtime OT_PART_RUNTIME
if [ -n "$NVML_INC" ]; then
    part cuda_headers_nvml OT_PART_NVML -DOT_HAVE_NVML -I"$NVML_INC"
else
    echo "SKIP cuda_headers_nvml: $NVML_WHY"
fi

# ---- 2. layout and constants: the same program built on the official headers and on ours.
cat >"$B/layout.c" <<'EOF'
#include <stddef.h>
#include <stdio.h>
#ifdef OFFICIAL
#define __CUDA_API_VERSION_INTERNAL 1 /* for CUdeviceptr_v1 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#ifdef OT_HAVE_NVML
#include <nvml.h>
#endif
#else
#include "cuda_abi.h"
#define OT_HAVE_NVML 1
#endif
#define S(t) printf("sizeof %s %zu\n", #t, sizeof(t));
#define O(t, f) printf("offsetof %s.%s %zu\n", #t, #f, offsetof(t, f));
#define C(c) printf("value %s %lld\n", #c, (long long)(c));
int main(void)
{
    S(CUresult) S(CUdeviceptr) S(CUdeviceptr_v1) S(CUdevice) S(CUcontext) S(CUstream) S(CUmemoryPool)
    S(cuuint64_t) S(CUmemGenericAllocationHandle) S(CUuuid) S(CUmemLocation) S(CUmemAllocationProp)
    S(CUdriverProcAddressQueryResult)
    O(CUmemAllocationProp, type) O(CUmemAllocationProp, requestedHandleTypes) O(CUmemAllocationProp, location)
    O(CUmemAllocationProp, win32HandleMetaData) O(CUmemAllocationProp, allocFlags)
    O(CUmemLocation, type) O(CUmemLocation, id)
    C(CUDA_SUCCESS) C(CUDA_ERROR_INVALID_VALUE) C(CUDA_ERROR_OUT_OF_MEMORY) C(CUDA_ERROR_NOT_INITIALIZED)
    C(CUDA_ERROR_DEINITIALIZED) C(CUDA_ERROR_STUB_LIBRARY) C(CUDA_ERROR_NO_DEVICE) C(CUDA_ERROR_INVALID_DEVICE)
    C(CUDA_ERROR_INVALID_CONTEXT) C(CUDA_ERROR_NOT_FOUND) C(CUDA_ERROR_NOT_SUPPORTED)
    C(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH) C(CUDA_ERROR_UNKNOWN)
    C(CU_MEM_LOCATION_TYPE_DEVICE) C(CU_MEM_LOCATION_TYPE_HOST) C(CU_MEM_LOCATION_TYPE_HOST_NUMA)
    C(CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT) C(CU_MEM_ALLOCATION_TYPE_PINNED)
    C(CU_GET_PROC_ADDRESS_DEFAULT) C(CU_GET_PROC_ADDRESS_LEGACY_STREAM)
    C(CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) C(CU_GET_PROC_ADDRESS_SUCCESS)
    C(CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND) C(CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT)
    S(cudaError_t) S(cudaStream_t) S(cudaMemPool_t) S(struct cudaPitchedPtr) S(struct cudaExtent)
    S(enum cudaDriverEntryPointQueryResult)
    O(struct cudaPitchedPtr, ptr) O(struct cudaPitchedPtr, pitch) O(struct cudaPitchedPtr, xsize)
    O(struct cudaPitchedPtr, ysize) O(struct cudaExtent, width) O(struct cudaExtent, height)
    O(struct cudaExtent, depth)
    C(cudaSuccess) C(cudaErrorInvalidValue) C(cudaErrorMemoryAllocation) C(cudaErrorInitializationError)
    C(cudaErrorCudartUnloading) C(cudaErrorInsufficientDriver) C(cudaErrorNoDevice) C(cudaErrorInvalidDevice)
    C(cudaErrorSymbolNotFound) C(cudaErrorNotSupported) C(cudaErrorUnknown)
    C(cudaDriverEntryPointSuccess) C(cudaDriverEntryPointSymbolNotFound)
    C(cudaDriverEntryPointVersionNotSufficent) C(cudaEnableDefault) C(cudaEnableLegacyStream)
    C(cudaEnablePerThreadDefaultStream)
#ifdef OT_HAVE_NVML
    S(nvmlReturn_t) S(nvmlDevice_t) S(nvmlMemory_t) S(nvmlProcessInfo_v1_t) S(nvmlProcessInfo_v2_t)
    O(nvmlMemory_t, total) O(nvmlMemory_t, free) O(nvmlMemory_t, used)
    O(nvmlProcessInfo_v1_t, pid) O(nvmlProcessInfo_v1_t, usedGpuMemory)
    O(nvmlProcessInfo_v2_t, pid) O(nvmlProcessInfo_v2_t, usedGpuMemory) O(nvmlProcessInfo_v2_t, gpuInstanceId)
    O(nvmlProcessInfo_v2_t, computeInstanceId)
    C(NVML_SUCCESS) C(NVML_ERROR_UNINITIALIZED) C(NVML_ERROR_INVALID_ARGUMENT) C(NVML_ERROR_NOT_SUPPORTED)
    C(NVML_ERROR_NO_PERMISSION) C(NVML_ERROR_NOT_FOUND) C(NVML_ERROR_INSUFFICIENT_SIZE)
    C(NVML_ERROR_DRIVER_NOT_LOADED) C(NVML_ERROR_LIBRARY_NOT_FOUND) C(NVML_ERROR_FUNCTION_NOT_FOUND)
    C(NVML_ERROR_UNKNOWN) C(NVML_VALUE_NOT_AVAILABLE)
#endif
    return 0;
}
EOF
nvml_flags=()
[ -n "$NVML_INC" ] && nvml_flags=(-DOT_HAVE_NVML -I"$NVML_INC")
if $CC -std=gnu11 -w -DOFFICIAL -I"$INC" "${nvml_flags[@]}" "$B/layout.c" -o "$B/layout_official" 2>"$B/layout.err" &&
    $CC -std=gnu11 -w -I"$ROOT/interpose" "$B/layout.c" -o "$B/layout_ours" 2>>"$B/layout.err"; then
    "$B/layout_official" >"$B/layout_official.txt"
    "$B/layout_ours" >"$B/layout_ours.txt"
    # Without nvml.h the official side has no NVML lines: compare what both sides have.
    if [ -z "$NVML_INC" ]; then grep -v -i nvml "$B/layout_ours.txt" >"$B/layout_ours.cmp"; else cp "$B/layout_ours.txt" "$B/layout_ours.cmp"; fi
    if diff -u "$B/layout_official.txt" "$B/layout_ours.cmp" >"$B/layout.diff"; then
        echo "PASS cuda_headers_layout${NVML_INC:+ (with nvml.h)}"
    else
        echo "FAIL cuda_headers_layout: $(grep '^[-+][a-z]' "$B/layout.diff" | head -n 6 | tr '\n' ' ')"
        RC=1
    fi
else
    echo "FAIL cuda_headers_layout: does not compile: $(head -n 3 "$B/layout.err" | tr '\n' ' ')"
    RC=1
fi
exit $RC
