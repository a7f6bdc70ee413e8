#!/usr/bin/env bash
# fork and exec under the preload: a child's report carries the child's pid (and the parent, which
# never failed, has none); a program exec'ed with LD_PRELOAD kept is reported under its own name and
# starts with a fresh live set; forking a multi-threaded parent while its threads allocate never
# leaves the child stuck on a lock (each child allocates, frees, exits; 5 s each at most).
. "$(dirname "$0")/lib.sh"
T=$OT_BUILD/targets

for f in "$OT_LIB" "$T/fork_oom" "$T/fork_rawsys" "$T/exec_parent" "$T/exec_oomchild" "$T/fork_mt"; do
    [ -e "$f" ] || { fail host_fork_exec "missing $f (run make tests)"; exit 1; }
done

reports_in() { ls "$1"/oomtrace.*.json 2>/dev/null; }
nreports() { reports_in "$1" | wc -l; }

# ---------------------------------------------------------------- fork: the child fails
d=$(newdir fork)
run_preloaded "$d" "$T/fork_oom"
ppid_=$(sed -n 's/^parent pid \([0-9]*\)$/\1/p' "$d/out.txt")
cpid=$(sed -n 's/^child pid \([0-9]*\) malloc failed$/\1/p' "$d/out.txt")
if [ "$RC" -ne 0 ] || [ -z "$ppid_" ] || [ -z "$cpid" ]; then
    fail fork_child_runs "exit status $RC; stdout: $(head -c 300 "$d/out.txt"); stderr: $(head -c 300 "$d/err.txt")"
else
    pass fork_child_runs
    r=$(first_report "$d")
    if [ "$(nreports "$d")" -ne 1 ] || [ -z "$r" ]; then
        fail fork_child_report "expected exactly 1 JSON report (the child's), found: $(reports_in "$d" | tr '\n' ' ')"
    else
        rpid=$(json_get "$r" "r['process']['pid']")
        if [ "$rpid" = "$cpid" ] && [ "$rpid" != "$ppid_" ]; then
            pass fork_child_report_pid
        else
            fail fork_child_report_pid "report's process.pid=$rpid, child pid $cpid, parent pid $ppid_"
        fi
        case "$(basename "$r")" in
        "oomtrace.$cpid."*) pass fork_child_report_name ;;
        *) fail fork_child_report_name "report file $(basename "$r") is not named after the child pid $cpid" ;;
        esac
        got=$(json_get "$r" "(r['failure']['api'], r['failure']['size'])")
        if [ "$got" = "('malloc', 1073741824)" ]; then pass fork_child_report_failure
        else fail fork_child_report_failure "failure (api, size) = $got, want ('malloc', 1073741824)"; fi
        f0=$(json_get "$r" "(r['failure']['stack'] or [{}])[0].get('function')")
        if [ "$f0" = child_big_alloc ]; then pass fork_child_report_stack
        else fail fork_child_report_stack "failing frame #0 is '$f0', want the target's static child_big_alloc"; fi
    fi
    # No report, no log header for the parent's pid.
    if ls "$d" | grep -q "\.$ppid_\." || grep -qs "==== pid $ppid_ " "$d"/log.txt*; then
        fail fork_parent_no_report "something names the parent pid $ppid_: $(ls "$d" | tr '\n' ' ')"
    elif ! grep -qs "==== pid $cpid " "$d"/log.txt*; then
        fail fork_parent_no_report "the text log has no report for the child $cpid: $(head -c 300 "$d/log.txt" 2>/dev/null)"
    else
        pass fork_parent_no_report
    fi
fi

# ---------------------------------------------------------------- fork by raw system call
# No pthread_atfork handler runs in such a child: the pid must not be a value cached at fork time.
d=$(newdir rawfork)
run_preloaded "$d" "$T/fork_rawsys"
ppid_=$(sed -n 's/^parent pid \([0-9]*\)$/\1/p' "$d/out.txt")
cpid=$(sed -n 's/^child pid \([0-9]*\) malloc failed$/\1/p' "$d/out.txt")
r=$(first_report "$d")
if [ "$RC" -ne 0 ] || [ -z "$cpid" ] || [ -z "$r" ]; then
    fail fork_rawsys_child_report_pid "status $RC; stdout: $(head -c 200 "$d/out.txt"); files: $(ls "$d" | tr '\n' ' ')"
else
    rpid=$(json_get "$r" "r['process']['pid']")
    if [ "$rpid" = "$cpid" ] && [ "$(basename "$r")" = "oomtrace.$cpid.1.json" ]; then
        pass fork_rawsys_child_report_pid
    else
        fail fork_rawsys_child_report_pid "report $(basename "$r") says process.pid=$rpid; child $cpid, parent $ppid_"
    fi
fi

# ---------------------------------------------------------------- exec: the exec'ed program fails
d=$(newdir exec)
OOMTRACE_OPTIONS_EXTRA="report=$d/oomtrace.%e.%p.json" run_preloaded "$d" "$T/exec_parent" "$T/exec_oomchild"
epid=$(sed -n 's/^exec_parent pid \([0-9]*\)$/\1/p' "$d/out.txt")
cpid=$(sed -n 's/^exec_oomchild pid \([0-9]*\) malloc failed$/\1/p' "$d/out.txt")
if [ "$RC" -ne 0 ] || [ -z "$epid" ] || [ "$epid" != "$cpid" ]; then
    fail exec_runs "exit status $RC; stdout: $(head -c 300 "$d/out.txt"); stderr: $(head -c 300 "$d/err.txt")"
else
    pass exec_runs
    r=$(first_report "$d")
    if [ "$(nreports "$d")" -ne 1 ] || [ -z "$r" ]; then
        fail exec_report "expected exactly 1 JSON report, found: $(ls "$d" | tr '\n' ' ')"
    else
        exe=$(json_get "$r" "r['process']['exe']")
        case "$exe" in
        */exec_oomchild) pass exec_report_exe ;;
        *) fail exec_report_exe "process.exe is '$exe', want the exec'ed program .../exec_oomchild" ;;
        esac
        cmd=$(json_get "$r" "r['process']['cmdline']")
        case "$cmd" in
        *exec_parent*) fail exec_report_cmdline "process.cmdline is still the old program's: '$cmd'" ;;
        *exec_oomchild*) pass exec_report_cmdline ;;
        *) fail exec_report_cmdline "process.cmdline '$cmd' does not name exec_oomchild" ;;
        esac
        rpid=$(json_get "$r" "r['process']['pid']")
        [ "$rpid" = "$epid" ] && pass exec_report_pid || fail exec_report_pid "process.pid=$rpid, want $epid (exec keeps the pid)"
        case "$(basename "$r")" in
        "oomtrace.exec_oomchild.$epid.json") pass exec_report_name ;;
        *) fail exec_report_name "report name $(basename "$r"): %e should expand to exec_oomchild" ;;
        esac
        # The old program held 40 MiB at exec time: the new process starts from nothing.
        live=$(json_get "$r" "r['live']['host']['bytes']")
        if [ -n "$live" ] && [ "$live" -lt $((8 << 20)) ]; then pass exec_report_fresh_live_set
        else fail exec_report_fresh_live_set "live.host.bytes=$live after exec (the old image held 40 MiB)"; fi
    fi
fi

# ---------------------------------------------------------------- fork from a multi-threaded parent
fork_mt_case() {
    local name=$1 extra=$2
    shift 2
    local d
    d=$(newdir "$name")
    OT_TIMEOUT=60 OOMTRACE_OPTIONS_EXTRA=$extra run_preloaded "$d" "$T/fork_mt" "$@"
    local n=$1
    if [ "$RC" -eq 124 ]; then
        fail "$name" "the whole run timed out (60 s): $(tail -n 3 "$d/out.txt")"
    elif [ "$RC" -ne 0 ] || ! grep -qx "forks $n ok $n hung 0 bad 0" "$d/out.txt"; then
        fail "$name" "exit status $RC; $(grep -v '^child pid' "$d/out.txt" | tail -n 5 | tr '\n' ';') stderr: $(head -c 300 "$d/err.txt")"
    else
        pass "$name"
    fi
    D=$d
}
fork_mt_case fork_threads_default "" 40
fork_mt_case fork_threads_stacks_all "stacks=all" 40
# Each child also fails an allocation: every child reports under its own pid, the parent never.
fork_mt_case fork_threads_child_reports "stacks=all" 12 fail
ppid_=$(sed -n 's/^parent pid \([0-9]*\)$/\1/p' "$D/out.txt")
want=$(sed -n 's/^child pid \([0-9]*\)$/\1/p' "$D/out.txt" | sort -n | tr '\n' ' ')
got=$(for r in $(reports_in "$D"); do json_get "$r" "r['process']['pid']"; done | sort -n | tr '\n' ' ')
if [ -n "$want" ] && [ "$got" = "$want" ]; then
    pass fork_threads_child_report_pids
else
    fail fork_threads_child_report_pids "report pids [$got], child pids [$want], parent $ppid_"
fi
