/* What fills the cgroup when its memory limit binds: memory.stat broken down (anonymous, file cache,
 * kernel, shared memory, swap; cgroup v1 and v2 name them differently) and the cgroup's processes
 * with their RSS. Raw reads into static buffers only: runs on the failure path, no malloc. */
#include <stdint.h>

#include "internal.h"

static char stat_mem[16384];
static char procs_mem[32768];

/* "key value" lines (memory.stat): the value of key, or -1. */
int64_t ot_cgstat_field(const char *text, const char *key)
{
    size_t kl = ot_strlen(key);
    for (const char *l = text; *l;) {
        if (!ot_strncmp(l, key, kl) && l[kl] == ' ') {
            const char *p = l + kl + 1;
            int64_t v = 0;
            bool any = false;
            while (*p >= '0' && *p <= '9') v = v * 10 + (*p++ - '0'), any = true;
            return any ? v : -1;
        }
        while (*l && *l != '\n') l++;
        if (*l) l++;
    }
    return -1;
}

static int64_t sum_known(const int64_t *v, unsigned n)
{
    int64_t s = -1;
    for (unsigned i = 0; i < n; i++)
        if (v[i] >= 0) s = (s < 0 ? 0 : s) + v[i];
    return s;
}

void ot_cg_stat_parse(const char *text, int version, ot_cg_usage_t *u)
{
    u->version = version;
    if (version == 1) {
        /* v1: the total_* lines count the whole subtree (the limit binds on it); the plain ones
         * only this cgroup's own pages. rss is anonymous memory (and swap cache), cache the page
         * cache with shmem in it. Kernel memory is a file of its own (memory.kmem.usage_in_bytes). */
        bool tot = ot_cgstat_field(text, "total_rss") >= 0;
        u->anon = ot_cgstat_field(text, tot ? "total_rss" : "rss");
        u->file = ot_cgstat_field(text, tot ? "total_cache" : "cache");
        u->shmem = ot_cgstat_field(text, tot ? "total_shmem" : "shmem");
        u->file_mapped = ot_cgstat_field(text, tot ? "total_mapped_file" : "mapped_file");
        u->swap = ot_cgstat_field(text, tot ? "total_swap" : "swap");
        return;
    }
    /* v2: "kernel" since Linux 5.18; before, its parts. file includes shmem, as in v1. Swap is
     * memory.swap.current. */
    u->anon = ot_cgstat_field(text, "anon");
    u->file = ot_cgstat_field(text, "file");
    u->shmem = ot_cgstat_field(text, "shmem");
    u->file_mapped = ot_cgstat_field(text, "file_mapped");
    u->kernel = ot_cgstat_field(text, "kernel");
    if (u->kernel < 0) {
        int64_t parts[] = {ot_cgstat_field(text, "kernel_stack"), ot_cgstat_field(text, "pagetables"),
                           ot_cgstat_field(text, "percpu"),       ot_cgstat_field(text, "sock"),
                           ot_cgstat_field(text, "slab"),         ot_cgstat_field(text, "vmalloc")};
        u->kernel = sum_known(parts, sizeof parts / sizeof parts[0]);
    }
}

static int64_t read_number(const char *path)
{
    int64_t v = ot_read_cg_value(path);
    return v >= 0 ? v : -1;
}

static void join(char *out, size_t cap, const char *a, const char *b)
{
    ot_buf_t buf;
    ot_buf_init(&buf, out, cap, -1);
    ot_buf_puts(&buf, a);
    ot_buf_puts(&buf, b);
    ot_buf_cstr(&buf);
}

/* Name and VmRSS of /proc/PID/status; false when the process is gone. */
static bool proc_rss(int pid, char *name, size_t cap, int64_t *rss)
{
    char path[64], buf[2048];
    ot_buf_t b;
    ot_buf_init(&b, path, sizeof path, -1);
    ot_buf_printf(&b, "/proc/%d/status", pid);
    ot_buf_cstr(&b);
    if (ot_read_file(path, buf, sizeof buf) <= 0) return false;
    name[0] = 0;
    *rss = 0; /* kernel threads and zombies have no VmRSS line */
    for (const char *l = buf; *l;) {
        if (!ot_strncmp(l, "Name:", 5)) {
            const char *p = l + 5;
            while (*p == ' ' || *p == '\t') p++;
            size_t n = 0;
            while (p[n] && p[n] != '\n' && n + 1 < cap) n++;
            ot_memcpy(name, p, n);
            name[n] = 0;
        } else if (!ot_strncmp(l, "VmRSS:", 6)) {
            const char *p = l + 6;
            while (*p == ' ' || *p == '\t') p++;
            int64_t v = 0;
            while (*p >= '0' && *p <= '9') v = v * 10 + (*p++ - '0');
            *rss = v * 1024;
        }
        while (*l && *l != '\n') l++;
        if (*l) l++;
    }
    return true;
}

static void add_proc(ot_cg_usage_t *u, int pid, const char *name, int64_t rss, bool self)
{
    unsigned at = u->nprocs;
    while (at > 0 && u->procs[at - 1].rss < rss) at--;
    if (at >= OT_CG_PROCS) return;
    unsigned last = u->nprocs < OT_CG_PROCS ? u->nprocs : OT_CG_PROCS - 1;
    for (unsigned j = last; j > at; j--) u->procs[j] = u->procs[j - 1];
    u->procs[at].pid = pid;
    ot_strlcpy(u->procs[at].name, name, sizeof u->procs[at].name);
    u->procs[at].rss = rss;
    u->procs[at].self = self;
    if (u->nprocs < OT_CG_PROCS) u->nprocs++;
}

void ot_cg_procs_parse(const char *pids, int self_pid, ot_cg_usage_t *u)
{
    for (const char *p = pids; *p;) {
        int pid = 0;
        while (*p >= '0' && *p <= '9') pid = pid * 10 + (*p++ - '0');
        while (*p && (*p < '0' || *p > '9')) p++;
        if (pid <= 0) continue;
        u->procs_total++;
        if (u->procs_read >= OT_CG_PROCS_READ && pid != self_pid) continue; /* bounded work */
        char name[32];
        int64_t rss;
        if (!proc_rss(pid, name, sizeof name, &rss)) continue;
        u->procs_read++;
        if (pid == self_pid) u->self_rss = rss;
        else u->others_rss += rss;
        add_proc(u, pid, name, rss, pid == self_pid);
    }
}

bool ot_cg_usage_read(const char *dir, int version, int self_pid, ot_cg_usage_t *u)
{
    ot_memset(u, 0, sizeof *u);
    u->anon = u->file = u->kernel = u->shmem = u->swap = u->file_mapped = -1;
    u->self_rss = -1;
    if (!dir || !dir[0] || !version) return false;
    char path[400];
    join(path, sizeof path, dir, "/memory.stat");
    if (ot_read_file(path, stat_mem, sizeof stat_mem) <= 0) return false;
    ot_cg_stat_parse(stat_mem, version, u);
    if (version == 1) {
        join(path, sizeof path, dir, "/memory.kmem.usage_in_bytes");
        u->kernel = read_number(path);
    } else {
        join(path, sizeof path, dir, "/memory.swap.current");
        u->swap = read_number(path);
    }
    join(path, sizeof path, dir, "/cgroup.procs");
    if (ot_read_file(path, procs_mem, sizeof procs_mem) > 0) ot_cg_procs_parse(procs_mem, self_pid, u);
    u->known = true;
    return true;
}
