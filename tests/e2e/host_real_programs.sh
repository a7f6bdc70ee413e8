#!/usr/bin/env bash
# Real programs run unchanged under the preload: python3, perl, gcc (and the cc1/as it spawns), git,
# sort and ls produce byte-identical stdout and stderr and the same exit status with and without
# liboomtrace.so, with the default options and with a stack for every allocation (stacks=all). When
# nothing fails the library is silent: no report file in the working directory, no text on
# stderr. Under `ulimit -v 200000` python3 and gcc still work (the library's own memory must fit),
# and a MemoryError that python3 recovers from is reported while python3's output stays the same.
. "$(dirname "$0")/lib.sh"

[ -e "$OT_LIB" ] || { fail host_real_programs "missing $OT_LIB (run make)"; exit 1; }

export LC_ALL=C TZ=UTC PYTHONHASHSEED=0 PYTHONDONTWRITEBYTECODE=1
export HOME=$OT_TMP/home GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
mkdir -p "$HOME"
unset LD_PRELOAD OOMTRACE_OPTIONS
# The interpreter itself, not a wrapper script in front of it (pyenv shims run bash first).
PY=$(python3 -c 'import sys; print(sys.executable)')
[ -x "$PY" ] || PY=python3

# ---------------------------------------------------------------- inputs (made once)
IN=$OT_TMP/inputs
mkdir -p "$IN"
cat >"$IN/alloc.py" <<'EOF'
import hashlib
d = {}
for i in range(200000):
    d['k%d' % i] = [i, str(i) * 3, (i, i * 2)]
items = sorted(d.items(), key=lambda kv: (kv[1][0] % 977, kv[0]))
s = ' '.join(k for k, v in items[:50000])
for k in list(d)[::3]:
    del d[k]
big = [bytes(1000 + i % 5000) for i in range(2000)]
print(len(d), len(s), sum(map(len, big)), hashlib.md5(s.encode()).hexdigest())
EOF
cat >"$IN/alloc.pl" <<'EOF'
use strict; use warnings; use Digest::MD5 qw(md5_hex);
my %h;
for my $i (0 .. 199999) { $h{"k$i"} = [$i, "x" x ($i % 50), { n => $i }]; }
my @k = sort keys %h;
my $s = join(",", @k[0 .. 9999]);
delete @h{ @k[ grep { $_ % 3 == 0 } 0 .. $#k ] };
my @big = map { "y" x (1000 + $_ % 5000) } 0 .. 1999;
my $t = 0; $t += length($_) for @big;
print scalar(keys %h), " ", length($s), " $t ", md5_hex($s), "\n";
EOF
# A C file of about 3000 lines: 500 small functions and one that calls them all.
python3 - "$IN/gen.c" <<'EOF'
import sys
n = 500
out = ['#include <string.h>\n#include <stdlib.h>\n']
for i in range(n):
    k = i % 7 + 3
    out.append('int f%d(int x) {\n    int a[%d];\n    for (int j = 0; j < %d; j++) a[j] = x * %d + j;\n'
               '    return a[x %% %d] ^ %d;\n}\n' % (i, k, k, i, k, i * 2654435761 % 1000003))
out.append('int all(int x) {\n    int s = 0;\n' + ''.join('    s += f%d(x);\n' % i for i in range(n)) +
           '    return s;\n}\n')
open(sys.argv[1], 'w').write(''.join(out))
EOF
awk 'BEGIN { srand(7); for (i = 0; i < 100000; i++) printf "%08d,%d,w%d\n", int(rand() * 1e8), i % 977, i }' >"$IN/sort.txt"
mkdir -p "$IN/lsparent/lsdir/sub"
for i in 1 2 3 4 5; do head -c $((i * 1000)) /dev/zero >"$IN/lsparent/lsdir/file$i"; done
ln -s file1 "$IN/lsparent/lsdir/link1"
touch -h -d '2020-02-03 04:05:06' "$IN"/lsparent/lsdir/* "$IN/lsparent/lsdir" "$IN/lsparent"
cat >"$IN/git.sh" <<'EOF'
set -e
export GIT_AUTHOR_NAME='A U Thor' GIT_AUTHOR_EMAIL=author@example.com GIT_AUTHOR_DATE='2020-01-02T03:04:05Z'
export GIT_COMMITTER_NAME='C O Mitter' GIT_COMMITTER_EMAIL=committer@example.com GIT_COMMITTER_DATE='2020-01-02T03:04:05Z'
git -c init.defaultBranch=main init -q repo
cd repo
printf 'hello\n' >a.txt
seq 1 1000 >b.txt
git add a.txt b.txt
git commit -q -m first
seq 1 2000 | sed 's/^/line /' >c.txt
git add c.txt
git rm -q a.txt
git commit -q -m second
git log --format=%H
git rev-parse 'HEAD^{tree}'
git cat-file -p HEAD
git fsck --no-progress
EOF

# ---------------------------------------------------------------- helpers
# run_in DIR OUTPREFIX OPTS CMD...: runs CMD in DIR; OPTS "-" = no preload, "" = preload with the
# default options (OOMTRACE_OPTIONS unset), else preload with OOMTRACE_OPTIONS=OPTS.
run_in() {
    local dir=$1 out=$2 opts=$3
    shift 3
    mkdir -p "$dir"
    if [ "$opts" = - ]; then
        (cd "$dir" && timeout 120 "$@" >"$out.out" 2>"$out.err")
    elif [ -z "$opts" ]; then
        (cd "$dir" && LD_PRELOAD=$OT_LIB timeout 120 "$@" >"$out.out" 2>"$out.err")
    else
        (cd "$dir" && LD_PRELOAD=$OT_LIB OOMTRACE_OPTIONS=$opts timeout 120 "$@" >"$out.out" 2>"$out.err")
    fi
    echo $?
}

# same_as_native NAME BASE OPTS CMD...: runs CMD under the preload (OPTS as in run_in) in a fresh
# working directory and compares with the native run already in BASE/native.
same_as_native() {
    local name=$1 base=$2 opts=$3
    shift 3
    local tag=${opts:-default}
    tag=${tag//[^a-z0-9]/_}
    local rc nrc
    rc=$(run_in "$base/cwd.$tag" "$base/$tag" "$opts" "$@")
    nrc=$(cat "$base/native.rc")
    if [ "$rc" != "$nrc" ]; then
        fail "$name" "exit status $rc under the preload, $nrc without; stderr: $(head -c 400 "$base/$tag.err")"
    elif ! cmp -s "$base/native.out" "$base/$tag.out"; then
        fail "$name" "stdout differs: $(diff "$base/native.out" "$base/$tag.out" | head -n 6 | tr '\n' '|')"
    else
        pass "$name"
    fi
    # Silence: the same stderr (the programs' own), and no file the native run did not make.
    local extra
    extra=$(diff <(cd "$base/cwd.native" && find . | sort) <(cd "$base/cwd.$tag" && find . | sort) | grep '^[<>]')
    if ! cmp -s "$base/native.err" "$base/$tag.err"; then
        fail "${name}_silent" "stderr differs: $(diff "$base/native.err" "$base/$tag.err" | head -n 6 | tr '\n' '|')"
    elif [ -n "$extra" ]; then
        fail "${name}_silent" "the working directory differs: $(echo "$extra" | head -n 5 | tr '\n' ' ')"
    else
        pass "${name}_silent"
    fi
}

# real_case NAME CMD...: native run, then default options and stacks=all must match it.
# Skipped when the program (or, for gcc, binutils' size; for perl, Digest::MD5) is not installed.
real_case() {
    local name=$1
    shift
    local need=$1 base
    case $name in python3) need=$PY ;; perl | gcc | git | sort | ls) need=$name ;; esac
    if ! command -v "$need" >/dev/null 2>&1 || { [ "$name" = gcc ] && ! command -v size >/dev/null 2>&1; } ||
        { [ "$name" = perl ] && ! perl -MDigest::MD5 -e 1 >/dev/null 2>&1; }; then
        skip "real_$name" "$need (or a tool its case needs) is not installed"
        return
    fi
    base=$(newdir "$name")
    run_in "$base/cwd.native" "$base/native" - "$@" >"$base/native.rc"
    if [ "$(cat "$base/native.rc")" != 0 ] || [ ! -s "$base/native.out" ]; then
        fail "$name" "the native run itself failed (status $(cat "$base/native.rc")): $(head -c 300 "$base/native.err")"
        return
    fi
    same_as_native "real_$name" "$base" "" "$@"
    same_as_native "real_${name}_stacks_all" "$base" "stacks=all" "$@"
}

# ---------------------------------------------------------------- the programs
real_case python3 "$PY" "$IN/alloc.py"
real_case perl perl "$IN/alloc.pl"
real_case gcc bash -c 'gcc -O1 -c "$1" -o gen.o && size gen.o && md5sum gen.o' _ "$IN/gen.c"
real_case git bash "$IN/git.sh"
real_case sort sort -S 1M -t, -k2,2n -k1,1 "$IN/sort.txt"
real_case ls ls -la --time-style=+%Y-%m-%dT%H:%M:%S "$IN/lsparent/lsdir"

# The checks above can only mean something if the outputs are what they claim to be.
if [ ! -e "$OT_TMP/git/native.out" ]; then
    :
elif [ "$(sed -n 1p "$OT_TMP/git/native.out" | wc -c)" -eq 41 ] && [ "$(wc -l <"$OT_TMP/git/native.out")" -ge 4 ]; then
    pass real_git_output_sane
else
    fail real_git_output_sane "git log did not print commit hashes: $(head -c 200 "$OT_TMP/git/native.out")"
fi
if [ ! -e "$OT_TMP/gcc/native.out" ]; then
    :
elif grep -q ' gen.o$' "$OT_TMP/gcc/native.out" && grep -q '^ *[0-9]' "$OT_TMP/gcc/native.out"; then
    pass real_gcc_output_sane
else
    fail real_gcc_output_sane "no size/md5 of the object: $(head -c 200 "$OT_TMP/gcc/native.out")"
fi

# ---------------------------------------------------------------- explicit destinations stay untouched
d=$(newdir silence)
run_in "$d/cwd" "$d/run" "log=$d/log.txt:report=$d/report.%p.%n.json" \
    "$PY" -c 'import sys; x = [str(i) * 10 for i in range(100000)]; print(len(x)); sys.stderr.write("own\n")' >"$d/rc"
if [ "$(cat "$d/rc")" = 0 ] && [ "$(cat "$d/run.out")" = 100000 ] && [ "$(cat "$d/run.err")" = own ] &&
    [ ! -e "$d/log.txt" ] && ! ls "$d"/report.* >/dev/null 2>&1 && [ -z "$(ls -A "$d/cwd")" ]; then
    pass silence_no_failure_no_output
else
    fail silence_no_failure_no_output "status $(cat "$d/rc"), files: $(ls -A "$d" "$d/cwd" | tr '\n' ' '), stderr: $(head -c 200 "$d/run.err")"
fi

# ---------------------------------------------------------------- under ulimit -v 200000
ulimit_case() {
    local name=$1 opts=$2
    shift 2
    local base
    base=$(newdir "$name")
    run_in "$base/cwd.native" "$base/native" - bash -c 'ulimit -v 200000 && exec "$@"' _ "$@" >"$base/native.rc"
    if [ "$(cat "$base/native.rc")" != 0 ]; then
        fail "$name" "the native run itself failed under ulimit -v 200000: $(head -c 300 "$base/native.err")"
        return 1
    fi
    same_as_native "$name" "$base" "$opts" bash -c 'ulimit -v 200000 && exec "$@"' _ "$@"
    B=$base
}
ulimit_case ulimit_python3 "" "$PY" -c 'x = {i: str(i) * 5 for i in range(300000)}; print(len(x), sum(map(len, x.values())))'
ulimit_case ulimit_gcc "" bash -c 'gcc -O1 -c "$1" -o gen.o && md5sum gen.o' _ "$IN/gen.c"
# A failure python3 recovers from: same output; a report is written where it was asked to go.
rep=$OT_TMP/ulimit_memoryerror_reports
mkdir -p "$rep"
if ulimit_case ulimit_python3_memoryerror "log=$rep/log.txt:report=$rep/r.%p.%n.json" "$PY" -c '
try:
    b = bytearray(300 * 1024 * 1024)
    print("allocated")
except MemoryError:
    print("MemoryError")
print(len([str(i) for i in range(100000)]))'; then
    r=$(ls "$rep"/r.*.json 2>/dev/null | head -n 1)
    if ! grep -qx MemoryError "$B/native.out"; then
        fail ulimit_python3_memoryerror_report "python3 did not run out of memory natively: $(head -c 200 "$B/native.out")"
    elif [ -z "$r" ]; then
        fail ulimit_python3_memoryerror_report "no JSON report in $rep: $(ls "$rep" | tr '\n' ' ')"
    else
        got=$(json_get "$r" "r['failure']['size'] >= 300 * 1024 * 1024 and r['host_memory']['rlimit_as'] == 200000 * 1024")
        if [ "$got" = True ] && grep -q "RLIMIT_AS" "$rep/log.txt"; then
            pass ulimit_python3_memoryerror_report
        else
            fail ulimit_python3_memoryerror_report "report: size $(json_get "$r" "r['failure']['size']") rlimit_as $(json_get "$r" "r['host_memory']['rlimit_as']"); log diagnosis: $(grep -A2 diagnosis "$rep/log.txt" | head -c 300)"
        fi
    fi
fi
