#!/usr/bin/env bash
# The supervisor (launcher/supervise.c): the launcher stays the program's parent and ends as it
# did — exit codes, death by each crash signal and by SIGTERM, as the shell sees them without
# oomtrace; SIGTERM and SIGINT sent to the launcher reach the program once; a ^C or ^Z from the
# terminal (a pty) is not delivered twice and ^Z stops the job; OOMTRACE_SUPERVISOR; --exec.
. "$(dirname "$0")/lib.sh"
T=$OT_BUILD/targets
L=$OT_LAUNCHER
for f in "$OT_LIB" "$L" "$T/sigtool" "$T/exit_code"; do
    [ -e "$f" ] || { fail supervisor "missing $f (run make tests)"; exit 1; }
done
unset OOMTRACE_OPTIONS LD_PRELOAD
W=$(newdir supervisor)
export OOMTRACE_OPTIONS="log=none:report=none"

# status CMD...: the exit status a shell sees
status() { ( "$@" >/dev/null 2>&1 ) 2>/dev/null; echo $?; }

for code in 0 1 42 255; do
    got=$(status "$L" "$T/exit_code" "$code")
    [ "$got" -eq "$code" ] && pass "supervisor_exit_$code" || fail "supervisor_exit_$code" "status $got"
done

# Each crash signal, SIGTERM and SIGKILL: the same status as the program alone (128 + signal).
for s in SEGV BUS FPE ILL ABRT TRAP SYS TERM KILL INT USR1; do
    n=$(kill -l "$s")
    native=$(status "$T/sigtool" raise "$n")
    got=$(status "$L" "$T/sigtool" raise "$n")
    if [ "$native" -eq $((128 + n)) ] && [ "$got" -eq "$native" ]; then
        pass "supervisor_dies_by_SIG$s"
    else
        fail "supervisor_dies_by_SIG$s" "status $got under the launcher, $native alone (want $((128 + n)))"
    fi
done
# The launcher's own death leaves no core file where the program would have left one.
D=$(newdir sv_core)
( cd "$D" && ulimit -c unlimited 2>/dev/null; "$L" "$T/sigtool" raise 11 >/dev/null 2>&1 ) 2>/dev/null
pat=$(cat /proc/sys/kernel/core_pattern 2>/dev/null)
case $pat in
core*) n=$(ls "$D" | grep -c '^core') ; [ "$n" -le 1 ] && pass supervisor_one_core_at_most ||
    fail supervisor_one_core_at_most "$n core files in $D: $(ls "$D")" ;;
*) skip supervisor_one_core_at_most "core_pattern is '$pat' (not a file in the working directory)" ;;
esac

# start_bg NAME ARGS...: the launcher in the background; LPID, CPID (its child), OUT
start_bg() {
    OUT=$W/$1.out; shift
    "$L" "$@" >"$OUT" 2>&1 &
    LPID=$!
    CPID=
    for _ in $(seq 200); do
        grep -q ready "$OUT" 2>/dev/null && break
        sleep 0.02
    done
    CPID=$(cat /proc/$LPID/task/$LPID/children 2>/dev/null | awk '{print $1}')
}

# SIGTERM sent to the launcher alone (kill, Slurm, systemd): forwarded once.
start_bg term "$T/sigtool" count 15 3000
kill -TERM "$LPID"
wait "$LPID"; rc=$?
if [ "$rc" -eq 0 ] && grep -qx 'got 1' "$OUT"; then pass supervisor_forwards_sigterm_once
else fail supervisor_forwards_sigterm_once "status $rc, output: $(tr '\n' '|' <"$OUT")"; fi
# A SIGKILL to the launcher's process group (a CI runner's or timeout's last word) ends the program
# and the program's own children with it: all stay in that group (README: the supervisor's limit
# on group signals says why the program gets no group of its own).
if ! command -v setsid >/dev/null; then
    skip supervisor_group_sigkill_reaches_grandchildren "setsid missing"
else
    tag=oomtrace-sv-$$-$RANDOM
    # the program (sh) and its child (sh, then sleep): the two shells' command lines name the tag
    setsid bash -c '"$0" -- sh -c "sh -c '\''sleep 30; : $1'\''; :" & sleep 0.5; kill -KILL -- -$$' "$L" "$tag" >/dev/null 2>&1
    left=
    for _ in $(seq 50); do
        left=$(pgrep -f "$tag" | tr '\n' ' ')
        [ -z "$left" ] && break
        sleep 0.02
    done
    if [ -z "$left" ]; then pass supervisor_group_sigkill_reaches_grandchildren
    else fail supervisor_group_sigkill_reaches_grandchildren "still running after SIGKILL to the group: $left"
        for p in $left; do g=$(ps -o pgid= -p "$p" | tr -d ' '); [ -n "$g" ] && kill -KILL -- "-$g" 2>/dev/null; done; fi
fi
# A program that ignores SIGINT keeps running when the launcher is sent one; then SIGUSR1 ends it.
start_bg ignint "$T/sigtool" ignint
kill -INT "$LPID"; sleep 0.2
alive=no; kill -0 "$LPID" 2>/dev/null && alive=yes
kill -USR1 "$LPID"
wait "$LPID"; rc=$?
if [ "$alive" = yes ] && [ "$rc" -eq 7 ]; then pass supervisor_child_ignoring_sigint
else fail supervisor_child_ignoring_sigint "alive after SIGINT: $alive, status $rc (want 7)"; fi
# A signal the program sends its parent is not sent back to it.
got=$(status "$L" "$T/sigtool" tellparent)
[ "$got" -eq 0 ] && pass supervisor_no_echo_to_child || fail supervisor_no_echo_to_child "status $got"
# OOMTRACE_SUPERVISOR names the launcher, the program's parent; --exec replaces the launcher.
out=$("$L" "$T/sigtool" env 2>&1)
sup=${out#supervisor=}; sup=${sup%% *}; pp=${out##*ppid=}; pp=${pp%% *}
if [ -n "$sup" ] && [ "$sup" = "$pp" ]; then pass supervisor_env_names_parent
else fail supervisor_env_names_parent "$out"; fi
# (bash prints its pid, then execs the launcher, which execs the program: one pid all along)
out=$(bash -c 'echo $$; exec "$0" --exec "$1" env' "$L" "$T/sigtool" 2>&1 | tr '\n' ' ')
me=${out%% *}
case $out in
"$me supervisor= ppid="*" pid=$me ") pass supervisor_exec_mode ;;
*) fail supervisor_exec_mode "$out (want no supervisor and the program in the launcher's pid $me)" ;;
esac
got=$(status "$L" --exec "$T/sigtool" raise 15)
[ "$got" -eq 143 ] && pass supervisor_exec_mode_signal || fail supervisor_exec_mode_signal "status $got"

# The terminal: in a pty the launcher's group is the foreground group. ^C reaches the program
# once (not again through the launcher); ^Z stops the program and the launcher with it (the
# shell's job), and SIGCONT to the group continues both.
if ! python3 -c 'import pty' 2>/dev/null; then
    skip supervisor_terminal_ctrl_c "python3 has no pty module"
else
    python3 - "$L" "$T/sigtool" <<'PY'
import os, pty, signal, sys, time
L, S = sys.argv[1], sys.argv[2]

def run(args, keys, after=None):
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(L, [L] + args)
    out = b""
    def read_for(t):
        nonlocal out
        end = time.time() + t
        while time.time() < end:
            import select
            r, _, _ = select.select([fd], [], [], 0.05)
            if r:
                try: out += os.read(fd, 4096)
                except OSError: return
    while b"ready" not in out:
        read_for(0.05)
    for k in keys:
        os.write(fd, k); read_for(0.1)
    res = after(pid) if after else None
    _, st = os.waitpid(pid, 0)
    read_for(0.2)
    return out.decode(errors="replace"), st, res

out, st, _ = run([S, "count", "2", "3000"], [b"\x03"])
ok = "got 1" in out and os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0
print(("PASS supervisor_terminal_ctrl_c_once" if ok else
       "FAIL supervisor_terminal_ctrl_c_once: status %r, output %r" % (st, out[-200:])))

# ^Z under an interactive bash (job control needs a shell: a session leader's own group is
# orphaned, and the kernel does not stop those): the job shows as stopped, fg continues it.
pid, fd = pty.fork()
if pid == 0:
    os.environ["PS1"] = "$ "
    os.execv("/bin/bash", ["bash", "--norc", "--noprofile", "-i"])
out = b""
def rd(t, until=None):
    global out
    import select
    end = time.time() + t
    while time.time() < end and not (until and until in out):
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            try: out += os.read(fd, 4096)
            except OSError: return
rd(1, b"$ ")
os.write(fd, ("%s %s count 10 1500\n" % (L, S)).encode()); rd(5, b"ready")
os.write(fd, b"\x1a"); rd(3, b"Stopped")
stopped = b"Stopped" in out
os.write(fd, b"fg\n"); rd(5, b"got ")
rd(0.3)
os.write(fd, b"echo rc=$?\n"); rd(2, b"rc=0")
os.write(fd, b"exit\n"); rd(0.5)
os.waitpid(pid, 0)
text = out.decode(errors="replace")
ok = stopped and "got 0" in text and "rc=0" in text
print(("PASS supervisor_terminal_ctrl_z_stops_job" if ok else
       "FAIL supervisor_terminal_ctrl_z_stops_job: bash saw it stop: %r; output %r" % (stopped, text[-300:])))
PY
fi
