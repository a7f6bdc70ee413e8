#!/usr/bin/env bash
# `oomtrace postmortem` (launcher/postmortem.c, launcher/statefile.c): a report beside a left-over
# state file, and the file removed; every file of a directory; --report=; its refusal for a live
# pid (the file kept); a torn file (no report), a file whose newest update is torn (the one before);
# truncated and crafted files (a clear message, no crash, no hang, no report where it cannot be
# read); a symlink and a FIFO under a state file's name.
. "$(dirname "$0")/lib.sh"
T=$OT_BUILD/targets
L=$OT_LAUNCHER
SW=$T/statefile_writer
for f in "$L" "$SW"; do
    [ -e "$f" ] || { fail postmortem "missing $f (run make tests)"; exit 1; }
done
unset OOMTRACE_OPTIONS LD_PRELOAD

# leave DIR [torn|torn1]: a state file of a process that is gone; sets SF, SPID
leave() {
    local out
    out=$("$SW" leave "$@" 2>&1)
    SPID=${out##*left }
    SF=$(ls "$1"/oomtrace-"$SPID"-*.rec 2>/dev/null)
}
pm() { timeout 20 "$L" postmortem "$@" >"$D/pm.out" 2>"$D/pm.err"; PRC=$?; }

D=$(newdir pm_file)
leave "$D"
pm --log="$D/log.txt" "$SF"
R="$D/oomtrace.statefile_writer.$SPID.1.json"
if [ "$PRC" -eq 0 ] && [ -f "$R" ] && [ ! -e "$SF" ]; then
    got=$(json_get "$R" "(r['event'], r['process']['pid'], r['killed']['killer'], r['killed']['supervisor_pid'], r['sites'][0]['stack'][0]['function'])")
    want="('killed', $SPID, 'unknown', None, 'grow_buffers')"
    [ "$got" = "$want" ] && pass postmortem_left_over_file || fail postmortem_left_over_file "$got, want $want"
    grep -q 'died without a report of its own' "$D/log.txt" && pass postmortem_text_report ||
        fail postmortem_text_report "$(head -c 300 "$D/log.txt")"
    # The launcher's frames have file and line (DWARF through libdw, as the leak report's).
    if ldconfig -p 2>/dev/null | grep -q 'libdw\.so\.1 '; then
        mark=$(grep -n "postmortem.sh: the site's line" "$OT_ROOT/tests/targets/statefile_writer.c" | cut -d: -f1)
        got=$(json_get "$R" "'%s:%s' % (r['sites'][0]['stack'][0]['file'], r['sites'][0]['stack'][0]['line'])")
        [ "$got" = "tests/targets/statefile_writer.c:$mark" ] && pass postmortem_file_line ||
            fail postmortem_file_line "$got, want tests/targets/statefile_writer.c:$mark"
    else
        skip postmortem_file_line "libdw.so.1 not installed (Debian package libdw1)"
    fi
else
    fail postmortem_left_over_file "status $PRC, files: $(ls "$D" | tr '\n' ' '); $(cat "$D/pm.err")"
fi

D=$(newdir pm_dir)
leave "$D"; a=$SPID
leave "$D"; b=$SPID
pm --log=none --report="$D/out.%p.json" "$D"
if [ "$PRC" -eq 0 ] && [ -f "$D/out.$a.json" ] && [ -f "$D/out.$b.json" ] && [ -z "$(ls "$D"/*.rec 2>/dev/null)" ]; then
    pass postmortem_directory_and_report_option
else
    fail postmortem_directory_and_report_option "status $PRC, files: $(ls "$D" | tr '\n' ' '); $(cat "$D/pm.err")"
fi

# A live process: refused, its file kept.
D=$(newdir pm_live)
"$SW" wait "$D" >"$D/w.out" 2>&1 &
WP=$!
for _ in $(seq 100); do grep -q ready "$D/w.out" && break; sleep 0.02; done
SF=$(ls "$D"/oomtrace-$WP-*.rec 2>/dev/null)
pm --log=none "$SF"
if [ -n "$SF" ] && [ "$PRC" -eq 1 ] && [ -e "$SF" ] && grep -q 'still running' "$D/pm.err" &&
    [ -z "$(ls "$D"/*.json 2>/dev/null)" ]; then
    pass postmortem_refuses_live_pid
else
    fail postmortem_refuses_live_pid "status $PRC, file '$SF', $(cat "$D/pm.err")"
fi
pm --log=none "$D"
[ "$PRC" -eq 0 ] && [ -e "$SF" ] && grep -q 'running processes left alone' "$D/pm.err" &&
    pass postmortem_scan_leaves_live_alone || fail postmortem_scan_leaves_live_alone "status $PRC, $(cat "$D/pm.err")"
kill "$WP"; wait "$WP" 2>/dev/null

# Torn: both frames being written when it died: no report; the newest torn: the one before.
D=$(newdir pm_torn)
leave "$D" torn
pm --log=none "$SF"
[ "$PRC" -eq 1 ] && grep -q 'torn: neither frame is complete' "$D/pm.err" && [ -z "$(ls "$D"/*.json 2>/dev/null)" ] &&
    pass postmortem_torn_file || fail postmortem_torn_file "status $PRC, $(cat "$D/pm.err"); $(ls "$D")"
leave "$D" torn1
pm --log=none "$SF"
R=$(ls "$D"/*.json 2>/dev/null | head -n 1)
[ "$PRC" -eq 0 ] && [ -n "$R" ] && [ "$(json_get "$R" "r['killed']['torn']")" = True ] &&
    pass postmortem_newest_update_torn || fail postmortem_newest_update_torn "status $PRC, $(cat "$D/pm.err")"

# Truncated.
D=$(newdir pm_trunc)
leave "$D"
truncate -s 3000 "$SF"
pm --log=none "$SF"
[ "$PRC" -eq 1 ] && grep -q "truncated: 3000 of" "$D/pm.err" && [ -z "$(ls "$D"/*.json 2>/dev/null)" ] &&
    pass postmortem_truncated_file || fail postmortem_truncated_file "status $PRC, $(cat "$D/pm.err")"

# Crafted files: each a valid file with one field made hostile. Every one ends in a clear line and a
# status of 0 or 1 within the timeout (no crash: >= 128; no hang: 124); those still readable get a
# report that is valid JSON.
D=$(newdir pm_crafted)
leave "$D"
mv "$SF" "$D/base.bin"
python3 - "$D" <<'PY'
import os, struct, sys
d = sys.argv[1]
base = bytearray(open(os.path.join(d, "base.bin"), "rb").read())
def u32(b, o, v): struct.pack_into("<I", b, o, v)
def u64(b, o, v): struct.pack_into("<Q", b, o, v)
f0 = struct.unpack_from("<Q", base, 32)[0]; f1 = struct.unpack_from("<Q", base, 40)[0]
cases = {}
def case(name, fn):
    b = bytearray(base); fn(b); cases[name] = b
for f in (f0, f1):
    pass
case("sites_count", lambda b: [u32(b, f + 36, 0xffffffff) for f in (f0, f1)])
case("modules_count", lambda b: [u32(b, f + 64, 100000) for f in (f0, f1)])
case("ring_heads", lambda b: [u64(b, f + 40, 2**64 - 1) or u64(b, f + 48, 2**63) for f in (f0, f1)])
case("section_offset", lambda b: u64(b, 48 + 16 * 0, 2**63))
case("section_overflow", lambda b: (u32(b, 48 + 16 * 1 + 8, 0xffffffff), u32(b, 48 + 16 * 1 + 12, 0xffffffff)))
case("section_tiny_entries", lambda b: u32(b, 48 + 16 * 2 + 8, 1))
case("frame_offset", lambda b: u64(b, 32, 2**64 - 4096))
case("frame_size", lambda b: u32(b, 28, 0xffffffff))
case("total_size", lambda b: u64(b, 16, 2**62))
case("header_size", lambda b: u32(b, 24, 0))
case("layout_version", lambda b: u32(b, 8, 99))
case("pid", lambda b: struct.pack_into("<i", b, 184, -5))
case("identity_torn", lambda b: u64(b, 176, 3))
def unterminated(b):
    for off, n in ((208, 40), (288, 16), (304, 128), (432, 32), (464, 256), (720, 1024), (1744, 256)):
        b[off:off + n] = b"A" * n
case("strings_unterminated", unterminated)
def bad_depth(b):
    so = struct.unpack_from("<Q", b, 48)[0]
    for f in (f0, f1): u32(b, f + so + 12, 100000)
case("site_depth", bad_depth)
def bad_module(b):
    mo = struct.unpack_from("<Q", b, 48 + 16 * 4)[0]
    for f in (f0, f1):
        p = f + mo + 72
        b[p:p + 256] = b"../../etc/shadow\0".ljust(256, b"\0")
        q = f + mo + 328 + 72
        b[q:q + 256] = b"/dev/zero\x01\x1b[31m\0".ljust(256, b"\0")
case("module_paths", bad_module)
def utf8(b):
    b[464:464 + 8] = b"/\xff\xfe\xc0x\0\0\0"
case("exe_not_utf8", utf8)
case("zeros", lambda b: b.__setitem__(slice(0, len(b)), bytes(len(b))))
case("empty", lambda b: b.__delitem__(slice(0, len(b))))
for name, b in cases.items():
    with open(os.path.join(d, "crafted-%s.rec" % name), "wb") as fh:
        fh.write(b)

PY
cp "$D/crafted-module_paths.rec" "$D/keep.bin"
for f in "$D"/crafted-*.rec; do
    name=${f##*/crafted-}; name=${name%.rec}
    rm -f "$D"/r.*.json
    pm --log=none --report="$D/r.%p.json" "$f"
    R=$(ls "$D"/r.*.json 2>/dev/null | head -n 1)
    msg=$(head -n 1 "$D/pm.err")
    if [ "$PRC" -ge 2 ]; then
        fail "postmortem_crafted_$name" "status $PRC (crash or hang): $msg"
    elif [ "$PRC" -eq 1 ] && [ -z "$R" ] && [[ $msg == "oomtrace: $f: "*"; no report" ]]; then
        pass "postmortem_crafted_$name"
    elif [ "$PRC" -eq 0 ] && [ -n "$R" ] && python3 -c 'import json,sys; json.load(open(sys.argv[1], encoding="utf-8"))' "$R" 2>/dev/null; then
        pass "postmortem_crafted_$name"
    else
        fail "postmortem_crafted_$name" "status $PRC, report '$R' (valid JSON?), message: $msg"
    fi
done
# The readable crafted files: sanitised, not trusted (the bad module paths left out, the strings cut).
R=$D/mod.json
cp "$D/keep.bin" "$D/m.rec"
pm --log=none --report="$R" "$D/m.rec"
if [ -f "$R" ]; then
    got=$(json_get "$R" "sorted({f['module'] for s in r['sites'] for f in s['stack']} & {'../../etc/shadow', '/dev/zero\x01\x1b[31m'})")
    [ "$got" = "[]" ] && pass postmortem_bad_module_paths_unused || fail postmortem_bad_module_paths_unused "$got"
else
    fail postmortem_bad_module_paths_unused "no report: $(cat "$D/pm.err")"
fi

# A symlink under a state file's name is not followed; a FIFO does not hang the scan.
D=$(newdir pm_links)
leave "$D"
mv "$SF" "$D/real.bin"
ln -s "$D/real.bin" "$D/oomtrace-1-1.rec"
pm --log=none "$D/oomtrace-1-1.rec"
[ "$PRC" -eq 1 ] && grep -q 'cannot open' "$D/pm.err" && pass postmortem_symlink_refused ||
    fail postmortem_symlink_refused "status $PRC, $(cat "$D/pm.err")"
rm -f "$D/oomtrace-1-1.rec"
mkfifo "$D/oomtrace-2-2.rec"
pm --log=none "$D"
[ "$PRC" -eq 1 ] && grep -q 'not a regular file' "$D/pm.err" && pass postmortem_fifo_no_hang ||
    fail postmortem_fifo_no_hang "status $PRC, $(cat "$D/pm.err")"
