#!/bin/bash
# The flight recorder end to end: a program killed with SIGKILL leaves a state file with its totals,
# top call site and history; a normal exit, _exit and exec leave none; a small program makes none;
# fork gives the child its own file; hostile directories are refused. The files are read the way a
# user reads them: `oomtrace postmortem` (launcher/statefile.c) and its JSON report.
. "$(dirname "$0")/lib.sh"
T=$OT_TMP/rec
mkdir -p "$T"
G=$OT_BUILD/targets/rec_grow
# pm FILE OUT: the post-mortem JSON report of a state file
pm() { rm -f "$2"; "$OT_LAUNCHER" postmortem --report="$2" "$1" >"$2.log" 2>&1; [ -s "$2" ]; }

# start NAME OPTS ARGS...: runs rec_grow in the background, waits for its "ready" line; sets PID
start() {
    local name=$1 opts=$2; shift 2
    rm -f "$T/$name.out"
    ( cd "$T" && LD_PRELOAD=$OT_LIB OOMTRACE_OPTIONS="log=$T/$name.log:report=$T/$name.%p.json${opts:+:$opts}" \
        exec "$G" "$@" >"$T/$name.out" 2>"$T/$name.err" ) &
    BG=$!
    for _ in $(seq 200); do grep -q '^ready' "$T/$name.out" 2>/dev/null && break; sleep 0.05; done
    PID=$(awk '/^ready/{print $2}' "$T/$name.out")
}
finish() { kill -9 "$BG" 2>/dev/null; wait "$BG" 2>/dev/null; }
files() { ls "$1" 2>/dev/null | grep -c '^oomtrace-.*\.rec$'; }

# --- SIGKILL: the state survives
S=$T/state1; mkdir -m 700 "$S"
start killed "state_dir=$S" 64 1024 hold
finish
f=$(ls "$S"/oomtrace-"$PID"-*.rec 2>/dev/null | head -n1)
if [ -z "$PID" ] || [ -z "$f" ]; then
    fail recorder_killed_leaves_file "no state file for pid ${PID:-?} in $S: $(ls "$S")"
else
    pass recorder_killed_leaves_file
    check recorder_file_mode bash -c "[ \"\$(stat -c %a '$f')\" = 600 ] && [ \"\$(stat -c %s '$f')\" -le 1048576 ]"
    pm "$f" "$T/killed.json" || fail recorder_killed_postmortem "oomtrace postmortem wrote no report on $f"
    j() { python3 -c "import json,sys; r=json.load(open('$T/killed.json')); k=r['killed']; sys.exit(0 if ($1) else 1)" 2>/dev/null; }
    check recorder_killed_identity j "r['event'] == 'killed' and r['process']['pid'] == $PID and r['process']['exe'].endswith('/rec_grow') and 'rec_grow 64 1024 hold' in r['process']['cmdline']"
    check recorder_killed_totals j "r['live']['host']['bytes'] >= 64<<20 and r['live']['host']['peak_bytes'] >= r['live']['host']['bytes'] and r['live']['host']['count'] >= 64"
    # symbolized after the process is gone, through the file's module map
    check recorder_killed_top_site j "r['sites'][0]['stack'][0]['function'] == 'grow_buffers' and r['sites'][0]['bytes'] >= 64<<20"
    check recorder_killed_history j "len(k['history']) >= 3 and k['history'][-1]['live_host'] >= 64<<20 and k['history'][-1]['rss'] > 60<<20"
    check recorder_killed_large_ring j "len(k['large']) >= 64 and k['large'][-1]['size'] == 1<<20 and k['large'][-1]['stack'][0]['function'] == 'grow_buffers'"
fi
# stacks=all: every large block reaches the ring, those whose stack is the last walk (the inline
# path's) included
S=$T/state-all; mkdir -m 700 "$S"
start killed_all "state_dir=$S:stacks=all" 64 1024 hold
finish
f=$(ls "$S"/oomtrace-"$PID"-*.rec 2>/dev/null | head -n1)
if [ -z "$PID" ] || [ -z "$f" ] || ! pm "$f" "$T/killed_all.json"; then
    fail recorder_stacks_all_large_ring "no state file or report for pid ${PID:-?} in $S: $(ls "$S")"
else
    check recorder_stacks_all_large_ring python3 -c "import json,sys; k=json.load(open('$T/killed_all.json'))['killed']; sys.exit(0 if len(k['large']) >= 64 and k['large'][-1]['stack'][0]['function'] == 'grow_buffers' else 1)"
fi
check recorder_not_in_cwd bash -c "! ls '$T' | grep -q '\.rec$'"

# --- normal ends leave nothing; a small program makes nothing
for mode in exit _exit exec forkexit; do
    S=$T/state-$mode; mkdir -m 700 "$S"
    start "$mode" "state_dir=$S" 64 1024 "$mode"
    wait "$BG"; rc=$?
    if [ -z "$PID" ]; then fail "recorder_${mode}_removes" "program did not start: $(cat "$T/$mode.err")"
    elif [ "$(files "$S")" = 0 ] && [ $rc = 0 ]; then pass "recorder_${mode}_removes"
    else fail "recorder_${mode}_removes" "rc=$rc, left: $(ls "$S")"; fi
done
S=$T/state-small; mkdir -m 700 "$S"
start small "state_dir=$S" 4 1024 hold
finish
if [ -n "$PID" ] && [ "$(files "$S")" = 0 ]; then pass recorder_small_process_none
else fail recorder_small_process_none "pid=${PID:-?} left: $(ls "$S")"; fi
S=$T/state-off; mkdir -m 700 "$S"
start off "state_dir=$S:recorder=0" 64 1024 hold
finish
if [ -n "$PID" ] && [ "$(files "$S")" = 0 ]; then pass recorder_off_none; else fail recorder_off_none "left: $(ls "$S")"; fi

# --- fork: the child writes its own file under its own pid
S=$T/state-fork; mkdir -m 700 "$S"
start fork "state_dir=$S" 32 1024 fork
for _ in $(seq 100); do grep -q '^child' "$T/fork.out" && break; sleep 0.05; done
CPID=$(awk '/^child/{print $2}' "$T/fork.out")
sleep 0.2
[ -n "$CPID" ] && kill -9 "$CPID"
finish
for _ in $(seq 40); do [ -e "/proc/${CPID:-x}" ] || break; sleep 0.05; done # reaped (by init, its parent gone)
pf=$(ls "$S"/oomtrace-"$PID"-*.rec 2>/dev/null | head -n1); cf=$(ls "$S"/oomtrace-"${CPID:-x}"-*.rec 2>/dev/null | head -n1)
if [ -n "$pf" ] && [ -n "$cf" ] && pm "$cf" "$T/child.json" &&
    [ "$(json_get "$T/child.json" "r['process']['pid'] == $CPID and r['live']['host']['bytes'] >= 64<<20")" = True ]; then
    pass recorder_fork_child_own_file
else
    fail recorder_fork_child_own_file "parent ${PID:-?} child ${CPID:-?}: $(ls "$S"); $(tail -2 "$T/child.json.log" 2>/dev/null)"
fi

# --- exec by a raw system call (no hook sees it): the new image, same pid and start time, takes
# the old image's file over rather than leaving it behind
S=$T/state-rawexec; mkdir -m 700 "$S"
start rawexec "state_dir=$S" 32 1024 rawexec
for _ in $(seq 100); do [ "$(grep -c '^ready' "$T/rawexec.out")" = 2 ] && break; sleep 0.05; done
finish
if [ "$(grep -c '^ready' "$T/rawexec.out")" = 2 ] && [ "$(files "$S")" = 1 ] && f=$(ls "$S"/oomtrace-"$PID"-*.rec) &&
    pm "$f" "$T/rawexec.json" && [ "$(json_get "$T/rawexec.json" "r['process']['pid'] == $PID and 'hold' in r['process']['cmdline']")" = True ]; then
    pass recorder_exec_takes_over
else
    fail recorder_exec_takes_over "$(cat "$T/rawexec.out"), left: $(ls "$S")"
fi
# --- vfork children (one _exits, one execs) and posix_spawn leave the parent's file alone
S=$T/state-spawn; mkdir -m 700 "$S"
start spawn "state_dir=$S" 32 1024 spawn
for _ in $(seq 100); do grep -q '^spawned' "$T/spawn.out" && break; sleep 0.05; done
sleep 0.1
finish
if grep -q '^spawned' "$T/spawn.out" && [ "$(files "$S")" = 1 ] && f=$(ls "$S"/oomtrace-"$PID"-*.rec) && pm "$f" "$T/spawn.json" &&
    [ "$(json_get "$T/spawn.json" "r['live']['host']['bytes'] >= 32<<20")" = True ]; then
    pass recorder_vfork_spawn_safe
else
    fail recorder_vfork_spawn_safe "$(cat "$T/spawn.out" "$T/spawn.err"), left: $(ls "$S")"
fi

# --- an allocation failure reported before the kill: counted in the file, with its report
S=$T/state-fail; mkdir -m 700 "$S"
start fail "state_dir=$S" 32 1024 fail
for _ in $(seq 100); do grep -q '^failed' "$T/fail.out" && break; sleep 0.05; done
finish
if f=$(ls "$S"/oomtrace-"${PID:-x}"-*.rec 2>/dev/null) && pm "$f" "$T/fail.json" &&
    [ "$(json_get "$T/fail.json" "r['killed']['failures_seen'] == 1 and r['killed']['reports_written'] == 1 and r['killed']['last_report'] == '$T/fail.$PID.json'")" = True ]; then
    pass recorder_failure_noted
else
    fail recorder_failure_noted "$(cat "$T/fail.out"); $(json_get "$T/fail.json" "r['killed']" 2>&1 | head -c 300)"
fi
# ... and the failure itself, from the one ring the crash report reads too: what, how big, its report
if [ -s "$T/fail.json" ] && [ "$(json_get "$T/fail.json" "[(e['api'], e['size'], e['error'], e['report']) for e in r['killed']['failures']] == [('malloc', 1 << 60, 'ENOMEM', '$T/fail.$PID.json')]")" = True ] &&
    grep -q "^oomtrace:   \(.* before death: \)\?malloc($((1 << 60))) failed (ENOMEM), report $T/fail.$PID.json" "$T/fail.json.log"; then
    pass recorder_failure_in_killed_report
else
    fail recorder_failure_in_killed_report "$(json_get "$T/fail.json" "r['killed']['failures']" 2>&1 | head -c 300); $(grep failed "$T/fail.json.log" 2>&1 | head -3)"
fi

# --- hostile places
S=$T/state-open; mkdir -m 777 "$S"
start open "state_dir=$S" 32 1024 exit
wait "$BG"
if [ "$(files "$S")" = 0 ] && grep -q "refusing state directory $S: writable by others" "$T/open.err"; then pass recorder_refuses_open_dir
else fail recorder_refuses_open_dir "$(cat "$T/open.err")"; fi
if [ "$(id -u)" = 0 ]; then
    S=$T/state-other; mkdir -m 700 "$S"; chown 65534:65534 "$S"
    start other "state_dir=$S" 32 1024 exit
    wait "$BG"
    if [ "$(files "$S")" = 0 ] && grep -q "owned by another user" "$T/other.err"; then pass recorder_refuses_other_owner
    else fail recorder_refuses_other_owner "$(cat "$T/other.err")"; fi
else
    skip recorder_refuses_other_owner "needs root to give a directory to another user"
fi
# The per-user default on a private /dev/shm (a mount namespace): made 0700; a planted symlink to
# a directory, or an open one, is refused.
if unshare -m true 2>/dev/null; then
    U=$(id -u)
    out=$(unshare -m bash -c "
        mount -t tmpfs none /dev/shm || exit 9
        LD_PRELOAD=$OT_LIB OOMTRACE_OPTIONS=log=none:report=none $G 32 1024 hold >/dev/shm/o & p=\$!
        for i in \$(seq 100); do grep -q ready /dev/shm/o && break; sleep 0.05; done
        stat -c 'mode=%a' /dev/shm/oomtrace-$U; ls /dev/shm/oomtrace-$U | grep -c \"^oomtrace-\$p-\"
        kill -9 \$p; wait \$p 2>/dev/null
        rm -rf /dev/shm/oomtrace-$U; mkdir /tmp/ot-elsewhere.\$\$; ln -s /tmp/ot-elsewhere.\$\$ /dev/shm/oomtrace-$U
        LD_PRELOAD=$OT_LIB OOMTRACE_OPTIONS=log=none:report=none $G 32 1024 exit 2>&1 >/dev/null
        echo linked=\$(ls /tmp/ot-elsewhere.\$\$ | wc -l); rm -rf /tmp/ot-elsewhere.\$\$ /dev/shm/oomtrace-$U
        mkdir -m 755 /dev/shm/oomtrace-$U
        LD_PRELOAD=$OT_LIB OOMTRACE_OPTIONS=log=none:report=none $G 32 1024 exit 2>&1 >/dev/null
        echo open=\$(ls /dev/shm/oomtrace-$U | wc -l)
    " 2>&1)
    if [ $? = 9 ]; then
        skip recorder_default_dir "cannot mount a private tmpfs on /dev/shm"
    else
        check recorder_default_dir_0700 grep -q "^mode=700" <<<"$out"
        check recorder_default_dir_file grep -qx 1 <<<"$out"
        check recorder_default_dir_symlink_refused bash -c "grep -q 'not a directory (a symlink?)' <<<'$out' && grep -q '^linked=0' <<<'$out'"
        check recorder_default_dir_open_refused bash -c "grep -q 'open to other users' <<<'$out' && grep -q '^open=0' <<<'$out'"
    fi
else
    skip recorder_default_dir "unshare -m is not allowed here: no private /dev/shm to plant things in"
fi
