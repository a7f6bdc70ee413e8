#!/usr/bin/env bash
# The killed-by-OOM demo: examples/grow_oom under oomtrace in a 200 MiB memory cgroup made for it
# (v1 below ours, or v2), killed by the cgroup's OOM killer; the launcher writes the "killed"
# report. Where no memory cgroup can be made, it says why and shows a SIGKILL from outside instead.
set -u
cd "$(dirname "$0")/.."
out=build/demo
mkdir -p "$out"
P=build/examples/grow_oom
rm -f "$out"/oomtrace.grow_oom.*.json*
limit=$((200 << 20))
cg= why=
rel=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3}' /proc/self/cgroup)
[ -n "${OT_DEMO_NO_CGROUP:-}" ] && rel=/nonexistent # (to see the fallback where cgroups work)
if [ -n "$rel" ] && [ -d "/sys/fs/cgroup/memory$rel" ]; then
    cg=/sys/fs/cgroup/memory${rel%/}/oomtrace-demo-$$
    if mkdir "$cg" 2>/dev/null && echo $limit >"$cg/memory.limit_in_bytes" 2>/dev/null; then
        [ -e "$cg/memory.memsw.limit_in_bytes" ] && echo $limit >"$cg/memory.memsw.limit_in_bytes" 2>/dev/null
    else
        rmdir "$cg" 2>/dev/null; cg=; why="cannot make a child cgroup with a limit under /sys/fs/cgroup/memory$rel"
    fi
fi
if [ -z "$cg" ]; then
    v2=$(awk -F: '$1 == 0 {print $3}' /proc/self/cgroup)
    [ -n "${OT_DEMO_NO_CGROUP:-}" ] && v2=/nonexistent
    for m in /sys/fs/cgroup /sys/fs/cgroup/unified; do
        d=$m${v2%/}
        grep -qw memory "$d/cgroup.controllers" 2>/dev/null || continue
        echo +memory >"$d/cgroup.subtree_control" 2>/dev/null
        if mkdir "$d/oomtrace-demo-$$" 2>/dev/null && echo $limit >"$d/oomtrace-demo-$$/memory.max" 2>/dev/null; then
            cg=$d/oomtrace-demo-$$; echo 0 >"$cg/memory.swap.max" 2>/dev/null; break
        fi
        rmdir "$d/oomtrace-demo-$$" 2>/dev/null
    done
    [ -z "$cg" ] && why="${why:-no memory cgroup here (v1 memory controller or v2 with memory)}; a v2 memory controller was not usable either"
fi
echo "== killed: examples/grow_oom under oomtrace, killed without a chance to speak =="
if [ -n "$cg" ]; then
    echo "\$ (in a memory cgroup limited to 200 MiB: $cg)"
    echo "\$ build/oomtrace --report=$out/oomtrace.%e.%p.%n.json -- $P"
    sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cg" build/oomtrace --report="$out/oomtrace.%e.%p.%n.json" -- "$P"
    rc=$?
    for _ in 1 2 3 4 5; do rmdir "$cg" 2>/dev/null && break; sleep 0.2; done
else
    echo "(no memory cgroup for an OOM kill: $why)"
    echo "(instead: grow_oom holds 128 MiB and the demo sends it SIGKILL, as an OOM killer would)"
    echo "\$ build/oomtrace --report=$out/oomtrace.%e.%p.%n.json -- $P 128 &   ...   kill -KILL <its pid>"
    build/oomtrace --report="$out/oomtrace.%e.%p.%n.json" -- "$P" 128 &
    lp=$!
    for _ in $(seq 100); do
        c=$(awk '{print $1}' /proc/$lp/task/$lp/children 2>/dev/null)
        [ -n "$c" ] && grep -q 'grow_oom' /proc/"$c"/cmdline 2>/dev/null && [ -n "$(ls /dev/shm/oomtrace-"$(id -u)"/oomtrace-"$c"-*.rec 2>/dev/null)" ] && break
        sleep 0.1
    done
    sleep 1
    [ -n "${c:-}" ] && kill -KILL "$c"
    wait "$lp" 2>/dev/null
    rc=$?
fi
echo "(exit status $rc: the launcher died by the program's signal, as a shell sees it without oomtrace)"
report=$(grep -l '"event":"killed"' "$out"/oomtrace.grow_oom.*.json* 2>/dev/null | head -n 1)
if [ -z "$report" ]; then
    echo "demo: no killed report was written" >&2
    exit 1
fi
echo
echo "== JSON report $report (excerpt) =="
python3 - "$report" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
k = r["killed"]
print(f"event={r['event']} signal={k['signal_name']} killer={k['killer']} cgroup_limit={(k['cgroup'] or {}).get('limit')}")
print("diagnosis:")
for d in r["diagnosis"]:
    print("  -", d)
print(f"history: {len(k['history'])} samples; last large allocations: {len(k['large'])}")
PY
