/* The flight recorder: a small state file per process (layout and reading rules in
 * recorder_format.h), mapped MAP_SHARED so that the page cache keeps it when the process is
 * SIGKILLed; the launcher's supervisor and `oomtrace postmortem` turn a left-over file into a report.
 * Runs on the allocation path (live.c's level flush, record_body's large allocations): no malloc,
 * no lock waited on there (one try-lock; a thread that finds it taken skips), errno kept. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "recorder_format.h"

uint64_t ot_recorder_large_min = OT_SIZE_BIG;

/* RS_WAITING: below the threshold, no file yet. RS_EXEC: an exec is under way (no new file). */
enum { RS_OFF = 0, RS_WAITING = 1, RS_LIVE = 2, RS_EXEC = 3, RS_CLOSED = 4 };
static _Atomic int g_state;
static int g_lock; /* the writer's try-lock: creation, updates, removal */
static int64_t g_min_level = OT_RECORDER_MIN_BYTES; /* recorder_min_bytes= */

#define UPDATE_EVERY_NS 100000000ull  /* ~100 ms stale at most while the program allocates */
#define UPDATE_BYTES (4ll << 20)      /* or 4 MiB of change, whichever comes first */
#define SAMPLE_EVERY_NS 250000000ull  /* a history sample (statm + cgroup usage) */
#define SAMPLE_BYTES (4ll << 20)      /* or sooner (after 25 ms) when the level moved this much */
#define SITES_EVERY_NS 100000000ull   /* a top-sites scan, further apart if scans are slow */
#define PROBE_EVERY_NS 1000000000ull  /* the full host memory context (meminfo, status, cgroup) */
#define MODCHECK_EVERY_NS 1000000000ull /* has the module map changed (dlpi_adds/subs)? */
#define FRAME_HEAD 1024u
#define FILE_HEAD 4096u
#define TOP_PER_CLASS 32u

/* ------------------------------------------------------------------ layout */
static struct {
    uint32_t cap[5], esz[5];
    uint64_t off[5];
    uint64_t frame_size, total;
} L;

static void layout(uint64_t bytes)
{
    static const uint32_t esz[5] = {sizeof(ot_rec_site_t), sizeof(ot_rec_large_t), sizeof(ot_rec_sample_t),
                                    sizeof(ot_rec_failure_t), sizeof(ot_rec_module_t)};
    uint64_t budget = ((bytes - FILE_HEAD) / 2) & ~4095ull;
    uint64_t fixed = FRAME_HEAD + 2 * TOP_PER_CLASS * esz[OT_REC_SEC_SITES] + 32 * esz[OT_REC_SEC_FAILURES];
    uint64_t rest = budget > fixed ? budget - fixed : 0;
    uint64_t mods = rest * 2 / 5 / esz[OT_REC_SEC_MODULES];
    if (mods > 512) mods = 512;
    if (mods < 16) mods = 16;
    rest = rest > mods * esz[OT_REC_SEC_MODULES] ? rest - mods * esz[OT_REC_SEC_MODULES] : 0;
    uint64_t hist = rest * 55 / 100 / esz[OT_REC_SEC_HISTORY], large = rest * 45 / 100 / esz[OT_REC_SEC_LARGE];
    L.cap[OT_REC_SEC_SITES] = 2 * TOP_PER_CLASS;
    L.cap[OT_REC_SEC_LARGE] = large < 16 ? 16 : (uint32_t)large;
    L.cap[OT_REC_SEC_HISTORY] = hist < 16 ? 16 : (uint32_t)hist;
    L.cap[OT_REC_SEC_FAILURES] = 32;
    L.cap[OT_REC_SEC_MODULES] = (uint32_t)mods;
    uint64_t at = FRAME_HEAD;
    for (int i = 0; i < 5; i++) {
        L.esz[i] = esz[i];
        L.off[i] = at;
        at += (uint64_t)esz[i] * L.cap[i];
    }
    L.frame_size = (at + 4095) & ~4095ull;
    L.total = FILE_HEAD + 2 * L.frame_size;
}

uint64_t ot_recorder_layout_for_test(uint64_t bytes, uint32_t caps[5])
{
    layout(bytes);
    for (int i = 0; i < 5; i++) caps[i] = L.cap[i];
    uint64_t total = L.total;
    layout(ot_opt.recorder_bytes);
    return total;
}

/* ------------------------------------------------------------------ the file */
static uint8_t *g_map;
static size_t g_map_bytes;
static pid_t g_pid;           /* the process that owns the file */
static char g_path[700];
static uint64_t g_update_no;
static _Atomic uint64_t g_last_ns;  /* coarse monotonic time of the last update */
static _Atomic int64_t g_last_level; /* host + device level then */
static uint64_t g_next_sample_ns, g_next_sites_ns, g_next_probe_ns, g_next_modcheck_ns, g_last_sample_ns;
static int64_t g_sample_level;
static bool g_warned;

static ot_rec_file_t *file_head(void) { return (ot_rec_file_t *)(void *)g_map; }
static ot_rec_frame_t *frame_at(unsigned i) { return (ot_rec_frame_t *)(void *)(g_map + FILE_HEAD + i * L.frame_size); }
static void *section(ot_rec_frame_t *f, int sec, uint64_t index)
{
    return (uint8_t *)f + L.off[sec] + (index % L.cap[sec]) * L.esz[sec];
}

/* Staging, in this process's own memory: what the frames are brought up to date from. */
static ot_rec_site_t *g_sites;      /* L.cap[SITES] */
static unsigned g_n_sites;
static uint64_t g_sites_stamp;      /* realtime of the last scan */
static ot_rec_sample_t *g_hist;     /* L.cap[HISTORY] */
static uint64_t g_hist_head;
static ot_rec_module_t *g_mods;     /* L.cap[MODULES] */
static unsigned g_n_mods;
static uint32_t g_mods_gen;
static unsigned long long g_mod_adds, g_mod_subs;
static ot_rec_host_mem_t g_mem;
static char g_cgroup_path[256];
static uint64_t g_kind_peak[OT_KIND_COUNT];
static char g_last_report[256];
static _Atomic unsigned g_reports; /* reports this process wrote (report.c tells us) */

/* Large allocations: filled by any thread, lock-free. Entry i is complete once its
 * seq reads i + 1 (a later lap's writer may have replaced it: seq > i + 1, skipped). */
#define LARGE_STAGE 1024u
typedef struct {
    _Atomic uint64_t seq;
    uint64_t rt, mono, size, live_host, live_device;
    uint32_t kind, site;
    int32_t device;
} large_stage_t;
static large_stage_t g_large[LARGE_STAGE];
static _Atomic uint64_t g_large_claim;



static void warn_once(const char *what, const char *path, const char *why)
{
    if (g_warned) return;
    g_warned = true;
    ot_warn("flight recorder off: %s %s: %s", what, path, why);
}

static bool lock_try(void) { return !__atomic_exchange_n(&g_lock, 1, __ATOMIC_ACQUIRE); }
static void lock_drop(void) { __atomic_store_n(&g_lock, 0, __ATOMIC_RELEASE); }

/* Bounded: the exit paths may run in a signal handler that interrupted the holder. */
static bool lock_wait(void)
{
    for (unsigned i = 0; i < 20000; i++) {
        if (lock_try()) return true;
        if (i > 100) sched_yield();
        else __builtin_ia32_pause();
    }
    return false;
}

/* ------------------------------------------------------------------ identity */
/* The launcher's supervisor, as OOMTRACE_SUPERVISOR names it; 0: none. */
static int32_t supervisor_pid(void)
{
    const char *sup = ot_getenv("OOMTRACE_SUPERVISOR");
    int32_t sp = 0;
    for (; sup && *sup >= '0' && *sup <= '9' && sp < 100000000; sup++) sp = sp * 10 + (*sup - '0');
    return sp;
}

/* /proc/self/stat field 22; the comm field (2) may hold spaces and parentheses: count from the
 * last ')'. */
static uint64_t read_start_time(void)
{
    char buf[1024];
    ssize_t n = ot_read_file("/proc/self/stat", buf, sizeof buf);
    if (n <= 0) return 0;
    const char *p = NULL;
    for (ssize_t i = 0; i < n; i++)
        if (buf[i] == ')') p = buf + i;
    if (!p) return 0;
    p++;
    for (int field = 3; field < 22 && *p; field++) {
        while (*p == ' ') p++;
        while (*p && *p != ' ') p++;
    }
    while (*p == ' ') p++;
    uint64_t v = 0;
    while (*p >= '0' && *p <= '9') v = v * 10 + (uint64_t)(*p++ - '0');
    return v;
}

static void fill_identity(ot_rec_file_t *h, pid_t pid, uint64_t start, uint32_t exec_count)
{
    /* odd, as a read-modify-write with acquire: none of the stores below can become visible first */
    (void)__atomic_exchange_n(&h->seq, 1, __ATOMIC_ACQ_REL);
    ot_memcpy(h->magic, OT_REC_MAGIC, 8);
    h->layout_version = OT_REC_LAYOUT_VERSION;
    h->endian_mark = OT_REC_ENDIAN_MARK;
    h->total_size = L.total;
    h->header_size = sizeof(ot_rec_file_t);
    h->frame_size = (uint32_t)L.frame_size;
    h->frame_offset[0] = FILE_HEAD;
    h->frame_offset[1] = FILE_HEAD + L.frame_size;
    for (int i = 0; i < 5; i++) h->sections[i] = (ot_rec_section_t){L.off[i], L.esz[i], L.cap[i]};
    h->pid = pid;
    h->ppid = (int32_t)getppid();
    h->start_time = start;
    h->clock_ticks = (uint64_t)sysconf(_SC_CLK_TCK);
    char bid[64];
    ssize_t n = ot_read_file("/proc/sys/kernel/random/boot_id", bid, sizeof bid);
    if (n > 0) {
        while (n > 0 && (bid[n - 1] == '\n' || bid[n - 1] == ' ')) bid[--n] = 0;
        ot_strlcpy(h->boot_id, bid, sizeof h->boot_id);
    }
    h->supervisor_pid = supervisor_pid();
    h->uid = (uint32_t)getuid();
    h->created_realtime_ns = ot_clock_ns(CLOCK_REALTIME);
    h->created_mono_ns = ot_clock_ns(CLOCK_MONOTONIC);
    h->exec_count = exec_count;
    h->ptr_bits = (uint32_t)(sizeof(void *) * 8);
    h->recorder_bytes = ot_opt.recorder_bytes;
    ot_strlcpy(h->version, OT_VERSION, sizeof h->version);
    ot_strlcpy(h->host, ot_state.host, sizeof h->host);
    const char *rank = ot_rank_string();
    ot_strlcpy(h->rank, rank ? rank : "", sizeof h->rank);
    ot_strlcpy(h->exe, ot_state.exe, sizeof h->exe);
    ot_strlcpy(h->cmdline, ot_state.cmdline, sizeof h->cmdline);
    ot_strlcpy(h->cgroup_path, g_cgroup_path, sizeof h->cgroup_path);
    __atomic_store_n(&h->seq, 2, __ATOMIC_RELEASE);
}

/* ------------------------------------------------------------------ the directory */
/* Opens the state directory: the per-user tmpfs default, created 0700 and required to be ours with
 * no group or other access; or state_dir=, which must be ours (or root's) and, if others may write
 * to it, sticky like /tmp. -1 (and one warning) when refused. */
static int open_state_dir(char *dir, size_t cap)
{
    uid_t uid = geteuid();
    bool own_default = !ot_opt.state_dir[0];
    if (own_default) {
        struct stat st;
        const char *base = "/dev/shm";
        if (stat(base, &st) != 0 || !S_ISDIR(st.st_mode)) {
            const char *t = ot_getenv("TMPDIR");
            base = t && t[0] == '/' ? t : "/tmp";
        }
        ot_buf_t b;
        ot_buf_init(&b, dir, cap, -1);
        ot_buf_printf(&b, "%s/oomtrace-%u", base, (unsigned)uid);
        ot_buf_cstr(&b);
        if (b.truncated) return -1;
    } else if (!ot_expand_template(ot_opt.state_dir, 0, dir, cap)) {
        warn_once("state_dir", ot_opt.state_dir, "too long once expanded");
        return -1;
    }
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        warn_once("cannot create", dir, ot_errno_name(errno));
        return -1;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        warn_once("cannot open", dir, errno == ELOOP || errno == ENOTDIR ? "not a directory (a symlink?)" : ot_errno_name(errno));
        return -1;
    }
    struct stat st;
    const char *why = NULL;
    if (fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode)) why = "not a directory";
    else if (own_default && st.st_uid != uid) why = "owned by another user";
    else if (own_default && (st.st_mode & 077)) why = "open to other users (mode is not 0700)";
    else if (!own_default && st.st_uid != uid && st.st_uid != 0) why = "owned by another user";
    else if (!own_default && (st.st_mode & 022) && !(st.st_mode & S_ISVTX)) why = "writable by others and not sticky";
    if (why) {
        warn_once("refusing state directory", dir, why);
        close(fd);
        return -1;
    }
    return fd;
}

/* Reserves the file's blocks now: a page first written on a full tmpfs would be a SIGBUS later. */
static bool reserve(int fd, uint64_t bytes)
{
    if (syscall(SYS_fallocate, fd, 0, (off_t)0, (off_t)bytes) == 0) return true;
    if (errno != EOPNOTSUPP && errno != ENOSYS) return false;
    if (ftruncate(fd, (off_t)bytes) != 0) return false;
    static const char zero[4096];
    for (uint64_t at = 0; at < bytes; at += sizeof zero)
        if (pwrite(fd, zero, sizeof zero, (off_t)at) != (ssize_t)sizeof zero) return false;
    return true;
}

/* ------------------------------------------------------------------ gathering */
static int mod_collect(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)arg;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
        g_mod_adds = info->dlpi_adds;
        g_mod_subs = info->dlpi_subs;
    }
    if (g_n_mods >= L.cap[OT_REC_SEC_MODULES]) return 0;
    ot_rec_module_t *m = &g_mods[g_n_mods];
    ot_memset(m, 0, sizeof *m);
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (unsigned i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD) {
            uintptr_t a = info->dlpi_addr + ph->p_vaddr;
            if (a < lo) lo = a;
            if (a + ph->p_memsz > hi) hi = a + ph->p_memsz;
        } else if (ph->p_type == PT_NOTE && !m->build_id_len) {
            const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
            while (p + 12 <= end) {
                const uint32_t *nh = (const uint32_t *)(const void *)p;
                uint32_t namesz = nh[0], descsz = nh[1], type = nh[2];
                const uint8_t *name = p + 12, *desc = name + ((namesz + 3) & ~3u);
                if (namesz > 256 || descsz > 4096 || desc + descsz > end) break;
                if (type == NT_GNU_BUILD_ID && namesz == 4 && !ot_strncmp((const char *)name, "GNU", 4)) {
                    uint32_t n = descsz < sizeof m->build_id ? descsz : (uint32_t)sizeof m->build_id;
                    ot_memcpy(m->build_id, desc, n);
                    m->build_id_len = n;
                    break;
                }
                p = desc + ((descsz + 3) & ~3u);
            }
        }
    }
    if (hi <= lo) return 0;
    m->base = info->dlpi_addr;
    m->start = lo;
    m->end = hi;
    const char *name = info->dlpi_name;
    if (name && name[0] && name[0] != '/' && ot_strncmp(name, "linux-", 6)) {
        /* A relative path (LD_PRELOAD=build/lib.so): made absolute, a post-mortem runs elsewhere. */
        if (getcwd(m->path, sizeof m->path - 2)) {
            size_t n = ot_strlen(m->path);
            m->path[n] = '/';
            ot_strlcpy(m->path + n + 1, name, sizeof m->path - n - 1);
        } else {
            ot_strlcpy(m->path, name, sizeof m->path);
        }
    } else {
        ot_strlcpy(m->path, name && name[0] ? name : g_n_mods == 0 ? ot_state.exe : "[unnamed]", sizeof m->path);
    }
    g_n_mods++;
    return 0;
}

static int mod_count(struct dl_phdr_info *info, size_t size, void *arg)
{
    unsigned long long *c = arg;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
        c[0] = info->dlpi_adds;
        c[1] = info->dlpi_subs;
    }
    return 1; /* the counters are the same in every entry */
}

static void modules_refresh(bool force)
{
    if (!force) {
        unsigned long long c[2] = {0, 0};
        dl_iterate_phdr(mod_count, c);
        if (c[0] == g_mod_adds && c[1] == g_mod_subs) return;
    }
    g_n_mods = 0;
    dl_iterate_phdr(mod_collect, NULL);
    g_mods_gen++;
}

/* The top call sites by live bytes, host ones then device ones, in one pass over the sites. */
static void sites_scan(void)
{
    static uint32_t ids[2][TOP_PER_CLASS];
    static uint64_t best[2][TOP_PER_CLASS];
    unsigned n[2] = {0, 0};
    uint32_t end = ot_sites_count() + 1;
    for (uint32_t id = 1; id < end; id++) {
        ot_site_info_t si;
        if (!ot_sites_get(id, &si) || si.live_bytes == 0) continue;
        int c = ot_kind_is_device(si.kind);
        if (n[c] == TOP_PER_CLASS && si.live_bytes <= best[c][n[c] - 1]) continue;
        unsigned i = n[c] < TOP_PER_CLASS ? n[c]++ : TOP_PER_CLASS - 1;
        while (i > 0 && best[c][i - 1] < si.live_bytes) {
            best[c][i] = best[c][i - 1];
            ids[c][i] = ids[c][i - 1];
            i--;
        }
        best[c][i] = si.live_bytes;
        ids[c][i] = id;
    }
    unsigned out = 0;
    for (int c = 0; c < 2; c++) {
        for (unsigned i = 0; i < n[c]; i++) {
            ot_site_info_t si;
            if (!ot_sites_get(ids[c][i], &si)) continue;
            ot_rec_site_t *s = &g_sites[out++];
            s->site_id = si.id;
            s->kind = si.kind;
            s->device = si.device;
            s->depth = si.depth < OT_REC_MAX_FRAMES ? si.depth : OT_REC_MAX_FRAMES;
            s->live_bytes = si.live_bytes;
            s->live_count = si.live_count;
            s->peak_bytes = si.peak_bytes;
            s->total_bytes = si.total_bytes;
            s->total_count = si.total_count;
            s->estimated = si.estimated;
            s->reserved = 0;
            for (unsigned k = 0; k < OT_REC_MAX_FRAMES; k++) s->ips[k] = k < s->depth ? si.ips[k] : 0;
        }
    }
    g_n_sites = out;
    g_sites_stamp = ot_clock_ns(CLOCK_REALTIME);
}

static void probe_mem(void)
{
    ot_host_mem_t m;
    ot_probe_host(&m);
    ot_usage_setup(&m);
    g_mem = (ot_rec_host_mem_t){m.mem_total, m.mem_available, m.swap_total, m.swap_free, m.vm_size, m.vm_rss,
                                m.vm_peak, m.vm_data, m.rlimit_as, m.rlimit_data, m.cgroup_limit, m.cgroup_usage,
                                m.cgroup_swap_limit, m.cgroup_version, m.ptr_bits, m.overcommit_memory,
                                ot_clock_ns(CLOCK_REALTIME)};
    ot_strlcpy(g_cgroup_path, m.cgroup_version ? m.cgroup_path : "", sizeof g_cgroup_path);
}

static void sample(uint64_t rt, uint64_t mono)
{
    ot_usage_t u;
    ot_usage_read(&u);
    int64_t h = ot_live_approx_level(0), d = ot_live_approx_level(1);
    /* The process's side of the memory context follows the samples (the rest, once a second). */
    if (u.vm_size >= 0) g_mem.vm_size = u.vm_size;
    if (u.rss >= 0) g_mem.vm_rss = u.rss;
    if (u.vm_size > g_mem.vm_peak) g_mem.vm_peak = u.vm_size;
    if (u.cgroup_usage >= 0) g_mem.cgroup_usage = u.cgroup_usage;
    ot_rec_sample_t *s = &g_hist[g_hist_head % L.cap[OT_REC_SEC_HISTORY]];
    *s = (ot_rec_sample_t){rt, mono, h > 0 ? (uint64_t)h : 0, d > 0 ? (uint64_t)d : 0, u.rss, u.cgroup_usage};
    g_hist_head++;
}

/* ------------------------------------------------------------------ writing a frame */
static void copy_large(ot_rec_frame_t *f)
{
    uint64_t head = atomic_load_explicit(&g_large_claim, memory_order_acquire), from = f->large_head;
    uint64_t cap = L.cap[OT_REC_SEC_LARGE] < LARGE_STAGE ? L.cap[OT_REC_SEC_LARGE] : LARGE_STAGE;
    if (head - from > cap) from = head - cap;
    uint64_t i = from;
    for (; i < head; i++) {
        large_stage_t *g = &g_large[i % LARGE_STAGE];
        uint64_t seq = atomic_load_explicit(&g->seq, memory_order_acquire);
        if (seq < i + 1) break; /* still being written: the next update takes it */
        ot_rec_large_t *e = section(f, OT_REC_SEC_LARGE, i);
        if (seq > i + 1) { /* replaced by a later lap before we copied it */
            ot_memset(e, 0, sizeof *e);
            continue;
        }
        e->realtime_ns = g->rt;
        e->mono_ns = g->mono;
        e->size = g->size;
        e->live_host = g->live_host;
        e->live_device = g->live_device;
        e->kind = g->kind;
        e->device = g->device;
        e->site_id = g->site;
        e->depth = 0;
        ot_site_info_t si;
        if (g->site && ot_sites_get(g->site, &si)) {
            e->depth = si.depth < OT_REC_LARGE_FRAMES ? si.depth : OT_REC_LARGE_FRAMES;
            for (unsigned k = 0; k < e->depth; k++) e->ips[k] = si.ips[k];
        }
        for (unsigned k = e->depth; k < OT_REC_LARGE_FRAMES; k++) e->ips[k] = 0;
    }
    f->large_head = i;
}

/* From the process's one ring of failures (failures.c). */
static void copy_failures(ot_rec_frame_t *f)
{
    uint64_t head = ot_failures_head(), from = f->failure_head;
    uint64_t cap = L.cap[OT_REC_SEC_FAILURES] < OT_FAILURE_RING ? L.cap[OT_REC_SEC_FAILURES] : OT_FAILURE_RING;
    if (head - from > cap) from = head - cap;
    uint64_t i = from;
    for (; i < head; i++) {
        ot_failure_note_t n;
        bool ok = ot_failures_get(i, &n);
        if (!ok && ot_failures_head() - i <= OT_FAILURE_RING) break; /* still being written: the next update */
        ot_rec_failure_t *e = section(f, OT_REC_SEC_FAILURES, i);
        ot_memset(e, 0, sizeof *e);
        if (!ok) continue; /* replaced by a later lap before we copied it */
        e->realtime_ns = n.realtime_ns;
        e->mono_ns = n.mono_ns;
        e->size = n.size;
        e->error_code = n.error_code;
        e->device = n.device;
        ot_strlcpy(e->api, n.api, sizeof e->api);
        ot_strlcpy(e->error_name, n.error_name, sizeof e->error_name);
        ot_strlcpy(e->report, n.report, sizeof e->report);
    }
    f->failure_head = i;
}

static void totals_to(ot_rec_totals_t *o, const ot_totals_t *t)
{
    *o = (ot_rec_totals_t){t->bytes, t->count, t->peak_bytes, t->total_bytes, t->total_count};
}

/* One update into the frame not written last. Lock held. */
static void write_frame(void)
{
    uint64_t no = ++g_update_no;
    ot_rec_frame_t *f = frame_at((unsigned)(no & 1));
    uint64_t seq = __atomic_load_n(&f->seq, __ATOMIC_RELAXED);
    /* Odd: being written. An exchange with acquire, so that no store to the frame below can become
     * visible before the odd count (a plain store would need a fence). */
    (void)__atomic_exchange_n(&f->seq, seq + 1, __ATOMIC_ACQ_REL);

    f->update_no = no;
    f->update_realtime_ns = ot_clock_ns(CLOCK_REALTIME);
    f->update_mono_ns = ot_clock_ns(CLOCK_MONOTONIC);
    uint32_t flags = 0;
    if (ot_opt.cuda && ot_cuda_active()) flags |= OT_REC_F_CUDA;
    for (unsigned k = 0; k < OT_KIND_COUNT && k < OT_REC_KINDS; k++) {
        ot_totals_t t;
        ot_live_totals_kind(k, &t);
        if (t.bytes > g_kind_peak[k]) g_kind_peak[k] = t.bytes;
        t.peak_bytes = g_kind_peak[k];
        totals_to(&f->kind[k], &t);
    }
    ot_totals_t t;
    ot_live_totals(false, &t);
    totals_to(&f->host, &t);
    f->kind[OT_KIND_HOST].peak_bytes = t.peak_bytes; /* the class peak, tracked on every change */
    ot_live_totals(true, &t);
    totals_to(&f->device, &t);

    uint64_t hcap = L.cap[OT_REC_SEC_HISTORY], from = f->history_head;
    if (g_hist_head - from > hcap) from = g_hist_head - hcap;
    for (uint64_t i = from; i < g_hist_head; i++)
        *(ot_rec_sample_t *)section(f, OT_REC_SEC_HISTORY, i) = g_hist[i % hcap];
    f->history_head = g_hist_head;
    copy_large(f);
    copy_failures(f);
    if (f->sites_realtime_ns != g_sites_stamp) {
        for (unsigned i = 0; i < g_n_sites; i++) *(ot_rec_site_t *)section(f, OT_REC_SEC_SITES, i) = g_sites[i];
        f->n_sites = g_n_sites;
        f->sites_realtime_ns = g_sites_stamp;
    }
    if (ot_sites_count() >= OT_MAX_SITES) flags |= OT_REC_F_SITES_FULL;
    if (f->modules_gen != g_mods_gen) {
        for (unsigned i = 0; i < g_n_mods; i++) *(ot_rec_module_t *)section(f, OT_REC_SEC_MODULES, i) = g_mods[i];
        f->n_modules = g_n_mods;
        f->modules_gen = g_mods_gen;
    }
    f->mem = g_mem;
    ot_pressure_info_t pi;
    ot_pressure_info(&pi);
    f->pressure = (ot_rec_pressure_t){pi.threshold, pi.limit_kind, pi.steps_reported, pi.limit, pi.usage, pi.next_step};
    f->cgroup_peak = -1;
    f->reports_written = atomic_load_explicit(&g_reports, memory_order_relaxed);
    f->failures_seen = (uint32_t)ot_report_failures_total();
    ot_strlcpy(f->last_report, g_last_report, sizeof f->last_report);
    f->flags = flags;

    __atomic_store_n(&f->seq, seq + 2, __ATOMIC_RELEASE); /* even: complete */
}

/* The periodic parts, then a frame. Lock held. force: all of them now (a failure, a snapshot). */
static void update(uint64_t now_coarse, bool force)
{
    uint64_t mono = ot_clock_ns(CLOCK_MONOTONIC);
    if (force) g_next_sample_ns = g_next_sites_ns = 0;
    if (mono >= g_next_probe_ns) {
        probe_mem();
        g_next_probe_ns = mono + PROBE_EVERY_NS;
    }
    int64_t level = ot_live_approx_level(0) + ot_live_approx_level(1), moved = level - g_sample_level;
    if (moved < 0) moved = -moved;
    uint64_t since = mono - g_last_sample_ns;
    if (mono >= g_next_sample_ns || (moved >= SAMPLE_BYTES && since >= SAMPLE_EVERY_NS / 10) ||
        (moved >= (256 << 10) && since >= UPDATE_EVERY_NS)) {
        sample(ot_clock_ns(CLOCK_REALTIME), mono);
        g_next_sample_ns = mono + SAMPLE_EVERY_NS;
        g_last_sample_ns = mono;
        g_sample_level = level;
        ot_pressure_poll(ot_live_approx_level(0));
    }
    if (mono >= g_next_modcheck_ns) {
        modules_refresh(false);
        g_next_modcheck_ns = mono + MODCHECK_EVERY_NS;
    }
    if (mono >= g_next_sites_ns) {
        sites_scan();
        /* A scan costs at most 2% of the time between scans. */
        uint64_t took = ot_clock_ns(CLOCK_MONOTONIC) - mono;
        g_next_sites_ns = mono + (took * 50 > SITES_EVERY_NS ? took * 50 : SITES_EVERY_NS);
    }
    write_frame();
    atomic_store_explicit(&g_last_ns, now_coarse, memory_order_relaxed);
    atomic_store_explicit(&g_last_level, ot_live_approx_level(0) + ot_live_approx_level(1), memory_order_relaxed);
}

static bool stage_alloc(void)
{
    if (!g_sites) g_sites = ot_mmap(sizeof(ot_rec_site_t) * L.cap[OT_REC_SEC_SITES]);
    if (!g_hist) g_hist = ot_mmap(sizeof(ot_rec_sample_t) * L.cap[OT_REC_SEC_HISTORY]);
    if (!g_mods) g_mods = ot_mmap(sizeof(ot_rec_module_t) * L.cap[OT_REC_SEC_MODULES]);
    return g_sites && g_hist && g_mods;
}

/* Creates the file. Lock held; state was RS_WAITING. */
static void create(pid_t pid)
{
    if (!stage_alloc()) return;
    char dir[512];
    int dfd = open_state_dir(dir, sizeof dir);
    if (dfd < 0) {
        atomic_store(&g_state, RS_OFF);
        return;
    }
    uint64_t start = read_start_time();
    char name[96];
    ot_buf_t b;
    ot_buf_init(&b, name, sizeof name, -1);
    ot_buf_printf(&b, OT_REC_NAME_PREFIX "%d-%llu" OT_REC_NAME_SUFFIX, (int)pid, (unsigned long long)start);
    ot_buf_cstr(&b);
    uint32_t exec_count = 1;
    int fd = -1;
    for (int attempt = 0; attempt < 2 && fd < 0; attempt++) {
        fd = openat(dfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 || errno != EEXIST || attempt) break;
        /* Our own name: pid + start time name this very process, so the file is an earlier image's
         * of ours (an exec the hooks did not see). Replace it if it is a plain file of ours. */
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid())
            break;
        if (unlinkat(dfd, name, 0) != 0) break;
        exec_count = 2;
    }
    if (fd < 0) {
        ot_buf_init(&b, g_path, sizeof g_path, -1);
        ot_buf_printf(&b, "%s/%s", dir, name);
        warn_once("cannot create", ot_buf_cstr(&b), errno == EEXIST ? "the name is taken" : ot_errno_name(errno));
        close(dfd);
        atomic_store(&g_state, RS_OFF);
        return;
    }
    ot_buf_init(&b, g_path, sizeof g_path, -1);
    ot_buf_printf(&b, "%s/%s", dir, name);
    ot_buf_cstr(&b);
    void *map = MAP_FAILED;
    int err = 0;
    if (!reserve(fd, L.total)) err = errno;
    else if ((map = mmap(NULL, L.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) err = errno;
    close(fd);
    if (map == MAP_FAILED) {
        unlinkat(dfd, name, 0);
        close(dfd);
        warn_once("cannot map", g_path, ot_errno_name(err));
        g_path[0] = 0;
        atomic_store(&g_state, RS_OFF);
        return;
    }
    close(dfd);
    madvise(map, L.total, MADV_DONTFORK); /* a fork child writes its own file, never this one */
    g_map = map;
    g_map_bytes = L.total;
    g_pid = pid;
    g_update_no = 0;
    probe_mem();
    fill_identity(file_head(), pid, start, exec_count);
    modules_refresh(true);
    sites_scan();
    uint64_t mono = ot_clock_ns(CLOCK_MONOTONIC);
    g_next_probe_ns = mono + PROBE_EVERY_NS;
    g_next_modcheck_ns = mono + MODCHECK_EVERY_NS;
    g_next_sites_ns = mono + SITES_EVERY_NS;
    g_next_sample_ns = 0;
    int expected = RS_WAITING;
    if (!atomic_compare_exchange_strong(&g_state, &expected, RS_LIVE)) {
        unlink(g_path); /* closed meanwhile (exit, exec) */
        return;
    }
    update(ot_clock_ns(CLOCK_MONOTONIC_COARSE), false);
    if (ot_opt.verbose) ot_warn("flight recorder: %s", g_path);
}

/* ------------------------------------------------------------------ entry points */
static OT_NOINLINE void slow(int st, uint64_t now, bool force)
{
    if (!lock_try()) return;
    int e = errno;
    ot_in_hook++;
    pid_t pid = (pid_t)syscall(SYS_getpid);
    /* Only the process the library's state belongs to: never a vfork child sharing our memory, nor
     * a child forked by a raw system call (no atfork handler ran: the parent's state). */
    if (pid == ot_state.pid) {
        st = atomic_load(&g_state);
        if (st == RS_WAITING) create(pid);
        else if (st == RS_LIVE && pid == g_pid) update(now, force);
    }
    ot_in_hook--;
    errno = e;
    lock_drop();
}

void ot_recorder_on_level(int cls, int64_t level)
{
    int st = atomic_load_explicit(&g_state, memory_order_relaxed);
    if (OT_LIKELY(st == RS_LIVE)) {
        int64_t total = level + ot_live_approx_level(!cls);
        int64_t moved = total - atomic_load_explicit(&g_last_level, memory_order_relaxed);
        uint64_t now = ot_clock_ns(CLOCK_MONOTONIC_COARSE);
        if (now - atomic_load_explicit(&g_last_ns, memory_order_relaxed) < UPDATE_EVERY_NS && moved < UPDATE_BYTES &&
            moved > -UPDATE_BYTES)
            return;
        slow(st, now, false);
    } else if (st == RS_WAITING) {
        if (level + ot_live_approx_level(!cls) < g_min_level) return;
        slow(st, 0, false);
    }
}

void ot_recorder_large(uint64_t size, unsigned kind, int device, uint32_t site)
{
    if (atomic_load_explicit(&g_state, memory_order_relaxed) == RS_OFF) return;
    uint64_t i = atomic_fetch_add_explicit(&g_large_claim, 1, memory_order_relaxed);
    large_stage_t *g = &g_large[i % LARGE_STAGE];
    (void)atomic_exchange_explicit(&g->seq, 0, memory_order_acq_rel); /* incomplete before any field changes */
    g->rt = ot_clock_ns(CLOCK_REALTIME_COARSE);
    g->mono = ot_clock_ns(CLOCK_MONOTONIC_COARSE);
    g->size = size;
    int64_t h = ot_live_approx_level(0), d = ot_live_approx_level(1);
    g->live_host = h > 0 ? (uint64_t)h : 0;
    g->live_device = d > 0 ? (uint64_t)d : 0;
    g->kind = kind;
    g->site = site;
    g->device = device;
    atomic_store_explicit(&g->seq, i + 1, memory_order_release);
}

void ot_recorder_failure(void)
{
    if (atomic_load_explicit(&g_state, memory_order_relaxed) == RS_OFF) return;
    /* Written down now; a failing loop at most every 10 ms (its later failures with the next update). */
    static _Atomic uint64_t last_ns;
    uint64_t now = ot_clock_ns(CLOCK_MONOTONIC_COARSE), was = atomic_load_explicit(&last_ns, memory_order_relaxed);
    if (atomic_load(&g_state) == RS_LIVE && (was == 0 || now - was >= 10000000ull)) {
        atomic_store_explicit(&last_ns, now ? now : 1, memory_order_relaxed);
        slow(RS_LIVE, now, false);
    }
}

void ot_recorder_note_report(const char *path)
{
    atomic_fetch_add_explicit(&g_reports, 1, memory_order_relaxed);
    if (path && path[0]) ot_strlcpy(g_last_report, path, sizeof g_last_report);
}

void ot_recorder_update_now(void)
{
    if (atomic_load(&g_state) != RS_LIVE) return;
    slow(RS_LIVE, ot_clock_ns(CLOCK_MONOTONIC_COARSE), true);
}

const char *ot_recorder_path(void)
{
    return atomic_load(&g_state) == RS_LIVE ? g_path : "";
}

/* Removes the file; state becomes `next`. Not in a vfork child (our memory, the parent's file). */
static void remove_file(int next)
{
    if ((pid_t)syscall(SYS_getpid) != ot_state.pid) return;
    int e = errno;
    bool locked = lock_wait();
    int st = atomic_exchange(&g_state, next);
    if (st == RS_LIVE && g_map && g_pid == ot_state.pid) {
        unlink(g_path);
        if (next != RS_CLOSED) { /* exec: the mapping goes (exec drops it anyway; failure: anew) */
            munmap(g_map, g_map_bytes);
            g_map = NULL;
        }
    }
    if (st == RS_OFF) atomic_store(&g_state, RS_OFF);
    if (locked) lock_drop();
    errno = e;
}

void ot_recorder_close(void)
{
    if (atomic_load(&g_state) == RS_OFF) return;
    remove_file(RS_CLOSED);
}

void ot_recorder_before_exec(void)
{
    int st = atomic_load(&g_state);
    if (st == RS_WAITING || st == RS_LIVE) remove_file(RS_EXEC);
}

void ot_recorder_exec_failed(void)
{
    int expected = RS_EXEC;
    atomic_compare_exchange_strong(&g_state, &expected, RS_WAITING);
}

void ot_recorder_atfork_child(void)
{
    /* Only this thread runs now. The parent's mapping was not inherited (MADV_DONTFORK); the child
     * gets a file of its own once it holds enough, under its own pid and start time. */
    g_lock = 0;
    g_map = NULL;
    g_path[0] = 0;
    g_hist_head = 0;
    g_update_no = 0;
    int st = atomic_load(&g_state);
    if (st == RS_LIVE || st == RS_EXEC) atomic_store(&g_state, RS_WAITING);
}

/* This process's parent is the launcher's supervisor. */
static bool supervised_child(void)
{
    int32_t sp = supervisor_pid();
    return sp > 0 && sp == (int32_t)getppid();
}

void ot_recorder_init(void)
{
    if (!ot_opt.recorder) return;
    layout(ot_opt.recorder_bytes);
    uint64_t large = ot_opt.stack_min_bytes > OT_RECORDER_LARGE_BYTES ? ot_opt.stack_min_bytes : OT_RECORDER_LARGE_BYTES;
    ot_recorder_large_min = large < OT_SIZE_BIG ? large : OT_SIZE_BIG;
    g_min_level = ot_opt.recorder_min_bytes > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)ot_opt.recorder_min_bytes;
    atomic_store(&g_state, RS_WAITING);
    /* The launcher's child, asked for a final report or a leak check, gets its file at once, whatever
     * it holds: the exit path removes it after them, so a file still there when the child has exited
     * with a status tells the supervisor they never ran (the Go runtime ends by the exit_group system
     * call itself: ot_pm_after_exit). One file per launcher run; its other processes wait as before. */
    if ((ot_opt.leak_check || ot_opt.report_at_exit) && supervised_child()) {
        g_min_level = 0;
        slow(RS_WAITING, 0, false);
    }
}
