#!/usr/bin/env bash
# The main job: run a Caffe-like program that dies of a host allocation failure (the second field
# report's "host allocation of size 3763200 failed") under oomtrace, and show what oomtrace wrote.
set -u
cd "$(dirname "$0")/.."
out=build/demo
rm -rf "$out" && mkdir -p "$out"
echo "== host: examples/host_oom --limit under oomtrace =="
echo "\$ build/oomtrace --report=$out/oomtrace.%e.%p.%n.json -- build/examples/host_oom --limit"
build/oomtrace --report="$out/oomtrace.%e.%p.%n.json" -- build/examples/host_oom --limit
rc=$?
echo "(program exit status $rc: it aborts, as Caffe does; oomtrace handed the failure back unchanged)"
report=$(ls "$out"/oomtrace.host_oom.*.json 2>/dev/null | head -n 1)
if [ -z "$report" ]; then
    echo "demo: no JSON report was written" >&2
    exit 1
fi
echo
echo "== JSON report $report (excerpt) =="
python3 - "$report" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
f = r["failure"]
print(f"event={r['event']} api={f['api']} size={f['size']} error={f['error']}")
print("failing stack:", " <- ".join(fr["function"] or "??" for fr in f["stack"][:6]))
print("diagnosis:")
for d in r["diagnosis"]:
    print("  -", d)
hm = r["host_memory"]
print(f"rlimit_as={hm['rlimit_as']} vm_size={hm['vm_size']} available={hm['available']}")
print(f"live host bytes={r['live']['host']['bytes']} in {r['live']['host']['count']} blocks; top site:",
      r["sites"][0]["stack"][1]["function"] if r["sites"] else None)
PY
echo
bash scripts/demo-killed.sh || exit 1
if [ -x scripts/demo-cuda.sh ]; then
    echo
    bash scripts/demo-cuda.sh || exit 1
fi
