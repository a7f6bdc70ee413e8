#!/usr/bin/env bash
# The benchmark suite (`make bench`): every workload without the preload, under oomtrace (default
# settings and stacks=all) and under heaptrack, in paired repetitions (a balanced order, each run
# after an untimed memory warm-up); writes BENCHMARKS.md. Never part of `make check`. Needs
# nothing but the build; installs heaptrack (and numpy, for np_loop) from Debian if they are missing
# and we are root, otherwise marks the heaptrack columns n/a (and skips np_loop, saying why).
#
# usage: scripts/bench.sh [--quick] [--only NAME[,NAME...]] [--reps N] [--no-heaptrack]
#                         [--no-callgrind] [--pin | --no-pin] [--out FILE]
# Pinning (taskset -c 1 for single-threaded runs) is on by default only when the machine is idle.
# Writes BENCHMARKS.md, or build/bench/BENCHMARKS-partial.md with --only (unless --out is given).
set -u
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
B=build
BB=$B/bench

quick=0 only="" reps="" use_ht=1 use_cg=1 pin=auto out=""
while [ $# -gt 0 ]; do
    case $1 in
        --quick) quick=1 ;;
        --only) only=${2:-}; shift ;;
        --only=*) only=${1#--only=} ;;
        --reps) reps=${2:-}; shift ;;
        --reps=*) reps=${1#--reps=} ;;
        --no-heaptrack) use_ht=0 ;;
        --no-callgrind) use_cg=0 ;;
        --no-pin) pin=0 ;;
        --pin) pin=1 ;;
        --out) out=${2:-}; shift ;;
        --out=*) out=${1#--out=} ;;
        -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[ -n "$reps" ] || reps=$([ $quick = 1 ] && echo 3 || echo 7)
case $reps in ''|*[!0-9]*|0) echo "bench: --reps wants a positive number" >&2; exit 2 ;; esac

# One list of workloads, bench_report.py's (the page's rows and their descriptions).
ALL_WORKLOADS=$(python3 "$(dirname "$0")/bench_report.py" --workloads 2>/dev/null)
[ -n "$ALL_WORKLOADS" ] || { echo "bench: python3 runs the suite's report and is not installed (sudo apt-get install python3)" >&2; exit 2; }
if [ -n "$only" ]; then
    for w in ${only//,/ }; do
        case " $ALL_WORKLOADS " in *" $w "*) ;; *) echo "bench: unknown workload $w (known: $ALL_WORKLOADS)" >&2; exit 2 ;; esac
    done
fi
# A partial run (--only) must not replace the full results unless asked to.
[ -n "$out" ] || out=$([ -n "$only" ] && echo build/bench/BENCHMARKS-partial.md || echo BENCHMARKS.md)
selected() { [ -z "$only" ] || case ",$only," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

say() { printf 'bench: %s\n' "$*" >&2; }

# Pinning to one CPU steadies the timings of a quiet machine, but on a busy one it only ties the
# run to whichever CPU the other load happens to use: decide from the 1-minute load average.
load1=$(cut -d' ' -f1 /proc/loadavg)
if [ "$pin" = auto ]; then
    if [ "$(nproc)" -ge 2 ] && awk -v l="$load1" 'BEGIN { exit !(l < 0.5) }'; then pin=1; else pin=0; fi
    pin_reason="automatic: load average $load1 at the start"
else
    pin_reason="forced by the command line"
fi
[ "$(nproc)" -ge 2 ] || pin=0

# ---------------------------------------------------------------- build
make -s all >&2 || { say "the library does not build; nothing measured"; exit 1; }
bins=()
for s in tests/bench/*.c; do bins+=("$BB/$(basename "$s" .c)"); done
for s in tests/bench/ref/*.c; do bins+=("$BB/ref/$(basename "$s" .c).so"); done
make -s "${bins[@]}" >&2 || { say "the bench programs do not build"; exit 1; }
RUN=$(mktemp -d /tmp/oomtrace-bench.XXXXXX)
trap 'rm -rf "$RUN"' EXIT
# Measure one fixed build: a copy of the library and launcher taken now (the launcher finds the
# library beside itself), so that a rebuild in the tree during the run cannot mix versions.
SNAP=$RUN/lib
mkdir -p "$SNAP"
cp "$B/liboomtrace.so" "$B/oomtrace" "$SNAP/" || { say "cannot copy the library"; exit 1; }
LIB=$SNAP/liboomtrace.so
LIB_SUM=$(sha256sum "$LIB" | cut -c1-16)
RUNSTAT=$ROOT/$BB/runstat

# ---------------------------------------------------------------- tools
as_root() { [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; }
apt_install() {
    say "installing $* from Debian"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null 2>&1 ||
        { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null 2>&1; }
}
ht_note=""
if [ $use_ht = 1 ] && ! command -v heaptrack >/dev/null 2>&1; then
    if as_root; then apt_install heaptrack; fi
    if ! command -v heaptrack >/dev/null 2>&1; then
        ht_note="heaptrack is not installed and could not be installed (needs root and apt-get: sudo apt-get install heaptrack); heaptrack columns are n/a"
        say "$ht_note"
        use_ht=0
    fi
elif [ $use_ht = 0 ]; then
    ht_note="heaptrack skipped (--no-heaptrack)"
fi
HT_VERSION=$([ $use_ht = 1 ] && heaptrack --version 2>/dev/null | head -1 | sed 's/^heaptrack //')

# LeakSanitizer preloaded (gcc's liblsan, Debian liblsan0): the peer the stacks=all target names.
# Its own allocator and frame-pointer stacks; run on the synthetic workloads only (a real program's
# exit-time leaks and a 1 PiB malloc would change its exit status or output).
LSAN_LIB=""
for f in "$(gcc -print-file-name=liblsan.so 2>/dev/null)" /usr/lib/x86_64-linux-gnu/liblsan.so.0; do
    [ -f "$f" ] && LSAN_LIB=$(readlink -f "$f") && break
done
if [ -z "$LSAN_LIB" ] && as_root; then
    apt_install liblsan0
    [ -f /usr/lib/x86_64-linux-gnu/liblsan.so.0 ] && LSAN_LIB=/usr/lib/x86_64-linux-gnu/liblsan.so.0
fi
lsan_note=""
[ -n "$LSAN_LIB" ] || { lsan_note="LeakSanitizer (liblsan0) is not installed: its rows are missing (sudo apt-get install liblsan0)"; say "$lsan_note"; }

# Instruction counts: perf stat when the CPU counters are visible, else callgrind on small sizes.
icount_tool=none icount_note=""
if [ $use_cg = 1 ]; then
    if perf stat -x, -e instructions true 2>&1 >/dev/null | grep -q '^[0-9]'; then
        icount_tool=perf
        icount_note="counted with perf stat -e instructions:u"
    else
        if ! command -v valgrind >/dev/null 2>&1 && as_root; then apt_install valgrind; fi
        if command -v valgrind >/dev/null 2>&1; then
            icount_tool=callgrind
            icount_note="perf stat cannot read the instructions counter here (<not supported>, typical in VMs and containers); counted with valgrind --tool=callgrind on small sizes"
        else
            icount_note="no instruction counts: perf has no instructions counter here and valgrind is missing"
        fi
    fi
else
    icount_note="instruction counts skipped (--no-callgrind)"
fi

# ---------------------------------------------------------------- inputs for the real programs
IN=$BB/inputs
mkdir -p "$IN"
CC1=$(gcc -print-prog-name=cc1 2>/dev/null)
[ -x "$CC1" ] || CC1=""
PY=/usr/bin/python3
[ -x $PY ] || PY=$(command -v python3)
GEN_PY=$(command -v python3)
# np_loop needs numpy for that python3 (Debian's python3-numpy).
np_note=""
if ! "$PY" -c 'import numpy' >/dev/null 2>&1; then
    if as_root; then apt_install python3-numpy; fi
    "$PY" -c 'import numpy' >/dev/null 2>&1 ||
        { np_note="skipped: numpy is not installed for $PY (sudo apt-get install python3-numpy)"; say "np_loop $np_note"; }
fi

# A large generated translation unit: many functions with switches, loops and tables (self-contained,
# no #include, so cc1 can compile it without the preprocessor driver).
cat >"$IN/gen_big_c.py" <<'EOF'
import sys
n = int(sys.argv[1])
w = print
w("/* generated by scripts/bench.sh: a large translation unit for the cc1 workload */")
w("typedef unsigned long u64;")
w("struct rec { u64 a, b, c; int tag; char name[24]; struct rec *next; };")
for i in range(n):
    m = 8 + i % 24
    w(f"static u64 tbl{i}[{m}] = {{" + ", ".join(str((i * 31 + j * 17) % 1000) for j in range(m)) + "};")
    w(f"u64 fn{i}(struct rec *r, u64 x, int k) {{")
    w(f"    u64 acc = {i}u;")
    w("    for (int j = 0; j < k; j++) {")
    w(f"        switch ((x + j) % {5 + i % 7}) {{")
    for c in range(5 + i % 7):
        w(f"        case {c}: acc += tbl{i}[(x + {c}) % {m}] * {c + 3} + (r ? r->a : {c}); x ^= acc << {c % 5}; break;")
    w("        }")
    w(f"        if (r && (acc & {1 + i % 15}) == 0) {{ r->b += acc; r = r->next; }}")
    w("    }")
    w("    return acc ^ x;")
    w("}")
w("u64 run_all(struct rec *r, u64 x) { u64 s = 0;")
for i in range(0, n, max(1, n // 200)):
    w(f"    s += fn{i}(r, x + {i}, 3);")
w("    return s; }")
EOF
# An allocation-heavy Python script: dicts of long strings, JSON round trips, growing bytearrays,
# sorting many strings.
cat >"$IN/alloc_heavy.py" <<'EOF'
import json, sys
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
acc = 0
for r in range(rounds):
    d = {}
    for i in range(4000):
        k = "key%d_%s" % (i, "x" * (i % 900))
        d[k] = [i] * (i % 64)
    s = json.dumps({k[:24]: len(v) for k, v in d.items()})
    acc += len(json.loads(s))
    b = bytearray()
    for i in range(4000):
        b += b"abcdefgh" * (i % 32)
    acc += len(b)
    words = [str(i * 7919) * (1 + i % 5) for i in range(40000)]
    words.sort()
    acc += len(words[-1]) + len("".join(words[:1000]))
    t = tuple(range(r, r + 10000))
    acc += sum({x: x for x in t}.values()) & 0xffff
print("@checksum", acc)
EOF
cc1_funcs=$([ $quick = 1 ] && echo 60 || echo 200)
"$GEN_PY" "$IN/gen_big_c.py" "$cc1_funcs" >"$IN/big.c" || { say "cannot generate the cc1 input"; CC1=""; }

# The CUDA test doubles (tests/doubles/doubles.mk): a runtime that reaches a simulated driver
# through cuGetProcAddress, as the real libcudart does.
cuda_note="" CUDART="" CUDA_LIBDIR=""
if [ -f tests/doubles/doubles.mk ]; then
    make -s $B/doubles/libcuda.so.1 $B/doubles/libfakecudart.so >&2 2>/dev/null ||
        say "building the CUDA doubles failed (make $B/doubles/libcuda.so.1 $B/doubles/libfakecudart.so)"
fi
for f in "$B"/doubles/libfakecudart.so "$B"/doubles/libcudart.so*; do [ -f "$f" ] && CUDART=$f && break; done
CUDA_DRV=""
[ -f $B/doubles/libcuda.so.1 ] && CUDA_DRV=$B/doubles/libcuda.so.1
if [ -z "$CUDART" ] || [ -z "$CUDA_DRV" ]; then
    cuda_note="skipped: the CUDA test doubles ($B/doubles/libcuda.so.1 and the runtime double, from tests/doubles/doubles.mk) are not built"
else
    CUDART=$ROOT/$CUDART
    CUDA_LIBDIR=$ROOT/$B/doubles
fi

# ---------------------------------------------------------------- workloads
# Each workload: size arguments (full / quick), whether it is single-threaded (pinned), how many
# repetitions (live_10m and report_1m are long single measurements; fewer in quick mode).
RES=$RUN/results.tsv
: >"$RES"
q() { [ $quick = 1 ] && echo "$2" || echo "$1"; }

declare -A ARGS PROG SINGLE WREPS ENVS NOTE
PROG[small_churn]=$BB/small_churn;             ARGS[small_churn]=$(q 10000000 4000000);    SINGLE[small_churn]=1
PROG[thread_churn]=$BB/small_churn;            ARGS[thread_churn]=$(q "10000000 16" "4000000 16"); SINGLE[thread_churn]=0
PROG[producer_consumer]=$BB/producer_consumer; ARGS[producer_consumer]=$(q "4 2000000" "4 600000"); SINGLE[producer_consumer]=0
# Threads that hand their blocks on and come and go (a server whose short-lived threads pass their
# live set to a successor), and a producer/consumer whose consumers free bursts of small blocks (a
# live count that swings): 2 and 8 threads each, 8 on 2 CPUs oversubscribed on purpose.
PROG[handoff_2]=$BB/handoff_server;            ARGS[handoff_2]=$(q "2 500 10000 4000" "2 150 10000 4000"); SINGLE[handoff_2]=0
PROG[handoff_8]=$BB/handoff_server;            ARGS[handoff_8]=$(q "8 125 10000 4000" "8 40 10000 4000"); SINGLE[handoff_8]=0
PROG[bursty_pc_2]=$BB/bursty_pc;               ARGS[bursty_pc_2]=$(q "2 5000000" "2 1500000"); SINGLE[bursty_pc_2]=0
PROG[bursty_pc_8]=$BB/bursty_pc;               ARGS[bursty_pc_8]=$(q "8 1250000" "8 400000"); SINGLE[bursty_pc_8]=0
PROG[deep_large]=$BB/deep_large;               ARGS[deep_large]=$(q 200000 100000);        SINGLE[deep_large]=1
# Allocations from ~2,000 distinct call stacks 5..40 frames deep (a recursive-descent parser and
# Karatsuba bignums): the shape in which stacks=all was first found to cost more than LeakSanitizer.
PROG[recursive_stacks]=$BB/recursive_stacks;   ARGS[recursive_stacks]=$(q 300000 100000);  SINGLE[recursive_stacks]=1
# The same built with frame pointers: LeakSanitizer's stacks are whole there (the depth probe).
PROG[recursive_stacks_fp]=$BB/recursive_stacks_fp; ARGS[recursive_stacks_fp]=$(q 300000 100000); SINGLE[recursive_stacks_fp]=1
PROG[realloc_growth]=$BB/realloc_growth;       ARGS[realloc_growth]=$(q 5000000 2000000);  SINGLE[realloc_growth]=1
PROG[live_10m]=$BB/live_10m;                   ARGS[live_10m]=10000000;                     SINGLE[live_10m]=1
# The same with one more thread that only sleeps: a process with threads, as every training job is,
# where the table's migrations cannot be made alone (table.c) and take the CAS way.
PROG[live_10m_mt]=$BB/live_10m;                ARGS[live_10m_mt]="10000000 1";              SINGLE[live_10m_mt]=1
PROG[report_1m]=$BB/report_1m;                 ARGS[report_1m]="1000000 100000";            SINGLE[report_1m]=1
PROG[cc1]=$CC1;                                ARGS[cc1]="-quiet -O2 $IN/big.c -o $RUN/big.s"; SINGLE[cc1]=1
PROG[python3]=$PY;                             ARGS[python3]="$IN/alloc_heavy.py $(q 150 30)"; SINGLE[python3]=1
# python3 lays out its dicts, and so allocates, by a random hash seed unless it is fixed: a count of
# the same script varies by 1% from run to run without it.
ENVS[python3]=PYTHONHASHSEED=0
# The host side of a training loop (the shape in which PyTorch's loop cost most under oomtrace on a
# GPU, docs/cuda.md): every block is 128 KiB, so every one gets a stack by default too.
NP_SIZE=131072
PROG[np_loop]=$PY;                             ARGS[np_loop]="tests/bench/np_loop.py $(q 40000 10000) $NP_SIZE"; SINGLE[np_loop]=1
PROG[cuda_path]=$BB/cuda_path;                 ARGS[cuda_path]="$CUDART $(q 1000000 200000) 1048576"; SINGLE[cuda_path]=1
# Process start-up: a CI suite runs many short processes, each of which loads the preload and
# runs its start-up. The children inherit the variant's preload from the environment (the
# launcher's, LSan's); heaptrack traces only the process it starts, so its row starts each child
# under its own heaptrack.
STARTUP_N=$(q 40 20) STARTUP_CMD=/bin/true
PROG[startup]=$BB/spawn;                       ARGS[startup]="$STARTUP_N $STARTUP_CMD";     SINGLE[startup]=1
for w in $ALL_WORKLOADS; do WREPS[$w]=$reps; done
# live_10m is the longest workload and its memory figure hardly varies: fewer repetitions (5: with
# heaptrack it has 5 variants, and each then runs once in each position).
if [ $quick = 1 ]; then WREPS[live_10m]=1; WREPS[live_10m_mt]=1; WREPS[report_1m]=2
elif [ "$reps" -gt 5 ]; then WREPS[live_10m]=5; WREPS[live_10m_mt]=5; fi
[ -z "$CC1" ] && NOTE[cc1]="skipped: gcc's cc1 not found (apt-get install gcc)"
[ -n "$np_note" ] && NOTE[np_loop]=$np_note
[ -n "$cuda_note" ] && NOTE[cuda_path]=$cuda_note
[ -n "$CUDA_LIBDIR" ] && ENVS[cuda_path]="LD_LIBRARY_PATH=$CUDA_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

VARIANTS=(none default all)
[ $use_ht = 1 ] && VARIANTS+=(heaptrack)
# Floors (tests/bench/ref), lower bounds, not trackers. For the default target on small_churn: a
# preload that only forwards, and one that keeps the least an exact per-block record needs; for the
# stacks=all target there, the least an exact stack for every allocation adds to that record, and
# that with the checks the brief asks of every tracker (safe). For the heaptrack target on live_10m:
# the least an exact table of 10 million live blocks costs, and on live_10m and live_10m_mt that
# table shared by threads with a stack for every block and the same checks (live_safe).
declare -A EXTRA_VARIANTS
EXTRA_VARIANTS[small_churn]="forwarder ideal ideal_stacks ideal_stacks_safe"
EXTRA_VARIANTS[live_10m]="ideal_table ideal_live_safe"
EXTRA_VARIANTS[live_10m_mt]="ideal_live_safe"
# On the 8-thread workloads of the thread targets, the same two small_churn floors: what glibc does
# under a preload that only forwards (its own slowdown from the preload, apart from any tracking),
# and under the least per-block record (which never finds another thread's record: a lower bound).
# On all four, the least an exact record costs when a free finds it in the thread that made it
# (the floor of the thread targets that does the work they measure), with per-thread arrays of
# oomtrace's grown nursery (bursty_pc: ideal_xthread) or of its first one (handoff_server:
# ideal_xthread_small).
for w in handoff_8 bursty_pc_8; do EXTRA_VARIANTS[$w]="forwarder ideal"; done
for w in handoff_2 handoff_8; do EXTRA_VARIANTS[$w]="${EXTRA_VARIANTS[$w]:+${EXTRA_VARIANTS[$w]} }ideal_xthread_small"; done
for w in bursty_pc_2 bursty_pc_8; do EXTRA_VARIANTS[$w]="${EXTRA_VARIANTS[$w]:+${EXTRA_VARIANTS[$w]} }ideal_xthread"; done
if [ -n "$LSAN_LIB" ]; then
    EXTRA_VARIANTS[small_churn]+=" lsan"
    for w in producer_consumer handoff_2 handoff_8 bursty_pc_2 bursty_pc_8 deep_large recursive_stacks recursive_stacks_fp realloc_growth startup; do
        EXTRA_VARIANTS[$w]="${EXTRA_VARIANTS[$w]:+${EXTRA_VARIANTS[$w]} }lsan"
    done
fi
variants_of() { echo "${VARIANTS[*]} ${EXTRA_VARIANTS[$1]:-}"; }
# A floor variant's preload (tests/bench/ref).
ref_lib() {
    case $1 in forwarder) echo forwarder.so ;; ideal) echo ideal_record.so ;; ideal_stacks) echo ideal_stacks.so ;;
        ideal_stacks_safe) echo ideal_stacks_safe.so ;; ideal_table) echo ideal_table.so ;;
        ideal_live_safe) echo ideal_live_safe.so ;; ideal_xthread) echo ideal_xthread.so ;;
        ideal_xthread_small) echo ideal_xthread_small.so ;; esac
}

# The command of one run, as words; also what BENCHMARKS.md shows (paths relative to the repo).
command_for() { # workload variant -> prints the command line
    local w=$1 v=$2 pinpfx="" otopts=""
    [ $pin = 1 ] && [ "${SINGLE[$w]}" = 1 ] && [ "$v" != heaptrack ] && pinpfx="taskset -c 1 "
    [ "$w" = report_1m ] && otopts="-o $RUN/report.%p.%n.json -l $RUN/report.%p.log "
    local env=${ENVS[$w]:-}
    [ -n "$env" ] && env="env $env "
    case $v in
        none) echo "$pinpfx$env${PROG[$w]} ${ARGS[$w]}" ;;
        default) echo "$pinpfx$env$SNAP/oomtrace $otopts-- ${PROG[$w]} ${ARGS[$w]}" ;;
        all) echo "$pinpfx$env$SNAP/oomtrace --stacks=all $otopts-- ${PROG[$w]} ${ARGS[$w]}" ;;
        heaptrack)
            if [ "$w" = startup ]; then echo "${env}${PROG[$w]} $STARTUP_N heaptrack -o $RUN/heaptrack.$w $STARTUP_CMD"
            else echo "${env}heaptrack -o $RUN/heaptrack.$w ${PROG[$w]} ${ARGS[$w]}"; fi ;;
        lsan) echo "${pinpfx}env ${ENVS[$w]:+${ENVS[$w]} }LSAN_OPTIONS=exitcode=0 LD_PRELOAD=$LSAN_LIB ${PROG[$w]} ${ARGS[$w]}" ;;
        forwarder | ideal | ideal_stacks | ideal_stacks_safe | ideal_table | ideal_live_safe | ideal_xthread | ideal_xthread_small)
            echo "${pinpfx}env ${ENVS[$w]:+${ENVS[$w]} }LD_PRELOAD=$ROOT/$BB/ref/$(ref_lib "$v") ${PROG[$w]} ${ARGS[$w]}" ;;
    esac
}

# Memory warm-up before every timed run (runstat -w, which explains why): four times the largest
# resident set any run of the workload has had so far, at least 256 MiB (1 GiB before its first
# run), at most half of what the machine has available at the start.
WARM_CAP=$(awk '/^MemAvailable:/ { print int($2 / 2048) }' /proc/meminfo 2>/dev/null)
[ -n "$WARM_CAP" ] || WARM_CAP=1024
declare -A RSS_SEEN # workload -> largest max RSS so far (KiB)
warm_mib() { # workload -> MiB
    local seen=${RSS_SEEN[$1]:-262144} mib
    mib=$((seen * 4 / 1024))
    [ $mib -lt 256 ] && mib=256
    [ $mib -gt "$WARM_CAP" ] && mib=$WARM_CAP
    echo $mib
}

run_one() { # workload variant rep
    local w=$1 v=$2 r=$3 cmd outf=$RUN/out.$1.$2.$3 st=$RUN/stat.$1.$2.$3
    cmd=$(command_for "$w" "$v")
    # shellcheck disable=SC2086
    (cd "$ROOT" && "$RUNSTAT" -w "$(warm_mib "$w")" "$st" $cmd >"$outf" 2>"$outf.err")
    rm -f "$RUN"/heaptrack.* "$RUN"/report.* "$RUN"/big.s
    local stat metrics
    stat=$(tail -1 "$st" 2>/dev/null)
    [ -n "$stat" ] || stat="nan nan nan 0 255"
    local rss
    read -r _ _ _ rss _ <<<"$stat"
    case $rss in '' | *[!0-9]*) ;; *) [ "$rss" -gt "${RSS_SEEN[$w]:-0}" ] && RSS_SEEN[$w]=$rss ;; esac
    metrics=$(grep -ah '^@' "$outf" | sed 's/^@//; s/ /=/' | paste -sd, -)
    printf '%s\t%s\t%s\t%s\t%s\n' "$w" "$v" "$r" "$(echo "$stat" | tr ' ' '\t')" "${metrics:--}" >>"$RES"
    local rc=${stat##* }
    if [ "$rc" != 0 ]; then
        say "$w/$v rep $r exited with status $rc:"
        tail -5 "$outf.err" | sed 's/^/    /' >&2
    fi
}

# The order of the variants in repetition r (0-based) of n: row r of a Williams design. Over n
# repetitions (2n for odd n) every variant runs equally often in each position and right after
# each other variant. A plain rotation (v0..vn-1, then v1..v0, ...) keeps each variant behind the
# same one every time: live_10m's ideal table always ran right after heaptrack, whose long exit
# left the memory cold (runstat's -w explains), and its floor against heaptrack came out at 2.1x
# (the run at 67e78c3); in this order and with the warm-up, 5.3-5.9x (three runs).
run_order() { # n r -> the variant indices, in order
    local n=$1 r=$2 k s row=() rows
    rows=$(( n % 2 ? 2 * n : n ))
    r=$((r % rows))
    for ((k = 0; k < n; k++)); do
        if [ $k -eq 0 ]; then s=0; elif [ $((k % 2)) = 1 ]; then s=$(((k + 1) / 2)); else s=$((n - k / 2)); fi
        row+=($(((s + r) % n)))
    done
    if [ $r -ge "$n" ]; then # odd n: the second square is the first one's rows reversed
        local rev=()
        for ((k = n - 1; k >= 0; k--)); do rev+=("${row[k]}"); done
        row=("${rev[@]}")
    fi
    echo "${row[*]}"
}

CMDS=$RUN/commands.tsv
SKIPS=$RUN/skips.tsv
: >"$CMDS"; : >"$SKIPS"
uptime_before=$(uptime)
t_start=$(date +%s)
# What the whole machine did meanwhile (/proc/stat's first line) against what the suite itself
# used (the CPU time of every process it waited for, bash's `times`): the load average counts the
# suite's own runs, so only the difference says whether other work shared the machine.
children_cpu_s() { # VAR: sets it. `times` runs in this shell: a subshell starts with no children's times
    times >"$RUN/times.txt"
    printf -v "$1" '%s' "$(awk 'NR == 2 { s = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); s += a[1] * 60 + a[2] }
                                          printf "%.2f", s }' "$RUN/times.txt")"
}
stat_before=$(head -1 /proc/stat 2>/dev/null)
children_cpu_s self_before
wall_before=$(date +%s.%N)
for w in $ALL_WORKLOADS; do
    selected "$w" || continue
    if [ -n "${NOTE[$w]:-}" ]; then
        printf '%s\t%s\n' "$w" "${NOTE[$w]}" >>"$SKIPS"
        say "$w: ${NOTE[$w]}"
        continue
    fi
    read -r -a wvars <<<"$(variants_of "$w")"
    for v in "${wvars[@]}"; do
        printf '%s\t%s\t%s\n' "$w" "$v" "$(command_for "$w" "$v" | sed "s|$SNAP/|$B/|g; s|$RUN|/tmp/bench|g; s|$ROOT/||g")" >>"$CMDS"
    done
    say "$w: ${WREPS[$w]} paired repetitions of: ${wvars[*]}"
    nv=${#wvars[@]}
    for ((r = 1; r <= WREPS[$w]; r++)); do
        read -r -a order <<<"$(run_order "$nv" $((r - 1)))"
        for i in "${order[@]}"; do run_one "$w" "${wvars[i]}" "$r"; done
    done
done

# ---------------------------------------------------------------- system calls
# The mmap and munmap calls of one run of each thread workload, without the preload and under
# oomtrace (default). strace -E gives the preload to the program alone, as the run without it has
# no env process whose own start-up (and oomtrace's in it) would count too (about 20 of the 91 more
# for bursty_pc 8). Under oomtrace each call's stack is taken too (strace -k): a call made straight
# from liboomtrace.so or libunwind (the caller of libc's mmap or munmap) is oomtrace's own: its
# table, the threads' records, libunwind's caches. Not glibc's calls inside the malloc and
# pthread_create that oomtrace's hooks forward to, which have the hooks further up their stacks:
# those are the program's glibc doing more of its own under other timing (slower threads overlap
# more, and glibc maps more thread stacks and arenas: handoff_8 at full size 32..36 thread stacks
# against 24..30 alone), and the loader mapping liboomtrace's own libraries once.
SYSCALLS=$RUN/syscalls.tsv
: >"$SYSCALLS"
# Counts mmap, munmap, and the calls of each that oomtrace made (frame 1, the caller of libc's
# wrapper, in liboomtrace.so or libunwind), in strace -f -k output: a call's frames (" > " lines)
# follow its completed line.
own_calls() {
    awk '/^[0-9]+ +(mmap|munmap)\(.*unfinished/ { cur = ""; next }
         /^[0-9]+ +(mmap|munmap)\(/ || /^[0-9]+ +<\.\.\. (mmap|munmap) resumed>/ {
             cur = ($0 ~ /munmap/) ? "munmap" : "mmap"; n[cur]++; depth = 0; next }
         /^ > / { if (cur != "" && ++depth == 2 && $0 ~ /liboomtrace\.so|libunwind/) own[cur]++; next }
         { cur = "" }
         END { printf "%d\t%d\t%d\t%d", n["mmap"], n["munmap"], own["mmap"], own["munmap"] }' "$1"
}
# strace_counts WORKLOAD [STRACE_ARGS...]: one run under strace -f -c; prints its mmap and munmap calls.
strace_counts() {
    local w=$1; shift
    # shellcheck disable=SC2086
    strace "$@" -f -c -o "$RUN/strace.txt" -e trace=mmap,munmap ${PROG[$w]} ${ARGS[$w]} >/dev/null 2>&1
    printf '%s\t%s' "$(awk '$NF == "mmap" { print $4 }' "$RUN/strace.txt")" \
        "$(awk '$NF == "munmap" { print $4 }' "$RUN/strace.txt")"
}
if command -v strace >/dev/null 2>&1; then
    for w in handoff_2 handoff_8 bursty_pc_2 bursty_pc_8; do
        selected "$w" || continue
        printf '%s\tnone\t%s\n' "$w" "$(strace_counts "$w")" >>"$SYSCALLS"
        # shellcheck disable=SC2086
        if strace -E LD_PRELOAD="$LIB" -f -k -o "$RUN/strace.txt" -e trace=mmap,munmap ${PROG[$w]} ${ARGS[$w]} \
            >/dev/null 2>&1 && grep -q '^ > ' "$RUN/strace.txt"; then
            printf '%s\tdefault\t%s\n' "$w" "$(own_calls "$RUN/strace.txt")" >>"$SYSCALLS"
        else # a strace without -k (built without an unwinder): the totals only
            printf '%s\tdefault\t%s\n' "$w" "$(strace_counts "$w" -E LD_PRELOAD="$LIB")" >>"$SYSCALLS"
        fi
    done
else
    say "strace is not installed (apt-get install strace): no mmap/munmap counts"
fi

# ---------------------------------------------------------------- stack depth, like for like
# LeakSanitizer's stacks come from its frame-pointer unwinder, which on code built without frame
# pointers (Debian's -O2, this suite's) stops after the first frame; oomtrace walks the call-frame
# information to stack_depth frames. The recursive_stacks target compares the two as each comes,
# so this probe measures what each recorded and what it costs at equal depth: a run of
# recursive_stacks that leaks a twin of every 97th allocation, checked by LSan (its default fast
# unwinder and fast_unwind_on_malloc=0, the slow one) and by oomtrace's leak check, whose reports
# give the lost sites each told apart and the frames of their stacks; then the best of three timed
# runs without leaks of the program alone, LSan (both unwinders, detect_leaks=0), stacks=all, and
# stacks=all cut to the depth LSan's fast unwinder reached (at least 2 frames); then the stacks of
# LSan and stacks=all on the program built with frame pointers, where LSan's stacks are whole too.
DEPTH=$RUN/depth.tsv
: >"$DEPTH"
best_of_3() { # command... -> the least wall seconds of three runs (runstat's first column)
    : >"$RUN/best3.txt"
    for _ in 1 2 3; do "$RUNSTAT" "$RUN/best3.txt" "$@" >/dev/null 2>&1; done
    sort -g "$RUN/best3.txt" | awk 'NR == 1 { print $1 }'
}
if selected recursive_stacks && [ -n "$LSAN_LIB" ]; then
    P=${PROG[recursive_stacks]} dn=$(q 60000 30000)
    printf 'meta\trounds\t%s\n' "$dn" >>"$DEPTH"
    env LSAN_OPTIONS=exitcode=0 LD_PRELOAD="$LSAN_LIB" "$P" "$dn" 97 2>"$RUN/depth.lsan.txt" >/dev/null
    env LSAN_OPTIONS=exitcode=0:fast_unwind_on_malloc=0 LD_PRELOAD="$LSAN_LIB" "$P" "$dn" 97 2>"$RUN/depth.lsan_full.txt" >/dev/null
    env OOMTRACE_OPTIONS="leak_check=1:leak_exitcode=0:report=$RUN/depth.all.json:log=/dev/null" LD_PRELOAD="$LIB" \
        "$P" "$dn" 97 >/dev/null 2>&1
    for f in lsan.txt lsan_full.txt all.json; do
        printf 'stacks\t%s\t%s\n' "${f%.*}" "$("$GEN_PY" scripts/bench_report.py --stack-depth "$RUN/depth.$f")" >>"$DEPTH"
    done
    dmax=$(awk -F'\t' '$1 == "stacks" && $2 == "lsan" { print $5 }' "$DEPTH")
    case $dmax in '' | *[!0-9]*) dmax=2 ;; esac
    [ "$dmax" -lt 2 ] && dmax=2
    printf 'meta\tdepth\t%s\n' "$dmax" >>"$DEPTH"
    printf 'time\tnone\t%s\n' "$(best_of_3 "$P" "$dn")" >>"$DEPTH"
    printf 'time\tlsan\t%s\n' "$(best_of_3 env LSAN_OPTIONS=exitcode=0:detect_leaks=0 LD_PRELOAD="$LSAN_LIB" "$P" "$dn")" >>"$DEPTH"
    printf 'time\tlsan_full\t%s\n' "$(best_of_3 env LSAN_OPTIONS=exitcode=0:detect_leaks=0:fast_unwind_on_malloc=0 \
        LD_PRELOAD="$LSAN_LIB" "$P" "$dn")" >>"$DEPTH"
    printf 'time\tall\t%s\n' "$(best_of_3 env OOMTRACE_OPTIONS=stacks=all LD_PRELOAD="$LIB" "$P" "$dn")" >>"$DEPTH"
    printf 'time\tall_at_depth\t%s\n' "$(best_of_3 env OOMTRACE_OPTIONS=stacks=all:stack_depth=$dmax LD_PRELOAD="$LIB" \
        "$P" "$dn")" >>"$DEPTH"
    # The same program built with frame pointers (as Fedora and Ubuntu build their packages), where
    # LeakSanitizer's fast unwinder reads whole stacks: what each recorder's stacks hold there (their
    # time is workload recursive_stacks_fp's paired runs, steadier than a best of three).
    PF=$BB/recursive_stacks_fp
    if [ -x "$PF" ]; then
        env LSAN_OPTIONS=exitcode=0 LD_PRELOAD="$LSAN_LIB" "$PF" "$dn" 97 2>"$RUN/depth.lsan_fp.txt" >/dev/null
        env OOMTRACE_OPTIONS="leak_check=1:leak_exitcode=0:report=$RUN/depth.all_fp.json:log=/dev/null" LD_PRELOAD="$LIB" \
            "$PF" "$dn" 97 >/dev/null 2>&1
        for f in lsan_fp.txt all_fp.json; do
            printf 'stacks\t%s\t%s\n' "${f%.*}" "$("$GEN_PY" scripts/bench_report.py --stack-depth "$RUN/depth.$f")" >>"$DEPTH"
        done
    else
        say "recursive_stacks: $PF is not built (make bench-bins): no frame-pointer rows"
    fi
    say "recursive_stacks: stack depth probe done ($dn rounds)"
elif selected recursive_stacks; then
    say "recursive_stacks: no stack depth probe: $lsan_note"
fi

# ---------------------------------------------------------------- instruction counts
# Marginal instructions per operation: each program is counted at N and 2N operations and the
# difference divided by N, so start-up (ld.so, oomtrace's init) cancels out.
ICOUNT=$RUN/icount.tsv
: >"$ICOUNT"
CENV=""
count_instructions() { # variant program args... -> prints the instruction count (CENV: more VAR=value)
    local v=$1; shift
    local env=(env) tmp=$RUN/cg.err
    # shellcheck disable=SC2206
    [ -n "${CENV:-}" ] && env+=($CENV)
    case $v in
        default) env+=(LD_PRELOAD="$LIB") ;;
        all) env+=(LD_PRELOAD="$LIB" OOMTRACE_OPTIONS=stacks=all) ;;
        forwarder | ideal | ideal_stacks | ideal_stacks_safe) env+=(LD_PRELOAD="$ROOT/$BB/ref/$(ref_lib $v)") ;;
        # Its exit-time check stops the world with ptrace, which under valgrind can leave the
        # program stopped for good; the per-operation difference (N against 2N) never counted it.
        lsan) env+=(LD_PRELOAD="$LSAN_LIB" LSAN_OPTIONS=exitcode=0:detect_leaks=0) ;;
    esac
    if [ $icount_tool = perf ]; then
        "${env[@]}" perf stat -x, -e instructions:u -o "$tmp" "$@" >/dev/null 2>&1
        grep -m1 instructions "$tmp" | cut -d, -f1
    else
        "${env[@]}" valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" >/dev/null 2>"$tmp"
        sed -n 's/.*Collected : *\([0-9]*\).*/\1/p' "$tmp" | tail -1
    fi
}
if [ $icount_tool != none ]; then
    declare -A ICN
    ICN[small_churn]=$(q 200000 50000); ICN[realloc_growth]=$(q 200000 50000); ICN[deep_large]=$(q 5000 1000)
    ICN[producer_consumer]=$(q 50000 10000); ICN[np_loop]=$(q 1000 300); ICN[recursive_stacks]=$(q 10000 4000)
    for w in small_churn realloc_growth deep_large recursive_stacks producer_consumer np_loop; do
        selected "$w" || continue
        [ -n "${NOTE[$w]:-}" ] && continue
        n=${ICN[$w]}
        # np_loop is python3 running the script: N iterations, numpy's import cancels out like start-up.
        prog=$BB/$w pre="" post=""
        [ $w = np_loop ] && prog=$PY pre="tests/bench/np_loop.py " post=" $NP_SIZE"
        # small_churn's floors too: counted, their ratios do not move with the machine's load.
        vs="none default all"
        [ $w = small_churn ] && vs+=" forwarder ideal ideal_stacks ideal_stacks_safe"
        # recursive_stacks' target compares stacks=all with LeakSanitizer: both counted.
        [ $w = recursive_stacks ] && [ -n "$LSAN_LIB" ] && vs+=" lsan"
        say "$w: instruction counts ($icount_tool) at $n and $((2 * n)) operations"
        for v in $vs; do
            if [ $w = producer_consumer ]; then a1="2 $n"; a2="2 $((2 * n))"; ops=$((2 * n)); else a1=$pre$n$post; a2=$pre$((2 * n))$post; ops=$n; fi
            # shellcheck disable=SC2086
            c1=$(count_instructions $v "$prog" $a1)
            # shellcheck disable=SC2086
            c2=$(count_instructions $v "$prog" $a2)
            printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$w" "$v" "$ops" "${c1:-nan}" "${c2:-nan}" "$(
                case $v in none) echo "$prog $a2" ;; default) echo "LD_PRELOAD=$B/liboomtrace.so $prog $a2" ;;
                    all) echo "LD_PRELOAD=$B/liboomtrace.so OOMTRACE_OPTIONS=stacks=all $prog $a2" ;;
                    lsan) echo "LSAN_OPTIONS=exitcode=0:detect_leaks=0 LD_PRELOAD=$LSAN_LIB $prog $a2" ;;
                    *) echo "LD_PRELOAD=$BB/ref/$(ref_lib $v) $prog $a2" ;; esac)" >>"$ICOUNT"
        done
    done
    # The two real programs, whole runs on smaller inputs (N 0 in the table): steadier than their
    # wall times on a shared machine. heaptrack is left out: its preload does not take effect
    # under valgrind.
    "$GEN_PY" "$IN/gen_big_c.py" $((cc1_funcs / 8)) >"$IN/small.c"
    for w in cc1 python3; do
        selected "$w" || continue
        [ -n "${NOTE[$w]:-}" ] && continue
        if [ $w = cc1 ]; then wargs=(-quiet -O2 "$IN/small.c" -o "$RUN/small.s"); else wargs=("$IN/alloc_heavy.py" 5); fi
        say "$w: instruction counts ($icount_tool), whole run"
        CENV=${ENVS[$w]:-}
        for v in none default all; do
            c1=$(count_instructions $v "${PROG[$w]}" "${wargs[@]}")
            printf '%s\t%s\t0\t%s\t\t%s\n' "$w" "$v" "${c1:-nan}" "$(
                [ -n "$CENV" ] && echo -n "$CENV "
                case $v in default) echo -n "LD_PRELOAD=$B/liboomtrace.so " ;;
                    all) echo -n "LD_PRELOAD=$B/liboomtrace.so OOMTRACE_OPTIONS=stacks=all " ;; esac
                echo "${PROG[$w]} ${wargs[*]}" | sed "s|$IN/|build/bench/inputs/|g; s|$RUN|/tmp/bench|g")" >>"$ICOUNT"
        done
    done
fi
t_end=$(date +%s)
uptime_after=$(uptime)
stat_after=$(head -1 /proc/stat 2>/dev/null)
children_cpu_s self_after
wall_after=$(date +%s.%N)

# ---------------------------------------------------------------- report
META=$RUN/meta.txt
{
    echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "mode=$([ $quick = 1 ] && echo quick || echo full)"
    echo "reps=$reps"
    echo "only=$only"
    echo "pin=$pin"
    echo "pin_reason=$pin_reason"
    echo "cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
    echo "ncpu=$(nproc)"
    echo "mem=$(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
    echo "kernel=$(uname -r)"
    # shellcheck disable=SC1091
    echo "os=$( . /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
    echo "glibc=$(ldd --version 2>/dev/null | head -1 | sed 's/.* //')"
    echo "gcc=$(gcc -dumpfullversion 2>/dev/null)"
    echo "python=$($PY --version 2>&1)"
    echo "heaptrack=${HT_VERSION:-n/a}"
    echo "heaptrack_note=$ht_note"
    echo "lsan_note=$lsan_note"
    echo "icount_tool=$icount_tool"
    echo "icount_note=$icount_note"
    echo "uptime_before=$uptime_before"
    echo "uptime_after=$uptime_after"
    echo "clk_tck=$(getconf CLK_TCK 2>/dev/null)"
    echo "stat_before=$stat_before"
    echo "stat_after=$stat_after"
    echo "self_cpu_before=$self_before"
    echo "self_cpu_after=$self_after"
    echo "wall_before=$wall_before"
    echo "wall_after=$wall_after"
    echo "elapsed_s=$((t_end - t_start))"
    echo "lib_sha256=$LIB_SUM"
    echo "git=$(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
    echo "cc1_funcs=$cc1_funcs"
} >"$META"
# Raw data of the last run, so the report can be regenerated (python3 scripts/bench_report.py
# --results build/bench/last-results.tsv --commands build/bench/last-commands.tsv ...).
for f in results commands skips icount syscalls depth; do cp "$RUN/$f.tsv" "$BB/last-$f.tsv"; done
cp "$META" "$BB/last-meta.txt"
"$GEN_PY" scripts/bench_report.py --results "$RES" --commands "$CMDS" --skips "$SKIPS" --icount "$ICOUNT" \
    --syscalls "$SYSCALLS" --depth "$DEPTH" --meta "$META" --out "$out" || { say "bench_report.py failed; raw results kept in $BB/last-results.tsv"; exit 1; }
say "wrote $out ($((t_end - t_start)) s)"
