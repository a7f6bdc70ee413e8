/* Who killed the child: the cgroup's and the kernel's OOM-kill counters (cgroup v2 memory.events,
 * v1 memory.oom_control and memory(.memsw).failcnt, /proc/vmstat), read before it starts and after it died,
 * and the cgroup's limit and peak. Reads files only; decides nothing about signals. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher.h"

static ssize_t slurp(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t have = 0;
    while (have + 1 < cap) {
        ssize_t r = read(fd, buf + have, cap - 1 - have);
        if (r <= 0) break;
        have += (size_t)r;
    }
    close(fd);
    buf[have] = 0;
    return (ssize_t)have;
}

/* "key value" lines (memory.events, memory.oom_control, /proc/vmstat): value of key, or -1. */
static int64_t keyed(const char *path, const char *key)
{
    char buf[16384];
    if (slurp(path, buf, sizeof buf) <= 0) return -1;
    size_t kl = strlen(key);
    for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (!strncmp(l, key, kl) && l[kl] == ' ') return strtoll(l + kl + 1, NULL, 10);
    return -1;
}

/* A number, or "max" / v1's near-2^63 "unlimited": -1; -2 not a number. */
static int64_t parse_value(const char *buf)
{
    if (!strncmp(buf, "max", 3)) return -1;
    char *e;
    unsigned long long v = strtoull(buf, &e, 10);
    if (e == buf) return -2;
    return v >= (1ull << 62) ? -1 : (int64_t)v;
}

/* A file holding one number: its value, -1 unlimited, -2 no such file or not a number. */
static int64_t value(const char *path)
{
    char buf[64];
    if (slurp(path, buf, sizeof buf) <= 0) return -2;
    return parse_value(buf);
}

static void at(char *out, size_t cap, const char *dir, const char *file)
{
    snprintf(out, cap, "%s/%s", dir, file);
}

/* A value read in dir and in each ancestor up to the mount root (key NULL: a plain number), then
 * combined: summed (a counter: a limit hit in an ancestor, a container's or job's cgroup above this
 * one, counts there, not here) or the least (a limit: the tightest one binds). -1: none read. */
typedef enum { UP_SUM, UP_MIN } up_t;
static int64_t up_tree(const char *mount, const char *dir, const char *file, const char *key, up_t how)
{
    char d[512], p[600];
    snprintf(d, sizeof d, "%s", dir);
    int64_t acc = -1;
    size_t ml = strlen(mount);
    for (;;) {
        at(p, sizeof p, d, file);
        int64_t v = key ? keyed(p, key) : value(p);
        if (v >= 0) {
            if (how == UP_SUM) acc = (acc < 0 ? 0 : acc) + v;
            else if (acc < 0 || v < acc) acc = v;
        }
        if (strlen(d) <= ml) break;
        char *s = strrchr(d, '/');
        if (!s || (size_t)(s - d) < ml) break;
        *s = 0;
    }
    return acc;
}
static int64_t summed(const char *mount, const char *dir, const char *file, const char *key)
{
    return up_tree(mount, dir, file, key, UP_SUM);
}
static int64_t tightest(const char *mount, const char *dir, const char *file)
{
    return up_tree(mount, dir, file, NULL, UP_MIN);
}

void ot_oom_probe(pid_t pid, ot_oom_probe_t *o)
{
    memset(o, 0, sizeof *o);
    o->oom_kill = o->oom = o->limit = o->limit_here = o->usage = o->peak = -1;
    o->vmstat_oom_kill = keyed("/proc/vmstat", "oom_kill");
    char path[64], buf[4096];
    if (pid) snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
    else snprintf(path, sizeof path, "/proc/self/cgroup");
    if (slurp(path, buf, sizeof buf) <= 0) return;
    char v1[256] = "", v2[256] = "";
    bool have_v1 = false, have_v2 = false;
    for (char *l = strtok(buf, "\n"); l; l = strtok(NULL, "\n")) {
        /* "hierarchy-id:controllers:path" */
        char *c1 = strchr(l, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c2 = 0;
        const char *ctl = c1 + 1, *rel = c2 + 1;
        if (!*ctl) {
            snprintf(v2, sizeof v2, "%s", rel);
            have_v2 = true;
            continue;
        }
        for (const char *t = ctl; t && *t;) {
            const char *e = strchr(t, ',');
            size_t n = e ? (size_t)(e - t) : strlen(t);
            if (n == 6 && !strncmp(t, "memory", 6)) {
                snprintf(v1, sizeof v1, "%s", rel);
                have_v1 = true;
            }
            t = e ? e + 1 : NULL;
        }
    }
    char p[700];
    if (have_v1) {
        const char *mount = "/sys/fs/cgroup/memory";
        snprintf(o->path, sizeof o->path, "%s%s", mount, strcmp(v1, "/") ? v1 : "");
        at(p, sizeof p, o->path, "memory.limit_in_bytes");
        if (access(p, R_OK) != 0) snprintf(o->path, sizeof o->path, "%s", mount); /* a container's root */
        at(p, sizeof p, o->path, "memory.limit_in_bytes");
        if (access(p, R_OK) == 0) {
            o->version = 1;
            snprintf(o->rel, sizeof o->rel, "%s", v1);
            snprintf(o->limit_file, sizeof o->limit_file, "memory.limit_in_bytes");
            o->limit_here = value(p);
            o->limit = tightest(mount, o->path, "memory.limit_in_bytes");
            at(p, sizeof p, o->path, "memory.oom_control");
            o->oom_kill = keyed(p, "oom_kill");
            /* memory+swap's limit (memsw) is hit in its own counter */
            int64_t f = summed(mount, o->path, "memory.failcnt", NULL),
                    fs = summed(mount, o->path, "memory.memsw.failcnt", NULL);
            o->oom = f < 0 ? fs : fs < 0 ? f : f + fs;
            at(p, sizeof p, o->path, "memory.usage_in_bytes");
            o->usage = value(p);
            at(p, sizeof p, o->path, "memory.max_usage_in_bytes");
            o->peak = value(p);
            return;
        }
    }
    if (have_v2) {
        static const char *const mounts[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified", NULL};
        for (int i = 0; mounts[i]; i++) {
            snprintf(o->path, sizeof o->path, "%s%s", mounts[i], strcmp(v2, "/") ? v2 : "");
            at(p, sizeof p, o->path, "memory.events");
            if (access(p, R_OK) != 0) continue;
            o->version = 2;
            snprintf(o->rel, sizeof o->rel, "%s", v2);
            snprintf(o->limit_file, sizeof o->limit_file, "memory.max");
            o->oom_kill = keyed(p, "oom_kill");
            o->oom = summed(mounts[i], o->path, "memory.events", "oom");
            at(p, sizeof p, o->path, "memory.max");
            o->limit_here = value(p);
            o->limit = tightest(mounts[i], o->path, "memory.max");
            at(p, sizeof p, o->path, "memory.current");
            o->usage = value(p);
            at(p, sizeof p, o->path, "memory.peak");
            o->peak = value(p);
            return;
        }
    }
    o->path[0] = 0;
}

int ot_oom_usage_open(const ot_oom_probe_t *p)
{
    if (!p->version || !p->path[0]) return -1;
    char f[600];
    at(f, sizeof f, p->path, p->version == 2 ? "memory.current" : "memory.usage_in_bytes");
    return open(f, O_RDONLY | O_CLOEXEC);
}

int64_t ot_oom_usage_read(int fd)
{
    char buf[64];
    ssize_t n = fd >= 0 ? pread(fd, buf, sizeof buf - 1, 0) : -1;
    if (n <= 0) return -1;
    buf[n] = 0;
    int64_t v = parse_value(buf);
    return v >= 0 ? v : -1;
}

static bool grew(int64_t before, int64_t after)
{
    return before >= 0 && after > before;
}

/* The OOM killer sends SIGKILL. A cgroup's oom_kill counts every OOM kill of one of its
 * processes, the global OOM killer's too; the cgroup's own OOM (v2 "oom", v1 failcnt: the limit
 * was hit) tells the two apart. /proc/vmstat oom_kill counts every kill on the host. */
ot_oom_verdict_t ot_oom_judge(int sig, const ot_oom_probe_t *b, const ot_oom_probe_t *a)
{
    ot_oom_verdict_t v = {OT_KILLER_UNKNOWN, "no OOM kill was counted while it ran", 0};
    if (sig != 9) {
        v.why = "the OOM killer sends SIGKILL";
        return v;
    }
    bool same_cg = b->version && b->version == a->version && !strcmp(b->path, a->path);
    if (same_cg && grew(b->oom_kill, a->oom_kill)) {
        v.kills = a->oom_kill - b->oom_kill;
        /* A limit hit on the way up (failcnt, "oom") tells the cgroup's killer from the global one;
         * where those counters cannot be read, a limit on the way up has to do. */
        bool limit_hit = b->oom >= 0 && a->oom >= 0 ? grew(b->oom, a->oom) : a->limit >= 0;
        /* v1 with memory+swap limited as well counts no failcnt for it: the peak at the limit says it */
        int64_t margin = a->limit / 100 > (1 << 20) ? a->limit / 100 : (1 << 20);
        if (a->limit >= 0 && a->peak >= 0 && a->peak >= a->limit - margin) limit_hit = true;
        if (limit_hit) {
            v.killer = OT_KILLER_CGROUP;
            v.why = b->version == 2 ? "memory.events oom_kill and oom grew while it ran"
                                    : "memory.oom_control oom_kill grew while it ran, and the cgroup hit its limit";
        } else {
            v.killer = OT_KILLER_KERNEL;
            v.why = "its cgroup counted an OOM kill, but no cgroup on the way up hit its limit: the system ran out";
        }
        return v;
    }
    if (grew(b->vmstat_oom_kill, a->vmstat_oom_kill)) {
        v.kills = a->vmstat_oom_kill - b->vmstat_oom_kill;
        v.killer = OT_KILLER_KERNEL;
        v.why = "/proc/vmstat oom_kill grew while it ran";
    }
    return v;
}
