#!/usr/bin/env bash
# The dlsym hook must be invisible to everything but CUDA names (RTLD_NEXT keeps meaning "after the
# caller"), a CUDA-free program must never get a CUDA library loaded, and the device section of a
# report must survive every way the driver or NVML can be missing or odd: no libcuda, cuInit
# failing, no NVML, NVML failing, a process list larger than the first buffer, drivers without the
# _v2 process call, a container's pid namespace.
source "$(dirname "$0")/lib.sh"
DBL=$OT_BUILD/doubles
CT=$OT_BUILD/cuda_targets
for f in libcuda.so.1 libfakecudart.so libnvidia-ml.so.1; do
    [ -e "$DBL/$f" ] || { skip cuda_lookup "test doubles not built (make tests)"; exit 0; }
done

# ---- RTLD_NEXT through the hook
d=$(newdir next)
( cd "$d" && "$CT/next_main" >plain.txt 2>&1 )
run_preloaded "$d" "$CT/next_main"
check cuda_dlsym_rtld_next_unchanged cmp -s "$d/plain.txt" "$d/out.txt"
check cuda_dlsym_rtld_next_from_library grep -qx 'liba_next=2' "$d/out.txt"

# The fast path must be a jump: the real dlsym has to see the program's return address.
if command -v objdump >/dev/null; then
    dis=$(objdump -d --no-show-raw-insn "$OT_LIB" | awk '/<ot_dlsym_filter>:/{exit} /<dlsym@@GLIBC_2.34>:/{p=1} p')
    if printf '%s\n' "$dis" | grep -q 'jmp  *\*.*(%rip)'; then pass cuda_dlsym_fast_path_is_tail_jump
    else fail cuda_dlsym_fast_path_is_tail_jump "no indirect jmp in dlsym's trampoline"; fi
else
    skip cuda_dlsym_fast_path_is_tail_jump "objdump not installed"
fi
check cuda_exports_both_dlsym_versions sh -c "readelf --dyn-syms -W '$OT_LIB' | grep -q ' dlsym@GLIBC_2.2.5\$' && readelf --dyn-syms -W '$OT_LIB' | grep -q ' dlsym@@GLIBC_2.34\$'"

# ---- a program that never touches CUDA (no CUDA library on its path either)
for mode in plain oom; do
    d=$(newdir "nocuda_$mode")
    arg=; [ $mode = oom ] && arg=oom
    ( cd "$d" && env -u LD_LIBRARY_PATH "$CT/nocuda" $arg >plain.txt 2>&1 )
    LD_LIBRARY_PATH= run_preloaded "$d" "$CT/nocuda" $arg
    check "cuda_free_${mode}_loads_no_cuda_library" grep -qx 'cuda_libs=none' "$d/out.txt"
    check "cuda_free_${mode}_lookups_unchanged" cmp -s "$d/plain.txt" "$d/out.txt"
done
check cuda_free_host_oom_reported test -n "$(first_report "$OT_TMP/nocuda_oom")"
f=$(first_report "$OT_TMP/nocuda_oom")
[ -n "$f" ] && check cuda_free_report_has_no_devices test "$(json_get "$f" "len(r['devices'])")" = 0

export LD_LIBRARY_PATH=$DBL${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# A context costs device memory, which is how NVML comes to list a process at all.
export OT_FAKE_GPU_TOTAL=16G OT_FAKE_GPU_OTHER_USED=12G OT_FAKE_GPU_OTHER_PID=4242 OT_FAKE_GPU_OTHER_NAME=python3 \
    OT_FAKE_GPU_CTX_OVERHEAD=256M

# device_of DIR EXPR: evaluates EXPR on the first report's focus device `d`
device_of() { json_get "$(first_report "$1")" "(lambda d: $2)(r['devices'][0])"; }
log_has() { grep -q -- "$2" "$1/log.txt"; }

# system_has LIB: the dynamic loader finds LIB without LD_LIBRARY_PATH (a driver is installed), so
# its absence cannot be simulated by leaving it off the path.
system_has() {
    ldconfig -p 2>/dev/null | awk -v lib="$1" '$1 == lib { found = 1 } END { exit !found }' && return 0
    local dir
    for dir in /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /lib64 /usr/lib64 /lib /usr/lib; do
        [ -e "$dir/$1" ] && return 0
    done
    return 1
}

# ---- the runtime without any driver: the runtime's own error comes back, the report says why
if system_has libcuda.so.1; then
    skip cuda_no_driver "this machine has a CUDA driver (libcuda.so.1 on the loader's path): no driver cannot be simulated"
else
    d=$(newdir no_driver)
    mkdir -p "$d/empty"
    LD_LIBRARY_PATH=$d/empty run_preloaded "$d" "$CT/paths_shared" oom
    check cuda_no_driver_error_passed_through grep -qx 'cudaMalloc 35' "$d/out.txt"
    check cuda_no_driver_reported test -n "$(first_report "$d")"
    if [ -n "$(first_report "$d")" ]; then
        check cuda_no_driver_unavailable_reason sh -c "python3 -c \"import json,sys; r=json.load(open(sys.argv[1])); d=r['devices'][0]; sys.exit(0 if d['total'] is None and 'libcuda.so.1' in d['unavailable'] else 1)\" '$(first_report "$d")'"
    fi
fi

# ---- cuInit fails (no device): the driver's own name and text
d=$(newdir no_device)
OT_FAKE_CUDA_INIT_ERROR=100 run_preloaded "$d" "$CT/paths_shared" oom
check cuda_no_device_error_passed_through grep -qx 'cudaMalloc 100' "$d/out.txt"
if [ -n "$(first_report "$d")" ]; then
    u=$(device_of "$d" "d['unavailable']")
    case "$u" in *CUDA_ERROR_NO_DEVICE*"no CUDA-capable device"*) pass cuda_no_device_reason ;; *) fail cuda_no_device_reason "unavailable: $u" ;; esac
else
    fail cuda_no_device_reason "no report"
fi

# ---- NVML: absent, failing, big lists, old drivers
d=$(newdir nvml_ok)
run_preloaded "$d" "$CT/paths_shared" oom
check cuda_nvml_lists_other_process test "$(device_of "$d" "[(p['pid'], p['name'], p['used']) for p in d['processes'] if not p['self']][0]")" = "(4242, 'python3', 12884901888)"
check cuda_nvml_finds_self test "$(device_of "$d" "sum(1 for p in d['processes'] if p['self'])")" = 1
check cuda_nvml_diagnosis_names_holder log_has "$d" 'other processes hold 12.0 GiB of 16.0 GiB on GPU 0: pid 4242 (python3) 12.0 GiB'

mkdir -p "$OT_TMP/nonvml"
for f in libcuda.so.1 libcuda.so libfakecudart.so; do ln -sf "$DBL/$f" "$OT_TMP/nonvml/$f"; done
d=$(newdir nvml_absent)
LD_LIBRARY_PATH=$OT_TMP/nonvml run_preloaded "$d" "$CT/paths_shared" oom
check cuda_nvml_absent_still_reports test -n "$(first_report "$d")"
if system_has libnvidia-ml.so.1; then
    skip cuda_nvml_absent_said "this machine has NVML (libnvidia-ml.so.1 on the loader's path): its absence cannot be simulated"
elif [ -n "$(first_report "$d")" ]; then
    check cuda_nvml_absent_said sh -c "python3 -c \"import json,sys; d=json.load(open(sys.argv[1]))['devices'][0]; sys.exit(0 if d['processes'] is None and 'NVML' in d['processes_note'] and d['free'] is not None else 1)\" '$(first_report "$d")'"
fi

d=$(newdir nvml_init_fails)
OT_FAKE_NVML_INIT_ERROR=9 run_preloaded "$d" "$CT/paths_shared" oom
n=$(device_of "$d" "d['processes_note']")
case "$n" in *nvmlInit*"Driver Not Loaded"*) pass cuda_nvml_init_error_said ;; *) fail cuda_nvml_init_error_said "note: $n" ;; esac
check cuda_nvml_init_error_keeps_memory test "$(device_of "$d" "d['free'] is not None")" = True

d=$(newdir nvml_grow)
OT_FAKE_NVML_EXTRA_PROCS=70 run_preloaded "$d" "$CT/paths_shared" oom
check cuda_nvml_buffer_grows test "$(device_of "$d" "len(d['processes'])")" = 32
n=$(device_of "$d" "d['processes_note']")
case "$n" in *"40 more processes not shown"*) pass cuda_nvml_truncation_said ;; *) fail cuda_nvml_truncation_said "note: $n" ;; esac
check cuda_nvml_biggest_first test "$(device_of "$d" "d['processes'][0]['pid']")" = 4242

d=$(newdir nvml_old)
OT_FAKE_NVML_NO_V2=1 run_preloaded "$d" "$CT/paths_shared" oom
check cuda_nvml_v1_fallback test "$(device_of "$d" "[p['pid'] for p in d['processes'] if not p['self']]")" = "[4242]"

d=$(newdir nvml_r535)
OT_FAKE_NVML_V3_STRIDE=32 run_preloaded "$d" "$CT/paths_shared" oom
check cuda_nvml_r535_layout_irrelevant test "$(device_of "$d" "[(p['pid'], p['used']) for p in d['processes'] if not p['self']]")" = "[(4242, 12884901888)]"

# ---- a container: NVML reports host pids, ours is not among them
d=$(newdir container)
OT_FAKE_NVML_PID_OFFSET=100000 run_preloaded "$d" "$CT/paths_shared" oom
n=$(device_of "$d" "d['processes_note'] or ''")
if [ -n "$(first_report "$d")" ]; then
    if [ "$(readlink /proc/self/ns/pid)" = "pid:[4026531836]" ]; then
        # Host namespace: our pid is trusted, and the shifted entry is not us.
        check cuda_container_host_ns_not_fooled test "$(device_of "$d" "sum(1 for p in d['processes'] if p['self'])")" = 0
    else
        case "$n" in *"NVML lists host pids"*) pass cuda_container_pids_said ;; *) fail cuda_container_pids_said "note: $n" ;; esac
    fi
else
    fail cuda_container_report "no report written"
fi
if command -v unshare >/dev/null && unshare --pid --fork --mount-proc true 2>/dev/null; then
    d=$(newdir pidns)
    OT_FAKE_NVML_PID_OFFSET=100000 run_preloaded "$d" unshare --pid --fork --mount-proc "$CT/paths_shared" oom
    n=$(device_of "$d" "d['processes_note'] or ''")
    case "$n" in *"own pid namespace"*"NVML lists host pids"*) pass cuda_pidns_note ;; *) fail cuda_pidns_note "note: $n" ;; esac
    # The only entry named like us is taken to be us, and said to be a guess.
    check cuda_pidns_self_by_name test "$(device_of "$d" "[(p['pid'] >= 100000, p['self']) for p in d['processes'] if p['pid'] != 4242]")" = "[(True, True)]"
else
    skip cuda_pidns_note "cannot create a pid namespace here (unshare --pid needs CAP_SYS_ADMIN)"
fi
exit 0
