#!/usr/bin/env bash
# The "killed" report (launcher/postmortem.c): a program under the supervisor is killed — by a
# SIGKILL from outside, by a forwarded SIGTERM, by the cgroup OOM killer in a memory cgroup made
# for the test (v1 or v2) — and the launcher writes the report from the state file it left: the
# signal, the killer, the cgroup's limit, the allocating function, the supervisor's own samples of
# the program's RSS and cgroup usage; it removes the file and dies by the same signal. State files come from tests/targets/statefile_writer (the recorder's layout,
# written without the library) and, where the library has its recorder, from the library itself.
. "$(dirname "$0")/lib.sh"
T=$OT_BUILD/targets
L=$OT_LAUNCHER
SW=$T/statefile_writer
for f in "$OT_LIB" "$L" "$SW" "$T/sigtool" "$T/touch_grow"; do
    [ -e "$f" ] || { fail killed "missing $f (run make tests)"; exit 1; }
done
unset OOMTRACE_OPTIONS LD_PRELOAD
# Does the library record state files itself (the recorder branch)?
REAL=no
grep -q 'state_dir' "$OT_LIB" 2>/dev/null && REAL=yes

# setup NAME: fresh D (reports) and SD (state dir); OPTS for the launcher's program
setup() {
    D=$(newdir "$1")
    SD=$D/state
    mkdir -m 700 "$SD"
    OPTS="state_dir=$SD:report=$D/r.%p.%n.json:log=$D/log.%p.txt"
    [ "${2:-}" = fake ] && OPTS="$OPTS:recorder=0"
}
# wait_file: waits for a state file in SD; sets SF and SPID (the pid it names)
wait_file() {
    SF=
    for _ in $(seq 250); do
        SF=$(ls "$SD"/oomtrace-*.rec 2>/dev/null | head -n 1)
        [ -n "$SF" ] && break
        sleep 0.02
    done
    SPID=${SF##*/oomtrace-}; SPID=${SPID%%-*}
}
report() { ls "$D"/r.*.json 2>/dev/null | head -n 1; }
jget() { json_get "$(report)" "$1" 2>&1; }

# ---------------------------------------------------------------- SIGKILL from outside
setup sigkill fake
OOMTRACE_OPTIONS=$OPTS "$L" "$SW" grow "$SD" 4 >"$D/out" 2>"$D/err" &
LP=$!
wait_file
sleep 0.3
[ -n "$SPID" ] && kill -KILL "$SPID"
wait "$LP" 2>/dev/null; rc=$?
R=$(report)
if [ -z "$SPID" ]; then
    fail killed_sigkill "the writer made no state file in $SD: $(head -c 300 "$D/err")"
elif [ -z "$R" ]; then
    fail killed_sigkill "no killed report in $D (status $rc): $(ls "$D"); $(head -c 300 "$D/err")"
else
    got=$(jget "(r['event'], r['process']['pid'], r['killed']['signal'], r['killed']['killer'], r['sites'][0]['stack'][0]['function'])")
    want="('killed', $SPID, 9, 'signal', 'grow_buffers')"
    [ "$got" = "$want" ] && pass killed_sigkill_report || fail killed_sigkill_report "$got, want $want"
    [ "$rc" -eq 137 ] && pass killed_sigkill_status || fail killed_sigkill_status "launcher status $rc, want 137"
    [ ! -e "$SF" ] && pass killed_state_file_removed || fail killed_state_file_removed "$SF is still there"
    grep -q 'killed by SIGKILL from outside, not by an OOM killer; .*grow_buffers' "$D/log.$SPID.txt" 2>/dev/null &&
        pass killed_sigkill_text_diagnosis ||
        fail killed_sigkill_text_diagnosis "$(head -c 400 "$D/log.$SPID.txt" 2>/dev/null)"
    got=$(jget "(len(r['killed']['large']) > 0, len(r['killed']['history']) > 1, r['killed']['supervisor_pid'] == $LP)")
    [ "$got" = "(True, True, True)" ] && pass killed_large_history_supervisor ||
        fail killed_large_history_supervisor "(large, history, supervisor) = $got"
fi

# ---------------------------------------------------------------- SIGTERM to the launcher
setup sigterm fake
OOMTRACE_OPTIONS=$OPTS "$L" "$SW" grow "$SD" 1 >"$D/out" 2>"$D/err" &
LP=$!
wait_file
sleep 0.2
kill -TERM "$LP"
wait "$LP" 2>/dev/null; rc=$?
got=$(jget "(r['killed']['signal'], r['killed']['forwarded_signal'], r['killed']['killer'])")
if [ "$rc" -eq 143 ] && [ "$got" = "(15, 'SIGTERM', 'signal')" ]; then pass killed_forwarded_sigterm
else fail killed_forwarded_sigterm "status $rc (want 143), (signal, forwarded, killer) = $got"; fi

# ---------------------------------------------------------------- a descendant's left-over file
# The program (a shell) starts a grandchild that records, and both are killed: the grandchild's
# file names this supervisor (OOMTRACE_SUPERVISOR), so the launcher reports it too.
setup descendant fake
{ OOMTRACE_OPTIONS=$OPTS "$L" bash -c '"$0" grow "$1" 1 & for _ in $(seq 100); do ls "$1"/*.rec >/dev/null 2>&1 && break; sleep 0.05; done; sleep 0.2; kill -9 $!; sleep 0.1; kill -9 $$' "$SW" "$SD" >"$D/out" 2>"$D/err"; } 2>/dev/null
rc=$?
R=$(report)
got=$([ -n "$R" ] && jget "(r['event'], r['killed']['killer'], r['process']['exe'].endswith('statefile_writer'))")
if [ "$rc" -eq 137 ] && [ "$got" = "('killed', 'unknown', True)" ] && [ -z "$(ls "$SD"/*.rec 2>/dev/null)" ]; then
    pass killed_descendant_file
else
    fail killed_descendant_file "status $rc, report: $got; left: $(ls "$SD"); $(head -c 200 "$D/err")"
fi

# ---------------------------------------------------------------- no state file: no report
setup nofile
{ OOMTRACE_OPTIONS=$OPTS "$L" "$T/sigtool" raise 9 >"$D/out" 2>"$D/err"; } 2>/dev/null; rc=$?
if [ "$rc" -eq 137 ] && [ -z "$(report)" ] && ! grep -q 'killed' "$D/err"; then pass killed_no_state_file_no_report
else fail killed_no_state_file_no_report "status $rc, reports: $(ls "$D"), stderr: $(head -c 200 "$D/err")"; fi

# ---------------------------------------------------------------- a real cgroup OOM kill
# make_cgroup: a memory cgroup below ours with a 64 MiB limit; sets CG, CGV; or why not, in WHY
make_cgroup() {
    CG= CGV= WHY=
    local rel v2rel
    rel=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3}' /proc/self/cgroup)
    if [ -n "$rel" ] && [ -d "/sys/fs/cgroup/memory$rel" ]; then
        CG=/sys/fs/cgroup/memory${rel%/}/oomtrace-killed-$$
        if mkdir "$CG" 2>/dev/null && echo $((64 << 20)) >"$CG/memory.limit_in_bytes" 2>/dev/null; then
            [ -e "$CG/memory.memsw.limit_in_bytes" ] && echo $((64 << 20)) >"$CG/memory.memsw.limit_in_bytes" 2>/dev/null
            CGV=1
            return 0
        fi
        WHY="cannot create a child cgroup with a limit under /sys/fs/cgroup/memory$rel"
        rmdir "$CG" 2>/dev/null
    fi
    v2rel=$(awk -F: '$1 == 0 {print $3}' /proc/self/cgroup)
    for m in /sys/fs/cgroup /sys/fs/cgroup/unified; do
        local dir=$m${v2rel%/}
        [ -e "$dir/cgroup.controllers" ] || continue
        if ! grep -qw memory "$dir/cgroup.controllers" 2>/dev/null; then
            WHY="${WHY:+$WHY; }cgroup v2 at $m has no memory controller for $dir"
            continue
        fi
        echo +memory >"$dir/cgroup.subtree_control" 2>/dev/null
        CG=$dir/oomtrace-killed-$$
        if mkdir "$CG" 2>/dev/null && echo $((64 << 20)) >"$CG/memory.max" 2>/dev/null; then
            echo 0 >"$CG/memory.swap.max" 2>/dev/null
            CGV=2
            return 0
        fi
        rmdir "$CG" 2>/dev/null
        WHY="${WHY:+$WHY; }cannot create a child cgroup with memory.max under $dir"
    done
    [ -z "$WHY" ] && WHY="no memory cgroup found in /proc/self/cgroup"
    return 1
}

# in_cgroup PROGRAM...: runs the launcher on PROGRAM inside the cgroup, output to $D; sets rc
in_cgroup() {
    { OOMTRACE_OPTIONS=$OPTS sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$CG" "$L" "$@" >"$D/out" 2>"$D/err"; } 2>/dev/null
    rc=$?
}

# oom_case NAME PROGRAM...: runs the launcher inside the cgroup and checks the killed report
oom_case() {
    local name=$1; shift
    in_cgroup "$@"
    R=$(report)
    if [ -z "$R" ]; then
        fail "$name" "no killed report (status $rc): $(ls "$D" | tr '\n' ' '); $(head -c 300 "$D/err")"
        return
    fi
    got=$(jget "(r['killed']['killer'], r['killed']['cgroup']['limit'], r['sites'][0]['stack'][0]['function'])")
    want="('cgroup_oom_killer', $((64 << 20)), 'grow_buffers')"
    local diag
    diag=$(jget "r['diagnosis'][0]")
    if [ "$rc" -eq 137 ] && [ "$got" = "$want" ] && [[ $diag == "killed by the cgroup OOM killer at "*" of a 64.0 MiB "*grow_buffers* ]]; then
        pass "$name"
    else
        fail "$name" "status $rc (want 137); (killer, limit, top function) = $got, want $want; diagnosis: $diag"
    fi
}

if make_cgroup; then
    setup cgroup_oom fake
    oom_case "killed_cgroup_v${CGV}_oom" "$SW" grow "$SD" 16
    if [ "$REAL" = yes ]; then
        setup cgroup_oom_recorder
        oom_case "killed_cgroup_v${CGV}_oom_recorder" "$SW" plain - 16
    else
        skip "killed_cgroup_v${CGV}_oom_recorder" "the library has no recorder in this build (state_dir= unknown to it)"
    fi
    if [ "$REAL" = yes ]; then
        # The supervisor's own samples (launcher/sampler.c): memory that grows with no allocation call.
        # One malloc of 128 MiB, then touched 1 MiB every 20 ms until the 64 MiB limit kills it: the
        # state file stops at the malloc, the samples follow the RSS up to the kill.
        setup cgroup_touch
        in_cgroup "$T/touch_grow" malloc 128 1 20
        if [ -z "$(report)" ]; then
            fail killed_supervisor_samples_touch "no killed report (status $rc): $(ls "$D" | tr '\n' ' '); $(head -c 300 "$D/err")"
        else
            # (killer, samples >= 4, RSS rising in most steps and by > 16 MiB, last sample within 300 ms
            # of the death (the diagnosis says how long) and at >= 75% of the limit, the touching named)
            got=$(jget "(lambda k, s, d: (k['killer'], len(s) >= 4,
                sum(b['rss'] > a['rss'] for a, b in zip(s, s[1:])) * 2 >= len(s) - 1 and s[-1]['rss'] - s[0]['rss'] > 16 << 20,
                [int(l.split(', ')[1].split(' ')[0]) <= 300 for l in d if l.startswith('the supervisor\'s last sample, ') and ' ms before it died' in l] == [True],
                max(s[-1]['rss'], s[-1]['cgroup_usage'] or 0) >= k['cgroup']['limit'] * 3 // 4,
                any('allocated earlier being touched' in l for l in d) and not any('never allocated through malloc' in l for l in d)))(
                r['killed'], r['killed']['supervisor_samples'], r['diagnosis'])")
            want="('cgroup_oom_killer', True, True, True, True, True)"
            [ "$rc" -eq 137 ] && [ "$got" = "$want" ] && pass killed_supervisor_samples_touch ||
                fail killed_supervisor_samples_touch "status $rc; (killer, samples, rising, last within 300 ms, near the limit, touching named) = $got, want $want; $(jget "r['killed']['supervisor_samples'][-3:], r['diagnosis']" | head -c 900)"
        fi
        # Growth by mmap(MAP_ANONYMOUS) and touching, never through malloc (12 MiB malloc'd first so
        # that the recorder makes its state file): the diagnosis says where it did not come from.
        setup cgroup_mmap
        in_cgroup "$T/touch_grow" mmap 12 1 20
        if [ -z "$(report)" ]; then
            fail killed_supervisor_not_malloc "no killed report (status $rc): $(ls "$D" | tr '\n' ' '); $(head -c 300 "$D/err")"
        else
            got=$(jget "(r['killed']['killer'], any('never allocated through malloc/cudaMalloc: the program\'s own mmap' in l for l in r['diagnosis']))")
            [ "$rc" -eq 137 ] && [ "$got" = "('cgroup_oom_killer', True)" ] && grep -q 'never allocated through malloc/cudaMalloc' "$D"/log.*.txt &&
                pass killed_supervisor_not_malloc ||
                fail killed_supervisor_not_malloc "status $rc; (killer, not-malloc named) = $got; $(jget "r['diagnosis']" | head -c 900)"
        fi
    else
        skip killed_supervisor_samples "the library has no recorder in this build (state_dir= unknown to it)"
    fi
    # A worker the OOM killer takes while the program lives on (a DataLoader worker: the program
    # sees it killed and goes on, then exits 0): its report comes while the program still runs,
    # with the cgroup's OOM killer named, and the launcher's status stays the program's.
    setup cgroup_descendant fake
    { OOMTRACE_OPTIONS=$OPTS sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$CG" "$L" bash -c \
        '"$0" grow "$1" 16 & wait $!; echo "worker $?"; for _ in $(seq 60); do ls "$2"/r.*.json >/dev/null 2>&1 && break; sleep 0.05; done; ls "$2"/r.*.json >/dev/null 2>&1 && echo "report while running"; exit 0' \
        "$SW" "$SD" "$D" >"$D/out" 2>"$D/err"; } 2>/dev/null
    rc=$?
    R=$(report)
    got=$([ -n "$R" ] && jget "(r['event'], r['killed']['signal'], r['killed']['killer'], r['process']['exe'].endswith('statefile_writer'), r['sites'][0]['stack'][0]['function'])")
    want="('killed', 9, 'cgroup_oom_killer', True, 'grow_buffers')"
    if [ "$rc" -eq 0 ] && [ "$got" = "$want" ] && grep -qx 'worker 137' "$D/out" && grep -qx 'report while running' "$D/out" &&
        [ -z "$(ls "$SD"/*.rec 2>/dev/null)" ]; then
        pass killed_cgroup_oom_descendant_while_running
    else
        fail killed_cgroup_oom_descendant_while_running "status $rc (want 0); report $got, want $want; output: $(tr '\n' '|' <"$D/out"); left: $(ls "$SD"); $(head -c 300 "$D/err")"
    fi
    for _ in 1 2 3 4 5; do rmdir "$CG" 2>/dev/null && break; sleep 0.2; done
else
    skip killed_cgroup_oom "$WHY"
    skip killed_supervisor_samples "$WHY"
    skip killed_cgroup_oom_descendant_while_running "$WHY"
fi

# ---------------------------------------------------------------- the library's own recorder
if [ "$REAL" = yes ]; then
    setup recorder_sigkill
    OOMTRACE_OPTIONS=$OPTS "$L" "$SW" plain - 4 >"$D/out" 2>"$D/err" &
    LP=$!
    wait_file
    sleep 0.3
    CP=$(awk '{print $1}' /proc/$LP/task/$LP/children 2>/dev/null)
    [ -n "$CP" ] && kill -KILL "$CP"
    wait "$LP" 2>/dev/null; rc=$?
    got=$(jget "(r['event'], r['killed']['signal'], 'grow_buffers' in r['diagnosis'][0])")
    [ "$rc" -eq 137 ] && [ "$got" = "('killed', 9, True)" ] && pass killed_recorder_sigkill ||
        fail killed_recorder_sigkill "status $rc, (event, signal, grow_buffers named) = $got; $(head -c 300 "$D/err")"
    # The supervisor sampled it while it held its memory (0.3 s: about 3 samples, each with an RSS
    # of at least the 4 MiB block it touched; the cgroup usage null where there is no memory cgroup).
    got=$(jget "(lambda s: (len(s) >= 1, all(x['rss'] is not None and x['rss'] >= 4 << 20 for x in s),
        all(x['time_ns'] <= y['time_ns'] for x, y in zip(s, s[1:]))))(r['killed']['supervisor_samples'])")
    [ "$got" = "(True, True, True)" ] && pass killed_recorder_supervisor_samples ||
        fail killed_recorder_supervisor_samples "(some, rss known, in time order) = $got: $(jget "r['killed']['supervisor_samples']" | head -c 400)"
else
    skip killed_recorder_sigkill "the library has no recorder in this build (state_dir= unknown to it)"
fi
