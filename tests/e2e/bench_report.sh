#!/usr/bin/env bash
# scripts/bench_report.py, the step of `make bench` that turns raw measurements into BENCHMARKS.md
# and decides each target met or missed: fed small hand-made measurements whose ratios are known,
# it must print those ratios and the verdicts they imply (a wrong verdict there would go unnoticed:
# make bench is not part of make check).
. "$(dirname "$0")/lib.sh"
GEN=$OT_ROOT/scripts/bench_report.py
command -v python3 >/dev/null 2>&1 || { skip bench_report "python3 is not installed"; exit 0; }
D=$(newdir bench_report)

# row WORKLOAD VARIANT WALL...: one results line per wall time (rep 1, 2, ...); CPU time = wall.
row() {
    local w=$1 v=$2 r=0; shift 2
    for t in "$@"; do
        r=$((r + 1))
        printf '%s\t%s\t%s\t%s\t%s\t0\t1000\t0\t-\n' "$w" "$v" "$r" "$t" "$t" >>"$D/results.tsv"
    done
}
: >"$D/results.tsv"
row small_churn none 1.00 1.10 0.90
row small_churn default 1.20 1.25 1.15        # medians 1.20 / 1.00: met (<= 1.3)
row small_churn all 2.50 2.40 2.60            # 2.50: missed (<= 2)
row small_churn forwarder 1.05 1.05 1.05
row small_churn ideal 1.40 1.40 1.40
row small_churn ideal_stacks 1.90 1.90 1.90
row small_churn ideal_stacks_safe 1.95 1.95 1.95   # 1.95x: leaves 0.05x, oomtrace spends 0.55x beyond
row small_churn heaptrack 10.0 10.0 10.0      # adds 9.0 against 1.5: 6.0x
row live_10m none 1.0 1.0 1.0
row live_10m all 2.0 2.0 2.0
row live_10m heaptrack 3.0 3.0 3.0            # adds 2.0 against 1.0: 2.0x, missed
row live_10m ideal_table 1.5 1.5 1.5          # adds 0.5: the floor is 4.0x, below it would rule 3x out
row live_10m ideal_live_safe 1.2 1.2 1.2      # heaptrack / it 2.5x: out of reach on live_10m
row live_10m_mt none 1.0 1.0 1.0
row live_10m_mt all 1.5 1.5 1.5               # 2.67x: missed, but the floor leaves room
row live_10m_mt heaptrack 4.0 4.0 4.0
row live_10m_mt ideal_live_safe 1.25 1.25 1.25 # heaptrack / it 3.2x: not ruled out
row cc1 none 3.00 3.05 3.02                   # the program agrees to within 5%: wall time decides
row cc1 default 3.30 3.33 3.36                # 1.10x: missed, whatever the instructions say
row cc1 all 3.40 3.40 3.40
row cc1 heaptrack 4.50 4.50 4.50              # heaptrack / none 1.49x: out of reach of any tracker
row python3 none 1.00 1.30 1.10               # spread 30%: the instructions decide
row python3 default 1.40 1.10 1.20            # 1.20/1.10 = 1.09x wall; instructions 1.004x: met
                                              # (without counts: n/a)
row np_loop none 0.50 0.60 0.55                # spread 20%: the instructions per iteration decide
row np_loop default 0.60 0.58 0.59            # 0.59/0.55 = 1.07x wall; 1,030 instructions per iteration
                                              # against 1,000: 1.030x, met
printf 'date=2026-01-01T00:00:00Z\nmode=full\nreps=3\nicount_tool=callgrind\nicount_note=counted with callgrind\n' >"$D/meta.txt"
# Marginal instructions per operation: (at 2N - at N) / N. none 100, default 130, all 290,
# forwarder 104, ideal 139, ideal_stacks 195, ideal_stacks_safe 212.
ic() { printf 'small_churn\t%s\t1000\t%s\t%s\tcmd %s\n' "$1" "$2" "$3" "$1" >>"$D/icount.tsv"; }
: >"$D/icount.tsv"
ic none 150000 250000
ic default 180000 310000
ic all 340000 630000
ic forwarder 154000 258000
ic ideal 189000 328000
ic ideal_stacks 245000 440000
ic ideal_stacks_safe 260000 472000
whole() { printf '%s\t%s\t0\t%s\t\tcmd\n' "$1" "$2" "$3" >>"$D/icount.tsv"; }
whole cc1 none 1000000
whole cc1 default 1010000
whole python3 none 1000000
whole python3 default 1004000
printf 'np_loop\tnone\t1000\t2000000\t3000000\tcmd none\nnp_loop\tdefault\t1000\t2100000\t3130000\tcmd default\n' >>"$D/icount.tsv"

gen() { # OUT [extra args]: runs the generator; GRC its status
    local out=$1; shift
    python3 "$GEN" --results "$D/results.tsv" --meta "$D/meta.txt" --out "$out" "$@" >"$D/gen.out" 2>&1
    GRC=$?
}
target_line() { grep -F -- "| $2" "$1" | head -n 1; }

gen "$D/with.md" --icount "$D/icount.tsv"
if [ "$GRC" -ne 0 ]; then
    fail bench_report_runs "status $GRC: $(head -c 400 "$D/gen.out")"
    exit 0
fi
pass bench_report_runs

l=$(target_line "$D/with.md" "default ≤ 1.3×")
# 1.20x is 8% from the target, less than small_churn's own 22% spread: the instructions decide
# (130 against 100: 1.30x, met).
check bench_report_default_met bash -c '[[ "$1" == *"wall 1.20×"* && "$1" == *"| **met** (on instructions: the program alone ranged 22% in wall time in this run, more than the 8% between the wall median and the target) |" ]]' _ "$l"
check bench_report_default_floors_counted bash -c \
    '[[ "$1" == *"oomtrace default 1.30×, forwarding preload 1.04×, ideal exact record 1.39×"* ]]' _ "$l"
l=$(target_line "$D/with.md" "stacks=all ≤ 2×")
# 2.50x is 25% from the target, more than small_churn's own 22% spread: wall time decides.
check bench_report_all_missed bash -c '[[ "$1" == *"wall 2.50×"* && "$1" == *"| **missed** |" ]]' _ "$l"
check bench_report_all_floor_counted bash -c \
    '[[ "$1" == *"oomtrace stacks=all 2.90×, ideal exact record + stacks 1.95×, + the brief'"'"'s checks 2.12×"* ]]' _ "$l"
check bench_report_safe_floor bash -c '[[ "$1" == *"the same with the checks the brief asks of every tracker (signal safety, dlclose, any number of sites, threads, ...) 1.95×"* ]] && grep -q -F "In this run it is at 1.95×: the target leaves 0.05× of the program'"'"'s own time for everything a tracker does beyond them; oomtrace spends 0.55× beyond them." "$2"' _ "$l" "$D/with.md"
l=$(target_line "$D/with.md" "… the same on the time each tool adds")
check bench_report_added_time bash -c \
    '[[ "$1" == *"small_churn 6.0×"* && "$1" == *"live_10m 2.0×"* && "$1" == *"live_10m_mt 6.0×"* && "$1" == *"**missed** (3 of 4)"* ]]' _ "$l"
# Each workload of the run is named with what it does (from the report's own list).
check bench_report_workloads bash -c 'grep -q -F "| live_10m | 10 million 16..32 B blocks allocated, held, freed |" "$1" && grep -q -F "| small_churn | malloc-saturated single thread" "$1"' _ "$D/with.md"
# bench.sh runs the workloads the report lists (--workloads), and has a command for each of them:
# the same names both ways, so no workload runs without a row on the page.
python3 "$GEN" --workloads | tr ' ' '\n' | sort >"$D/listed.txt"
sed -n 's/^PROG\[\([a-z0-9_]*\)\]=.*/\1/p' "$OT_ROOT/scripts/bench.sh" | sort >"$D/commands.txt"
check bench_report_workload_list bash -c '[ "$(wc -l <"$1")" -ge 12 ] && diff "$1" "$2"' _ "$D/listed.txt" "$D/commands.txt"
check bench_report_icount_table grep -q -F '| small_churn | floor: ideal exact record | 1,000 | 189000 | 328000 | 139 | 1.39× |' "$D/with.md"

check bench_report_table_floor grep -q -F 'In this run it adds 4.0× less than heaptrack (medians): the floor does not rule the target out' "$D/with.md"
# On wall time the same floor is 3.0 / 1.5 = 2.0x: below 3, in the verdict's row and the text.
l=$(target_line "$D/with.md" "stacks=all at least 3× faster than heaptrack on every workload: wall time")
check bench_report_table_floor_wall bash -c '[[ "$1" == *"floor measured alongside: on live_10m heaptrack ÷ the ideal live table alone 2.0× (fastest runs: 2.0×)"* ]] && grep -q -F "heaptrack ÷ the ideal table alone is 2.0× (medians): by this run, no tracker that keeps an exact table" "$2"' _ "$l" "$D/with.md"
# The floor with stacks and the brief's checks on the live workloads, and what no tracker can reach:
# cc1 (heaptrack / the program alone below 3x) and live_10m (heaptrack / that floor below 3x), not
# live_10m_mt (3.2x: the floor leaves room).
check bench_report_live_floor bash -c '[[ "$1" == *"heaptrack ÷ the ideal live table shared by threads with stacks and the brief'"'"'s checks: live_10m 2.5× (fastest runs: 2.5×), live_10m_mt 3.2× (fastest runs: 3.2×)"* ]] && grep -q -F "In this run heaptrack ÷ it is live_10m 2.5×, live_10m_mt 3.2× (medians, wall time): by this run, no tracker that makes these checks and keeps its exact table in the process can be 3× faster than heaptrack on live_10m here." "$2"' _ "$l" "$D/with.md"
check bench_report_out_of_reach bash -c '[[ "$1" == *"| **missed** (1 of 4; by this run out of reach of any tracker: cc1 (heaptrack ÷ the program alone below 3×); live_10m (heaptrack ÷ the floor with the brief'"'"'s checks below 3×)) |"* ]]' _ "$l"
l=$(target_line "$D/with.md" "default ≤ 1.05× on an everyday program (cc1)")
check bench_report_steady_wall_decides bash -c '[[ "$1" == *"wall 1.10×"* && "$1" == *"| **missed** |"* ]]' _ "$l"
l=$(target_line "$D/with.md" "default ≤ 1.05× on an everyday program (python3)")
check bench_report_noisy_counts_decide bash -c \
    '[[ "$1" == *"wall 1.09×"* && "$1" == *"**met** (on instructions: the program alone ranged 30% in wall time"* ]]' _ "$l"
l=$(target_line "$D/with.md" "default ≤ 1.05× on an everyday program (np_loop)")
check bench_report_np_loop_per_iteration bash -c '[[ "$1" == *"wall 1.07×"* && "$1" == *"instructions per iteration (counted at N and 2N) 1.030×"* && "$1" == *"**met** (on instructions: the program alone ranged 20% in wall time"* ]]' _ "$l"

# Without instruction counts the targets say nothing about them (no "n/a" guesses).
gen "$D/without.md"
l=$(target_line "$D/without.md" "default ≤ 1.3×")
check bench_report_no_counts bash -c '[ "$2" -eq 0 ] && [[ -n "$1" && "$1" != *"instructions per operation"* ]]' _ "$l" "$GRC"
l=$(target_line "$D/without.md" "default ≤ 1.05× on an everyday program (python3)")
check bench_report_noisy_no_counts bash -c '[[ "$1" == *"| n/a (the program alone ranged 30% in wall time in this run, and no instruction count) |"* ]]' _ "$l"
# A wall median that lands below 2x on a host noisier than its margin does not make the target met:
# 1.90x is 5% from it, small_churn's own runs spread 22%, and the instructions say 2.90x.
sed 's/^small_churn\tall\t\([0-9]\)\t2\.[0-9]0\t2\.[0-9]0/small_churn\tall\t\1\t1.90\t1.90/' "$D/results.tsv" >"$D/noisy.tsv"
python3 "$GEN" --results "$D/noisy.tsv" --meta "$D/meta.txt" --icount "$D/icount.tsv" --out "$D/noisy.md" >"$D/gen.out" 2>&1
l=$(target_line "$D/noisy.md" "stacks=all ≤ 2×")
check bench_report_noisy_margin_counts bash -c '[[ "$1" == *"wall 1.90×"* && "$1" == *"| **missed** (on instructions: the program alone ranged 22% in wall time in this run, more than the 5% between the wall median and the target) |" ]]' _ "$l"
# A safe floor at 2x or above rules the stacks=all target out, and says so.
sed 's/^small_churn\tideal_stacks_safe\t\([0-9]\)\t1.95\t1.95/small_churn\tideal_stacks_safe\t\1\t2.05\t2.05/' "$D/results.tsv" >"$D/safe2.tsv"
python3 "$GEN" --results "$D/safe2.tsv" --meta "$D/meta.txt" --out "$D/safe2.md" >"$D/gen.out" 2>&1
check bench_report_safe_floor_rules_out grep -q -F "In this run it is at 2.05×: by this run, no tracker that makes these checks can meet the target here." "$D/safe2.md"
# A floor below 3x rules the target out, and says so; without heaptrack there is no floor sentence.
sed -i 's/^live_10m\tideal_table\t\([0-9]\)\t1.5\t1.5/live_10m\tideal_table\t\1\t2.0\t2.0/' "$D/results.tsv"
gen "$D/lowfloor.md" --icount "$D/icount.tsv"
check bench_report_table_floor_rules_out grep -q -F 'In this run it adds 2.0× less than heaptrack (medians): by this run, no such tracker can meet the target here.' "$D/lowfloor.md"
# heaptrack at 6.3 s against the ideal table's 2.0 (set above): 3.1x on wall time, not ruled out.
sed 's/^live_10m\theaptrack\t\([0-9]\)\t3.0\t3.0/live_10m\theaptrack\t\1\t6.3\t6.3/' "$D/results.tsv" >"$D/slowht.tsv"
python3 "$GEN" --results "$D/slowht.tsv" --meta "$D/meta.txt" --out "$D/slowht.md" >"$D/gen.out" 2>&1
check bench_report_table_floor_wall_not_ruled_out grep -q -F 'heaptrack ÷ the ideal table alone is 3.1× (medians): the floor does not rule the target out there either.' "$D/slowht.md"
grep -v -P '\theaptrack\t' "$D/results.tsv" >"$D/noht.tsv"
python3 "$GEN" --results "$D/noht.tsv" --meta "$D/meta.txt" --out "$D/noht.md" >"$D/gen.out" 2>&1
check bench_report_table_floor_without_heaptrack bash -c '[ "$1" -eq 0 ] && grep -q "The floor row of live_10m" "$2" && ! grep -q "In this run it adds" "$2"' _ "$?" "$D/noht.md"

# Whether other work shared the machine: /proc/stat's busy time less the suite's own CPU time, over
# the wall time. The load average after a run counts the suite's own last runs, so a run with no
# other work must not be called busy for it; one with a CPU's worth of other work must.
# meta_with BEFORE_BUSY AFTER_BUSY SELF_S STEAL_AFTER: 10 s of wall time, 2 CPUs, 100 ticks/s.
meta_with() {
    cp "$D/meta.txt" "$D/m.txt"
    printf 'ncpu=2\nuptime_before= 09:59:50 up 1:00,  0 user,  load average: 0.10, 0.20, 0.30\n' >>"$D/m.txt"
    printf 'uptime_after= 10:00:00 up 1:00,  0 user,  load average: 1.00, 1.00, 1.00\n' >>"$D/m.txt"
    printf 'clk_tck=100\nstat_before=cpu  %s 0 0 5000 0 0 0 0 0 0\nstat_after=cpu  %s 0 0 5000 0 0 0 %s 0 0\n' \
        "$1" "$2" "$4" >>"$D/m.txt"
    printf 'self_cpu_before=1.00\nself_cpu_after=%s\nwall_before=100.0\nwall_after=110.0\n' "$3" >>"$D/m.txt"
}
meta_with 1000 2000 11.00 0 # 10 s busy, all of it the suite's: no other work
python3 "$GEN" --results "$D/results.tsv" --meta "$D/m.txt" --out "$D/idle.md" >"$D/gen.out" 2>&1
check bench_report_own_load_not_busy bash -c '! grep -q "busy with other work" "$1" && grep -q -F "Other work during the run: other processes used 0.00 of its 2 CPUs on average and the hypervisor took 0.00 CPUs away" "$1"' _ "$D/idle.md"
meta_with 1000 3000 11.00 0 # 20 s busy, 10 of them the suite's: one CPU of other work
python3 "$GEN" --results "$D/results.tsv" --meta "$D/m.txt" --out "$D/busy.md" >"$D/gen.out" 2>&1
check bench_report_other_work_busy grep -q -F "**The machine was busy with other work during this run** (other processes used 1.00 of its 2 CPUs" "$D/busy.md"
meta_with 1000 2000 11.00 500 # no other process, but 5 s stolen by the hypervisor
python3 "$GEN" --results "$D/results.tsv" --meta "$D/m.txt" --out "$D/steal.md" >"$D/gen.out" 2>&1
check bench_report_steal_busy grep -q -F "busy with other work during this run** (other processes used 0.00 of its 2 CPUs on average and the hypervisor took 0.50 CPUs away" "$D/steal.md"
# A run that did not record them (older raw data) is judged by its load average as before.
grep -v -E '^(clk_tck|stat_|self_cpu|wall_)' "$D/m.txt" >"$D/m_old.txt"
python3 "$GEN" --results "$D/results.tsv" --meta "$D/m_old.txt" --out "$D/old.md" >"$D/gen.out" 2>&1
check bench_report_load_fallback grep -q -F "(1-minute load 0.10 before, 1.00 after, on 2 CPUs)" "$D/old.md"

# recursive_stacks (issue 30): stacks=all against LeakSanitizer measured in the same run. Wall time
# decides where the program's own runs agree better than the two medians differ; otherwise the
# counted instructions of both.
: >"$D/rs.tsv"
printf 'recursive_stacks\tnone\t%s\t%s\t%s\t0\t1000\t0\t-\n' 1 1.00 1.00 2 1.01 1.01 3 1.02 1.02 >>"$D/rs.tsv"
printf 'recursive_stacks\tall\t%s\t%s\t%s\t0\t1000\t0\t-\n' 1 2.50 2.50 2 2.52 2.52 3 2.55 2.55 >>"$D/rs.tsv"
printf 'recursive_stacks\tlsan\t%s\t%s\t%s\t0\t1000\t0\t-\n' 1 1.70 1.70 2 1.72 1.72 3 1.75 1.75 >>"$D/rs.tsv"
python3 "$GEN" --results "$D/rs.tsv" --meta "$D/meta.txt" --out "$D/rs.md" >"$D/gen.out" 2>&1
l=$(target_line "$D/rs.md" "stacks=all ≤ LeakSanitizer preloaded")
# 2.52/1.01 = 2.50x against 1.72/1.01 = 1.70x: 2% spread, wall time decides: missed.
check bench_report_recursive_missed bash -c '[[ "$1" == *"stacks=all wall 2.50×"* && "$1" == *"LeakSanitizer wall 1.70×"* && "$1" == *"| **missed** |" ]]' _ "$l"
check bench_report_recursive_row grep -q -F "| recursive_stacks | a recursive-descent parser" "$D/rs.md"
# Noisy (the program alone 1.0..1.6 s) with stacks=all at 1.50x against 1.60x: the instructions decide
# (per round: none 1,000, all 2,000, lsan 2,800: 2.00x against 2.80x: met).
: >"$D/rsn.tsv"
printf 'recursive_stacks\tnone\t%s\t%s\t%s\t0\t1000\t0\t-\n' 1 1.00 1.00 2 1.00 1.00 3 1.60 1.60 >>"$D/rsn.tsv"
printf 'recursive_stacks\tall\t%s\t%s\t%s\t0\t1000\t0\t-\n' 1 1.50 1.50 2 1.50 1.50 3 1.50 1.50 >>"$D/rsn.tsv"
printf 'recursive_stacks\tlsan\t%s\t%s\t%s\t0\t1000\t0\t-\n' 1 1.60 1.60 2 1.60 1.60 3 1.60 1.60 >>"$D/rsn.tsv"
printf 'recursive_stacks\t%s\t1000\t%s\t%s\tcmd\n' none 1000000 2000000 all 2000000 4000000 lsan 2800000 5600000 >"$D/rsn_ic.tsv"
python3 "$GEN" --results "$D/rsn.tsv" --meta "$D/meta.txt" --icount "$D/rsn_ic.tsv" --out "$D/rsn.md" >"$D/gen.out" 2>&1
l=$(target_line "$D/rsn.md" "stacks=all ≤ LeakSanitizer preloaded")
check bench_report_recursive_counts_decide bash -c '[[ "$1" == *"stacks=all 2.00×, LeakSanitizer 2.80×"* && "$1" == *"| **met** (on instructions: the program alone ranged 60% in wall time in this run, more than the 6% between the two wall medians) |" ]]' _ "$l"
# The depth probe beside it (scripts/bench.sh): the frames of each recorder's leak stacks, from
# LeakSanitizer's text (its interceptor's #0 and an inlined call's repeated address not counted) and
# from oomtrace's JSON (lost, unsuppressed leaks only), and the times of the probe as ratios.
cat >"$D/lsan.txt" <<'LSAN'
==1==ERROR: LeakSanitizer: detected memory leaks

Direct leak of 16 byte(s) in 1 object(s) allocated from:
    #0 0x7f0000000010 in __interceptor_malloc lsan_interceptors.cpp:75
    #1 0x5500000000a0 in leaf prog.c:10
    #2 0x5500000000a0 in inlined_into_leaf prog.c:12
    #3 0x5500000000b0 in rec prog.c:20
    #4 0x5500000000b0 in rec prog.c:20

Direct leak of 8 byte(s) in 1 object(s) allocated from:
    #0 0x7f0000000010 in __interceptor_malloc lsan_interceptors.cpp:75
    #1 0x5500000000c0 in other prog.c:30

SUMMARY: LeakSanitizer: 24 byte(s) leaked in 2 allocation(s).
LSAN
check bench_report_depth_lsan bash -c '[ "$(python3 "$1" --stack-depth "$2")" = "$(printf "2\t1.5\t2")" ]' _ "$GEN" "$D/lsan.txt"
cat >"$D/ot.json" <<'OTJ'
{"event": "leak_check", "leaks": [
 {"kind": "host", "bytes": 16, "count": 1, "reachable": false, "suppressed": false, "stack": [{"ip": "0x1"}, {"ip": "0x2"}, {"ip": "0x3"}]},
 {"kind": "host", "bytes": 8, "count": 1, "reachable": false, "suppressed": false, "stack": [{"ip": "0x1"}]},
 {"kind": "host", "bytes": 8, "count": 1, "reachable": true, "suppressed": false, "stack": [{"ip": "0x1"}, {"ip": "0x2"}, {"ip": "0x3"}, {"ip": "0x4"}, {"ip": "0x5"}]},
 {"kind": "host", "bytes": 8, "count": 1, "reachable": false, "suppressed": true, "stack": [{"ip": "0x1"}, {"ip": "0x2"}, {"ip": "0x3"}, {"ip": "0x4"}, {"ip": "0x5"}]}]}
OTJ
check bench_report_depth_json bash -c '[ "$(python3 "$1" --stack-depth "$2")" = "$(printf "2\t2.0\t3")" ]' _ "$GEN" "$D/ot.json"
check bench_report_depth_unreadable bash -c '[ "$(python3 "$1" --stack-depth "$2")" = "$(printf "n/a\tn/a\tn/a")" ]' _ "$GEN" "$D/missing.json"
printf 'meta\trounds\t1000\nstacks\tlsan\t16\t1.0\t1\nstacks\tlsan_full\t800\t12.0\t27\nstacks\tall\t810\t13.4\t32\nmeta\tdepth\t2\n' >"$D/depth.tsv"
printf 'time\tnone\t0.10\ntime\tlsan\t0.25\ntime\tlsan_full\t10.0\ntime\tall\t0.65\ntime\tall_at_depth\t0.26\n' >>"$D/depth.tsv"
python3 "$GEN" --results "$D/rs.tsv" --meta "$D/meta.txt" --depth "$D/depth.tsv" --out "$D/rsd.md" >"$D/gen.out" 2>&1
l=$(target_line "$D/rsd.md" "stacks=all ≤ LeakSanitizer preloaded")
check bench_report_depth_target bash -c '[[ "$1" == *"LeakSanitizer'"'"'s stacks held 1.0 frames here (its fast unwinder), oomtrace'"'"'s 13.4; cut to 2 frames stacks=all costs 2.60× against LeakSanitizer'"'"'s 2.50×, and LeakSanitizer walking whole stacks (fast_unwind_on_malloc=0) costs 100.00×"* && "$1" == *"| **missed** |" ]]' _ "$l"
check bench_report_depth_table bash -c 'grep -q -F "| LeakSanitizer, fast_unwind_on_malloc=0 (whole stacks) | 800 | 12.0 / 27 | 100.00× |" "$1" && grep -q -F "| oomtrace stacks=all, stack_depth=2 | — | — / — | 2.60× |" "$1"' _ "$D/rsd.md"
# Without the frame-pointer build's rows the table has none of them.
check bench_report_depth_no_fp_rows bash -c '! grep -q "built with frame pointers |" "$1"' _ "$D/rsd.md"
# With them (their stacks from the probe, their time from workload recursive_stacks_fp's paired
# runs): each time × that build alone, not the plain build's.
printf 'stacks\tlsan_fp\t700\t11.5\t27\nstacks\tall_fp\t805\t13.3\t32\n' >>"$D/depth.tsv"
cp "$D/rs.tsv" "$D/rsfp.tsv"
printf 'recursive_stacks_fp\tnone\t%s\t%s\t%s\t0\t1000\t0\t-\n' 1 2.00 2.00 2 2.00 2.00 3 2.00 2.00 >>"$D/rsfp.tsv"
printf 'recursive_stacks_fp\tall\t%s\t%s\t%s\t0\t1000\t0\t-\n' 1 8.00 8.00 2 8.00 8.00 3 8.00 8.00 >>"$D/rsfp.tsv"
printf 'recursive_stacks_fp\tlsan\t%s\t%s\t%s\t0\t1000\t0\t-\n' 1 9.00 9.00 2 9.00 9.00 3 9.00 9.00 >>"$D/rsfp.tsv"
python3 "$GEN" --results "$D/rsfp.tsv" --meta "$D/meta.txt" --depth "$D/depth.tsv" --out "$D/rsfp.md" >"$D/gen.out" 2>&1
l=$(target_line "$D/rsfp.md" "stacks=all ≤ LeakSanitizer preloaded")
check bench_report_depth_fp_target bash -c '[[ "$1" == *"(recursive_stacks_fp, the same program built with frame pointers: its stacks 11.5 frames, oomtrace'"'"'s 13.3) LeakSanitizer wall 4.50×"*", stacks=all wall 4.00×"* ]]' _ "$l"
check bench_report_depth_fp_table bash -c 'grep -q -F "| LeakSanitizer (its default, fast unwinder), built with frame pointers | 700 | 11.5 / 27 | 4.50× |" "$1" && grep -q -F "| oomtrace stacks=all (leak_check=1 for the stacks), built with frame pointers | 805 | 13.3 / 32 | 4.00× |" "$1"' _ "$D/rsfp.md"
# Without LeakSanitizer the probe does not run, and the page says why where its section would be.
{ cat "$D/meta.txt"; echo "lsan_note=LeakSanitizer (liblsan0) is not installed"; } >"$D/meta_nolsan.txt"
python3 "$GEN" --results "$D/rs.tsv" --meta "$D/meta_nolsan.txt" --out "$D/rs_nolsan.md" >"$D/gen.out" 2>&1
check bench_report_depth_not_measured grep -q -F "Not measured: LeakSanitizer (liblsan0) is not installed." "$D/rs_nolsan.md"

# The mmap/munmap target is judged on the calls oomtrace made itself (strace -k: frame 1 in
# liboomtrace.so or libunwind), not on the whole difference, part of which is the program's glibc
# under other timing; without stacks, on the difference.
: >"$D/mt.tsv"
for v in none default; do printf 'handoff_8\t%s\t1\t1.0\t1.0\t0\t1000\t0\t-\n' "$v" >>"$D/mt.tsv"; done
printf 'handoff_8\tall\t1\t1.0\t1.0\t0\t1000\t0\t-\n' >>"$D/mt.tsv"
: >"$D/mtf.tsv"
for vt in "none 1.00" "default 2.10" "all 2.50" "forwarder 1.05" "ideal 1.20"; do
    read -r v t <<<"$vt"
    printf 'handoff_8\t%s\t1\t%s\t%s\t0\t1000\t0\t-\n' "$v" "$t" "$t" >>"$D/mtf.tsv"
done
python3 "$GEN" --results "$D/mtf.tsv" --meta "$D/meta.txt" --out "$D/mtf.md" >"$D/gen.out" 2>&1
l=$(target_line "$D/mtf.md" "no collapse when threads hand blocks on")
# The 8-thread rows name the floors measured beside them: glibc under a forwarding preload, and the
# ideal record (which finds no other thread's record).
check bench_report_thread_floors bash -c '[[ "$1" == *"default wall 2.10×"* && "$1" == *"a preload that only forwards (glibc'"'"'s own slowdown under a preload) 1.05×"* && "$1" == *"the ideal exact per-block record, which never finds another thread'"'"'s record 1.20×"* && "$1" == *"| **missed** |" ]]' _ "$l"
printf 'handoff_8\tnone\t41\t29\nhandoff_8\tdefault\t115\t51\t52\t15\n' >"$D/sys_own.tsv"
printf 'handoff_8\tnone\t41\t29\nhandoff_8\tdefault\t115\t51\n' >"$D/sys_total.tsv"
printf 'handoff_8\tnone\t41\t29\nhandoff_8\tdefault\t140\t51\t70\t15\n' >"$D/sys_many.tsv"
for k in own total many; do
    python3 "$GEN" --results "$D/mt.tsv" --meta "$D/meta.txt" --syscalls "$D/sys_$k.tsv" --out "$D/sys_$k.md" >"$D/gen.out" 2>&1
done
l=$(target_line "$D/sys_own.md" "mmap/munmap within a small constant")
check bench_report_syscalls_own bash -c '[[ "$1" == *"under oomtrace 115 mmap, 51 munmap, of which oomtrace'"'"'s own (called from liboomtrace.so or libunwind"*"52 mmap, 15 munmap"* && "$1" == *"| **met** |" ]]' _ "$l"
l=$(target_line "$D/sys_total.md" "mmap/munmap within a small constant")
check bench_report_syscalls_total bash -c '[[ "$1" == *"strace -f -c: oomtrace'"'"'s calls at most 64 more of each"* && "$1" == *"| **missed** |" ]]' _ "$l"
l=$(target_line "$D/sys_many.md" "mmap/munmap within a small constant")
check bench_report_syscalls_own_missed bash -c '[[ "$1" == *"70 mmap, 15 munmap"* && "$1" == *"| **missed** |" ]]' _ "$l"
