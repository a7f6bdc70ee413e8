/* The pressure watch: one report (event "pressure") when the process's memory crosses pressure= of
 * the tightest limit that would kill it (cgroup memory limit, RLIMIT_AS, MemTotal + SwapTotal), again
 * at each further step, three at most. Also the cheap usage readings the recorder samples.
 * Runs on the allocation path (live.c's level flush): no malloc, no lock waited on; the hot check is
 * one compare against ot_pressure_trigger, a host live-bytes level derived from the last reading. */
#include <errno.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "recorder_format.h"

int64_t ot_pressure_trigger = INT64_MAX;

#define ARM_LEVEL (8ll << 20)       /* live host bytes before the watch reads anything */
#define LIMITS_EVERY_NS 1000000000ull /* limits reread at most once a second */
#define READ_EVERY_NS 4000000ull    /* usage reread at most every 4 ms (a coarse clock tick) */
#define RECHECK_BYTES (64ll << 20)  /* heap growth that forces a new reading even far from a limit */
#define MIN_STEP_BYTES (256ll << 10)

static struct {
    int lock;
    pid_t pid;            /* the process the steps belong to (a fork child starts again) */
    double steps[3];
    unsigned next;        /* index of the next step; 3: all reported */
    uint64_t limits_ns, read_ns;
    int64_t limit[3];     /* indexed by OT_REC_LIMIT_* - 1; -1 none */
    int64_t usage[3];
    unsigned kind;        /* OT_REC_LIMIT_* of the tightest at the last reading */
    double frac;
    unsigned reported;
} P;

/* cgroup files found by the last limits read: usage, and memory.stat for the inactive file cache. */
static char cg_usage_path[600], cg_stat_path[600];
static int cg_version;


static int64_t parse_i64(const char *p)
{
    int64_t v = 0;
    bool any = false;
    while (*p >= '0' && *p <= '9' && v < INT64_MAX / 16) v = v * 10 + (*p++ - '0'), any = true;
    return any ? v : -1;
}

void ot_usage_read(ot_usage_t *u)
{
    char buf[128];
    long page = sysconf(_SC_PAGESIZE);
    u->vm_size = u->rss = u->cgroup_usage = -1;
    if (ot_read_file("/proc/self/statm", buf, sizeof buf) > 0) {
        const char *p = buf;
        int64_t size = parse_i64(p);
        while (*p && *p != ' ') p++;
        while (*p == ' ') p++;
        int64_t rss = parse_i64(p);
        if (size >= 0) u->vm_size = size * page;
        if (rss >= 0) u->rss = rss * page;
    }
    int64_t cg = cg_usage_path[0] ? ot_read_cg_value(cg_usage_path) : -1;
    u->cgroup_usage = cg >= 0 ? cg : -1;
}

static void join3(char *out, size_t cap, const char *a, const char *b, const char *c)
{
    ot_buf_t bf;
    ot_buf_init(&bf, out, cap, -1);
    ot_buf_puts(&bf, a);
    ot_buf_puts(&bf, b);
    ot_buf_puts(&bf, c);
    ot_buf_cstr(&bf);
}

/* Where the cgroup's usage is read from: the directory memprobe.c read it from (m). */
void ot_usage_setup(const ot_host_mem_t *m)
{
    cg_version = m->cgroup_version;
    cg_usage_path[0] = cg_stat_path[0] = 0;
    if (!m->cgroup_version || !m->cgroup_dir[0]) return;
    join3(cg_usage_path, sizeof cg_usage_path, m->cgroup_dir,
          m->cgroup_version == 1 ? "/memory.usage_in_bytes" : "/memory.current", "");
    join3(cg_stat_path, sizeof cg_stat_path, m->cgroup_dir, "/memory.stat", "");
}

void ot_pressure_steps(double p, double out[3])
{
    /* 0.9 -> 0.9, 0.95, 0.99; 0.8 -> 0.8, 0.9, 0.98 */
    out[0] = p;
    out[1] = p + (1 - p) / 2;
    out[2] = p + (1 - p) * 0.9;
}

unsigned ot_pressure_tightest(const int64_t limit[3], const int64_t usage[3], double *frac)
{
    unsigned best = OT_REC_LIMIT_NONE;
    double bf = -1;
    for (unsigned i = 0; i < 3; i++) {
        if (limit[i] <= 0 || usage[i] < 0) continue;
        double f = (double)usage[i] / (double)limit[i];
        if (f > bf) bf = f, best = i + 1;
    }
    *frac = bf < 0 ? 0 : bf;
    return best;
}

int64_t ot_pressure_next_trigger(int64_t host_level, const int64_t limit[3], const int64_t usage[3], double step)
{
    int64_t head = RECHECK_BYTES;
    for (unsigned i = 0; i < 3; i++) {
        if (limit[i] <= 0 || usage[i] < 0) continue;
        int64_t room = (int64_t)(step * (double)limit[i]) - usage[i];
        if (room < head) head = room;
    }
    if (head < MIN_STEP_BYTES) head = MIN_STEP_BYTES;
    return host_level + head;
}

static void read_limits(void)
{
    ot_host_mem_t m;
    ot_probe_host(&m);
    ot_usage_setup(&m);
    P.limit[OT_REC_LIMIT_CGROUP - 1] = m.cgroup_limit;
    P.limit[OT_REC_LIMIT_AS - 1] = m.rlimit_as;
    P.limit[OT_REC_LIMIT_RAM - 1] =
        m.mem_total > 0 ? m.mem_total + (m.swap_total > 0 ? m.swap_total : 0) : -1;
}

static void read_usage(void)
{
    ot_usage_t u;
    ot_usage_read(&u);
    int64_t cg = u.cgroup_usage;
    /* Page cache the kernel would reclaim before it kills: a cgroup usage near its limit is
     * checked without its inactive file pages (kubelet's working set), read only then. */
    int64_t cl = P.limit[OT_REC_LIMIT_CGROUP - 1];
    if (cg > 0 && cl > 0 && (double)cg >= P.steps[P.next < 3 ? P.next : 2] * (double)cl && cg_stat_path[0]) {
        char buf[4096];
        if (ot_read_file(cg_stat_path, buf, sizeof buf) > 0) {
            int64_t inact = ot_cgstat_field(buf, cg_version == 1 ? "total_inactive_file" : "inactive_file");
            if (inact > 0 && inact < cg) cg -= inact;
        }
    }
    P.usage[OT_REC_LIMIT_CGROUP - 1] = cg;
    P.usage[OT_REC_LIMIT_AS - 1] = u.vm_size;
    P.usage[OT_REC_LIMIT_RAM - 1] = u.rss;
}

static const char *limit_name(unsigned kind)
{
    switch (kind) {
    case OT_REC_LIMIT_CGROUP: return cg_version == 2 ? "the cgroup's memory.max" : "the cgroup's memory.limit_in_bytes";
    case OT_REC_LIMIT_AS: return "RLIMIT_AS";
    case OT_REC_LIMIT_RAM: return "MemTotal + SwapTotal";
    default: return "no limit";
    }
}

static const char *usage_name(unsigned kind)
{
    switch (kind) {
    case OT_REC_LIMIT_CGROUP: return "cgroup usage";
    case OT_REC_LIMIT_AS: return "VmSize";
    default: return "VmRSS";
    }
}

/* One reading and what follows from it. Lock held. */
static void check(int64_t host_level, uint64_t now)
{
    pid_t pid = (pid_t)syscall(SYS_getpid);
    if (pid != P.pid) { /* a fork child's own steps (a vfork child never gets here: ot_state.pid) */
        if (pid != ot_state.pid) return;
        P.pid = pid;
        P.next = 0;
        P.reported = 0;
        P.limits_ns = 0;
    }
    if (!P.limits_ns || now - P.limits_ns >= LIMITS_EVERY_NS) {
        read_limits();
        P.limits_ns = now ? now : 1;
    }
    read_usage();
    P.read_ns = now;
    P.kind = ot_pressure_tightest(P.limit, P.usage, &P.frac);
    if (P.next < 3 && P.kind != OT_REC_LIMIT_NONE && P.frac >= P.steps[P.next]) {
        unsigned step = P.next;
        while (P.next < 3 && P.frac >= P.steps[P.next]) P.next++;
        P.reported++;
        unsigned k = P.kind - 1;
        char reason[400];
        ot_buf_t b;
        ot_buf_init(&b, reason, sizeof reason, -1);
        unsigned pct10 = (unsigned)(P.frac * 1000 + 0.5);
        ot_buf_printf(&b, "memory at %u.%u%% of %s (", pct10 / 10, pct10 % 10, limit_name(P.kind));
        ot_buf_puts(&b, usage_name(P.kind));
        ot_buf_putc(&b, ' ');
        ot_buf_bytes(&b, (uint64_t)P.usage[k]);
        ot_buf_puts(&b, " of ");
        ot_buf_bytes(&b, (uint64_t)P.limit[k]);
        ot_buf_printf(&b, "), crossing the pressure=%u%% step", (unsigned)(P.steps[step] * 100 + 0.5));
        if (P.next < 3) ot_buf_printf(&b, "; next report at %u%%", (unsigned)(P.steps[P.next] * 100 + 0.5));
        else ot_buf_puts(&b, "; the last pressure report");
        ot_pressure_event_t ev = {limit_name(P.kind), usage_name(P.kind), P.limit[k], P.usage[k], P.frac,
                                  P.steps[step], P.next < 3 ? P.steps[P.next] : 0};
        ot_report_pressure(&ev, ot_buf_cstr(&b));
    }
    int64_t t = P.next < 3 ? ot_pressure_next_trigger(host_level, P.limit, P.usage, P.steps[P.next]) : INT64_MAX;
    __atomic_store_n(&ot_pressure_trigger, t, __ATOMIC_RELAXED);
}

void ot_pressure_crossed(int64_t host_level)
{
    if (__atomic_exchange_n(&P.lock, 1, __ATOMIC_ACQUIRE)) return; /* another thread is looking */
    int e = errno;
    ot_in_hook++;
    uint64_t now = ot_clock_ns(CLOCK_MONOTONIC_COARSE);
    if (P.read_ns && now - P.read_ns < READ_EVERY_NS && P.pid == (pid_t)syscall(SYS_getpid)) {
        /* Read a moment ago: look again a little further on rather than reading at every flush. */
        __atomic_store_n(&ot_pressure_trigger, host_level + MIN_STEP_BYTES, __ATOMIC_RELAXED);
    } else {
        check(host_level, now);
    }
    ot_in_hook--;
    errno = e;
    __atomic_store_n(&P.lock, 0, __ATOMIC_RELEASE);
}

void ot_pressure_poll(int64_t host_level)
{
    if (__atomic_load_n(&ot_pressure_trigger, __ATOMIC_RELAXED) == INT64_MAX || host_level < ARM_LEVEL) return;
    ot_pressure_crossed(host_level);
}

void ot_pressure_init(void)
{
    if (ot_opt.pressure <= 0) return;
    ot_pressure_steps(ot_opt.pressure, P.steps);
    P.pid = ot_state.pid;
    __atomic_store_n(&ot_pressure_trigger, ARM_LEVEL, __ATOMIC_RELAXED);
}

void ot_pressure_atfork_child(void)
{
    P.lock = 0;
    /* The child's own steps: it is a new process for the limits it may hit. */
    P.pid = ot_state.pid;
    P.next = 0;
    P.reported = 0;
    P.read_ns = P.limits_ns = 0;
    if (ot_opt.pressure > 0) __atomic_store_n(&ot_pressure_trigger, ARM_LEVEL, __ATOMIC_RELAXED);
}

void ot_pressure_info(ot_pressure_info_t *out)
{
    out->threshold = ot_opt.pressure;
    out->limit_kind = P.kind;
    out->steps_reported = P.reported;
    out->limit = P.kind ? P.limit[P.kind - 1] : -1;
    out->usage = P.kind ? P.usage[P.kind - 1] : -1;
    out->next_step = P.next < 3 && ot_opt.pressure > 0 ? P.steps[P.next] : 0;
}
