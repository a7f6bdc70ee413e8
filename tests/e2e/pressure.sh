#!/bin/bash
# The pressure watch end to end: a program growing towards RLIMIT_AS, and towards a cgroup v1 memory
# limit made for the test, gets one "pressure" report per step it crosses (0.9, 0.95, 0.99), never
# more, and none with pressure=0.
. "$(dirname "$0")/lib.sh"
G=$OT_BUILD/targets/rec_grow

# reports DIR: the pressure reports' reasons, one a line
reports() {
    for f in "$1"/*.json; do [ -e "$f" ] && json_get "$f" "r['event'] + ' ' + (r.get('reason') or '')"; done | grep '^pressure' || true
}

# --- RLIMIT_AS: grow to ~97% of it in 256 KiB blocks (each flushes the level: many looks, 2 reports)
D=$(newdir pressure_as)
OOMTRACE_OPTIONS_EXTRA="recorder=0" run_preloaded "$D" "$G" 0 1024 exit
base=$(awk '/^ready/{print $3}' "$D/out.txt")
if [ -z "$base" ]; then
    fail pressure_rlimit_as "cannot measure the base VmSize: $(cat "$D/err.txt")"
else
    lim=$((base + 300 * 1024))                          # KiB
    blocks=$(( (lim * 97 / 100 - base - 1024) / 260 ))  # a 256 KiB block maps 260 KiB
    rm -f "$D"/*.json
    ( cd "$D" && ulimit -v "$lim" && LD_PRELOAD=$OT_LIB OOMTRACE_OPTIONS="report=$D/p.%p.%n.json:log=$D/log.txt" \
        "$G" $((blocks / 4)) 256 exit >"$D/out.txt" 2>"$D/err.txt" ); rc=$?
    r=$(reports "$D")
    n=$(grep -c . <<<"$r")
    if [ $rc = 0 ] && [ "$n" = 2 ] && grep -q "of RLIMIT_AS.*pressure=90% step" <<<"$r" && grep -q "pressure=95% step; next report at 99%" <<<"$r"; then
        pass pressure_rlimit_as_steps
    else
        fail pressure_rlimit_as_steps "rc=$rc, $n reports (want 2 at 90% and 95%): $r $(tail -3 "$D/err.txt")"
    fi
    check pressure_text_report grep -q "pressure: memory at 9[0-9].[0-9]% of RLIMIT_AS" "$D/log.txt"
    check pressure_crossing_stack bash -c "grep -A1 -m1 'allocation that crossed it' '$D/log.txt' | grep -q '#0 .* in grow_buffers'"
    D2=$(newdir pressure_off)
    ( cd "$D2" && ulimit -v "$lim" && LD_PRELOAD=$OT_LIB OOMTRACE_OPTIONS="report=$D2/p.%p.%n.json:log=$D2/log.txt:pressure=0" \
        "$G" $((blocks / 4)) 256 exit >"$D2/out.txt" 2>"$D2/err.txt" )
    check pressure_off_no_report test -z "$(reports "$D2")"
fi

# --- a cgroup v1 memory limit of 160 MiB made below ours; grow by 150 MiB: the 90% step for sure,
# the 95% one too where the cgroup's other charges (page cache, the state file) add 8 MiB more
cg=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3}' /proc/self/cgroup)
root=/sys/fs/cgroup/memory
CG=$root${cg%/}/oomtrace-pressure-$$
if [ -z "$cg" ] || ! mkdir "$CG" 2>/dev/null; then
    skip pressure_cgroup_v1 "cannot create a memory cgroup below ${root}${cg} (no v1 memory controller or no permission)"
elif ! echo $((160 << 20)) >"$CG/memory.limit_in_bytes" 2>/dev/null; then
    skip pressure_cgroup_v1 "cannot set memory.limit_in_bytes in $CG"
    rmdir "$CG"
else
    D=$(newdir pressure_cg)
    ( cd "$D" && sh -c "echo \$\$ >'$CG/cgroup.procs' && LD_PRELOAD=$OT_LIB OOMTRACE_OPTIONS=report=$D/p.%p.%n.json:log=$D/log.txt exec '$G' 150 1024 exit" \
        >"$D/out.txt" 2>"$D/err.txt" ); rc=$?
    r=$(reports "$D")
    n=$(grep -c . <<<"$r")
    peak=$(cat "$CG/memory.max_usage_in_bytes")
    first=$(head -n1 <<<"$r"); second=$(sed -n 2p <<<"$r")
    if [ $rc = 0 ] && { [ "$n" = 1 ] || [ "$n" = 2 ]; } &&
        grep -q "of the cgroup's memory.limit_in_bytes (cgroup usage .* of 160.0 MiB), crossing the pressure=90% step" <<<"$first" &&
        { [ "$n" = 1 ] || grep -q "crossing the pressure=95% step" <<<"$second"; }; then
        pass pressure_cgroup_v1
    else
        fail pressure_cgroup_v1 "rc=$rc, $n reports (want the 90% step, then at most the 95% one; peak usage $peak): $r $(tail -3 "$D/err.txt")"
    fi
    f=$(ls "$D"/*.json 2>/dev/null | head -n1)
    if [ -n "$f" ] && [ "$(json_get "$f" "r['pressure']['stack'][0]['function'] + '|' + r['pressure']['limit_name']")" = "grow_buffers|the cgroup's memory.limit_in_bytes" ]; then
        pass pressure_cgroup_v1_stack
    else
        fail pressure_cgroup_v1_stack "the JSON pressure section lacks the crossing stack: ${f:-no report}"
    fi
    rmdir "$CG" 2>/dev/null
fi
