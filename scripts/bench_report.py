#!/usr/bin/env python3
"""Turns the raw measurements of scripts/bench.sh into BENCHMARKS.md: medians with min-max, ratios to
the run without the preload, the workload-specific metrics, instruction counts and the issue's
targets, each marked met or missed with its numbers. Standard library only."""
import argparse
import json
import statistics
import sys

VARIANTS = ["none", "default", "all", "heaptrack", "lsan", "forwarder", "ideal", "ideal_stacks", "ideal_stacks_safe",
            "ideal_table", "ideal_live_safe", "ideal_xthread", "ideal_xthread_small"]
VARIANT_LABEL = {
    "none": "no preload",
    "default": "oomtrace default",
    "all": "oomtrace stacks=all",
    "heaptrack": "heaptrack",
    "lsan": "LeakSanitizer (preloaded)",
    "forwarder": "floor: forwarding preload",
    "ideal": "floor: ideal exact record",
    "ideal_stacks": "floor: ideal exact record + stacks",
    "ideal_stacks_safe": "floor: ideal exact record + stacks + the brief's checks",
    "ideal_table": "floor: ideal live table",
    "ideal_live_safe": "floor: ideal live table shared by threads + stacks + the brief's checks",
    "ideal_xthread": "floor: ideal exact record found by any thread",
    "ideal_xthread_small": "floor: ideal exact record found by any thread (first nursery's size)",
}
WORKLOAD_DESC = {
    "small_churn": "malloc-saturated single thread: 8..512 B blocks through a 256-slot ring",
    "thread_churn": "small_churn on 16 threads at once, each with its own ring (many allocating threads)",
    "producer_consumer": "4 threads in a ring, each frees the blocks the previous one allocated",
    "handoff_2": "2 lanes of short-lived threads (10 000 replacements each), each handed its lane's 4 000 "
                 "blocks of 8..1000 B by the thread before it, 500 threads per lane",
    "handoff_8": "handoff_2 with 8 lanes at once (125 threads per lane): 8 threads on 2 CPUs",
    "bursty_pc_2": "1 producer allocates bursts of 256..16 384 small blocks, 1 consumer frees each burst at once",
    "bursty_pc_8": "bursty_pc_2 with 4 producer/consumer pairs: 8 threads on 2 CPUs",
    "deep_large": "64 KiB..1 MiB blocks requested 28..32 frames deep (full stack each, by default)",
    "recursive_stacks": "a recursive-descent parser and evaluator with Karatsuba bignums: 8..64 B blocks, most of "
                        "the time in malloc/free, from ~2,000 distinct call stacks 5..40 frames deep",
    "recursive_stacks_fp": "recursive_stacks built with frame pointers (-fno-omit-frame-pointer, as Fedora 38 and "
                           "Ubuntu 24.04 build their packages), where LeakSanitizer's fast unwinder reads whole stacks",
    "realloc_growth": "64 buffers growing by 1..64 B per realloc up to 8..16 KiB",
    "live_10m": "10 million 16..32 B blocks allocated, held, freed",
    "live_10m_mt": "live_10m in a process with one more thread, which only sleeps (a training job has several)",
    "report_1m": "1 M live blocks over 100 000 call sites, then a failing 1 PiB malloc",
    "cc1": "Debian gcc-12 cc1 -O2 on a generated translation unit",
    "python3": "Debian python3 on an allocation-heavy script",
    "np_loop": "Debian python3 + numpy: a training step's host side, four 128 KiB arrays per iteration",
    "startup": "process start-up, as a CI suite pays it per process: /bin/true started 40 times in a row "
               "(20 with --quick), each under the variant's preload (heaptrack: each under its own "
               "heaptrack); the wall time divided by that count is one start",
    "cuda_path": "cudaMalloc+cudaFree pairs through the CUDA runtime/driver test doubles",
}
ORDER = list(WORKLOAD_DESC)
# The mmap/munmap target: oomtrace may add this many calls of each to a run of a thread workload
# (its table's few migrations that find no spare, each new thread's records and walk cache, libunwind).
SYSCALL_SLACK = 64


def stack_depth(path):
    """The lost sites a leak report told apart and the frames of their stacks: (sites, mean, max) as
    strings, from oomtrace's JSON leak report or LeakSanitizer's text (its frames after the
    interceptor's #0; an inlined call repeats the address of the frame before, and is not
    counted). ("n/a",) * 3 if unreadable."""
    depths = []
    try:
        if path.endswith(".json"):
            with open(path) as f:
                d = json.load(f)
            depths = [len(l.get("stack") or []) for l in d.get("leaks", [])
                      if not l.get("reachable") and not l.get("suppressed")]
        else:
            cur = None
            with open(path, errors="replace") as f:
                for line in f:
                    if line.startswith("Direct leak of") or line.startswith("Indirect leak of"):
                        cur = []
                        depths.append(cur)
                    elif cur is not None and line.strip().startswith("#"):
                        parts = line.split()
                        if len(parts) >= 2 and parts[0] != "#0" and (not cur or cur[-1] != parts[1]):
                            cur.append(parts[1])
                    elif not line.strip():
                        cur = None
            depths = [len(x) for x in depths]
    except (OSError, ValueError):
        depths = []
    if not depths:
        return ("n/a",) * 3
    return (str(len(depths)), f"{sum(depths) / len(depths):.1f}", str(max(depths)))


def read_tsv(path):
    rows = []
    if not path:
        return rows
    try:
        with open(path) as f:
            for line in f:
                line = line.rstrip("\n")
                if line:
                    rows.append(line.split("\t"))
    except FileNotFoundError:
        pass
    return rows


def read_meta(path):
    meta = {}
    with open(path) as f:
        for line in f:
            k, _, v = line.rstrip("\n").partition("=")
            meta[k] = v
    return meta


# Other work that makes a run "busy": this many CPUs on average, used by processes other than the
# suite's, or taken away by the hypervisor.
OTHER_BUSY_CPUS = 0.2


def other_work(meta):
    """(CPUs other processes used on average, CPUs stolen by the hypervisor) over the run, from the
    machine's /proc/stat totals less the CPU time of the suite's own processes; None where the
    run did not record them."""
    try:
        before = [int(x) for x in meta["stat_before"].split()[1:]]
        after = [int(x) for x in meta["stat_after"].split()[1:]]
        tck = float(meta.get("clk_tck") or 100)
        self_s = float(meta["self_cpu_after"]) - float(meta["self_cpu_before"])
        wall = float(meta["wall_after"]) - float(meta["wall_before"])
    except (KeyError, ValueError, IndexError):
        return None
    if len(before) < 8 or len(after) < 8 or wall <= 0:
        return None
    d = [a - b for a, b in zip(after, before)]
    # user nice system idle iowait irq softirq steal (guest time is already in user)
    busy_s = (d[0] + d[1] + d[2] + d[5] + d[6]) / tck
    return max(0.0, busy_s - self_s) / wall, d[7] / tck / wall


def fnum(s):
    try:
        return float(s)
    except ValueError:
        return float("nan")


class Run:
    def __init__(self, row):
        self.workload, self.variant, self.rep = row[0], row[1], int(row[2])
        self.wall, self.user, self.sys = fnum(row[3]), fnum(row[4]), fnum(row[5])
        self.maxrss_kib = fnum(row[6])
        self.rc = int(row[7]) if row[7].lstrip("-").isdigit() else 255
        self.metrics = {}
        if len(row) > 8 and row[8] != "-":
            for kv in row[8].split(","):
                k, _, v = kv.partition("=")
                self.metrics[k] = v


def med(xs):
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else float("nan")


def fmt_s(x):
    if x != x:
        return "n/a"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def fmt_ratio(x, digits=2):
    return "n/a" if x != x else f"{x:.{digits}f}×"


def fmt_range(xs, f=fmt_s):
    xs = [x for x in xs if x == x]
    if not xs:
        return "n/a"
    return f"{f(min(xs))}–{f(max(xs))}"


def main():
    # The suite's workloads, in the page's order: scripts/bench.sh takes its list from here, so a
    # workload cannot run without a row on the page.
    if sys.argv[1:] == ["--workloads"]:
        print(" ".join(ORDER))
        return
    if len(sys.argv) == 3 and sys.argv[1] == "--stack-depth":
        print("\t".join(stack_depth(sys.argv[2])))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--commands")
    ap.add_argument("--skips")
    ap.add_argument("--icount")
    ap.add_argument("--syscalls")
    ap.add_argument("--depth")
    ap.add_argument("--meta", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    meta = read_meta(a.meta)
    runs = [Run(r) for r in read_tsv(a.results) if len(r) >= 8]
    commands = {(r[0], r[1]): r[2] for r in read_tsv(a.commands) if len(r) >= 3}
    skips = {r[0]: r[1] for r in read_tsv(a.skips) if len(r) >= 2}
    icount = read_tsv(a.icount)
    # workload, variant -> (mmap calls, munmap calls) of one run under strace -f -c
    # (workload, variant) -> (mmap, munmap, oomtrace's own mmap, its own munmap); the last two NaN
    # where strace could not take stacks (and for the run without the preload).
    syscalls = {(r[0], r[1]): (fnum(r[2]), fnum(r[3]), fnum(r[4]) if len(r) >= 6 else float("nan"),
                               fnum(r[5]) if len(r) >= 6 else float("nan"))
                for r in read_tsv(a.syscalls) if len(r) >= 4}
    # recursive_stacks' depth probe (scripts/bench.sh): what each recorder's stacks hold, and its time
    depth_rows = read_tsv(a.depth)
    depth_meta = {r[1]: r[2] for r in depth_rows if len(r) >= 3 and r[0] == "meta"}
    depth_stacks = {r[1]: r[2:5] for r in depth_rows if len(r) >= 5 and r[0] == "stacks"}
    depth_time = {r[1]: fnum(r[2]) for r in depth_rows if len(r) >= 3 and r[0] == "time"}

    def depth_ratio(v):
        b = depth_time.get("none", float("nan"))
        x = depth_time.get(v, float("nan"))
        return x / b if b == b and x == x and b > 0 else float("nan")

    def whole_count(w, v):
        """Instructions of a whole run (icount rows with N 0), nan if not counted."""
        for row in icount:
            if len(row) >= 4 and row[0] == w and row[1] == v and row[2] == "0":
                return fnum(row[3])
        return float("nan")

    def per_op(w, v):
        """Marginal instructions per operation (icount rows counted at N and 2N), nan if not counted."""
        for row in icount:
            if len(row) >= 5 and row[0] == w and row[1] == v and row[2] != "0":
                try:
                    return (int(row[4]) - int(row[3])) / int(row[2])
                except (ValueError, ZeroDivisionError):
                    return float("nan")
        return float("nan")

    def per_op_ratio(w, v):
        base = per_op(w, "none")
        return per_op(w, v) / base if base > 0 else float("nan")

    def counted(w, pairs):
        """The targets' note on counted instructions ("; instructions per operation ...: label r×, ...")
        for the variants counted, else ""."""
        got = [(label, per_op_ratio(w, v)) for label, v in pairs]
        got = [f"{label} {fmt_ratio(x)}" for label, x in got if x == x]
        return "; instructions per operation (counted, steady under load): " + ", ".join(got) if got else ""

    by = {}
    for r in runs:
        by.setdefault((r.workload, r.variant), []).append(r)
    workloads = [w for w in ORDER if any(k[0] == w for k in by)]
    present_variants = [v for v in VARIANTS if any(k[1] == v for k in by) or v == "heaptrack"]

    def ok_runs(w, v):
        return [r for r in by.get((w, v), []) if r.rc == 0]

    def wall_med(w, v):
        return med([r.wall for r in ok_runs(w, v)])

    def paired_ratios(w, v):
        base = {r.rep: r.wall for r in ok_runs(w, "none")}
        return [r.wall / base[r.rep] for r in ok_runs(w, v) if r.rep in base and base[r.rep] > 0]

    def cpu_med(w, v):
        return med([x.user + x.sys for x in ok_runs(w, v)])

    def cpu_ratio(w, v):
        b, x = cpu_med(w, "none"), cpu_med(w, v)
        return x / b if b == b and x == x and b > 0 else float("nan")

    def metric(w, v, key):
        return [fnum(r.metrics[key]) for r in ok_runs(w, v) if key in r.metrics]

    def ratio(w, v):
        b = wall_med(w, "none")
        x = wall_med(w, v)
        return x / b if b == b and x == x and b > 0 else float("nan")

    out = []
    w_ = out.append
    quick = meta.get("mode") == "quick"
    w_("# oomtrace benchmarks")
    w_("")
    w_("Generated by `make bench` (`scripts/bench.sh`, statistics by `scripts/bench_report.py`); "
       "rerunning it rewrites this file. " + ("**This is a `--quick` run: smaller sizes, fewer repetitions.** " if quick else ""))
    w_("")
    w_("## Machine and load")
    w_("")
    w_(f"- {meta.get('date', '?')}, {meta.get('git', '')}, liboomtrace.so sha256 {meta.get('lib_sha256', '?')}…; {meta.get('os', '')}, kernel {meta.get('kernel', '')}, "
       f"glibc {meta.get('glibc', '')}, gcc {meta.get('gcc', '')}, {meta.get('python', '')}, heaptrack {meta.get('heaptrack', 'n/a')}")
    w_(f"- CPU: {meta.get('cpu', '?')}, {meta.get('ncpu', '?')} cores visible; memory {meta.get('mem', '?')}")
    w_(f"- load before: `{meta.get('uptime_before', '').strip()}`")
    w_(f"- load after: `{meta.get('uptime_after', '').strip()}`")
    nreps = {w: len({r.rep for r in runs if r.workload == w}) for w in workloads}
    odd = ", ".join(f"{w} {n}" for w, n in nreps.items() if str(n) != meta.get("reps"))
    w_(f"- suite wall time: {meta.get('elapsed_s', '?')} s; {meta.get('reps', '?')} paired repetitions per workload"
       + (f" ({odd})" if odd else ""))
    def load1(u):
        try:
            return float(u.split("load average:")[1].split(",")[0])
        except (IndexError, ValueError):
            return float("nan")

    loads = [load1(meta.get("uptime_before", "")), load1(meta.get("uptime_after", ""))]
    try:
        ncpu = int(meta.get("ncpu", "0"))
    except ValueError:
        ncpu = 0
    other = other_work(meta)
    busy_why = None  # what says the machine was busy, if anything does
    if other is not None:
        other_cpus, steal_cpus = other
        what = (f"other processes used {other_cpus:.2f} of its {ncpu or '?'} CPUs on average and the "
                f"hypervisor took {steal_cpus:.2f} CPUs away (steal time), from /proc/stat less the "
                "suite's own CPU time")
        if other_cpus >= OTHER_BUSY_CPUS or steal_cpus >= OTHER_BUSY_CPUS:
            busy_why = what
        else:
            w_(f"- Other work during the run: {what}. (The load average after the run counts the suite's "
               "own last runs.) Neither figure shows a host that runs this machine's CPUs slower for a "
               "while (other guests' memory traffic, clock speed): the spread of each program's own runs "
               "(the min–max columns) does.")
    elif ncpu and any(x == x and x >= 0.5 * ncpu for x in loads):
        busy_why = f"1-minute load {loads[0]:.2f} before, {loads[1]:.2f} after, on {ncpu} CPUs"
    if busy_why:
        w_(f"- **The machine was busy with other work during this run** ({busy_why}): wall times are "
           "noisier than on an idle machine; the CPU-time ratios and the instruction counts are the "
           "steadier figures.")
    if meta.get("heaptrack_note"):
        w_(f"- {meta['heaptrack_note']}")
    w_("")

    # ------------------------------------------------------------ targets
    targets = []  # (target, measured, status)

    def status(ok):
        return "n/a" if ok is None else ("**met**" if ok else "**missed**")

    def fastest(w, v):
        return min((r.wall for r in ok_runs(w, v)), default=float("nan"))

    def min_ratio(w, v):
        b = fastest(w, "none")
        return fastest(w, v) / b if b > 0 else float("nan")

    def added_ratio(w, v, stat):
        """heaptrack's added time over variant v's, (heaptrack − none) ÷ (v − none), each taken by
        stat (wall_med, fastest or cpu_med); inf where v added no time (nothing to divide by)."""
        h, x, n = stat(w, "heaptrack"), stat(w, v), stat(w, "none")
        return (h - n) / (x - n) if x - n > 0 else float("inf")

    def wall_cpu(w, v):
        return (f"wall {fmt_ratio(ratio(w, v))} (fastest runs: {fmt_ratio(min_ratio(w, v))}), "
                f"CPU {fmt_ratio(cpu_ratio(w, v))}")

    def own_spread(w):
        """How far the program's own runs (no preload) ranged: slowest ÷ fastest − 1."""
        own = [x.wall for x in ok_runs(w, "none")]
        return max(own) / min(own) - 1 if own and min(own) > 0 else float("nan")

    def judged(w, v, r, limit, ic_limit=None, between="the wall median and the target"):
        """The status of the target r <= limit for variant v on w. Wall time decides where the
        program's own runs (no preload) spread less than the wall median's distance from the limit;
        on a host noisier than that, the median can land on either side of it by chance, and the
        counted instructions decide instead (against ic_limit, by default the limit itself), as for
        the 1.05× targets; the status says so. `between` names what the margin lies between."""
        ic_limit = limit if ic_limit is None else ic_limit
        st = status(None if r != r or limit != limit else r <= limit)
        spread = own_spread(w)
        margin = abs(r / limit - 1) if r == r and limit == limit and limit > 0 else float("nan")
        if spread == spread and margin == margin and spread > margin:
            ic = per_op_ratio(w, v)
            why = (f"the program alone ranged {spread * 100:.0f}% in wall time in this run, more than the "
                   f"{margin * 100:.0f}% between {between}")
            st = (status(ic <= ic_limit) + f" (on instructions: {why})" if ic == ic and ic_limit == ic_limit
                  else f"n/a ({why}, and no instruction count)")
        return st

    r = ratio("small_churn", "default")
    floors = ""
    if ok_runs("small_churn", "ideal"):
        floors = (f"; floors measured alongside: a preload that only forwards "
                  f"{fmt_ratio(ratio('small_churn', 'forwarder'))} (fastest runs: {fmt_ratio(min_ratio('small_churn', 'forwarder'))}), "
                  f"the ideal exact per-block record {fmt_ratio(ratio('small_churn', 'ideal'))} "
                  f"(fastest runs: {fmt_ratio(min_ratio('small_churn', 'ideal'))})")
    floors += counted("small_churn", [("oomtrace default", "default"), ("forwarding preload", "forwarder"),
                                      ("ideal exact record", "ideal")])
    targets.append(("default ≤ 1.3× on the malloc-saturated program (small_churn)",
                    wall_cpu("small_churn", "default") + floors, judged("small_churn", "default", r, 1.3)))
    # A 5% margin is judged on wall time only where the program's own runs in this suite agree to
    # within 5% (slowest ÷ fastest without the preload); on a noisier machine the wall median
    # cannot tell 1.04× from 1.06×, and the verdict is taken on the counted instructions instead,
    # as the issue allows where wall time is too noisy. The status says which decided.
    # np_loop is counted per iteration (at N and 2N, numpy's import cancelling out), the other two whole.
    for w in ("cc1", "python3", "np_loop"):
        r = ratio(w, "default")
        if w == "np_loop":
            ic = per_op_ratio(w, "default")
            icn = f"; instructions per iteration (counted at N and 2N) {fmt_ratio(ic, 3)}" if ic == ic else ""
        else:
            base = whole_count(w, "none")
            ic = whole_count(w, "default") / base if base > 0 else float("nan")
            icn = f"; instructions (whole run, smaller input) {fmt_ratio(ic, 3)}" if ic == ic else ""
        spread = own_spread(w)
        st = status(None if r != r else r <= 1.05)
        if spread == spread and spread > 0.05:
            why = f"the program alone ranged {spread * 100:.0f}% in wall time in this run"
            st = (status(ic <= 1.05) + f" (on instructions: {why})" if ic == ic
                  else f"n/a ({why}, and no instruction count)")
        targets.append((f"default ≤ 1.05× on an everyday program ({w})", wall_cpu(w, "default") + icn, st))
    r = ratio("producer_consumer", "default")
    rs = ratio("small_churn", "default")
    targets.append(("no collapse when threads free each other's blocks (producer_consumer, default; "
                    "criterion used here: wall ≤ 2×)",
                    f"{wall_cpu('producer_consumer', 'default')}; single thread (small_churn): {fmt_ratio(rs)}",
                    status(None if r != r else r <= 2.0)))
    # Threads that hand their blocks on, come and go, or swing their live set (issue 32).
    for w in ("handoff_2", "handoff_8", "bursty_pc_2", "bursty_pc_8"):
        if not ok_runs(w, "none"):
            continue
        rd, ra = ratio(w, "default"), ratio(w, "all")
        floors = ""
        if ok_runs(w, "forwarder") and ok_runs(w, "ideal"):
            floors = (f"; floors measured alongside: a preload that only forwards (glibc's own slowdown under a "
                      f"preload) {fmt_ratio(ratio(w, 'forwarder'))} (fastest runs: {fmt_ratio(min_ratio(w, 'forwarder'))}), "
                      f"the ideal exact per-block record, which never finds another thread's record "
                      f"{fmt_ratio(ratio(w, 'ideal'))} (fastest runs: {fmt_ratio(min_ratio(w, 'ideal'))})")
        xv = next((v for v in ("ideal_xthread", "ideal_xthread_small") if ok_runs(w, v)), None)
        if xv:
            rx = ratio(w, xv)
            floors += ("; floors measured alongside:" if not floors else ",") + (
                f" the ideal exact record that a free finds in whichever thread made it "
                f"{fmt_ratio(rx)} (fastest runs: {fmt_ratio(min_ratio(w, xv))})" +
                (": the floor itself is above the default target in this run" if rx == rx and rx > 2.0 else ""))
        targets.append((f"no collapse when threads hand blocks on, come and go or swing their live set ({w}): "
                        "default ≤ 2×, stacks=all ≤ 3×",
                        f"default {wall_cpu(w, 'default')}; stacks=all {wall_cpu(w, 'all')}{floors}",
                        status(None if rd != rd or ra != ra else rd <= 2.0 and ra <= 3.0)))
        if (w, "none") in syscalls and (w, "default") in syscalls:
            (pm, pu, _, _), (om, ou, sm, su) = syscalls[(w, "none")], syscalls[(w, "default")]
            seen = f"program alone {pm:.0f} mmap, {pu:.0f} munmap; under oomtrace {om:.0f} mmap, {ou:.0f} munmap"
            if sm == sm and su == su:
                # Judged on the calls oomtrace made itself: the rest of the difference is glibc's own
                # calls, which vary with the threads' timing (scripts/bench.sh says how they are told).
                ok = sm <= SYSCALL_SLACK and su <= SYSCALL_SLACK
                what = (f"one run under strace -f -k: the calls oomtrace made itself at most {SYSCALL_SLACK} of each")
                seen += (f", of which oomtrace's own (called from liboomtrace.so or libunwind: its table, the "
                         f"threads' records, libunwind's caches) {sm:.0f} mmap, {su:.0f} munmap; the rest is the "
                         f"program's glibc under other timing (thread stacks, arenas) and the loader")
            else:
                ok = None if any(x != x for x in (pm, pu, om, ou)) else om - pm <= SYSCALL_SLACK and ou - pu <= SYSCALL_SLACK
                what = f"one run under strace -f -c: oomtrace's calls at most {SYSCALL_SLACK} more of each"
                seen += " (the table's, the threads' records and walk caches, libunwind's, glibc's under other timing)"
            targets.append((f"mmap/munmap within a small constant of the program's own ({w}, {what})", seen,
                            status(ok)))
    r = ratio("small_churn", "all")
    peer = ""
    if ok_runs("small_churn", "lsan"):
        peer = (f"; LeakSanitizer preloaded, measured alongside: {fmt_ratio(ratio('small_churn', 'lsan'))} "
                f"(fastest runs: {fmt_ratio(min_ratio('small_churn', 'lsan'))})")
    elif meta.get("lsan_note"):
        peer = f"; {meta['lsan_note']}"
    if ok_runs("small_churn", "ideal_stacks"):
        peer += (f"; floor measured alongside: the ideal exact record with a stack for every allocation "
                 f"{fmt_ratio(ratio('small_churn', 'ideal_stacks'))} "
                 f"(fastest runs: {fmt_ratio(min_ratio('small_churn', 'ideal_stacks'))})")
    if ok_runs("small_churn", "ideal_stacks_safe"):
        peer += (f"; the same with the checks the brief asks of every tracker (signal safety, dlclose, any "
                 f"number of sites, threads, ...) {fmt_ratio(ratio('small_churn', 'ideal_stacks_safe'))} "
                 f"(fastest runs: {fmt_ratio(min_ratio('small_churn', 'ideal_stacks_safe'))})")
    peer += counted("small_churn", [("oomtrace stacks=all", "all"), ("ideal exact record + stacks", "ideal_stacks"),
                                    ("+ the brief's checks", "ideal_stacks_safe")])
    targets.append(("stacks=all ≤ 2× on the malloc-saturated program (small_churn)", wall_cpu("small_churn", "all") + peer,
                    judged("small_churn", "all", r, 2.0)))
    # Issue 30: a program whose allocations come from many distinct, recursive stacks, where stacks=all
    # must cost no more than LeakSanitizer preloaded. The limit is LSan's own ratio in the same run;
    # where the program's runs spread more than the two ratios differ, the counted instructions of
    # both decide.
    if ok_runs("recursive_stacks", "none") and ok_runs("recursive_stacks", "lsan"):
        w = "recursive_stacks"
        ra, rl = ratio(w, "all"), ratio(w, "lsan")
        ia, il = per_op_ratio(w, "all"), per_op_ratio(w, "lsan")
        st = judged(w, "all", ra, rl, ic_limit=il, between="the two wall medians")
        icn = (f"; instructions per operation (counted): stacks=all {fmt_ratio(ia)}, LeakSanitizer {fmt_ratio(il)}"
               if ia == ia and il == il else "")
        like = ""
        if depth_time and "lsan" in depth_stacks and "all" in depth_stacks:
            like = (f"; like for like (the depth probe below): LeakSanitizer's stacks held "
                    f"{depth_stacks['lsan'][1]} frames here (its fast unwinder), oomtrace's {depth_stacks['all'][1]}; "
                    f"cut to {depth_meta.get('depth', '?')} frames stacks=all costs {fmt_ratio(depth_ratio('all_at_depth'))} "
                    f"against LeakSanitizer's {fmt_ratio(depth_ratio('lsan'))}, and LeakSanitizer walking whole stacks "
                    f"(fast_unwind_on_malloc=0) costs {fmt_ratio(depth_ratio('lsan_full'))}")
            fw = "recursive_stacks_fp"
            if ("lsan_fp" in depth_stacks and "all_fp" in depth_stacks and ok_runs(fw, "none")
                    and ok_runs(fw, "lsan") and ok_runs(fw, "all")):
                like += (f"; where LeakSanitizer's stacks are whole too (recursive_stacks_fp, the same program built "
                         f"with frame pointers: its stacks {depth_stacks['lsan_fp'][1]} frames, oomtrace's "
                         f"{depth_stacks['all_fp'][1]}) LeakSanitizer {wall_cpu(fw, 'lsan')}, stacks=all "
                         f"{wall_cpu(fw, 'all')}")
        targets.append(("stacks=all ≤ LeakSanitizer preloaded on allocations from many distinct, recursive stacks "
                        "(recursive_stacks)",
                        f"stacks=all {wall_cpu(w, 'all')}; LeakSanitizer {wall_cpu(w, 'lsan')}" + icn + like, st))
    table_floor_ratio = float("nan")  # live_10m: heaptrack's added time over the ideal table's, medians
    table_floor_wall = float("nan")  # live_10m: heaptrack's wall time over the ideal table's, medians
    live_floor_wall = {}  # live_10m(_mt): heaptrack's wall time over the floor with the brief's checks
    if any(k[1] == "heaptrack" for k in by):
        parts, oks, over_parts, over_oks, missed_w = [], [], [], [], []
        for w in workloads:
            if w == "cuda_path":
                continue  # heaptrack does not see device allocations: nothing to compare
            h, al, n = wall_med(w, "heaptrack"), wall_med(w, "all"), wall_med(w, "none")
            if h == h and al == al and al > 0:
                parts.append(f"{w} {h / al:.1f}×")
                oks.append(h / al >= 3)
                if h / al < 3:
                    missed_w.append(w)
                if n == n:
                    ov = added_ratio(w, "all", wall_med)
                    # The same on the fastest run of each: the estimate least disturbed by other
                    # work, which matters most for the multi-threaded workload on a busy machine.
                    fv = added_ratio(w, "all", fastest)
                    # oomtrace at or below the program's own time: no added time to divide by.
                    fs = ("none added" if fv == float("inf") else "n/a" if fv != fv else f"{fv:.1f}×")
                    ms = "no added time measured" if ov == float("inf") else f"{ov:.1f}×"
                    over_parts.append(f"{w} {ms} (fastest runs: {fs})")
                    over_oks.append(ov >= 3)
        # live_10m's floor (the ideal live table), for both rows: on wall time and on added time.
        wall_floor = table_floor = ""
        if ok_runs("live_10m", "ideal_table") and ok_runs("live_10m", "heaptrack"):
            table_floor_wall = wall_med("live_10m", "heaptrack") / wall_med("live_10m", "ideal_table")
            fw = fastest("live_10m", "heaptrack") / fastest("live_10m", "ideal_table")
            wall_floor = (f"; floor measured alongside: on live_10m heaptrack ÷ the ideal live table alone "
                          f"{table_floor_wall:.1f}× (fastest runs: {fw:.1f}×)")
            mr, fr = (added_ratio("live_10m", "ideal_table", stat) for stat in (wall_med, fastest))
            if mr != float("inf") and fr != float("inf"):
                table_floor_ratio = mr
                table_floor = (f"; floor measured alongside: on live_10m the ideal live table alone gives "
                               f"{mr:.1f}× (fastest runs: {fr:.1f}×)")
        # What no tracker can reach by this run: heaptrack ÷ the program alone below 3× (a preload
        # cannot make the program faster than it is), and on the live workloads heaptrack ÷ the floor
        # with stacks and the brief's checks below 3×.
        live_parts = []
        for w in ("live_10m", "live_10m_mt"):
            if ok_runs(w, "ideal_live_safe") and ok_runs(w, "heaptrack"):
                r_ = wall_med(w, "heaptrack") / wall_med(w, "ideal_live_safe")
                live_floor_wall[w] = r_
                live_parts.append(f"{w} {r_:.1f}× (fastest runs: "
                                  f"{fastest(w, 'heaptrack') / fastest(w, 'ideal_live_safe'):.1f}×)")
        if live_parts:
            wall_floor += ("; heaptrack ÷ the ideal live table shared by threads with stacks and the brief's "
                           "checks: " + ", ".join(live_parts))
        no_room = [w for w in missed_w if wall_med(w, "none") > 0 and
                   wall_med(w, "heaptrack") / wall_med(w, "none") < 3]
        no_floor = [w for w in missed_w if live_floor_wall.get(w, 3) < 3 and w not in no_room]
        out_of_reach = ""
        if no_room or no_floor:
            out_of_reach = "; by this run out of reach of any tracker: " + "; ".join(
                ([", ".join(no_room) + " (heaptrack ÷ the program alone below 3×)"] if no_room else []) +
                ([", ".join(no_floor) + " (heaptrack ÷ the floor with the brief's checks below 3×)"]
                 if no_floor else []))
        targets.append(("stacks=all at least 3× faster than heaptrack on every workload: wall time "
                        "(heaptrack ÷ oomtrace)", (", ".join(parts) or "n/a") + wall_floor,
                        status(all(oks) if oks else None) +
                        (f" ({sum(oks)} of {len(oks)}{out_of_reach})" if oks else "")))
        targets.append(("… the same on the time each tool adds to the program "
                        "((heaptrack − none) ÷ (stacks=all − none))", (", ".join(over_parts) or "n/a") + table_floor,
                        status(all(over_oks) if over_oks else None) +
                        (f" ({sum(over_oks)} of {len(over_oks)})" if over_oks else "")))
        # heaptrack's interpreter is a second process on the other CPU: its work is off the wall
        # clock here but not off the machine. Shown beside the wall-time rows, not counted.
        cpu_parts, cpu_oks = [], []
        for w in workloads:
            if w == "cuda_path":
                continue
            if all(cpu_med(w, v) == cpu_med(w, v) for v in ("heaptrack", "all", "none")):
                c = added_ratio(w, "all", cpu_med)
                cpu_parts.append(f"{w} " + ("no added time measured" if c == float("inf") else f"{c:.1f}×"))
                cpu_oks.append(c >= 3)
        if cpu_parts:
            targets.append(("… the same on the CPU time each tool adds (user + system of all its processes, "
                            "heaptrack's interpreter included)", ", ".join(cpu_parts),
                            f"for comparison, not counted: 3× or more on {sum(cpu_oks)} of {len(cpu_oks)}"))
    else:
        targets.append(("stacks=all at least 3× faster than heaptrack on every workload", "heaptrack n/a", "n/a"))

    def per_alloc(v):
        base = med(metric("live_10m", "none", "rss_hold_kib"))
        x = med(metric("live_10m", v, "rss_hold_kib"))
        n = med(metric("live_10m", "none", "ops"))
        if base != base or x != x or n != n or n <= 0:
            return float("nan")
        return (x - base) * 1024 / n

    pa, pall = per_alloc("default"), per_alloc("all")
    n_live = med(metric("live_10m", "none", "ops"))
    targets.append((f"tracking memory ≤ 32 B per live allocation ({n_live / 1e6:.0f} M live; "
                    "VmRSS with − without, at the point all are live)" if n_live == n_live else
                    "tracking memory ≤ 32 B per live allocation",
                    f"default {pa:.1f} B, stacks=all {pall:.1f} B" if pa == pa else "n/a",
                    status(None if pa != pa else max(pa, pall if pall == pall else pa) <= 32)))
    cn = med(metric("cuda_path", "none", "ns_per_pair"))
    cd = med(metric("cuda_path", "default", "ns_per_pair"))
    ca = med(metric("cuda_path", "all", "ns_per_pair"))
    if cn == cn and cd == cd:
        targets.append(("a device allocation through the hooks adds < 1 µs against the test double "
                        "(cudaMalloc+cudaFree pair, default)",
                        f"{cd - cn:+.0f} ns per pair ({cn:.0f} → {cd:.0f} ns; stacks=all {ca:.0f} ns)",
                        status(cd - cn < 1000)))
    else:
        targets.append(("a device allocation through the hooks adds < 1 µs against the test double",
                        skips.get("cuda_path", "not measured"), "n/a"))
    rm = metric("report_1m", "all", "failing_malloc_ms")
    live = med(metric("report_1m", "all", "live"))
    sites = med(metric("report_1m", "all", "sites"))
    if rm:
        targets.append((f"failure report with {live / 1e6:.0f} M live allocations and {sites:,.0f} call sites "
                        "< 100 ms (time inside the failing malloc, stacks=all)",
                        f"{med(rm):.1f} ms (min–max {fmt_range(rm, lambda x: f'{x:.1f}')})",
                        status(med(rm) < 100)))
    else:
        targets.append(("failure report with 1 M live allocations and 100 000 call sites < 100 ms",
                        skips.get("report_1m", "not measured"), "n/a"))

    w_("## Targets")
    w_("")
    w_("| target | measured | status |")
    w_("|---|---|---|")
    for t, m, s in targets:
        w_(f"| {t} | {m} | {s} |")
    w_("")
    met = [t for t in targets if t[2].startswith("**met")]
    missed = [t for t in targets if t[2].startswith("**missed")]
    w_(f"**{len(met)} of {len(met) + len(missed)} measured targets met, {len(missed)} missed.**")
    w_("")
    w_("Ratios are median ÷ median of the same workload without the preload, measured in the same "
       "run; \"fastest runs\" divides the fastest run of each, which on a shared machine is the "
       "estimate least disturbed by other work. The 3× heaptrack target is given two ways: on wall time, where a workload whose own "
       "work dominates (cc1, python3, np_loop, deep_large's kernel time) bounds the ratio by heaptrack ÷ none "
       "whatever oomtrace does, and on the time each tracker adds to the program. The verdict is taken on "
       "wall time; the CPU-time row beside it counts the work heaptrack's interpreter does in a second "
       "process, which the wall clock of a 2-CPU machine hides while a CPU is idle. The 1.05× "
       "targets are judged on wall time only where the program's own runs (no preload) agree to within "
       "5%; where they spread more, a wall-time median cannot resolve a 5% margin, and the verdict is "
       "taken on the counted instructions (which leave out cache misses): of a whole run for cc1 and "
       "python3 (oomtrace's start-up included), per iteration for np_loop; the status then says so. "
       "small_churn's ≤ 1.3× and ≤ 2× targets are judged the same way with their own margin: on wall "
       "time where small_churn's own runs spread less than the wall median's distance from the target, "
       "otherwise on the instructions per operation (a noisy host can put the median on either side).")
    w_("")
    if ok_runs("small_churn", "ideal"):
        w_("The first two floor rows of small_churn are lower bounds, not trackers (tests/bench/ref): "
           "`forwarder.so` only forwards malloc and free to the next definition, as any preloaded "
           "interposer must; `ideal_record.so` adds the least an exact per-block record needs: each "
           "block's size in a per-thread 2-way array of oomtrace's nursery shape, and allocated/freed "
           "totals. It has no recursion guard, no options, no sampling, no peak, no shared table, and a "
           "full set overwrites a record. Where the ideal record is above 1.3×, no tracker that keeps "
           "every block's exact size can meet the default target on this machine. The floors' "
           "instructions are counted too (Instruction counts below): the count does not move with the "
           "machine's load, where a floor's wall time on a busy machine can come out below the program's own.")
        w_("")
    if any(ok_runs(w, v) for w in workloads for v in ("ideal_xthread", "ideal_xthread_small")):
        w_("The thread workloads' floor `ideal_xthread.so` is the ideal record where a free finds the "
           "record in whichever thread made it: each thread's records in a 2-way array of the size of "
           "oomtrace's grown nursery (32,768 sets, 1 MiB; `ideal_xthread_small.so`, handoff_server's: "
           "as many sets as its first nursery, 8,192) with its set function, published in a shared list, an "
           "exited thread's array going to the next new thread; a free looks in its own array, then "
           "where its last cross-thread find was, then in every other one, and clears the way with a "
           "plain store. It has no protocol with the record's owner, no table for records a full set "
           "cannot hold (it overwrites them), no recursion guard, options, sampling or peak. Where it "
           "is above 2×, a tracker that records every block where its thread made it cannot meet the "
           "default target on this machine; below, the gap to oomtrace is what oomtrace spends beyond it.")
        w_("")
    if ok_runs("small_churn", "ideal_stacks"):
        w_("The third floor row of small_churn, `ideal_stacks.so`, is the ideal record plus the least an "
           "exact stack for every allocation costs on code without frame pointers: the caller's return "
           "address and stack pointer compared with the one remembered stack, then every outer frame's "
           "return-address slot read and compared (a stack that fails is walked with libunwind and "
           "interned), and the site's live, total and peak figures kept with plain adds. It checks no "
           "saved rbp, remembers one stack, shares nothing between threads and is not safe against signal "
           "handlers or dlclose. It is the floor for the stacks=all ≤ 2× target: where it is below 2×, the "
           "target is not shown impossible, and the gap to oomtrace is what oomtrace spends beyond it.")
        w_("")
    if ok_runs("small_churn", "ideal_stacks_safe"):
        rs, ra = ratio("small_churn", "ideal_stacks_safe"), ratio("small_churn", "all")
        verdict = ""
        if rs == rs:
            verdict = (f" In this run it is at {fmt_ratio(rs)}: " +
                       ("by this run, no tracker that makes these checks can meet the target here." if rs >= 2.0 else
                        f"the target leaves {2.0 - rs:.2f}× of the program's own time for everything a tracker does "
                        f"beyond them" + (f"; oomtrace spends {ra - rs:.2f}× beyond them." if ra == ra else ".")))
        w_("The fourth, `ideal_stacks_safe.so`, is that floor with the checks the brief asks of every "
           "tracker on this path, each the cheapest way (tests/bench/ref/ideal_stacks.c, SAFE): a busy flag "
           "held around the compare, so that a signal handler's malloc cannot rewrite the remembered stack "
           "under it; a size that does not fit the record going another way; the mode (default or "
           "stacks=all) looked at; a code generation compared (a stack remembered before a dlclose is not "
           "this one); rbp compared where the walk says it matters; sites past a static array found through "
           "a chunk table (any number of sites, without reserving address space up front); a site's "
           "counters added only by the thread that owns them. It still lacks most of what a tracker does: "
           "a process-wide peak, a shared table for blocks that outlive the nursery, more than one "
           "remembered stack, site creation, sampling." + verdict)
        w_("")
    if ok_runs("live_10m", "ideal_table"):
        w_("The floor row of live_10m is a lower bound too: `ideal_table.so` keeps every live block's size "
           "in one open-addressing hash table (16-byte slots, oomtrace's homes, linear probing, huge pages, "
           "the next granule's line prefetched on malloc and on free), with no lock, no atomic, no counter "
           "and no stack, for one thread only. Like oomtrace's table it keeps the 32-byte budget at every "
           "live count: at 80% full it grows to a table its blocks fill to 51% (doubling, as it did "
           "before, moves fewer blocks but holds up to 42.7 bytes per block; 41 at 6.5 million blocks). "
           "Its memory per block is in the memory rows below. heaptrack keeps no "
           "table in the process: it writes each event down a pipe to another process, which on a 2-CPU "
           "machine runs on the other CPU. Where the ideal table alone adds more than a third of what heaptrack adds, "
           "no tracker that keeps an exact table of live blocks in the process (as the report on failure "
           "and the leak check need) can be 3× faster than heaptrack on live_10m on this machine." +
           ("" if table_floor_ratio != table_floor_ratio else
            f" In this run it adds {table_floor_ratio:.1f}× less than heaptrack (medians): " +
            ("the floor does not rule the target out; what misses it is the rest of oomtrace's table."
             if table_floor_ratio >= 3 else "by this run, no such tracker can meet the target here.")) +
           ("" if table_floor_wall != table_floor_wall else
            f" On wall time, which the verdict takes, heaptrack ÷ the ideal table alone is "
            f"{table_floor_wall:.1f}× (medians): " +
            ("the floor does not rule the target out there either."
             if table_floor_wall >= 3 else
             "by this run, no tracker that keeps an exact table of live blocks in the process can be "
             "3× faster than heaptrack on live_10m's wall time here; the floor itself is not.")))
        w_("")
    if any(ok_runs(w, "ideal_live_safe") for w in workloads):
        lv = ", ".join(f"{w} {r_:.1f}×" for w, r_ in live_floor_wall.items())
        w_("The second floor row of live_10m and the one of live_10m_mt, `ideal_live_safe.so`, is what "
           "stacks=all needs at least there from a tracker that meets the brief: `ideal_stacks_safe.so` "
           "(an exact stack for every allocation, with the checks above) recording each block, its size "
           "and its site, in the ideal table as threads share it (tests/bench/ref/ideal_table.h, "
           "IDEAL_SHARED): each insert claims its slot with one locked compare-and-swap, the counts that "
           "decide growth are kept per thread and folded into shared ones, a remove is a plain store. "
           "It still lacks a growth that other threads can meet (it rehashes alone), a process-wide peak, "
           "a nursery, site creation for many stacks and everything a report needs." +
           ("" if not lv else
            f" In this run heaptrack ÷ it is {lv} (medians, wall time): " +
            ("by this run, no tracker that makes these checks and keeps its exact table in the process "
             "can be 3× faster than heaptrack on " +
             " or ".join(w for w, r_ in live_floor_wall.items() if r_ < 3) + " here."
             if any(r_ < 3 for r_ in live_floor_wall.values()) else
             "the floor does not rule the target out.")))
        w_("")
    if any(ok_runs(w, "lsan") for w in workloads):
        w_("The LeakSanitizer rows preload gcc's liblsan (Debian liblsan0) with `LSAN_OPTIONS=exitcode=0` on "
           "the synthetic workloads: the peer the stacks=all target names. It replaces glibc's malloc with "
           "its own allocator and takes each allocation's stack with its frame-pointer unwinder "
           "(fast_unwind_on_malloc=1, its default), which on code built without frame pointers, as these "
           "workloads are, gives short or wrong stacks; oomtrace's come from the DWARF CFI.")
        w_("")

    # ------------------------------------------------------------ workloads
    w_("## Workloads")
    w_("")
    w_("| workload | what it does |")
    w_("|---|---|")
    for w in workloads:
        w_(f"| {w} | {WORKLOAD_DESC[w]} |")
    w_("")

    # ------------------------------------------------------------ wall time
    w_("## Wall time, CPU time and peak RSS")
    w_("")
    w_("Median of the paired repetitions, with min–max. `× none` is the ratio of medians, and in "
       "brackets the range of the per-repetition ratios (each run against the `none` run of the same "
       "repetition). CPU is user + system time of the program and everything it waited for; peak "
       "RSS is the largest resident set among those processes (for heaptrack that includes its "
       "interpreter).")
    w_("")
    w_("| workload | variant | wall (s) | min–max | × none | CPU (s) | CPU × none | peak RSS (MiB) | command |")
    w_("|---|---|---|---|---|---|---|---|---|")
    for w in workloads:
        for v in present_variants:
            rr = by.get((w, v), [])
            if not rr:
                if v == "heaptrack" and meta.get("heaptrack_note"):
                    w_(f"| {w} | {VARIANT_LABEL[v]} | n/a | n/a | n/a | n/a | n/a | n/a | {meta['heaptrack_note']} |")
                continue
            good = ok_runs(w, v)
            failed = len(rr) - len(good)
            walls = [x.wall for x in good]
            pr = paired_ratios(w, v)
            rat = "—" if v == "none" else (f"{fmt_ratio(ratio(w, v))} [{fmt_range(pr, lambda x: f'{x:.2f}')}]")
            cpu = med([x.user + x.sys for x in good])
            rss = med([x.maxrss_kib for x in good]) / 1024
            note = f" ({failed} of {len(rr)} runs failed)" if failed else ""
            base_sums = {x.metrics.get("checksum") for x in ok_runs(w, "none")}
            if v != "none" and len(base_sums) == 1 and any(x.metrics.get("checksum") not in base_sums for x in good):
                note += " (**checksum differs from the run without the preload**)"
            cmd = commands.get((w, v), "")
            crat = "—" if v == "none" else fmt_ratio(cpu_ratio(w, v))
            w_(f"| {w} | {VARIANT_LABEL[v]}{note} | {fmt_s(med(walls))} | {fmt_range(walls)} | {rat} | "
               f"{fmt_s(cpu)} | {crat} | {rss:.0f} | `{cmd}` |")
    for w, note in skips.items():
        w_(f"| {w} | — | — | — | — | — | — | — | {note} |")
    w_("")

    # ------------------------------------------------------------ specific metrics
    w_("## Workload metrics")
    w_("")
    w_("| workload | metric | " + " | ".join(VARIANT_LABEL[v] for v in present_variants) + " |")
    w_("|---|---|" + "---|" * len(present_variants))

    def mrow(w, label, key, f, scale=1.0):
        cells = []
        any_ = False
        for v in present_variants:
            xs = [x * scale for x in metric(w, v, key)]
            if xs:
                any_ = True
                cells.append(f"{f(med(xs))} ({fmt_range(xs, f)})" if len(xs) > 1 else f(med(xs)))
            else:
                cells.append("—")
        if any_:
            w_(f"| {w} | {label} | " + " | ".join(cells) + " |")

    def ops_rate(w, label):
        cells = []
        for v in present_variants:
            good = ok_runs(w, v)
            xs = [fnum(x.metrics.get("ops", "nan")) / x.wall / 1e6 for x in good if x.wall > 0]
            cells.append(f"{med(xs):.1f}" if xs else "—")
        if any(c != "—" for c in cells):
            w_(f"| {w} | {label} | " + " | ".join(cells) + " |")

    ops_rate("small_churn", "M malloc+free per second (whole run)")
    ops_rate("thread_churn", "M malloc+free per second, all 16 threads (whole run)")
    ops_rate("producer_consumer", "M blocks passed per second, all threads (whole run)")
    ops_rate("handoff_2", "M replacements (free + malloc) per second, all threads (whole run)")
    ops_rate("handoff_8", "M replacements (free + malloc) per second, all threads (whole run)")
    ops_rate("bursty_pc_2", "M blocks passed per second, all pairs (whole run)")
    ops_rate("bursty_pc_8", "M blocks passed per second, all pairs (whole run)")
    ops_rate("realloc_growth", "M reallocs per second (whole run)")
    ops_rate("deep_large", "M large mallocs per second (whole run)")
    ops_rate("recursive_stacks", "M malloc+free per second (whole run)")
    mrow("live_10m", "VmRSS with all blocks live (MiB)", "rss_hold_kib", lambda x: f"{x:.0f}", 1 / 1024)
    cells = []
    for v in present_variants:
        x = per_alloc(v) if v != "none" else float("nan")
        cells.append("—" if x != x else f"{x:.1f}")
    if any(c != "—" for c in cells):
        w_("| live_10m | extra resident bytes per live block (VmRSS − VmRSS none) ÷ blocks | " + " | ".join(cells) + " |")
    mrow("live_10m", "blocks oomtrace counts as live (oomtrace_get_totals)", "tracked_live", lambda x: f"{x:,.0f}")
    mrow("live_10m", "allocation phase (s)", "alloc_s", fmt_s)
    mrow("live_10m", "free phase (s)", "free_s", fmt_s)
    mrow("live_10m_mt", "allocation phase (s)", "alloc_s", fmt_s)
    mrow("live_10m_mt", "free phase (s)", "free_s", fmt_s)
    mrow("report_1m", "time inside the failing malloc (ms)", "failing_malloc_ms", lambda x: f"{x:.2f}")
    mrow("report_1m", "allocation phase (s)", "alloc_s", fmt_s)
    mrow("np_loop", "the loop's own time, numpy's import left out (s)", "loop_s", fmt_s)
    mrow("cuda_path", "ns per cudaMalloc+cudaFree pair", "ns_per_pair", lambda x: f"{x:.0f}")
    w_("")

    # ------------------------------------------------------------ stack depth, like for like
    if depth_time or depth_stacks:
        w_("## Stack depth, like for like (recursive_stacks)")
        w_("")
        w_(f"recursive_stacks at {depth_meta.get('rounds', '?')} rounds. Stacks: a run that leaks a twin of every "
           "97th allocation (`recursive_stacks N 97`), as each recorder's leak report lists it: the lost sites it "
           "told apart and the frames of their stacks (LeakSanitizer: its frames after the interceptor's, an inlined call's repeat of the "
           "address not counted). Time: the best of three runs without leaks, × the program alone in the same probe. "
           "LeakSanitizer's default unwinder follows frame pointers, which code built without them (this suite, "
           "Debian's packages) does not keep: it stops after the caller of malloc. `stack_depth` cuts oomtrace's "
           "stacks to the depth LeakSanitizer's reached (at least 2). The last rows run the same program built with "
           "`-fno-omit-frame-pointer` (as Fedora 38 and Ubuntu 24.04 build their packages), where LeakSanitizer's fast "
           "unwinder reads whole stacks; their time is the median of workload recursive_stacks_fp's paired runs × that build alone.")
        w_("")
        w_("| recorder | lost sites told apart | frames per stack (mean / max) | time × program alone |")
        w_("|---|---|---|---|")
        rows = [(label, v, depth_ratio(v)) for label, v in (
            ("LeakSanitizer (its default, fast unwinder)", "lsan"),
            ("LeakSanitizer, fast_unwind_on_malloc=0 (whole stacks)", "lsan_full"),
            ("oomtrace stacks=all (leak_check=1 for the stacks)", "all"),
            (f"oomtrace stacks=all, stack_depth={depth_meta.get('depth', '?')}", "all_at_depth"))]
        # The frame-pointer build's rows, where it ran: their time from its paired runs' medians.
        rows += [(label, v, ratio("recursive_stacks_fp", variant)) for label, v, variant in (
            ("LeakSanitizer (its default, fast unwinder), built with frame pointers", "lsan_fp", "lsan"),
            ("oomtrace stacks=all (leak_check=1 for the stacks), built with frame pointers", "all_fp", "all"))
            if v in depth_stacks]
        for label, v, t in rows:  # the cut run has a time only
            st_ = depth_stacks.get(v, ("—", "—", "—"))
            w_(f"| {label} | {st_[0]} | {st_[1]} / {st_[2]} | {fmt_ratio(t)} |")
        w_("")
    elif meta.get("lsan_note") and "recursive_stacks" in {x.workload for x in runs}:
        w_("## Stack depth, like for like (recursive_stacks)")
        w_("")
        w_(f"Not measured: {meta['lsan_note']}.")
        w_("")

    # ------------------------------------------------------------ instruction counts
    if icount:
        w_("## Instruction counts")
        w_("")
        w_(f"{meta.get('icount_note', '')}. Each program is counted at N and 2N operations; the "
           "difference divided by N is the marginal cost of one operation, free of start-up costs.")
        w_("")
        w_("| workload | variant | N | instructions at N | at 2N | per operation | × none | command (2N) |")
        w_("|---|---|---|---|---|---|---|---|")
        whole = [row for row in icount if len(row) >= 6 and row[2] == "0"]
        for row in icount:
            if len(row) < 6 or row[2] == "0":
                continue
            wl, v, n, c1, c2, cmd = row[:6]
            p = per_op(wl, v)
            rat = "—" if v == "none" else fmt_ratio(per_op_ratio(wl, v))
            w_(f"| {wl} | {VARIANT_LABEL.get(v, v)} | {int(n):,} | {c1} | {c2} | "
               f"{'n/a' if p != p else f'{p:,.0f}'} | {rat} | `{cmd}` |")
        w_("")
        if whole:
            w_("The two real programs are counted whole (start-up included), on smaller inputs than their "
               "timed runs: cc1 on a translation unit an eighth the size, python3 with 5 rounds.")
            w_("")
            w_("| workload | variant | instructions | × none | command |")
            w_("|---|---|---|---|---|")
            for wl, v, _, c1, _, cmd in (row[:6] for row in whole):
                base = whole_count(wl, "none")
                x = fnum(c1)
                rat = "—" if v == "none" else fmt_ratio(x / base if base == base and base > 0 else float("nan"), 3)
                w_(f"| {wl} | {VARIANT_LABEL.get(v, v)} | {c1} | {rat} | `{cmd}` |")
            w_("")
    elif meta.get("icount_note"):
        w_("## Instruction counts")
        w_("")
        w_(meta["icount_note"])
        w_("")

    # ------------------------------------------------------------ method
    w_("## Method")
    w_("")
    w_("- Variants: `none` runs the program as it is; `default` and `stacks=all` run it through the "
       "launcher (`build/oomtrace [--stacks=all] -- PROGRAM`), which sets `LD_PRELOAD` and execs; "
       "`heaptrack` runs `heaptrack -o FILE PROGRAM` (Debian's heaptrack records a stack for every "
       "allocation and streams them to its compressing interpreter). The whole heaptrack run is "
       "timed, its data file included; `heaptrack_print` analysis is not.")
    w_("- Paired repetitions: each repetition runs every variant once, in the order of one row of a "
       "Williams design, so that slow drifts in machine load hit all variants alike and, over the "
       "rows, each variant runs in every position and right after every other variant equally "
       "often (what one run leaves behind, its freed memory above all, does not always fall on the "
       "same successor).")
    w_("- Memory warm-up: before each timed run, untimed, `runstat -w` writes and frees fresh memory "
       "(four times the largest resident set of the workload's runs so far; at least 256 MiB, 1 GiB "
       "before its first run). On a virtual machine whose balloon hands free pages back to the host, "
       "a run that starts a few seconds after the last big one otherwise pays the host for every "
       "page it touches: live_10m under the ideal table took 1.36–1.64 s that way, 0.88–1.13 s after the warm-up.")
    pin = meta.get("pin") == "1"
    w_("- " + ("Single-threaded workloads run pinned to CPU 1 (`taskset -c 1`) without the preload and "
               "under oomtrace; heaptrack is left unpinned because its interpreter runs as a second "
               "process alongside the program (this can only favour heaptrack). producer_consumer is "
               "never pinned" if pin else "Nothing was pinned: on a busy machine pinning only ties a run to "
               "whichever CPU the other load uses") + f" ({meta.get('pin_reason', '')}; `--pin` / `--no-pin` decide).")
    w_("- CPU time is shown next to wall time: on a machine shared with other work it is the steadier "
       "of the two for single-threaded programs. The targets are judged on wall time, as stated.")
    w_("- heaptrack has a fixed start-up cost (its shell script, starting `heaptrack_interpret`, "
       "about 0.3 s here) that weighs on the short workloads; that is part of using it, so it is "
       "part of the comparison. cuda_path is left out of the heaptrack comparison: heaptrack does "
       "not see device allocations.")
    w_("- Wall time, user+system CPU time and peak RSS come from `build/bench/runstat` (fork, exec, "
       "`wait4`); workloads print `@key value` lines (checksum, operations, phase times, VmRSS) "
       "that the report reads.")
    w_("- Tracking memory: `live_10m` prints VmRSS while all blocks are live; the extra bytes per "
       "block are (VmRSS under oomtrace − VmRSS without) ÷ blocks. This includes everything "
       "oomtrace maps (live table, call sites, per-thread state), not just the table.")
    w_("- Report time: `report_1m` builds its call sites from paths through 16 never-inlined "
       "functions, 5 levels deep, and times the one failing `malloc(1 PiB)`: under oomtrace that "
       "call writes the text report and the JSON report (to files) before returning NULL.")
    w_("- The CUDA row uses the test doubles of `tests/doubles` (a runtime that reaches a simulated "
       "driver through cuGetProcAddress); its `none` column is the doubles' own cost.")
    w_("")
    w_("## Reproducing")
    w_("")
    w_("```")
    w_("make bench                                  # everything, ~13 minutes on 2 cores")
    w_("bash scripts/bench.sh --quick               # smaller sizes, 3 repetitions, ~2-3 minutes")
    w_("bash scripts/bench.sh --only small_churn,cc1 --reps 7")
    w_("bash scripts/bench.sh --no-heaptrack --no-callgrind --no-pin --out /tmp/b.md")
    w_("```")
    w_("")
    w_("Each row's command above is exactly what was run, from the repository root, after "
       "`scripts/bench.sh` has built `build/bench/` and generated `build/bench/inputs/` "
       "(`/tmp/bench` stands for the run's scratch directory: `mkdir -p /tmp/bench` first). "
       "Raw measurements of the last run: `build/bench/last-*.tsv` and `last-meta.txt`; "
       "`python3 scripts/bench_report.py --results build/bench/last-results.tsv --commands "
       "build/bench/last-commands.tsv --skips build/bench/last-skips.tsv --icount build/bench/last-icount.tsv "
       "--meta build/bench/last-meta.txt --out FILE` rebuilds this page from them.")
    w_("")
    with open(a.out, "w") as f:
        f.write("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
