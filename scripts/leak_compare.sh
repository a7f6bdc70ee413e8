#!/usr/bin/env bash
# The leak check side by side with LeakSanitizer (Debian's liblsan0, preloaded): lost bytes and
# sites each reports on real programs, and the check's time at exit with 1 M live blocks in 1 GiB.
# A measurement, not a test: prints a table. Usage: scripts/leak_compare.sh [build dir]
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${1:-$ROOT/build}
LIB=$B/liboomtrace.so
LSAN=$(ls /usr/lib/x86_64-linux-gnu/liblsan.so.0 2>/dev/null | head -n 1)
[ -e "$LIB" ] || { echo "build first (make)"; exit 1; }
[ -n "$LSAN" ] || { echo "liblsan0 not installed (apt-get install liblsan0)"; exit 1; }
W=$(mktemp -d /tmp/leak_compare.XXXXXX)
trap 'rm -rf "$W"' EXIT

cat >"$W/containers.py" <<'EOF'
d = {i: [str(i)] * 3 for i in range(200000)}
s = set(range(100000)); l = [(i, str(i)) for i in range(200000)]
print(len(d), len(s), len(l))
EOF
printf 'int main(void){int a[10]={0};for(int i=0;i<10;i++)a[i]=i*i;return a[3]-9;}\n' >"$W/f.c"
seq 200000 | shuf --random-source=<(yes) >"$W/nums"
git init -q "$W/repo" && (cd "$W/repo" && echo x >a && git add a && git -c user.name=t -c user.email=t@t commit -qm a)

# oomtrace LABEL CMD...: "lost_bytes lost_sites" from the leak check's JSON
ot() {
    local d="$W/ot.$1"; shift; mkdir -p "$d"
    LD_PRELOAD=$LIB OOMTRACE_OPTIONS="leak_check=1:leak_exitcode=0:log=none:report=$d/r.%p.%n.json" "$@" >/dev/null 2>&1
    python3 - "$d" <<'EOF'
import json, glob, sys
b = s = 0
for f in glob.glob(sys.argv[1] + "/r.*.json"):  # every process's reports: the leak check's only
    r = json.load(open(f))
    if r.get("event") != "leak_check":
        continue
    t = r["totals"]["lost"]
    b += t["host"]["bytes"] + t["device"]["bytes"]; s += t["host"]["sites"] + t["device"]["sites"]
print(b, s)
EOF
}
# lsan LABEL CMD...: "lost_bytes lost_sites" (direct + indirect) from LSan's report
lsan() {
    local d="$W/lsan.$1"; shift; mkdir -p "$d"
    LD_PRELOAD=$LSAN LSAN_OPTIONS="exitcode=0:log_path=$d/lsan" "$@" >/dev/null 2>&1
    cat "$d"/lsan* 2>/dev/null | python3 -c '
import re, sys
t = sys.stdin.read()
b = sum(int(x) for x in re.findall(r"leak of (\d+) byte", t))
print(b, len(re.findall(r"leak of \d+ byte", t)))'
}

printf '%-28s %22s %22s\n' program "oomtrace lost B/sites" "LSan lost B/sites"
n=0
run() {
    local label=$1; shift
    n=$((n + 1)) # a directory name without spaces: LSAN_OPTIONS splits on them
    printf '%-28s %22s %22s\n' "$label" "$(ot "$n" "$@" | tr ' ' /)" "$(lsan "$n" "$@" | tr ' ' /)"
}
run "python3 containers.py" python3 "$W/containers.py"
run "perl -e (hash, regex)" perl -e 'my %h; $h{$_} = "x" x 10 for 1..100000; my @m = grep { /7/ } keys %h; print scalar(@m), "\n"'
run "git log (in a repo)" git -C "$W/repo" log --oneline
run "gcc -O2 -c f.c" gcc -O2 -c "$W/f.c" -o "$W/f.o"
run "sort 200k numbers" sort -n "$W/nums" -o "$W/sorted"

echo "(LSan crashes when preloaded into perl and git on Debian 12: its numbers there are no measurement)"

# The check's time at exit: 1 M live blocks of 1 KiB (1 GiB), all reachable from one array, as
# allocated (never written, as the program leaves them) and filled (a byte pattern written over
# each, as a program that uses its heap does). LSan's allocator keeps its headers apart from the
# blocks, so a block never written is a page never touched: its scan reads the kernel's zero page.
# glibc writes a header before every block, so every page of that heap is real memory that both
# scans read.
cat >"$W/live1m.c" <<'EOF'
#include <stdlib.h>
#include <string.h>
void **a;
int main(int argc, char **argv) {
    (void)argv;
    a = malloc(sizeof(void *) << 20);
    for (int i = 0; i < 1 << 20; i++) { a[i] = malloc(1024); if (argc > 1) memset(a[i], i & 0x7f, 1024); }
    return a[5] == 0;
}
EOF
cc -O1 -o "$W/live1m" "$W/live1m.c"
t() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); python3 -c "print(round($e - $s, 3))"; }
best() { local m=999 x; for _ in 1 2 3 4 5; do x=$(t "$@"); m=$(python3 -c "print(min($m, $x))"); done; echo "$m"; }
echo
echo "1 M live blocks in 1 GiB, best of 5, seconds (the check: the run with it less the run without):"
for fill in "" written; do
    o0=$(best env LD_PRELOAD=$LIB OOMTRACE_OPTIONS=stacks=all:report=none:log=none "$W/live1m" $fill)
    o1=$(best env LD_PRELOAD=$LIB OOMTRACE_OPTIONS=leak_check=1:report=none:log=none "$W/live1m" $fill)
    l0=$(best env LD_PRELOAD=$LSAN LSAN_OPTIONS=detect_leaks=0 "$W/live1m" $fill)
    l1=$(best env LD_PRELOAD=$LSAN LSAN_OPTIONS=detect_leaks=1 "$W/live1m" $fill)
    echo " blocks ${fill:-never written}:"
    printf '  oomtrace  stacks=all %s  leak_check=1 %s  check %s\n' "$o0" "$o1" "$(python3 -c "print(round($o1 - $o0, 3))")"
    printf '  LSan      detect_leaks=0 %s  =1 %s  check %s\n' "$l0" "$l1" "$(python3 -c "print(round($l1 - $l0, 3))")"
done
