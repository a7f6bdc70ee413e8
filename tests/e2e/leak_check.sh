#!/usr/bin/env bash
# The leak check (leak_check=1): lost versus reachable for blocks held in every kind of root
# (globals, thread stacks, registers only, static and dynamic TLS, pthread keys, the program's own
# mmap'd memory, interior pointers), lost chains and cycles, device blocks against the CUDA test
# doubles, suppressions (an LSan file unchanged), exit codes, stdout kept, JUnit validated against
# tests/junit.xsd, fork, threads blocked in system calls, and a run under strace -f.
source "$(dirname "$0")/lib.sh"
T=$OT_BUILD/targets/leaky
[ -x "$T" ] || { skip leak_check "build/targets/leaky not built (make tests)"; exit 0; }
export LEAK_TLS_LIB=$OT_BUILD/targets/libleak_tls.so

# leak_report DIR [PROGRAM]: the leak check's JSON report of PROGRAM (default leaky) in DIR; the
# `timeout` that run_preloaded runs is preloaded too and writes its own.
leak_report() {
    local f
    for f in "$1"/oomtrace.*.json; do
        [ -e "$f" ] && [ "$(json_get "$f" "r['event'] + ' ' + r['process']['exe'].rsplit('/', 1)[-1]")" = "leak_check ${2:-leaky}" ] &&
            { echo "$f"; return; }
    done
}

# state DIR FUNC [PROGRAM]: "lost", "reachable" or "suppressed" for the listed site whose stack
# holds FUNC (all of them, space-separated, largest first), "absent" when none does.
state() {
    local f
    f=$(leak_report "$1" "${3:-leaky}")
    [ -n "$f" ] || { echo "no-report"; return; }
    python3 - "$f" "$2" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
out = []
for l in r["leaks"]:
    if any((fr.get("function") or "") == sys.argv[2] for fr in l["stack"]):
        out.append("suppressed" if l["suppressed"] else "reachable" if l["reachable"] else "lost")
print(" ".join(out) or "absent")
EOF
}

# leak NAME MODE FUNC WANT [extra options]: runs leaky MODE under the check, expects FUNC's state
leak() {
    local name=$1 mode=$2 func=$3 want=$4 d got
    d=$(newdir "$name")
    OOMTRACE_OPTIONS_EXTRA="leak_check=1:leak_report_reachable=1${5:+:$5}" run_preloaded "$d" "$T" "$mode"
    got=$(state "$d" "$func")
    if [ "$got" = "$want" ]; then pass "$name"; else fail "$name" "$func: got '$got', want '$want' (rc=$RC; $(tail -n 2 "$d/err.txt" | tr '\n' ' '))"; fi
    LAST=$d
}

leak leak_global_reachable global mk_global reachable
check leak_global_exit_0 test "$RC" -eq 0
leak leak_overwritten_lost lost mk_lost lost
check leak_lost_exit_23 test "$RC" -eq 23
leak leak_interior_reachable interior mk_interior reachable
leak leak_chain_and_cycle_lost chain mk_chain "lost lost lost lost lost"
leak leak_tls_static tls_static mk_tls_static reachable
leak leak_tls_static_thread tls_thread mk_for_thread reachable
# the TLS block __tls_get_addr made (reached through the DTV) and the block it holds
leak leak_tls_dynamic tls_dyn leak_tls_lib_hold "reachable reachable"
leak leak_setspecific_main setspecific_main mk_setspecific_main reachable
leak leak_setspecific_thread setspecific mk_for_thread reachable
leak leak_thread_stack thread_stack mk_for_thread reachable
leak leak_thread_registers_only thread_reg mk_for_thread reachable
check leak_thread_registers_saved test "$(json_get "$(leak_report "$LAST")" "r['leak_check']['threads_with_registers']")" = 1
leak leak_lost_beside_a_thread thread_lost mk_lost lost
leak leak_own_mmap_region mmap mk_mmap reachable

# File and line from DWARF (elfutils' libdw, dlopen'ed at report time): leaky is built with -g, and
# the lost site's first frame is mk_lost's malloc call, on the line its source marks.
# frame DIR FUNC [note]: "file:line" of FUNC's frame in a listed site's stack, "none:None" where it
# has none, "absent" where no frame is FUNC's; with "note", the frame's line_note instead ("-" where
# it has none: file and line were found, or not looked for)
frame() {
    python3 - "$(leak_report "$1")" "$2" "${3:-}" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
for l in r["leaks"]:
    for fr in l["stack"]:
        # "libc:": the first frame in the C library, whatever its symbol is called in this glibc
        if fr.get("function") == sys.argv[2] or (sys.argv[2] == "libc:" and (fr.get("module") or "").endswith("/libc.so.6")):
            if sys.argv[3] == "note":
                print(fr.get("line_note") or "-")
            else:
                print("%s:%s" % (fr["file"] or "none", fr["line"]))
            sys.exit(0)
print("absent")
EOF
}
line_note() { frame "$1" "$2" note; }
mark=$(grep -n "leak_check.sh: the lost site's line" "$OT_ROOT/tests/targets/leaky.c" | cut -d: -f1)
if ldconfig -p 2>/dev/null | grep -q 'libdw\.so\.1 '; then
    d=$(newdir leak_file_line); OOMTRACE_OPTIONS_EXTRA="leak_check=1" run_preloaded "$d" "$T" lost
    check_report leak_file_line_json "$d" test "$(frame "$d" mk_lost)" = "tests/targets/leaky.c:$mark"
    check leak_file_line_text grep -q "in mk_lost (.*/leaky+0x[0-9a-f]*) tests/targets/leaky.c:$mark\$" "$d/log.txt"
    check_report leak_file_line_caller "$d" test "$(frame "$d" main | cut -d: -f1)" = tests/targets/leaky.c
    # The C library's frames are left without (libc6-dbg's compressed DWARF: ~80 ms a process).
    check leak_file_line_not_libc test "$(frame "$d" libc:)" = none:None
    check leak_line_note_runtime test "$(line_note "$d" libc:)" = runtime_not_looked_up
    check_report leak_line_note_none_where_found "$d" test "$(line_note "$d" mk_lost)" = -
    # A build without -g (the same name, for leak_report): its frames say so.
    mkdir -p "$OT_TMP/nodebug"
    if ${CC:-cc} -std=gnu11 -D_GNU_SOURCE -O1 -I"$OT_ROOT/include" "$OT_ROOT/tests/targets/leaky.c" \
        -o "$OT_TMP/nodebug/leaky" -lpthread -ldl 2>"$OT_TMP/nodebug/cc.txt"; then
        d=$(newdir leak_line_note_nodebug); OOMTRACE_OPTIONS_EXTRA="leak_check=1" run_preloaded "$d" "$OT_TMP/nodebug/leaky" lost
        check_report leak_line_note_no_line_info "$d" test "$(line_note "$d" mk_lost)" = no_line_info
    else
        skip leak_line_note_no_line_info "cannot build leaky.c without -g: $(head -c 200 "$OT_TMP/nodebug/cc.txt")"
    fi
    check leak_file_line_no_note bash -c "! grep -q 'note: no file:line' '$d/log.txt'"
    # Suppressions match the file as well (as LSan's do).
    printf 'leak:targets/leaky.c\n' >"$OT_TMP/file.supp"
    leak leak_suppressed_by_file_name lost mk_lost suppressed "suppressions=$OT_TMP/file.supp"
else
    skip leak_file_line "libdw.so.1 not installed (Debian package libdw1): frames have no file and line"
fi
# Without libdw the report is the same, with no file and line, and says why; libdw=none: silently.
d=$(newdir leak_no_libdw); OOMTRACE_OPTIONS_EXTRA="leak_check=1:libdw=$OT_TMP/no/libdw.so.1" run_preloaded "$d" "$T" lost
check leak_no_libdw_status test "$RC" -eq 23
check_report leak_no_libdw_lost "$d" test "$(state "$d" mk_lost)" = lost
check_report leak_no_libdw_no_line "$d" test "$(frame "$d" mk_lost)" = none:None
check_report leak_no_libdw_line_note "$d" test "$(line_note "$d" mk_lost)" = libdw_unavailable
check leak_no_libdw_says_why grep -q "note: no file:line: cannot load elfutils' libdw (Debian package libdw1): $OT_TMP/no/libdw.so.1" "$d/log.txt"
d=$(newdir leak_libdw_none); OOMTRACE_OPTIONS_EXTRA="leak_check=1:libdw=none" run_preloaded "$d" "$T" lost
check_report leak_libdw_none_no_line "$d" test "$(frame "$d" mk_lost)" = none:None
check leak_libdw_none_quiet bash -c "grep -q 'LOST host memory' '$d/log.txt' && ! grep -q 'note: no file:line' '$d/log.txt'"
# exit() from a signal handler (which may have interrupted malloc): libdw, which allocates, is not used.
d=$(newdir leak_sigexit); OOMTRACE_OPTIONS_EXTRA="leak_check=1" run_preloaded "$d" "$T" sigexit
check leak_sigexit_status test "$RC" -eq 23
check_report leak_sigexit_no_line "$d" test "$(frame "$d" mk_lost)" = none:None
check leak_sigexit_says_why grep -q "note: no file:line: exit was called from a signal handler" "$d/log.txt"

# Exit codes: the program's own failure status is kept, leak_exitcode= changes 23.
d=$(newdir leak_status); OOMTRACE_OPTIONS_EXTRA="leak_check=1" run_preloaded "$d" "$T" lost 5
check leak_program_failure_kept test "$RC" -eq 5
d=$(newdir leak_exitcode); OOMTRACE_OPTIONS_EXTRA="leak_check=1:leak_exitcode=42" run_preloaded "$d" "$T" lost
check leak_exitcode_option test "$RC" -eq 42
d=$(newdir leak_none); OOMTRACE_OPTIONS_EXTRA="leak_check=1" run_preloaded "$d" "$T" none
check leak_clean_exit_0 test "$RC" -eq 0
d=$(newdir leak_min); OOMTRACE_OPTIONS_EXTRA="leak_check=1:leak_min_bytes=2K" run_preloaded "$d" "$T" lost
check leak_min_bytes_not_failing test "$RC" -eq 0
d=$(newdir leak_off); run_preloaded "$d" "$T" lost
check leak_off_by_default test "$RC" -eq 0 -a ! -e "$(first_report "$d")"

# The program's buffered stdout (never flushed by it) survives the changed exit status.
d=$(newdir leak_stdout); OOMTRACE_OPTIONS_EXTRA="leak_check=1" run_preloaded "$d" "$T" buffered
check leak_stdout_status_23 test "$RC" -eq 23
check leak_stdout_intact test "$(cat "$d/out.txt")" = "$(printf 'buffered line one\nbuffered line two (no newline at the end)')"

# Each process checks itself: the child leaks (23), the parent does not and keeps its own 0.
d=$(newdir leak_fork); OOMTRACE_OPTIONS_EXTRA="leak_check=1" run_preloaded "$d" "$T" fork
check leak_fork_parent_own_status test "$RC" -eq 0
check leak_fork_child_checked grep -q "child status 23" "$d/out.txt"
check leak_fork_two_reports test "$(grep -l '"event":"leak_check"' $(grep -l '"exe":"[^"]*/leaky"' "$d"/oomtrace.*.json) | wc -l)" -eq 2

# The launcher: --leak-check, and its status is its own child's (the program's).
d=$(newdir leak_launcher)
(cd "$d" && timeout 60 "$OT_LAUNCHER" --leak-check -o "$d/oomtrace.%p.%n.json" -l none "$T" lost); RC=$?
check leak_launcher_flag test "$RC" -eq 23
check_report leak_launcher_report "$d" test "$(state "$d" mk_lost)" = lost

# Threads blocked in read, nanosleep and a futex at exit: all stopped, with registers, quickly.
d=$(newdir leak_blocked_threads); OOMTRACE_OPTIONS_EXTRA="leak_check=1" OT_TIMEOUT=20 run_preloaded "$d" "$T" many
check leak_blocked_threads_status test "$RC" -eq 23
check_report leak_blocked_threads_stopped "$d" test "$(json_get "$(leak_report "$d")" "r['leak_check']['threads_with_registers']")" = 6

# Under strace -f (ptrace: LeakSanitizer refuses to run there).
if command -v strace >/dev/null 2>&1; then
    d=$(newdir leak_strace)
    (cd "$d" && LD_PRELOAD=$OT_LIB OOMTRACE_OPTIONS="leak_check=1:log=$d/log.txt:report=$d/oomtrace.%p.%n.json" \
        timeout 60 strace -f -o "$d/strace.txt" "$T" many >"$d/out.txt" 2>"$d/err.txt"); RC=$?
    if grep -q "PTRACE_TRACEME\|Operation not permitted" "$d/err.txt" && [ ! -s "$d/strace.txt" ]; then
        skip leak_under_strace "strace cannot trace here: $(head -c 200 "$d/err.txt")"
    else
        check leak_under_strace_status test "$RC" -eq 23
        check_report leak_under_strace_found "$d" test "$(state "$d" mk_lost)" = lost
    fi
else
    skip leak_under_strace "strace not installed (scripts/deps.sh installs it)"
fi

# Under gdb (ptrace too): the stop signal is passed on (gdb stops on it unless told not to).
if command -v gdb >/dev/null 2>&1; then
    d=$(newdir leak_gdb)
    (cd "$d" && timeout 120 gdb -nx -batch -ex "handle SIG63 SIG62 SIG61 nostop noprint pass" -ex run --args \
        env LD_PRELOAD=$OT_LIB OOMTRACE_OPTIONS="leak_check=1:log=$d/log.txt:report=$d/oomtrace.%p.%n.json" \
        "$T" many >"$d/out.txt" 2>&1)
    check leak_under_gdb_status grep -q "exited with code 027" "$d/out.txt"
    check_report leak_under_gdb_found "$d" test "$(state "$d" mk_lost)" = lost
else
    skip leak_under_gdb "gdb not installed"
fi

# Suppressions: an LSan file, used unchanged by both.
supp=$OT_TMP/lsan.supp
printf '# LSan suppressions\n\n  leak:mk_l*st  \nleak:^no_such_function$\nleak:libno_such_module.so\n' >"$supp"
leak leak_suppressed_by_file lost mk_lost suppressed "suppressions=$supp"
check leak_suppressed_exit_0 test "$RC" -eq 0
check leak_suppression_named grep -q "suppression used: 1 blocks, 1002 bytes: leak:mk_l\*st" "$LAST/log.txt"
LSAN=$(ls /usr/lib/x86_64-linux-gnu/liblsan.so.0 2>/dev/null | head -n 1)
if [ -n "$LSAN" ]; then
    LD_PRELOAD=$LSAN LSAN_OPTIONS="suppressions=$supp" "$T" lost >/dev/null 2>&1; r1=$?
    LD_PRELOAD=$LSAN "$T" lost >/dev/null 2>&1; r2=$?
    check leak_same_file_works_with_lsan test "$r1" -eq 0 -a "$r2" -eq 23
else
    skip leak_same_file_works_with_lsan "liblsan0 not installed"
fi

# Built-in suppressions: a finished thread's DTV, which glibc keeps with its cached stack.
# The scan is conservative: a stale copy of the DTV's address (a register spilled to a stack that is
# scanned) makes it reachable in some runs. So: never "lost" with the built-ins on; with them off, a
# lost DTV fails the run (23) and a reachable one does not.
d=$(newdir leak_builtin_on); OOMTRACE_OPTIONS_EXTRA="leak_check=1:leak_report_reachable=1" run_preloaded "$d" "$T" thread_joined
got=$(state "$d" _dl_allocate_tls)
check leak_builtin_suppression test "$got" = suppressed -o "$got" = reachable
check leak_builtin_suppression_exit_0 test "$RC" -eq 0
d=$(newdir leak_builtin_off); OOMTRACE_OPTIONS_EXTRA="leak_check=1:leak_report_reachable=1:leak_builtin_suppressions=0" run_preloaded "$d" "$T" thread_joined
got=$(state "$d" _dl_allocate_tls)
if [ "$got" = lost ]; then check leak_builtin_suppressions_off test "$RC" -eq 23
elif [ "$got" = reachable ]; then check leak_builtin_suppressions_off test "$RC" -eq 0
else fail leak_builtin_suppressions_off "_dl_allocate_tls: got '$got' (rc=$RC), want lost or reachable"; fi

# Device blocks against the CUDA doubles: lost when no program memory holds the address.
DBL=$OT_BUILD/doubles
if [ -x "$OT_BUILD/cuda_targets/leak_dev" ] && [ -e "$DBL/libcuda.so.1" ]; then
    d=$(newdir leak_device)
    LD_LIBRARY_PATH=$DBL${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} OOMTRACE_OPTIONS_EXTRA="leak_check=1:leak_report_reachable=1" \
        run_preloaded "$d" "$OT_BUILD/cuda_targets/leak_dev"
    for want in dev_kept:reachable dev_lost:lost pinned_kept:reachable pinned_lost:lost managed_lost:lost; do
        f=${want%%:*} w=${want#*:}
        got=$(state "$d" "$f" leak_dev)
        if [ "$got" = "$w" ] || { [ "$f" = pinned_kept ] && [ "$got" = "reachable reachable" ]; }; then pass "leak_device_$f"
        else fail "leak_device_$f" "got '$got', want '$w' (rc=$RC)"; fi
    done
    check leak_device_exit_23 test "$RC" -eq 23
    check_report leak_device_totals "$d" test "$(json_get "$(leak_report "$d" leak_dev)" "r['totals']['lost']['device']['bytes']")" = $((10 << 20))
else
    skip leak_device "CUDA test doubles or leak_dev not built (make tests)"
fi

# JUnit: one failing test case per lost site, valid against tests/junit.xsd; a passing case when clean.
xml_valid() { xmllint --noout --schema "$OT_ROOT/tests/junit.xsd" "$1" 2>"$1.xmllint" || { cat "$1.xmllint"; return 1; }; }
if command -v xmllint >/dev/null 2>&1; then
    d=$(newdir leak_junit); OOMTRACE_OPTIONS_EXTRA="leak_check=1:junit=$d/junit.%p.xml" run_preloaded "$d" "$T" chain
    j=$(grep -l 'oomtrace.leaks.leaky"' "$d"/junit.*.xml 2>/dev/null | head -n 1)
    check leak_junit_written test -n "$j"
    check leak_junit_valid xml_valid "${j:-/nonexistent}"
    check leak_junit_five_failures test "$(grep -c '<failure ' "${j:-/dev/null}")" -eq 5
    check leak_junit_named_by_program_frames grep -q 'name="host leak in mk_chain_part from mk_chain (leaky+0x' "${j:-/dev/null}"
    d=$(newdir leak_junit_clean); OOMTRACE_OPTIONS_EXTRA="leak_check=1:junit=$d/junit.%p.xml" run_preloaded "$d" "$T" global
    j=$(grep -l 'oomtrace.leaks.leaky"' "$d"/junit.*.xml 2>/dev/null | head -n 1)
    check leak_junit_clean_valid xml_valid "${j:-/nonexistent}"
    check leak_junit_clean_no_failure test -n "$j" -a "$(grep -c '<failure ' "${j:-/dev/null}")" -eq 0
else
    skip leak_junit "xmllint not installed (scripts/deps.sh installs libxml2-utils)"
fi

# report_at_exit=1: a final "exit" report through the normal report writer.
d=$(newdir leak_report_at_exit); OOMTRACE_OPTIONS_EXTRA="report_at_exit=1" run_preloaded "$d" "$T" global
check_report report_at_exit_written "$d" grep -q '"event":"exit".*"exe":"[^"]*/leaky"' "$d"/oomtrace.*.json
