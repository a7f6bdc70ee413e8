#!/usr/bin/env bash
# The launcher (build/oomtrace): help and version, the program's exit status and death by signal
# passed through as the shell would see them, an existing LD_PRELOAD kept, options reaching the
# library, bad usage rejected with status 2, a missing program 127, a static program warned about.
. "$(dirname "$0")/lib.sh"
T=$OT_BUILD/targets
L=$OT_LAUNCHER

for f in "$OT_LIB" "$L" "$T/exit_code" "$T/fail_loop" "$T/libpreload_hello.so"; do
    [ -e "$f" ] || { fail launcher "missing $f (run make tests)"; exit 1; }
done
unset OOMTRACE_OPTIONS LD_PRELOAD
W=$OT_TMP/launcher
mkdir -p "$W"

# lrun NAME ARGS...: runs the launcher in a fresh directory; sets D, LRC; output in $D/out, $D/err
lrun() {
    D=$(newdir "$1")
    shift
    # (the subshell's own stderr is dropped: bash's "Aborted" notice for a program that aborts)
    (cd "$D" && timeout 30 "$L" "$@" >"$D/out" 2>"$D/err") 2>/dev/null
    LRC=$?
}
show() { echo "status $LRC; stdout: $(head -c 300 "$D/out" | tr '\n' '|'); stderr: $(head -c 300 "$D/err" | tr '\n' '|')"; }

# ---------------------------------------------------------------- help, version, usage
lrun help --help
if [ "$LRC" -eq 0 ] && grep -q -- '--report' "$D/out" && grep -q -- '--stacks' "$D/out" && [ ! -s "$D/err" ]; then
    pass launcher_help
else
    fail launcher_help "$(show)"
fi
lrun version --version
ver=$(sed -n 's/^oomtrace \([0-9][0-9.]*\)$/\1/p' "$D/out")
if [ "$LRC" -eq 0 ] && [ -n "$ver" ] && [ "$(wc -l <"$D/out")" -eq 1 ]; then
    pass launcher_version
else
    fail launcher_version "$(show)"
fi
# The library the launcher runs must be the same version (its JSON "tool" field).
lrun version_match --report="$OT_TMP/version_match/r.json" --log=none "$T/fail_loop" 1
tool=$(json_get "$D/r.json" "r['tool']" 2>/dev/null)
if [ -n "$ver" ] && [ "$tool" = "oomtrace $ver" ]; then
    pass launcher_version_matches_library
else
    fail launcher_version_matches_library "launcher says '$ver', report tool is '$tool'; $(show)"
fi
lrun noargs
if [ "$LRC" -eq 2 ] && grep -q '^usage: oomtrace' "$D/err"; then pass launcher_no_program_usage; else fail launcher_no_program_usage "$(show)"; fi
lrun badopt --no-such-option "$T/exit_code" 0
if [ "$LRC" -eq 2 ] && ! grep -q 'exit_code' "$D/out"; then pass launcher_unknown_option; else fail launcher_unknown_option "$(show)"; fi

# ---------------------------------------------------------------- exit status passthrough
lrun exit42 "$T/exit_code" 42
if [ "$LRC" -eq 42 ] && grep -qx 'exit_code 42: oomtrace loaded' "$D/out"; then
    pass launcher_exit_status
else
    fail launcher_exit_status "want 42 and the library loaded; $(show)"
fi
(cd "$W" && "$T/exit_code" abort >/dev/null 2>&1) 2>/dev/null
native_abort=$?
lrun abort "$T/exit_code" abort
if [ "$native_abort" -eq 134 ] && [ "$LRC" -eq 134 ]; then
    pass launcher_signal_status
else
    fail launcher_signal_status "an aborting program: $LRC through the launcher, $native_abort directly (want 134); $(show)"
fi
# The program's own options are its own ('+': the launcher stops at the first non-option).
lrun prog_options "$T/exit_code" --version
if [ "$LRC" -eq 0 ] && grep -qx 'exit_code --version: oomtrace loaded' "$D/out"; then
    pass launcher_program_options_untouched
else
    fail launcher_program_options_untouched "$(show)"
fi

# ---------------------------------------------------------------- an exit with no exit path
# A program that ends by the exit_group system call itself (as the Go runtime does) runs no exit
# handler: asked for a leak check or a final report, the launcher says they did not run (its
# child's state file, made at start for that, is still there), keeps the status and removes the
# file, so no later `oomtrace postmortem` takes the exit for a death. A normal exit says nothing.
for spec in "leak --leak-check:leak check" "final --options=report_at_exit=1:report=none:final report" \
            "both --leak-check --options=report_at_exit=1:report=none:final report and leak check"; do
    name=${spec%% *}; rest=${spec#* }; what=${rest##*:}; opts=${rest%:*}
    S=$(newdir "xg_state_$name")
    # shellcheck disable=SC2086
    lrun "xg_$name" --options=state_dir="$S" $opts "$T/exit_code" exit_group
    msg="exit_code (pid [0-9]*) exited with status 5 by the exit_group system call, without libc's exit .*: its $what did not run\$"
    if [ "$LRC" -eq 5 ] && grep -qx 'exit_code exit_group: oomtrace loaded' "$D/out" && grep -q "$msg" "$D/err" &&
        [ -z "$(ls -A "$S")" ]; then
        pass "launcher_exit_group_$name"
    else
        fail "launcher_exit_group_$name" "state dir: $(ls -A "$S" | head -c 100); $(show)"
    fi
done
S=$(newdir xg_state_normal)
lrun xg_normal --leak-check --options=state_dir="$S" "$T/exit_code" 0
if [ "$LRC" -eq 0 ] && ! grep -q "exit_group" "$D/err" && grep -q "leak check passed" "$D/err" && [ -z "$(ls -A "$S")" ]; then
    pass launcher_normal_exit_no_exit_group_note
else
    fail launcher_normal_exit_no_exit_group_note "$(show)"
fi
# Without a report or check asked for, a small child makes no file, and nothing is said.
S=$(newdir xg_state_plain)
lrun xg_plain --options=state_dir="$S" "$T/exit_code" exit_group
if [ "$LRC" -eq 5 ] && [ ! -s "$D/err" ] && [ -z "$(ls -A "$S")" ]; then
    pass launcher_exit_group_nothing_asked
else
    fail launcher_exit_group_nothing_asked "$(show)"
fi

# ---------------------------------------------------------------- an existing LD_PRELOAD is kept
D=$(newdir keep_preload)
(cd "$D" && LD_PRELOAD=$T/libpreload_hello.so timeout 30 "$L" --log=none "$T/exit_code" 0 >"$D/out" 2>"$D/err")
LRC=$?
if [ "$LRC" -eq 0 ] && grep -qx 'preload_hello: constructor ran' "$D/err" && grep -qx 'exit_code 0: oomtrace loaded' "$D/out"; then
    pass launcher_keeps_ld_preload
else
    fail launcher_keeps_ld_preload "want both the existing preload's constructor and oomtrace; $(show)"
fi

# ---------------------------------------------------------------- options reach the library
lrun options --stacks=all --stack-depth=5 --max-reports=1 --report="$OT_TMP/options/r.%n.json" \
    --log="$OT_TMP/options/log.txt" "$T/fail_loop" 3
r=$D/r.1.json
if [ "$LRC" -ne 0 ] || [ ! -f "$r" ]; then
    fail launcher_options "no report at the --report path: $(ls "$D" | tr '\n' ' '); $(show)"
else
    got=$(json_get "$r" "(r['options']['stacks'], r['options']['stack_depth'], len(r['failure']['stack']) <= 5)")
    [ "$got" = "('all', 5, True)" ] && pass launcher_options_in_json ||
        fail launcher_options_in_json "(options.stacks, options.stack_depth, stack depth <= 5) = $got, want ('all', 5, True)"
    nrep=$(ls "$D"/r.*.json | wc -l)
    [ "$nrep" -eq 1 ] && grep -q 'failed: ENOMEM' "$D/log.txt" && pass launcher_options_max_reports_and_log ||
        fail launcher_options_max_reports_and_log "$nrep reports with --max-reports=1; log: $(head -c 200 "$D/log.txt" 2>/dev/null)"
fi
# An OOMTRACE_OPTIONS already set is kept, and the launcher's options come after it (they win).
D=$(newdir options_env)
(cd "$D" && OOMTRACE_OPTIONS="stack_depth=7:log=none:report=$D/env.json" timeout 30 "$L" --stacks=none \
    "$T/fail_loop" 1 >"$D/out" 2>"$D/err")
LRC=$?
if [ "$LRC" -eq 0 ] && [ -f "$D/env.json" ] && [ ! -s "$D/err" ] &&
    [ "$(json_get "$D/env.json" "(r['options']['stacks'], r['options']['stack_depth'])")" = "('none', 7)" ]; then
    pass launcher_options_env_kept
else
    fail launcher_options_env_kept "$(ls "$D" | tr '\n' ' '); $(show)"
fi
lrun stacks_bad --stacks=bad "$T/exit_code" 0
if [ "$LRC" -eq 2 ] && grep -q 'stacks' "$D/err" && grep -q "bad" "$D/err" && grep -q 'sampled' "$D/err" &&
    [ ! -s "$D/out" ]; then
    pass launcher_bad_stacks
else
    fail launcher_bad_stacks "want status 2, a message naming --stacks and the valid values, and the program not run; $(show)"
fi

# ---------------------------------------------------------------- a program that does not exist
lrun notfound ./no-such-program-oomtrace arg
if [ "$LRC" -eq 127 ] && grep -q 'no-such-program-oomtrace' "$D/err"; then
    pass launcher_program_not_found
else
    fail launcher_program_not_found "want 127 and a message naming the program; $(show)"
fi
lrun notfound_path no-such-program-oomtrace-on-path
if [ "$LRC" -eq 127 ] && grep -q 'no-such-program-oomtrace-on-path' "$D/err"; then
    pass launcher_program_not_on_path
else
    fail launcher_program_not_on_path "$(show)"
fi

# ---------------------------------------------------------------- a static binary
S=$W/static_hello
if ! ${CC:-cc} -static -O1 -o "$S" "$OT_ROOT/tests/targets/static_hello.c" >"$W/static.log" 2>&1; then
    skip launcher_static_warning "the toolchain cannot link -static: $(head -c 200 "$W/static.log")"
elif readelf -l "$S" 2>/dev/null | grep -q INTERP; then
    skip launcher_static_warning "-static produced a dynamically linked program here"
else
    lrun static "$S"
    if [ "$LRC" -eq 5 ] && grep -qx 'static_hello: ok' "$D/out" && grep -q 'statically linked' "$D/err"; then
        pass launcher_static_warning
    else
        fail launcher_static_warning "want the program's own status 5, its output and a 'statically linked' warning; $(show)"
    fi
    # A dynamic program gets no such warning.
    lrun dynamic "$T/exit_code" 0
    if [ "$LRC" -eq 0 ] && ! grep -q 'statically linked' "$D/err" && [ ! -s "$D/err" ]; then
        pass launcher_dynamic_no_warning
    else
        fail launcher_dynamic_no_warning "$(show)"
    fi
fi
