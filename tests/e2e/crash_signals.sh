#!/usr/bin/env bash
# Crash signals (issue 29 §4, snapshot_signal of §5): each crash signal gets a crash report and the
# same wait status as without the preload (core bit included: ulimit -c, cores kept in the test's
# temporary directories); the program's own handlers, installed before or after the library, still
# run (own exit, siglongjmp, SA_RESETHAND, glog-style reset-and-raise, SIG_IGN and exec);
# Python's faulthandler and the JVM's NullPointerExceptions; stack overflow, double free, an abort
# after a failed allocation (the story line); fork/vfork/posix_spawn; a SIGSEGV sent from outside;
# snapshots on snapshot_signal= while the program runs.
. "$(dirname "$0")/lib.sh"
T=$OT_BUILD/targets
for f in "$OT_LIB" "$T/crash" "$T/waitstatus" "$T/libsig_early.so"; do
    [ -e "$f" ] || { fail crash_signals "missing $f (run make tests)"; exit 1; }
done
ulimit -c unlimited 2>/dev/null || ulimit -c 0

# plain DIR CMD...: CMD without the preload; stdout+stderr and the status line into DIR/out.txt
plain() {
    local dir=$1; shift
    ( cd "$dir" && timeout "${OT_TIMEOUT:-60}" "$T/waitstatus" "$@" >"$dir/out.txt" 2>&1 )
}
# preloaded DIR CMD...: the same under the preload (reports and log into DIR)
preloaded() {
    local dir=$1; shift
    local opts="report=$dir/oomtrace.%p.%n.json:log=$dir/log.txt"
    [ -n "${OOMTRACE_OPTIONS_EXTRA:-}" ] && opts="$opts:$OOMTRACE_OPTIONS_EXTRA"
    ( cd "$dir" && LD_PRELOAD="${PRELOAD_FIRST:+$PRELOAD_FIRST:}$OT_LIB" OOMTRACE_OPTIONS="$opts" \
        timeout "${OT_TIMEOUT:-60}" "$T/waitstatus" "$@" >"$dir/out.txt" 2>&1 )
}
status_of() { grep '^waitstatus:' "$1/out.txt"; }
# same NAME A B [FILE]: the two runs printed the same (addresses aside: ASLR) and ended the same
# way; FILE (in each directory, default out.txt) is the part of the output compared
same() {
    local f=${4:-out.txt}
    if [ -n "$(status_of "$2")" ] && cmp -s <(sed -E 's/0x[0-9a-f]+/0x?/g' "$2/$f") <(sed -E 's/0x[0-9a-f]+/0x?/g' "$3/$f"); then
        pass "$1"
    else
        fail "$1" "without: $(tr '\n' '|' <"$2/$f" | head -c 400) with: $(tr '\n' '|' <"$3/$f" | head -c 400)"
    fi
}
# pair NAME ARGS...: runs `crash ARGS` both ways into $OT_TMP/NAME.{plain,pre}; sets A and B
pair() {
    local name=$1; shift
    A=$(newdir "$name.plain"); B=$(newdir "$name.pre")
    plain "$A" "$T/crash" "$@"
    preloaded "$B" "$T/crash" "$@"
}
crash_report() { for r in "$1"/oomtrace.*.json; do [ -e "$r" ] && grep -q '"event":"crash"' "$r" && echo "$r"; done | head -n 1; }
# crash_field NAME DIR EXPR EXPECTED: a field of DIR's crash report
crash_field() {
    local r; r=$(crash_report "$2")
    if [ -z "$r" ]; then fail "$1" "no crash report in $2 (log: $(head -c 300 "$2/log.txt" 2>/dev/null))"; return; fi
    local got; got=$(json_get "$r" "$3")
    if [ "$got" = "$4" ]; then pass "$1"; else fail "$1" "$3 = $got, expected $4"; fi
}

# ---------------------------------------------------------------- each crash signal
for spec in segv:SIGSEGV:SEGV_MAPERR bus:SIGBUS:BUS_ADRERR fpe:SIGFPE:FPE_INTDIV ill:SIGILL:ILL_ILLOPN \
            abrt:SIGABRT:SI_TKILL trap:SIGTRAP:SI_KERNEL; do
    IFS=: read -r mode sig code <<<"$spec"
    pair "sig_$mode" "$mode"
    same "crash_${mode}_status" "$A" "$B"
    crash_field "crash_${mode}_report" "$B" "(r['crash']['signal'], r['crash']['code'])" "('$sig', '$code')"
    grep -q "crash: $sig (signal" "$B/log.txt" 2>/dev/null && pass "crash_${mode}_text" ||
        fail "crash_${mode}_text" "no '$sig' crash line in the text log"
done
case "$(status_of "$OT_TMP/sig_segv.plain")" in
*"core 1") pass crash_core_bit_meaningful ;;
*) skip crash_core_bit_meaningful "no core dump even without the preload (ulimit -c or core_pattern here): the core bit was compared, both 0" ;;
esac
r=$(crash_report "$OT_TMP/sig_segv.pre")
if [ -n "$r" ] && json_get "$r" "[f['function'] for f in r['crash']['stack']][:1]" | grep -q "do_segv\|main"; then
    pass crash_stack_from_ucontext
else
    fail crash_stack_from_ucontext "frame 0 of the crash stack is not the faulting function: $( [ -n "$r" ] && json_get "$r" "r['crash']['stack'][:2]")"
fi
crash_field crash_fault_address "$OT_TMP/sig_segv.pre" "r['crash']['address']" "0x10"

# ---------------------------------------------------------------- what the program sees
pair query query
same sigaction_view_unchanged "$A" "$B"

# ---------------------------------------------------------------- the program's handlers
pair own own
same handler_after_library "$A" "$B"
[ -z "$(crash_report "$B")" ] && pass handler_after_no_report || fail handler_after_no_report "a crash report for a handled signal"
A=$(newdir before.plain); B=$(newdir before.pre)
( cd "$A" && LD_PRELOAD="$T/libsig_early.so" "$T/waitstatus" "$T/crash" before >"$A/out.txt" 2>&1 )
PRELOAD_FIRST="$T/libsig_early.so" preloaded "$B" "$T/crash" before
same handler_before_library "$A" "$B"
grep -q "early handler ran" "$B/out.txt" && pass handler_before_ran || fail handler_before_ran "$(head -c 300 "$B/out.txt")"
crash_field handler_before_then_report "$B" "r['crash']['program_handler_first']['code']" "SEGV_MAPERR"
# The other order: the library first, the early library's constructor goes through the hook.
B2=$(newdir before2.pre)
( cd "$B2" && LD_PRELOAD="$OT_LIB:$T/libsig_early.so" OOMTRACE_OPTIONS="report=$B2/oomtrace.%p.%n.json:log=$B2/log.txt" \
    "$T/waitstatus" "$T/crash" before >"$B2/out.txt" 2>&1 )
same handler_before_library_other_order "$A" "$B2"

pair longjmp longjmp
same handler_siglongjmp "$A" "$B"
pair resethand resethand
same handler_sa_resethand "$A" "$B"
crash_field resethand_then_report "$B" "r['crash']['signal']" "SIGSEGV"
pair glog glog
same handler_glog_style "$A" "$B"
crash_field glog_style_report "$B" "r['crash']['program_handler_first']['signal']" "SIGSEGV"
# The real glog: InstallFailureSignalHandler prints its trace, restores SIG_DFL and raises again.
G=$(newdir glog_build)
cat >"$G/glog_crash.cc" <<'EOF'
#include <glog/logging.h>
int main(int argc, char **argv) {
    google::InitGoogleLogging(argv[0]);
    google::InstallFailureSignalHandler();
    volatile int *p = reinterpret_cast<int *>(16);
    return *p;
}
EOF
if [ -e /usr/include/glog/logging.h ] && ${CXX:-c++} -O1 -g "$G/glog_crash.cc" -o "$G/glog_crash" -lglog 2>"$G/cc.txt"; then
    A=$(newdir glogr.plain); B=$(newdir glogr.pre)
    plain "$A" "$G/glog_crash"; preloaded "$B" "$G/glog_crash"
    # glog prints times, pids and addresses: compare the lines that say what happened.
    for d in "$A" "$B"; do grep -E '^\*\*\* (SIGSEGV|Aborted)|^waitstatus' "$d/out.txt" | sed -E 's/[0-9]+ \(unix time\).*//; s/0x[0-9a-f]+/0x?/g; s/ (from|by) PID [0-9]+/ by PID ?/' >"$d/what.txt"; done
    if [ -s "$A/what.txt" ] && cmp -s "$A/what.txt" "$B/what.txt"; then pass glog_failure_handler; else
        fail glog_failure_handler "without: $(tr '\n' '|' <"$A/what.txt") with: $(tr '\n' '|' <"$B/what.txt")"; fi
    crash_field glog_failure_handler_report "$B" "(r['crash']['signal'], r['crash']['program_handler_first']['code'])" "('SIGSEGV', 'SEGV_MAPERR')"
else
    skip glog_failure_handler "libgoogle-glog-dev not installed or not usable here (scripts/deps.sh installs it); the glog-style target above stands in"
fi
pair ignore ignore
same sig_ign_kill_and_exec "$A" "$B"

# ---------------------------------------------------------------- overflow, heap corruption, the story
# Under the default 8 MiB stack limit: with `ulimit -s unlimited` the main thread's stack grows
# until the address space is gone, which takes longer than the test's timeout.
for mode in overflow thread_overflow; do
    (ulimit -s 8192; pair "$mode" "$mode")
    A=$OT_TMP/$mode.plain B=$OT_TMP/$mode.pre # pair's directories (set in the subshell)
    same "stack_${mode}_status" "$A" "$B"
    crash_field "stack_${mode}_report" "$B" "r['crash']['stack_overflow']" "True"
done
pair thread_segv thread_segv
same thread_segv_status "$A" "$B"
crash_field thread_segv_report "$B" "r['crash']['signal']" "SIGSEGV"
pair double_free double_free
same double_free_status "$A" "$B"
r=$(crash_report "$B")
if [ -n "$r" ] && json_get "$r" "[f['function'] for f in r['crash']['stack']]" | grep -q "'free'"; then
    pass double_free_report
else
    fail double_free_report "no crash report through free: $(head -c 300 "$B/log.txt" 2>/dev/null)"
fi
pair fail_abort fail_abort
same abort_after_failure_status "$A" "$B"
first=$(ls "$B"/oomtrace.*.1.json 2>/dev/null | head -n 1)
if [ -n "$first" ] && grep -Eq "^oomtrace: aborted [0-9.]+ (us|ms|s) after malloc\(70368744177664\) failed, report $first\$" "$B/log.txt"; then
    pass abort_after_failure_story
else
    fail abort_after_failure_story "no story line naming $first: $(grep -m1 'aborted' "$B/log.txt" 2>/dev/null)"
fi
crash_field abort_after_failure_json "$B" "(r['crash']['failures_before'][-1]['api'], r['crash']['failures_before'][-1]['report'] == '$first')" "('malloc', True)"

# ---------------------------------------------------------------- children
pair fork fork
same fork_vfork_spawn "$A" "$B"
n=$(for r in "$B"/oomtrace.*.json; do grep -l '"event":"crash"' "$r"; done 2>/dev/null | wc -l)
[ "$n" -eq 3 ] && pass fork_children_reports || fail fork_children_reports "expected 3 crash reports (fork, vfork+exec, posix_spawn children), found $n"

# ---------------------------------------------------------------- a SIGSEGV sent from outside
outside() { # DIR PRELOAD?: starts `crash wait`, kills it with SIGSEGV once it is ready
    local dir=$1 pre=$2
    (
        cd "$dir"
        if [ "$pre" = 1 ]; then
            LD_PRELOAD="$OT_LIB" OOMTRACE_OPTIONS="report=$dir/oomtrace.%p.%n.json:log=$dir/log.txt" \
                "$T/waitstatus" "$T/crash" wait >"$dir/out.txt" 2>&1 &
        else
            "$T/waitstatus" "$T/crash" wait >"$dir/out.txt" 2>&1 &
        fi
        w=$!
        for _ in $(seq 100); do grep -q ready "$dir/out.txt" 2>/dev/null && break; sleep 0.05; done
        pkill -SEGV -P "$w" 2>/dev/null || kill -SEGV "$(pgrep -P "$w")"
        echo "$BASHPID" >"$dir/killer"
        wait "$w"
    )
}
A=$(newdir kill.plain); B=$(newdir kill.pre)
outside "$A" 0; outside "$B" 1
same kill_from_outside_status "$A" "$B"
crash_field kill_from_outside_report "$B" "(r['crash']['code'], r['crash']['address'], r['crash']['sender_pid'] is not None)" "('SI_USER', None, True)"

# ---------------------------------------------------------------- snapshot_signal
snap() { # DIR ARGS...: `crash snapshot` with a SIGUSR2 from outside while it waits in read()
    local dir=$1; shift
    local pre=$1; shift
    (
        cd "$dir"
        if [ "$pre" = 1 ]; then
            LD_PRELOAD="$OT_LIB" OOMTRACE_OPTIONS="report=$dir/oomtrace.%p.%n.json:log=$dir/log.txt:snapshot_signal=${SNAP:-SIGUSR2}" \
                "$T/waitstatus" "$T/crash" snapshot "$@" >"$dir/out.txt" 2>&1 &
        else
            "$T/waitstatus" "$T/crash" snapshot "$@" >"$dir/out.txt" 2>&1 &
        fi
        w=$!
        for _ in $(seq 100); do grep -q ready "$dir/out.txt" 2>/dev/null && break; sleep 0.02; done
        kill -USR2 "$(pgrep -P "$w")" 2>/dev/null
        wait "$w"
    )
}
B=$(newdir snap.pre)
SNAP=12 snap "$B" 1
n=$(grep -l '"event":"snapshot"' "$B"/oomtrace.*.json 2>/dev/null | wc -l)
if grep -q "^read 1$" "$B/out.txt" && grep -q "^done 1$" "$B/out.txt" && grep -q "waitstatus: exit 0" "$B/out.txt" && [ "$n" -eq 2 ]; then
    pass snapshot_signal_while_running
else
    fail snapshot_signal_while_running "$n snapshot reports (expected 2); $(tr '\n' '|' <"$B/out.txt")"
fi
r=$(grep -l '"event":"snapshot"' "$B"/oomtrace.*.json 2>/dev/null | head -n 1)
if [ -n "$r" ] && [ "$(json_get "$r" "r['live']['host']['bytes'] >= 1048576")" = True ]; then
    pass snapshot_signal_live_totals
else
    fail snapshot_signal_live_totals "the snapshot does not count the 1 MiB block"
fi
A=$(newdir snaph.plain); B=$(newdir snaph.pre)
snap "$A" 0 handler; snap "$B" 1 handler
same snapshot_signal_program_handler "$A" "$B"
e=$(LD_PRELOAD="$OT_LIB" OOMTRACE_OPTIONS="snapshot_signal=SIGSEGV:log=none:report=none" "$T/crash" bogus 2>&1 | grep -c "snapshot_signal")
[ "$e" -eq 1 ] && pass snapshot_signal_bad_value || fail snapshot_signal_bad_value "$e messages about snapshot_signal=SIGSEGV"

# ---------------------------------------------------------------- Python's faulthandler
if command -v python3 >/dev/null; then
    A=$(newdir py.plain); B=$(newdir py.pre)
    plain "$A" python3 -X faulthandler -c 'import ctypes; ctypes.string_at(0)'
    preloaded "$B" python3 -X faulthandler -c 'import ctypes; ctypes.string_at(0)'
    same python_faulthandler_status "$A" "$B"
    grep -q "Fatal Python error: Segmentation fault" "$B/out.txt" && pass python_faulthandler_traceback ||
        fail python_faulthandler_traceback "$(head -c 300 "$B/out.txt")"
    crash_field python_faulthandler_report "$B" "r['crash']['program_handler_first']['code']" "SEGV_MAPERR"
else
    skip python_faulthandler "python3 not found"
fi

# ---------------------------------------------------------------- the JVM
if command -v java >/dev/null && command -v javac >/dev/null; then
    J=$(newdir java)
    cat >"$J/Npe.java" <<'EOF'
public class Npe {
    static String s;
    public static void main(String[] a) {
        long caught = 0;
        for (int i = 0; i < 200000; i++) {
            try { if (s.length() == 5) caught--; } catch (NullPointerException e) { caught++; }
        }
        System.out.println("caught " + caught);
        System.exit(3);
    }
}
EOF
    if (cd "$J" && javac Npe.java 2>"$J/javac.txt"); then
        A=$(newdir java.plain); B=$(newdir java.pre)
        plain "$A" java -Xss1m -cp "$J" Npe
        preloaded "$B" java -Xss1m -cp "$J" Npe
        same jvm_null_pointer_exceptions "$A" "$B"
        [ -z "$(crash_report "$B")" ] && pass jvm_no_crash_report || fail jvm_no_crash_report "a crash report for the JVM's own SIGSEGVs"
    else
        skip jvm_null_pointer_exceptions "javac failed: $(head -c 200 "$J/javac.txt")"
    fi
else
    skip jvm_null_pointer_exceptions "no java/javac here (scripts/deps.sh does not install a JDK: it is large)"
fi

# ---------------------------------------------------------------- Go
# tests/targets/go/gosig.go, built with cgo: linked against libc, so the preload applies. The Go
# runtime installs its handlers through cgo's libc sigaction (chained behind oomtrace's): its nil
# dereferences become panics that recover() catches, os/signal gets its signals, and its fatal
# errors print and exit 2 as without the preload, with no crash report of ours (as for the JVM: the
# runtime handles the signal; ours cannot know it will not return).
if command -v go >/dev/null && G=$(newdir go) &&
    (cd "$G" && GOCACHE="$G/cache" GOPATH="$G/path" GOFLAGS=-buildvcs=false CGO_ENABLED=1 \
        go build -o "$G/gosig" "$OT_ROOT/tests/targets/go/gosig.go" >"$G/build.txt" 2>&1); then
    if ! ldd "$G/gosig" 2>/dev/null | grep -q libc.so; then
        fail go_signals "gosig is not linked against libc (cgo off?): $(ldd "$G/gosig" 2>&1 | head -c 200)"
    fi
    for mode in recover notify panic csegv gosegv; do
        A=$(newdir "go.$mode.plain"); B=$(newdir "go.$mode.pre")
        plain "$A" "$G/gosig" "$mode"
        preloaded "$B" "$G/gosig" "$mode"
        # A fatal error lists every goroutine, and the runtime's own (the finalizer's) are caught in
        # whatever state the scheduler left them: goroutine 1's trace and the status are compared.
        for d in "$A" "$B"; do
            awk '/^goroutine [0-9]+ \[/ { keep = $2 == "1" } keep || /^waitstatus:/' \
                keep=1 "$d/out.txt" >"$d/go.txt"
        done
        same "go_${mode}_same" "$A" "$B" go.txt
        [ -z "$(crash_report "$B")" ] && pass "go_${mode}_no_crash_report" ||
            fail "go_${mode}_no_crash_report" "a crash report for the Go runtime's own signal"
    done
    grep -q "^recovered 1000 nil dereferences: runtime error: invalid memory address" "$OT_TMP/go.recover.pre/out.txt" &&
        grep -q "^waitstatus: exit 0" "$OT_TMP/go.recover.pre/out.txt" && pass go_recover_works ||
        fail go_recover_works "$(head -c 300 "$OT_TMP/go.recover.pre/out.txt")"
    grep -q "^got user defined signal 2" "$OT_TMP/go.notify.pre/out.txt" && pass go_notify_works ||
        fail go_notify_works "$(head -c 300 "$OT_TMP/go.notify.pre/out.txt")"
    grep -q "^fatal error: unexpected signal during runtime execution" "$OT_TMP/go.csegv.pre/out.txt" &&
        grep -q "^waitstatus: exit 2" "$OT_TMP/go.csegv.pre/out.txt" && pass go_csegv_fatal_error ||
        fail go_csegv_fatal_error "$(head -c 300 "$OT_TMP/go.csegv.pre/out.txt")"
    # oomtrace itself works in the Go program: C's malloc through cgo fails, with a report.
    B=$(newdir go.cfail)
    preloaded "$B" "$G/gosig" cfail
    r=$(ls "$B"/oomtrace.*.json 2>/dev/null | head -n 1)
    if grep -q "^malloc(2^62) gave NULL: true" "$B/out.txt" && [ -n "$r" ] &&
        [ "$(json_get "$r" "(r['event'], r['failure']['size'])")" = "('alloc_failure', 4611686018427387904)" ]; then
        pass go_cgo_failure_report
    else
        fail go_cgo_failure_report "report ${r:-none}: $(head -c 300 "$B/out.txt")"
    fi
    # A Go program ends by the exit_group system call: no exit path of ours runs. Under the launcher
    # a leak check asked for is said not to have run; found afterwards, a Go program's state file is
    # reported as one that may not have died.
    D=$(newdir go.leak); S=$(newdir go.leak.state)
    (cd "$D" && timeout 60 "$OT_LAUNCHER" --leak-check --options=state_dir="$S" "$G/gosig" recover >"$D/out" 2>"$D/err")
    rc=$?
    if [ "$rc" -eq 0 ] && grep -q "^recovered 1000" "$D/out" && grep -q "by the exit_group system call.*its leak check did not run" "$D/err" &&
        [ -z "$(ls -A "$S")" ]; then
        pass go_leak_check_said_not_run
    else
        fail go_leak_check_said_not_run "status $rc; state: $(ls -A "$S"); stderr: $(head -c 300 "$D/err")"
    fi
    D=$(newdir go.hold); S=$(newdir go.hold.state)
    (cd "$D" && LD_PRELOAD="$OT_LIB" OOMTRACE_OPTIONS="state_dir=$S" timeout 60 "$G/gosig" hold >"$D/out" 2>&1)
    (cd "$D" && timeout 60 "$OT_LAUNCHER" postmortem --report="$D/pm.json" --log=stderr "$S" >"$D/pm.out" 2>&1)
    if grep -q "it is a Go program: the Go runtime ends a program by the exit_group system call" "$D/pm.out" &&
        grep -q "exit_group" "$D/pm.json"; then
        pass go_postmortem_says_go
    else
        fail go_postmortem_says_go "$(head -c 400 "$D/pm.out")"
    fi
elif command -v go >/dev/null; then
    fail go_signals "go build failed: $(head -c 300 "$G/build.txt")"
else
    skip go_signals "go not installed here (scripts/deps.sh installs golang-go when it can)"
fi

# ---------------------------------------------------------------- passing a child's death on
# timeout(1) re-raises its child's signal (signal(sig, SIG_DFL); raise(sig)): the child's crash gets
# its report, timeout's own death none, and the status is unchanged.
if command -v timeout >/dev/null; then
    A=$(newdir pass_on.plain); B=$(newdir pass_on.pre)
    plain "$A" timeout 30 "$T/crash" abrt
    preloaded "$B" timeout 30 "$T/crash" abrt
    same pass_on_status "$A" "$B"
    n=$(grep -l '"event":"crash"' "$B"/oomtrace.*.json 2>/dev/null | wc -l)
    exe=$(grep -l '"event":"crash"' "$B"/oomtrace.*.json 2>/dev/null | head -n 1)
    if [ "$n" -eq 1 ] && [ "$(json_get "$exe" "r['process']['exe'].endswith('/crash')")" = True ]; then
        pass pass_on_one_report
    else
        fail pass_on_one_report "expected one crash report, the child's; found $n"
    fi
else
    skip pass_on_one_report "timeout(1) not found"
fi

# ---------------------------------------------------------------- Caffe: CHECK → abort after cudaMalloc
# examples/cuda_oom against the CUDA test doubles: the crash report reads as one story with the
# failure report before it.
DBL=$OT_BUILD/doubles
if [ -e "$DBL/libcuda.so.1" ] && [ -e "$OT_BUILD/examples/cuda_oom" ]; then
    A=$(newdir caffe.plain); B=$(newdir caffe.pre)
    export OT_FAKE_GPU_TOTAL=12G OT_FAKE_GPU_OTHER_USED=11776M OT_FAKE_GPU_CTX_OVERHEAD=64M
    LD_LIBRARY_PATH=$DBL${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} plain "$A" "$OT_BUILD/examples/cuda_oom"
    LD_LIBRARY_PATH=$DBL${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} preloaded "$B" "$OT_BUILD/examples/cuda_oom"
    unset OT_FAKE_GPU_TOTAL OT_FAKE_GPU_OTHER_USED OT_FAKE_GPU_CTX_OVERHEAD
    sed -i -E 's/^F[0-9]+ [0-9:]+ [0-9]+ /F /' "$A/out.txt" "$B/out.txt" # glog's time and pid
    same caffe_abort_status "$A" "$B"
    first=$(ls "$B"/oomtrace.*.1.json 2>/dev/null | head -n 1)
    if [ -n "$first" ] && grep -Eq "^oomtrace: aborted [0-9.]+ (us|ms|s) after cudaMalloc\(837538000\) failed on GPU 0, report $first\$" "$B/log.txt"; then
        pass caffe_abort_story
    else
        fail caffe_abort_story "no story line after cudaMalloc(837538000): $(grep -m1 'aborted' "$B/log.txt" 2>/dev/null)"
    fi
else
    skip caffe_abort_story "CUDA test doubles or examples/cuda_oom not built (make tests)"
fi
