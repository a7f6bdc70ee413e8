/* Host memory context read at the moment of a failure: /proc/meminfo, /proc/self/status, rlimits and
 * the cgroup (v2 or v1) memory controller. Stack buffers and raw reads only: the heap may be full. */
#include <sys/resource.h>

#include "internal.h"

/* Finds "Key:   1234 kB" in a /proc text and returns bytes, or -1. */
static int64_t kb_field(const char *text, const char *key)
{
    size_t kl = ot_strlen(key);
    for (const char *l = text; l && *l;) {
        if (!ot_strncmp(l, key, kl) && l[kl] == ':') {
            const char *p = l + kl + 1;
            while (*p == ' ' || *p == '\t') p++;
            int64_t v = 0;
            bool any = false;
            while (*p >= '0' && *p <= '9') v = v * 10 + (*p++ - '0'), any = true;
            if (!any) return -1;
            while (*p == ' ') p++;
            return *p == 'k' ? v * 1024 : v;
        }
        while (*l && *l != '\n') l++;
        if (*l) l++;
    }
    return -1;
}

/* Reads a cgroup value file: a number, or "max" (unlimited, -1). Values near 2^63 are v1's "unlimited". */
int64_t ot_read_cg_value(const char *path)
{
    char buf[64];
    if (ot_read_file(path, buf, sizeof buf) <= 0) return -2; /* absent */
    if (!ot_strncmp(buf, "max", 3)) return -1;
    int64_t v = 0;
    const char *p = buf;
    if (*p < '0' || *p > '9') return -2;
    while (*p >= '0' && *p <= '9') {
        if (v > INT64_MAX / 10 - 10) return -1;
        v = v * 10 + (*p++ - '0');
    }
    if (v >= (INT64_C(1) << 62)) return -1;
    return v;
}

static void join(char *out, size_t cap, const char *a, const char *b, const char *c)
{
    ot_buf_t buf;
    ot_buf_init(&buf, out, cap, -1);
    ot_buf_puts(&buf, a);
    ot_buf_puts(&buf, b);
    ot_buf_puts(&buf, c);
    ot_buf_cstr(&buf);
}

/* The tightest limit on the way from the process's cgroup up to the root of the visible hierarchy
 * (inside a container the root is the container's own cgroup). */
static void probe_cgroup_v2(ot_host_mem_t *m, const char *rel)
{
    char dir[512], path[600];
    ot_strlcpy(dir, rel, sizeof dir);
    bool found_any = false;
    for (;;) {
        join(path, sizeof path, "/sys/fs/cgroup", dir, "/memory.max");
        int64_t lim = ot_read_cg_value(path);
        if (lim != -2) {
            if (!found_any) {
                join(path, sizeof path, "/sys/fs/cgroup", dir, "/memory.current");
                m->cgroup_usage = ot_read_cg_value(path);
                if (m->cgroup_usage < 0) m->cgroup_usage = -1;
                join(path, sizeof path, "/sys/fs/cgroup", dir, "/memory.swap.max");
                int64_t sw = ot_read_cg_value(path);
                m->cgroup_swap_limit = sw >= 0 ? sw : -1;
                join(m->cgroup_dir, sizeof m->cgroup_dir, "/sys/fs/cgroup", dir, "");
                found_any = true;
            }
            if (lim >= 0 && (m->cgroup_limit < 0 || lim < m->cgroup_limit)) m->cgroup_limit = lim;
        }
        size_t n = ot_strlen(dir);
        if (n <= 1) break;
        while (n > 0 && dir[n - 1] != '/') n--;
        dir[n > 1 ? n - 1 : 1] = 0;
        if (n <= 1) dir[0] = 0;
        if (!dir[0]) {
            /* the root itself has no memory.max; stop */
            break;
        }
    }
    if (found_any) {
        m->cgroup_version = 2;
        ot_strlcpy(m->cgroup_path, rel[0] ? rel : "/", sizeof m->cgroup_path);
    }
}

static void probe_cgroup_v1(ot_host_mem_t *m, const char *rel)
{
    char path[600];
    join(path, sizeof path, "/sys/fs/cgroup/memory", rel, "/memory.limit_in_bytes");
    int64_t lim = ot_read_cg_value(path);
    const char *used_rel = rel;
    if (lim == -2) { /* inside a container the controller root is the container's cgroup */
        used_rel = "";
        lim = ot_read_cg_value("/sys/fs/cgroup/memory/memory.limit_in_bytes");
    }
    if (lim == -2) return;
    m->cgroup_version = 1;
    m->cgroup_limit = lim;
    join(path, sizeof path, "/sys/fs/cgroup/memory", used_rel, "/memory.usage_in_bytes");
    int64_t u = ot_read_cg_value(path);
    m->cgroup_usage = u >= 0 ? u : -1;
    join(m->cgroup_dir, sizeof m->cgroup_dir, "/sys/fs/cgroup/memory", used_rel, "");
    ot_strlcpy(m->cgroup_path, rel[0] ? rel : "/", sizeof m->cgroup_path);
}

static void probe_cgroup(ot_host_mem_t *m)
{
    char buf[2048];
    if (ot_read_file("/proc/self/cgroup", buf, sizeof buf) <= 0) return;
    char v2[512] = "", v1[512] = "";
    bool have_v2 = false, have_v1 = false;
    for (char *l = buf; *l;) {
        char *e = l;
        while (*e && *e != '\n') e++;
        char save = *e;
        *e = 0;
        /* "hierarchy-id:controllers:path" */
        char *c1 = l;
        while (*c1 && *c1 != ':') c1++;
        if (*c1) {
            char *c2 = c1 + 1;
            while (*c2 && *c2 != ':') c2++;
            if (*c2) {
                *c2 = 0;
                const char *ctrl = c1 + 1, *path = c2 + 1;
                if (!ot_strncmp(l, "0:", 2) && !*ctrl) {
                    ot_strlcpy(v2, ot_strcmp(path, "/") ? path : "", sizeof v2);
                    have_v2 = true;
                } else if (ot_strstr(ctrl, "memory")) {
                    ot_strlcpy(v1, ot_strcmp(path, "/") ? path : "", sizeof v1);
                    have_v1 = true;
                }
            }
        }
        *e = save;
        l = *e ? e + 1 : e;
    }
    if (have_v1) probe_cgroup_v1(m, v1);
    if (m->cgroup_version == 0 && have_v2) probe_cgroup_v2(m, v2);
}

static int64_t rlim_value(int res)
{
    struct rlimit rl;
    if (getrlimit(res, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return -1;
    return (int64_t)rl.rlim_cur;
}

void ot_probe_host(ot_host_mem_t *m)
{
    char buf[4096];
    ot_memset(m, 0, sizeof *m);
    m->mem_total = m->mem_available = m->swap_total = m->swap_free = -1;
    m->vm_size = m->vm_rss = m->vm_peak = m->vm_data = -1;
    m->cgroup_limit = m->cgroup_usage = m->cgroup_swap_limit = -1;
    m->overcommit_memory = -1;
    m->ptr_bits = (int)(sizeof(void *) * 8);
    if (ot_read_file("/proc/meminfo", buf, sizeof buf) > 0) {
        m->mem_total = kb_field(buf, "MemTotal");
        m->mem_available = kb_field(buf, "MemAvailable");
        m->swap_total = kb_field(buf, "SwapTotal");
        m->swap_free = kb_field(buf, "SwapFree");
    }
    if (ot_read_file("/proc/self/status", buf, sizeof buf) > 0) {
        m->vm_size = kb_field(buf, "VmSize");
        m->vm_rss = kb_field(buf, "VmRSS");
        m->vm_peak = kb_field(buf, "VmPeak");
        m->vm_data = kb_field(buf, "VmData");
    }
    m->rlimit_as = rlim_value(RLIMIT_AS);
    m->rlimit_data = rlim_value(RLIMIT_DATA);
    if (ot_read_file("/proc/sys/vm/overcommit_memory", buf, 16) > 0 && buf[0] >= '0' && buf[0] <= '2')
        m->overcommit_memory = buf[0] - '0';
    probe_cgroup(m);
}
