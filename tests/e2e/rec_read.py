#!/usr/bin/env python3
"""A second, independent reader of flight-recorder state files, written from the layout documented
in interpose/recorder_format.h (tests/e2e/recorder.sh). Prints one JSON object: the identity, the
newest complete frame's totals, top sites (innermost function symbolized with addr2line through the
module map), ring counts. Exit 2 on a torn or bad file, with the reason on stderr."""
import json, struct, subprocess, sys

def cstr(b):
    return b.split(b"\0", 1)[0].decode("utf-8", "replace")

def main(path):
    d = open(path, "rb").read()
    if len(d) < 2048 or d[:8] != b"OOMTREC\0":
        sys.exit("bad: magic") or 2
    ver, endian, total, hsize, fsize = struct.unpack_from("<IIQII", d, 8)
    fo = struct.unpack_from("<QQ", d, 32)
    secs = [struct.unpack_from("<QII", d, 48 + 16 * i) for i in range(5)]
    fseq, = struct.unpack_from("<Q", d, 176)
    pid, ppid, start = struct.unpack_from("<iiQ", d, 184)
    sup, uid = struct.unpack_from("<iI", d, 248)
    exec_count, = struct.unpack_from("<I", d, 272)
    exe = cstr(d[464:720]); cmd = cstr(d[720:1744])
    if ver != 1 or total != len(d) or fseq == 0 or fseq & 1:
        print("bad or torn header", file=sys.stderr); sys.exit(2)
    best = None
    for i in range(2):
        seq, no = struct.unpack_from("<QQ", d, fo[i])
        if seq and not seq & 1 and no and (best is None or no > best[1]):
            best = (i, no)
    if best is None:
        print("torn: no complete frame", file=sys.stderr); sys.exit(2)
    F = fo[best[0]]
    seq, no, rt, mono, flags, nsites, lhead, hhead, fhead, nmods, mgen, srt = struct.unpack_from("<QQQQIIQQQIIQ", d, F)
    kinds = [struct.unpack_from("<5Q", d, F + 80 + 40 * k) for k in range(6)]
    host = struct.unpack_from("<5Q", d, F + 320)
    dev = struct.unpack_from("<5Q", d, F + 360)
    pres = struct.unpack_from("<dIIqqd", d, F + 528)
    def entry(s, i):
        off, esz, cap = secs[s]
        return F + off + (i % cap) * esz
    mods = []
    for i in range(nmods):
        o = entry(4, i)
        base, lo, hi, bl = struct.unpack_from("<QQQI", d, o)
        mods.append((base, lo, hi, d[o + 32:o + 32 + bl].hex(), cstr(d[o + 72:o + 328])))
    def sym(ip):
        for base, lo, hi, bid, p in mods:
            if lo <= ip < hi:
                try:
                    out = subprocess.run(["addr2line", "-f", "-e", p, hex(ip - 1 - base)], capture_output=True, text=True).stdout.split("\n")
                    return out[0]
                except Exception:
                    return "?"
        return "?"
    sites = []
    for i in range(nsites):
        o = entry(0, i)
        sid, kind, devn, depth = struct.unpack_from("<IIiI", d, o)
        lb, lc, pk, tb, tc = struct.unpack_from("<5Q", d, o + 16)
        ips = struct.unpack_from("<%dQ" % min(depth, 64), d, o + 64)
        sites.append({"id": sid, "kind": kind, "live_bytes": lb, "live_count": lc,
                      "frames": [sym(ip) for ip in ips[:4]]})
    hist = []
    hcap = secs[2][2]
    for i in range(max(0, hhead - hcap), hhead):
        hist.append(struct.unpack_from("<QQQQqq", d, entry(2, i)))
    large = []
    lcap = secs[1][2]
    for i in range(max(0, lhead - lcap), lhead):
        o = entry(1, i)
        rt_, mo_, size, lh, ld, kind, devn, sid, depth = struct.unpack_from("<5QIiII", d, o)
        large.append({"size": size, "kind": kind, "site": sid, "depth": depth})
    print(json.dumps({"pid": pid, "ppid": ppid, "start_time": start, "supervisor": sup, "exec_count": exec_count,
                      "exe": exe, "cmdline": cmd, "frame": best[0], "update_no": no, "flags": flags,
                      "host": {"bytes": host[0], "count": host[1], "peak": host[2]},
                      "device": {"bytes": dev[0]}, "kind0": kinds[0][0],
                      "pressure": {"threshold": pres[0], "kind": pres[1], "reported": pres[2]},
                      "sites": sites, "history": [{"host": h[2], "rss": h[4], "cg": h[5]} for h in hist],
                      "large": large, "modules": [{"path": m[4], "build_id": m[3]} for m in mods]}))

main(sys.argv[1])
