#!/usr/bin/env bash
# Where the address space went: programs that fill it with one kind of mapping each (arenas, thread
# stacks, a file mapped whole, an anonymous pool, a library's bss, the heap, the CUDA driver's
# reservation) fail a malloc under RLIMIT_AS; each report names that kind first, with its figures
# to within a few pages, and the diagnosis that follows. And a 32-bit build of the host OOM example.
. "$(dirname "$0")/lib.sh"
T=$OT_BUILD/targets/as_hogs
MiB=$((1 << 20)); PAGE=4096

# first_kind REPORT: the largest category other than the request itself
first_kind() { json_get "$1" "[c['kind'] for c in r['address_space']['categories'] if c['kind'] != 'requested'][0]"; }
# cat_field REPORT KIND EXPR: EXPR on category c of KIND (None when absent)
cat_field() { json_get "$1" "next(($3 for c in r['address_space']['categories'] if c['kind'] == '$2'), None)"; }
# near A B TOLERANCE: |A - B| <= TOLERANCE
near() { [ "$1" != None ] && [ $(( $1 > $2 ? $1 - $2 : $2 - $1 )) -le "$3" ]; }
# stack8 CMD...: CMD in this shell with the default 8 MiB stack limit (a soft limit, put back after),
# whatever ulimit -s the caller runs under
stack8() { local s; s=$(ulimit -S -s); ulimit -S -s 8192; "$@"; ulimit -S -s "$s"; }

hog() { # NAME ARGS...: runs as_hogs under the preload and plain; same output; sets R, LAST
    local name=$1; shift
    local d; d=$(newdir "$name")
    ( cd "$d" && timeout 60 "$T" "$@" >plain.txt 2>/dev/null ); local prc=$?
    run_preloaded "$d" "$T" "$@"
    if [ "$prc" = 0 ] && [ "$RC" = 0 ] && cmp -s "$d/plain.txt" "$d/out.txt" && grep -q "malloc(67108864) -> NULL" "$d/out.txt"
    then pass "${name}_program_sees_same"; else fail "${name}_program_sees_same" "status $prc vs $RC: $(head -c 300 "$d/err.txt")"; fi
    LAST=$d; R=$(first_report "$d")
    [ -n "$R" ] || fail "${name}_report" "no JSON in $d"
}
no_batch_advice() { # NAME: the batch-size advice is for a heap that fills the space only
    check "${1}_no_batch_size_advice" sh -c "! grep -q 'reduce the batch size' '$LAST/log.txt'"
}

hog arenas arenas
if [ -n "$R" ]; then
    check arenas_named_first [ "$(first_kind "$R")" = malloc_arenas ]
    check arenas_eight_of_64MiB [ "$(cat_field "$R" malloc_arenas '(c["count"], c["bytes"])')" = "(8, $((512 * MiB)))" ]
    check arenas_diagnosis grep -q "glibc malloc arenas reserve 512.0 MiB of address space in 8 arenas .*: set MALLOC_ARENA_MAX=2 or raise the limit" "$LAST/log.txt"
    check arenas_text_line grep -q "^oomtrace:   glibc malloc arenas 512.0 MiB (.*) in 8 arenas" "$LAST/log.txt"
    no_batch_advice arenas
fi

# glibc sizes a thread's stack by RLIMIT_STACK (2 MiB where it is unlimited): the figures below are
# for 8 MiB, which a hard limit below it does not allow
hard_s=$(ulimit -H -s)
if [ "$hard_s" != unlimited ] && [ "$hard_s" -lt 8192 ]; then
    skip stacks "the hard stack limit is ${hard_s} KiB: the thread-stack figures are for the default 8 MiB"
    R=""
else
    stack8 hog stacks stacks
fi
if [ -n "$R" ]; then
    check stacks_named_first [ "$(first_kind "$R")" = thread_stacks ]
    check stacks_41_counted [ "$(cat_field "$R" thread_stacks 'c["count"]')" = 41 ]
    b=$(cat_field "$R" thread_stacks 'c["bytes"]')
    # 40 stacks of RLIMIT_STACK (8 MiB) and a guard page each, and the main thread's [stack]
    check stacks_bytes near "$b" $((40 * (8 * MiB + PAGE))) $((2 * MiB))
    check stacks_diagnosis grep -q "41 threads' stacks take 32[0-9].[0-9] MiB" "$LAST/log.txt"
    check stacks_threads_counted [ "$(json_get "$R" 'r["address_space"]["threads"]')" = 41 ]
    no_batch_advice stacks
fi

hog file file data.bin
if [ -n "$R" ]; then
    check file_named_first [ "$(first_kind "$R")" = files ]
    check file_by_name [ "$(cat_field "$R" files 'c["top"][0]["name"].endswith("/data.bin")')" = True ]
    check file_bytes near "$(cat_field "$R" files 'c["top"][0]["bytes"]')" $((1024 * MiB)) $((2 * PAGE))
    check file_diagnosis grep -q "/data.bin is mapped whole (1.0 GiB)" "$LAST/log.txt"
    no_batch_advice file
fi

hog pool pool
if [ -n "$R" ]; then
    check pool_named_first [ "$(first_kind "$R")" = anonymous ]
    check pool_largest_mapping near "$(cat_field "$R" anonymous 'c["top"][0]["bytes"]')" $((512 * MiB)) $((2 * PAGE))
    check pool_diagnosis grep -q "anonymous mappings made outside malloc take 51[0-9].[0-9] MiB" "$LAST/log.txt"
    no_batch_advice pool
fi

hog bss bss "$OT_BUILD/targets/libbigbss.so"
if [ -n "$R" ]; then
    check bss_named_first [ "$(first_kind "$R")" = libraries ]
    check bss_library_by_name [ "$(cat_field "$R" libraries 'c["top"][0]["name"].endswith("/libbigbss.so")')" = True ]
    # the 512 MiB bss and the library's own few pages
    check bss_bytes near "$(cat_field "$R" libraries 'c["top"][0]["bytes"]')" $((512 * MiB)) $((8 * PAGE))
    check bss_diagnosis grep -q "(largest: libbigbss.so 512.0 MiB, its bss included)" "$LAST/log.txt"
    no_batch_advice bss
fi

hog heap heap
if [ -n "$R" ]; then
    check heap_named_first [ "$(first_kind "$R")" = heap ]
    check heap_live [ "$(cat_field "$R" heap 'c["live"]')" = $((512 * MiB)) ]
    check heap_batch_advice grep -q "or reduce the batch size or model size" "$LAST/log.txt"
    check heap_call_sites grep -q "this process's live heap is 512.0 MiB in 8 blocks" "$LAST/log.txt"
fi

# A cgroup whose limit the failure crosses, with a neighbour (python3 holding 160 MiB) in it: the
# report breaks the cgroup's usage down (memory.stat) and names the neighbour with its RSS.
CGROOT=/sys/fs/cgroup/memory
cgrel=$(sed -n 's/^[0-9]*:memory:\(.*\)/\1/p' /proc/self/cgroup)
[ -f "$CGROOT$cgrel/memory.limit_in_bytes" ] || cgrel=""   # in a container the mount is our own cgroup
CG=$CGROOT$cgrel/oomtrace-asmap-$$
if [ "$(id -u)" != 0 ] || [ ! -f "$CGROOT/memory.limit_in_bytes" ] || ! mkdir "$CG" 2>/dev/null; then
    skip cgroup_breakdown "no cgroup v1 memory controller we may make a child cgroup in ($CG)"
else
    echo $((240 * MiB)) >"$CG/memory.limit_in_bytes"
    d=$(newdir cgroup)
    sh -c 'echo $$ >"$1/cgroup.procs"; exec python3 -c "import sys,time; b=bytearray(160 << 20); print(1, flush=True); time.sleep(60)"' \
        sh "$CG" >"$d/neighbour.txt" &
    npid=$!
    for _ in $(seq 100); do [ -s "$d/neighbour.txt" ] && break; sleep 0.1; done
    run_preloaded "$d" sh -c 'echo $$ >"$1/cgroup.procs"; exec "$2" cgroup' sh "$CG" "$T"
    kill "$npid" 2>/dev/null; wait "$npid" 2>/dev/null
    R=$(first_report "$d")
    check cgroup_program_fails_as_planned grep -q "malloc(67108864) -> NULL" "$d/out.txt"
    check_report cgroup_usage_in_json "$d" [ "$(json_get "$R" 'r["cgroup_usage"]["version"], r["cgroup_usage"]["anonymous"] >= 190 << 20')" = "1 True" ]
    check_report cgroup_neighbour_listed "$d" [ "$(json_get "$R" "[(p['pid'], p['name'], p['rss'] >= 160 << 20) for p in r['cgroup_usage']['processes'] if not p['self']][0]")" = "($npid, 'python3', True)" ]
    check cgroup_neighbour_diagnosis grep -q "other processes in the cgroup hold 1[6-9][0-9].[0-9] MiB of RSS (this one .*): pid $npid (python3)" "$d/log.txt"
    check cgroup_limit_diagnosis grep -q "cgroup memory.max reached (v1 limit_in_bytes): .* used of 240.0 MiB" "$d/log.txt"
    # anonymous: the neighbour's 160 MiB and as_hogs' 32 MiB, and up to 32 MiB more that the
    # interpreters and the preload touch (195-200 MiB seen, by python3 build): 192 to 224 MiB, compared
    # in tenths of a MiB; and the JSON's figure, to the text's one decimal
    anon=$(sed -n "s/.*the cgroup's memory: anonymous \([0-9]*\.[0-9]\) MiB, page cache .*/\1/p" "$d/log.txt" | head -n 1)
    anon10=None; [ -n "$anon" ] && anon10=$((10#${anon/./}))
    check cgroup_breakdown_diagnosis near "$anon10" $(((192 + 16) * 10)) $((16 * 10))
    check_report cgroup_breakdown_as_in_json "$d" near "$anon10" "$(json_get "$R" 'round(r["cgroup_usage"]["anonymous"] * 10 / 2**20)')" 1
    check cgroup_breakdown_text grep -q "^oomtrace: cgroup usage: anonymous .*; 2 processes:" "$d/log.txt"
    for _ in $(seq 50); do rmdir "$CG" 2>/dev/null && break; sleep 0.1; done
    check cgroup_removed [ ! -d "$CG" ]
fi

# The CUDA driver's reservation (the double reserves 4 GiB at cuInit, PROT_NONE and MAP_NORESERVE,
# as the real driver does): no address-space limit leaves room for CUDA.
DBL=$OT_BUILD/doubles
if [ -x "$OT_BUILD/cuda_targets/drv_paths" ] && [ -e "$DBL/libcuda.so.1" ]; then
    d=$(newdir cuda_vlimit)
    LD_LIBRARY_PATH=$DBL${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} run_preloaded "$d" "$OT_BUILD/cuda_targets/drv_paths" vlimit
    R=$(first_report "$d")
    check cuda_vlimit_runs grep -q "malloc(67108864) -> NULL" "$d/out.txt"
    check_report cuda_reservation_named_first "$d" [ "$(first_kind "$R")" = cuda_reserved ]
    check_report cuda_reservation_bytes "$d" [ "$(cat_field "$R" cuda_reserved 'c["bytes"]')" = $((4096 * MiB)) ]
    check cuda_diagnosis grep -q "the CUDA driver maps 4.0 GiB of virtual address space: an address-space limit (ulimit -v, a scheduler's vmem limit) cannot work with CUDA" "$d/log.txt"
else
    skip cuda_reservation "CUDA test doubles not built (make tests)"
fi

# A 32-bit build of the host OOM example. liboomtrace is 64-bit only (its unwinder and the hooks'
# atomics are x86-64's), so a 32-bit test double saves the program's maps where its malloc fails
# and the 64-bit parser and writers (asmap_dump) write up that address space with pointer_bits 32.
d=$(newdir host_oom32)
if ! gcc -m32 -std=gnu11 -D_GNU_SOURCE -O1 -g -Iinclude -o "$d/host_oom32" "$OT_ROOT/examples/host_oom.c" 2>"$d/cc.txt" ||
   ! gcc -m32 -shared -fPIC -O1 -o "$d/maps32.so" "$OT_ROOT/tests/doubles/maps_at_failure.c" 2>>"$d/cc.txt"; then
    skip host_oom_32bit "gcc -m32 cannot build here (Debian: apt-get install gcc-multilib): $(head -c 200 "$d/cc.txt")"
elif [ ! -x "$OT_BUILD/tests/tools/asmap_dump" ]; then
    skip host_oom_32bit "build/tests/tools/asmap_dump not built (make tests)"
else
    # batch 700: 233 MiB of weights, 813 MiB of conv1, then 2.6 GiB for pool1: past 4 GiB. With the
    # stack unlimited the kernel lays a 32-bit process out the legacy way (mmap from the bottom up),
    # malloc's large blocks come from brk and the heap is named first: the default 8 MiB, then (or
    # whatever lower finite limit the hard limit leaves: the layout is the same).
    ( cd "$d" || exit; ulimit -S -s 8192 2>/dev/null; OT_MAPS_OUT="$d/maps.txt" LD_PRELOAD="$d/maps32.so" timeout 60 ./host_oom32 --batch 700 >out.txt 2>err.txt )
    check host_oom32_fails_as_caffe grep -q "Check failed: \*ptr host allocation of size" "$d/err.txt"
    if [ -s "$d/maps.txt" ]; then
        req=$(sed -n '1s/# request //p' "$d/maps.txt")
        "$OT_BUILD/tests/tools/asmap_dump" "$d/maps.txt" 32 "$req" "$d/r.json" >"$d/log.txt"
        check host_oom32_report_names_32bit grep -q "a 32-bit process can address at most 3–4 GiB, this one has .* in use: run a 64-bit build" "$d/log.txt"
        # Without the tracker's records malloc's large blocks are anonymous mappings: the weights and
        # conv1's output, merged by the kernel, a page or so each of chunk header and rounding.
        check host_oom32_blocks_named_first [ "$(first_kind "$d/r.json")" = anonymous ]
        w=$(sed -n 's/.*Loaded \([0-9]*\) bytes of weights/\1/p' "$d/out.txt")
        check host_oom32_blocks_bytes near "$(cat_field "$d/r.json" anonymous 'c["bytes"]')" $(( ${w:-0} + 700 * 96 * 55 * 55 * 4 )) $((16 * PAGE))
        check host_oom32_pointer_bits [ "$(json_get "$d/r.json" 'r["address_space"]["pointer_bits"], r["host_memory"]["pointer_bits"]')" = "32 32" ]
        check host_oom32_requested [ "$(cat_field "$d/r.json" requested 'c["bytes"]')" = "$req" ]
    else
        fail host_oom32_maps_saved "the 32-bit double saved no maps: $(head -c 300 "$d/err.txt")"
    fi
fi
