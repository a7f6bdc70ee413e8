#!/usr/bin/env bash
# The headline case (the first field report): a Caffe-like program dies with
#   Check failed: error == cudaSuccess (2 vs. 0)  out of memory
# while another process holds the GPU. No GPU here: the simulated driver and NVML doubles from
# tests/doubles stand in for libcuda.so.1 and libnvidia-ml.so.1 (12 GiB GPU, pid 4242 holds 11.5 GiB).
set -u
cd "$(dirname "$0")/.."
out=build/demo
mkdir -p "$out"
echo "== CUDA: examples/cuda_oom under oomtrace (simulated GPU; another process holds it) =="
echo "\$ build/oomtrace --report=$out/oomtrace.%e.%p.%n.json -- build/examples/cuda_oom"
LD_LIBRARY_PATH=build/doubles OT_FAKE_GPU_TOTAL=12G OT_FAKE_GPU_OTHER_USED=11776M OT_FAKE_GPU_OTHER_PID=4242 \
    OT_FAKE_GPU_OTHER_NAME=python3 build/oomtrace --report="$out/oomtrace.%e.%p.%n.json" -- build/examples/cuda_oom
rc=$?
echo "(program exit status $rc: Caffe's CHECK aborts; the cudaMalloc error 2 reached it unchanged)"
report=$(ls "$out"/oomtrace.cuda_oom.*.json 2>/dev/null | head -n 1)
if [ -z "$report" ]; then
    echo "demo: no JSON report for the CUDA case" >&2
    exit 1
fi
python3 - "$report" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
f = r["failure"]
print(f"\n== JSON report {sys.argv[1]} (excerpt) ==")
print(f"api={f['api']} size={f['size']} error={f['error']} ({f['error_code']}) device={f['device']}")
for d in r["devices"]:
    print(f"GPU {d['index']} {d['name']}: free {d['free']} of {d['total']}; processes:",
          [(p["pid"], p["name"], p["used"]) for p in (d["processes"] or [])])
for d in r["diagnosis"]:
    print("  -", d)
PY
