/* The flight recorder's state file: its layout, shared by the writer (interpose/recorder.c, inside
 * the traced process) and every reader (the launcher's supervisor and `oomtrace postmortem`).
 * Plain C, fixed-width fields, no pointers, little-endian x86-64/arm64 as written. A reader must
 * treat a file as untrusted input: check every size, offset, count and string below before use.
 *
 * File = one ot_rec_file_t (the identity, written once when the file is created) followed by two
 * frames (ot_rec_frame_t + its sections). The writer alternates between the frames: update n goes
 * to frame n % 2, so a frame torn by a SIGKILL in the middle of its update leaves the other, one
 * update older, intact.
 *
 * Torn-update rule (per frame): frame.seq is odd while the writer is changing that frame, even when
 * the frame is complete. A reader copies the frame, then reads seq again: the copy is good only if
 * both reads are the same even, nonzero value (a live writer: retry a few times; a dead process:
 * that frame is "torn"). Of the good frames, the one with the higher `update_no` is the state. No
 * good frame: the file is "torn" (report that, never its contents). The identity block has its own
 * seq with the same rule (written at creation and again by an exec'd image's takeover).
 *
 * Strings: fixed char arrays, NUL-terminated when the writer wrote them; a reader must still stop at
 * the array's end. Times: *_realtime_ns is CLOCK_REALTIME, *_mono_ns is CLOCK_MONOTONIC (the same
 * clock as /proc/uptime and the kernel's, so a supervisor can compare them with its own), both in
 * nanoseconds. Sizes in bytes. -1 in an int64 field means unknown / unlimited.
 *
 * Where: state_dir= (a path template), else /dev/shm/oomtrace-<uid>/ (else $TMPDIR, else /tmp, with
 * the same oomtrace-<uid> directory), 0700, owned by the uid. Name: OT_REC_NAME_PREFIX <pid> "-"
 * <start_time> OT_REC_NAME_SUFFIX, mode 0600. The process removes its file when it exits normally
 * or has written its own final report, so a file whose pid + start_time names no live process is
 * the state of a process that died without a chance to speak. */
#ifndef OOMTRACE_RECORDER_FORMAT_H
#define OOMTRACE_RECORDER_FORMAT_H

#include <stdint.h>

#define OT_REC_MAGIC "OOMTREC\0"          /* 8 bytes, file offset 0 */
#define OT_REC_LAYOUT_VERSION 1u         /* bumped on any incompatible change */
#define OT_REC_ENDIAN_MARK 0x01020304u   /* read back as written: same byte order as the reader */
#define OT_REC_NAME_PREFIX "oomtrace-"   /* file name: oomtrace-<pid>-<start_time>.rec */
#define OT_REC_NAME_SUFFIX ".rec"

#define OT_REC_KINDS 6       /* the kinds of internal.h's ot_kind_t: host, device, managed, pinned, vmm, pool */
#define OT_REC_MAX_FRAMES 64 /* stack frames (raw return addresses) per stack */
#define OT_REC_LARGE_FRAMES 32

/* Frame flags (ot_rec_frame_t.flags). */
#define OT_REC_F_EXITING 1u      /* the process started its normal exit (the file should vanish soon) */
#define OT_REC_F_FINAL_REPORT 2u /* the process wrote its own final report */
#define OT_REC_F_CUDA 4u         /* the CUDA family was active */
#define OT_REC_F_SITES_FULL 8u   /* the call-site table was full: some allocations have no site */

/* Which limit the pressure watch measures against (ot_rec_pressure_t.limit_kind). */
#define OT_REC_LIMIT_NONE 0u
#define OT_REC_LIMIT_CGROUP 1u   /* cgroup memory limit; usage = cgroup usage */
#define OT_REC_LIMIT_AS 2u       /* RLIMIT_AS; usage = VmSize */
#define OT_REC_LIMIT_RAM 3u      /* MemTotal + SwapTotal; usage = VmRSS */

/* ------------------------------------------------------------------ section descriptors
 * Where each array of a frame lives: offsets are from the start of the frame; every frame has the
 * same descriptors. A reader checks offset + entry_size * capacity <= frame_size and that
 * entry_size >= the size of the struct it knows (a later minor version may append fields). */
typedef struct {
    uint64_t offset;     /* from the frame's first byte */
    uint32_t entry_size; /* bytes per entry */
    uint32_t capacity;   /* entries */
} ot_rec_section_t;      /* 16 bytes */

enum {
    OT_REC_SEC_SITES = 0,    /* ot_rec_site_t[capacity]: top call sites by live bytes, n_sites used */
    OT_REC_SEC_LARGE = 1,    /* ot_rec_large_t ring: the last large allocations */
    OT_REC_SEC_HISTORY = 2,  /* ot_rec_sample_t ring: memory history */
    OT_REC_SEC_FAILURES = 3, /* ot_rec_failure_t ring: allocation failures seen */
    OT_REC_SEC_MODULES = 4,  /* ot_rec_module_t[capacity]: module map, n_modules used */
    OT_REC_SECTIONS = 8      /* descriptors reserved in the header (unused ones are all zero) */
};

/* ------------------------------------------------------------------ identity (file offset 0) */
typedef struct {
    char magic[8];             /*    0: OT_REC_MAGIC */
    uint32_t layout_version;   /*    8: OT_REC_LAYOUT_VERSION */
    uint32_t endian_mark;      /*   12: OT_REC_ENDIAN_MARK */
    uint64_t total_size;       /*   16: bytes of the whole file as created (the file's size) */
    uint32_t header_size;      /*   24: sizeof(ot_rec_file_t) as written (>= 2048) */
    uint32_t frame_size;       /*   28: bytes of one frame, sections included */
    uint64_t frame_offset[2];  /*   32: file offsets of frame 0 and 1 */
    ot_rec_section_t sections[OT_REC_SECTIONS]; /* 48: indexed by OT_REC_SEC_* (128 bytes) */
    uint64_t seq;              /*  176: identity's own torn-update counter (odd: being written) */
    int32_t pid;               /*  184 */
    int32_t ppid;              /*  188: parent at creation */
    uint64_t start_time;       /*  192: /proc/<pid>/stat field 22 (clock ticks after boot): pid + start_time
                                *       name one process across pid reuse; exec keeps both */
    uint64_t clock_ticks;      /*  200: sysconf(_SC_CLK_TCK) of the writer, to turn start_time into seconds */
    char boot_id[40];          /*  208: /proc/sys/kernel/random/boot_id: a file from an earlier boot names no live process */
    int32_t supervisor_pid;    /*  248: OOMTRACE_SUPERVISOR at start-up, 0 if none */
    uint32_t uid;              /*  252: real uid of the writer */
    uint64_t created_realtime_ns; /* 256 */
    uint64_t created_mono_ns;  /*  264 */
    uint32_t exec_count;       /*  272: images of this pid+start_time that wrote this file (1, +1 per exec takeover) */
    uint32_t ptr_bits;         /*  276: 64 */
    uint64_t recorder_bytes;   /*  280: the recorder_bytes= option in force */
    char version[16];          /*  288: oomtrace version of the writer ("0.1.0") */
    char host[128];            /*  304: nodename */
    char rank[32];             /*  432: RANK / OMPI_COMM_WORLD_RANK / SLURM_PROCID / PMI_RANK, "" if none */
    char exe[256];             /*  464: /proc/self/exe */
    char cmdline[1024];        /*  720: arguments joined by spaces (truncated) */
    char cgroup_path[256];     /* 1744: the memory cgroup, as memprobe.c found it ("" none) */
    char reserved[48];         /* 2000: zero */
} ot_rec_file_t;               /* 2048 bytes */

/* ------------------------------------------------------------------ frame */
typedef struct {
    uint64_t bytes, count, peak_bytes, total_bytes, total_count; /* as internal.h's ot_totals_t */
} ot_rec_totals_t;             /* 40 bytes */

typedef struct {               /* internal.h's ot_host_mem_t at the last full probe, -1 unknown */
    int64_t mem_total, mem_available, swap_total, swap_free;
    int64_t vm_size, vm_rss, vm_peak, vm_data;
    int64_t rlimit_as, rlimit_data;
    int64_t cgroup_limit, cgroup_usage, cgroup_swap_limit;
    int32_t cgroup_version;    /* 0 none found, 1, 2 */
    int32_t ptr_bits;
    int64_t overcommit_memory;
    uint64_t probed_realtime_ns; /* when these were read (0: never) */
} ot_rec_host_mem_t;           /* 128 bytes */

typedef struct {
    double threshold;          /* pressure= option (0: off) */
    uint32_t limit_kind;       /* OT_REC_LIMIT_* of the tightest limit */
    uint32_t steps_reported;   /* pressure reports written (steps 0.9, 0.95, 0.99 ...) */
    int64_t limit;             /* its value in bytes, -1 none */
    int64_t usage;             /* the matching usage at the last reading, -1 unknown */
    double next_step;          /* fraction of limit that fires the next report (0: none left) */
} ot_rec_pressure_t;           /* 40 bytes */

typedef struct {
    uint64_t seq;              /*   0: torn-update counter of this frame (odd: being written) */
    uint64_t update_no;        /*   8: 1, 2, 3 ... over both frames; the higher good one is newest */
    uint64_t update_realtime_ns; /* 16 */
    uint64_t update_mono_ns;   /*  24 */
    uint32_t flags;            /*  32: OT_REC_F_* */
    uint32_t n_sites;          /*  36: sites used (host first, then device; each sorted by live bytes) */
    uint64_t large_head;       /*  40: large allocations recorded so far; entry i is at i % capacity,
                                *       valid for large_head - capacity <= i < large_head */
    uint64_t history_head;     /*  48: history samples so far (ring as above) */
    uint64_t failure_head;     /*  56: allocation failures so far (ring as above) */
    uint32_t n_modules;        /*  64: modules used */
    uint32_t modules_gen;      /*  68: bumped whenever the module map changed */
    uint64_t sites_realtime_ns; /* 72: when the site list was taken */
    ot_rec_totals_t kind[OT_REC_KINDS]; /* 80: live and peak per ot_kind_t (240 bytes) */
    ot_rec_totals_t host;      /*  320: = kind[0] */
    ot_rec_totals_t device;    /*  360: all device kinds together (peak over the sum) */
    ot_rec_host_mem_t mem;     /*  400 */
    ot_rec_pressure_t pressure; /* 528 */
    int64_t cgroup_peak;       /*  568: cgroup memory.peak / max_usage_in_bytes at the last reading, -1 */
    uint32_t reports_written;  /*  576: reports this process wrote itself */
    uint32_t failures_seen;    /*  580 */
    char last_report[256];     /*  584: path of the last report it wrote ("" none) */
    char reserved[184];        /*  840: zero */
} ot_rec_frame_t;              /* 1024 bytes; the sections follow within frame_size */

typedef struct {
    uint32_t site_id;          /* the process's call-site id (1..), for cross-reference with the large ring */
    uint32_t kind;             /* ot_kind_t */
    int32_t device;            /* CUDA ordinal, -1 host */
    uint32_t depth;            /* ips used (<= OT_REC_MAX_FRAMES) */
    uint64_t live_bytes, live_count, peak_bytes, total_bytes, total_count;
    uint32_t estimated;        /* 1: host totals scaled from byte sampling */
    uint32_t reserved;
    uint64_t ips[OT_REC_MAX_FRAMES]; /* return addresses, innermost first; symbolize with the module map */
} ot_rec_site_t;               /* 576 bytes */

typedef struct {
    uint64_t realtime_ns;      /* when it was recorded (coarse clock, ~4 ms) */
    uint64_t mono_ns;
    uint64_t size;
    uint64_t live_host;        /* live host bytes (approximate) just after it */
    uint64_t live_device;
    uint32_t kind;
    int32_t device;
    uint32_t site_id;          /* 0: none */
    uint32_t depth;            /* ips used (<= OT_REC_LARGE_FRAMES), a copy of the site's stack */
    uint64_t ips[OT_REC_LARGE_FRAMES];
} ot_rec_large_t;              /* 312 bytes */

typedef struct {
    uint64_t realtime_ns;
    uint64_t mono_ns;
    uint64_t live_host;        /* live host bytes (approximate: within 256 KiB per thread) */
    uint64_t live_device;      /* all device kinds */
    int64_t rss;               /* VmRSS, -1 unknown */
    int64_t cgroup_usage;      /* -1 unknown / no cgroup */
} ot_rec_sample_t;             /* 48 bytes */

typedef struct {
    uint64_t realtime_ns;
    uint64_t mono_ns;
    uint64_t size;             /* bytes requested */
    int32_t error_code;        /* errno or CUDA error number */
    uint32_t device;           /* 1: a device allocation */
    char api[32];              /* "malloc", "cudaMalloc" ... */
    char error_name[48];
    char report[256];          /* the report it wrote ("" none) */
} ot_rec_failure_t;            /* 368 bytes */

typedef struct {
    uint64_t base;             /* load bias (dl_iterate_phdr's dlpi_addr): offset = ip - base */
    uint64_t start, end;       /* span of its PT_LOAD segments in memory, [start, end) */
    uint32_t build_id_len;     /* bytes of build_id used, 0 none */
    uint32_t reserved;
    uint8_t build_id[40];      /* NT_GNU_BUILD_ID descriptor */
    char path[256];            /* absolute (a relative loader name is joined to the cwd); the main
                                * program's is /proc/self/exe's; "linux-vdso.so.1" for the vDSO */
} ot_rec_module_t;             /* 328 bytes */

/* Compile-time checks of the documented sizes and offsets (C11). */
#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#include <stddef.h>
_Static_assert(sizeof(ot_rec_section_t) == 16, "ot_rec_section_t");
_Static_assert(offsetof(ot_rec_file_t, sections) == 48, "sections");
_Static_assert(offsetof(ot_rec_file_t, seq) == 176, "file seq");
_Static_assert(offsetof(ot_rec_file_t, start_time) == 192, "start_time");
_Static_assert(offsetof(ot_rec_file_t, exe) == 464, "exe");
_Static_assert(offsetof(ot_rec_file_t, cgroup_path) == 1744, "cgroup_path");
_Static_assert(sizeof(ot_rec_file_t) == 2048, "ot_rec_file_t");
_Static_assert(sizeof(ot_rec_totals_t) == 40, "ot_rec_totals_t");
_Static_assert(sizeof(ot_rec_host_mem_t) == 128, "ot_rec_host_mem_t");
_Static_assert(sizeof(ot_rec_pressure_t) == 40, "ot_rec_pressure_t");
_Static_assert(offsetof(ot_rec_frame_t, kind) == 80, "frame kind");
_Static_assert(offsetof(ot_rec_frame_t, mem) == 400, "frame mem");
_Static_assert(offsetof(ot_rec_frame_t, last_report) == 584, "frame last_report");
_Static_assert(sizeof(ot_rec_frame_t) == 1024, "ot_rec_frame_t");
_Static_assert(sizeof(ot_rec_site_t) == 576, "ot_rec_site_t");
_Static_assert(sizeof(ot_rec_large_t) == 312, "ot_rec_large_t");
_Static_assert(sizeof(ot_rec_sample_t) == 48, "ot_rec_sample_t");
_Static_assert(sizeof(ot_rec_failure_t) == 368, "ot_rec_failure_t");
_Static_assert(sizeof(ot_rec_module_t) == 328, "ot_rec_module_t");
#endif

/* Capacities: the writer fixes sites 64 (up to 32 host, then up to 32 device) and failures 32, gives
 * the modules up to 512 (2/5 of what is left of a frame), and the rest to the history (55%) and the
 * large ring (45%). recorder_bytes=1M (the default): a file of 1044480 bytes, 3467 samples (one per
 * 250 ms when memory is steady: 14 minutes), 436 large allocations, 512 modules; 256K: 532, 67, 94;
 * 4M: 21489, 2704, 512. Frames are page-aligned, the first at file offset 4096; the descriptors
 * are what a reader goes by, never these numbers. */

#endif
