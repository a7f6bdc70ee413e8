/* The "killed" event's part of a report (a process that died without a chance to speak, written
 * by the launcher from its state file): the diagnosis rules, and the text and JSON sections. Reads
 * only the report's data; no malloc. */
#include "report_internal.h"

#define LINE_BEGIN() ot_buf_init(&b, line, sizeof line, -1)
#define LINE_END() (ot_buf_cstr(&b), sink(ctx, line))

static void put_ms(ot_buf_t *b, uint64_t ns)
{
    uint64_t ms = ns / 1000000;
    if (ms < 10000) ot_buf_printf(b, "%llu ms", (unsigned long long)ms);
    else ot_buf_printf(b, "%llu.%llu s", (unsigned long long)(ms / 1000), (unsigned long long)(ms % 1000 / 100));
}

/* "this process's live heap was 190 MiB, 95% from grow_buffers ← main" */
static void put_heap(ot_buf_t *b, const ot_report_t *r)
{
    ot_buf_puts(b, "this process's live heap was ");
    ot_buf_bytes(b, r->host.bytes);
    if (r->n_host_sites && r->host.bytes) {
        const ot_site_info_t *s = &r->host_sites[0];
        ot_buf_printf(b, ", %llu%% from ", (unsigned long long)(s->live_bytes * 100 / r->host.bytes));
        ot_report_put_site_name(b, s->ips, s->depth);
    }
    if (r->device.bytes) {
        ot_buf_puts(b, "; device memory ");
        ot_buf_bytes(b, r->device.bytes);
    }
}

/* The tracked live memory (live host + device, as the history samples it) at realtime t: the
 * newest history sample at or before t; none (the state file was made later, when the heap passed
 * the recorder's threshold): 0. */
static uint64_t tracked_at(const ot_report_killed_t *k, uint64_t t)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < k->n_hist && k->hist[i].realtime_ns <= t; i++)
        v = k->hist[i].live_host + k->hist[i].live_device;
    return v;
}

/* What the supervisor's samples show that the state file cannot (it is updated from allocation
 * calls only): the RSS and cgroup usage just before the death, and growth no allocation call made. */
static void diagnose_samples(const ot_report_t *r, ot_diag_sink_t sink, void *ctx, char *line, size_t cap)
{
    const ot_report_killed_t *k = r->killed;
    ot_buf_t b;
    const ot_killed_sample_t *z = &k->sv[k->n_sv - 1];
    ot_buf_init(&b, line, cap, -1);
    ot_buf_puts(&b, "the supervisor's last sample");
    if (k->died_realtime_ns >= z->realtime_ns) {
        ot_buf_puts(&b, ", ");
        put_ms(&b, k->died_realtime_ns - z->realtime_ns);
        ot_buf_puts(&b, " before it died");
    }
    ot_buf_puts(&b, ": RSS ");
    ot_report_put_bytes_or(&b, z->rss, "?");
    if (z->cgroup_usage >= 0) {
        ot_buf_puts(&b, ", cgroup usage ");
        ot_buf_bytes(&b, (uint64_t)z->cgroup_usage);
        if (k->cgroup_limit > 0)
            ot_buf_printf(&b, " (%llu%% of the limit)",
                          (unsigned long long)((uint64_t)z->cgroup_usage * 100 / (uint64_t)k->cgroup_limit));
    }
    if (k->state_realtime_ns && k->state_realtime_ns <= z->realtime_ns) {
        ot_buf_puts(&b, "; the state file's last update was ");
        put_ms(&b, z->realtime_ns - k->state_realtime_ns);
        ot_buf_puts(&b, " before that");
    }
    ot_buf_cstr(&b);
    sink(ctx, line);

    /* Growth over the samples' window: the cgroup's usage where it has a limit (the usage is what
     * the cgroup is killed for; an unlimited one, a session's or the root, is mostly other
     * processes), else the RSS; against the tracked live memory over the same window. */
    bool cg = z->cgroup_usage >= 0 && k->cgroup_limit > 0;
    const ot_killed_sample_t *a = NULL;
    for (unsigned i = 0; i < k->n_sv && !a; i++)
        if ((cg ? k->sv[i].cgroup_usage : k->sv[i].rss) >= 0) a = &k->sv[i];
    int64_t za = cg ? z->cgroup_usage : z->rss;
    if (!a || a == z || za < 0) return;
    int64_t aa = cg ? a->cgroup_usage : a->rss;
    if (za <= aa) return;
    uint64_t grown = (uint64_t)(za - aa);
    uint64_t t0 = tracked_at(k, a->realtime_ns), t1 = r->host.bytes + r->device.bytes;
    uint64_t tracked_grown = t1 > t0 ? t1 - t0 : 0;
    /* The host memory the cgroup is charged for that oomtrace tracks: malloc's, pinned, managed. */
    uint64_t charged = r->host.bytes + r->by_kind[OT_KIND_PINNED].bytes + r->by_kind[OT_KIND_MANAGED].bytes;
    const uint64_t MiB = 1ull << 20;
    if (grown < 16 * MiB || grown <= 2 * tracked_grown + 8 * MiB) return;
    uint64_t slack = (uint64_t)za / 8 > 16 * MiB ? (uint64_t)za / 8 : 16 * MiB;
    ot_buf_init(&b, line, cap, -1);
    ot_buf_puts(&b, cg ? "the cgroup usage grew by " : "the RSS grew by ");
    ot_buf_bytes(&b, grown);
    ot_buf_puts(&b, " in the last ");
    put_ms(&b, z->realtime_ns - a->realtime_ns);
    ot_buf_puts(&b, " of the samples, the tracked live memory by ");
    ot_buf_bytes(&b, tracked_grown);
    if ((uint64_t)za > charged + slack) {
        ot_buf_puts(&b, ", and ");
        ot_buf_bytes(&b, (uint64_t)za - charged);
        ot_buf_puts(&b, cg ? " of the cgroup's usage" : " of the RSS");
        ot_buf_puts(&b, " was never allocated through malloc/cudaMalloc: ");
        ot_buf_puts(&b, cg ? "the program's own mmap, files in tmpfs or the page cache charged to the cgroup, or "
                             "other processes in the cgroup"
                           : "the program's own mmap, or files it mapped");
    } else {
        ot_buf_puts(&b, ": pages of memory allocated earlier being touched (page faults, no allocation call; "
                        "the state file is only updated on allocation calls)");
    }
    ot_buf_cstr(&b);
    sink(ctx, line);
}

void ot_report_diagnose_killed(const ot_report_t *r, ot_diag_sink_t sink, void *ctx)
{
    static char line[1024];
    const ot_report_killed_t *k = r->killed;
    const ot_host_mem_t *m = &r->mem;
    ot_buf_t b;
    const char *sig = k->signal ? ot_report_signal_name(k->signal) : NULL;
    LINE_BEGIN();
    switch (k->by) {
    case OT_KILLED_CGROUP_OOM:
        ot_buf_puts(&b, "killed by the cgroup OOM killer");
        if (k->cgroup_limit >= 0) {
            int64_t at = k->cgroup_peak >= 0 ? k->cgroup_peak : k->cgroup_usage;
            if (at >= 0) {
                ot_buf_puts(&b, " at ");
                ot_buf_bytes(&b, (uint64_t)at);
            }
            ot_buf_puts(&b, " of a ");
            ot_buf_bytes(&b, (uint64_t)k->cgroup_limit);
            ot_buf_printf(&b, " %s", k->limit_file ? k->limit_file : "limit");
        }
        ot_buf_puts(&b, "; ");
        put_heap(&b, r);
        break;
    case OT_KILLED_KERNEL_OOM:
        ot_buf_puts(&b, "killed by the kernel's OOM killer: the machine ran out of memory");
        if (m->mem_available >= 0 && m->mem_total >= 0) {
            ot_buf_puts(&b, " (MemAvailable ");
            ot_buf_bytes(&b, (uint64_t)m->mem_available);
            ot_buf_puts(&b, " of ");
            ot_buf_bytes(&b, (uint64_t)m->mem_total);
            ot_buf_puts(&b, " at the last state)");
        }
        ot_buf_puts(&b, "; ");
        put_heap(&b, r);
        if (m->vm_rss >= 0) {
            ot_buf_puts(&b, ", VmRSS ");
            ot_buf_bytes(&b, (uint64_t)m->vm_rss);
        }
        break;
    case OT_KILLED_SIGNAL:
        if (k->signal == 9) ot_buf_puts(&b, "killed by SIGKILL from outside, not by an OOM killer");
        else ot_buf_printf(&b, "killed by %s, and no handler in the process wrote a report", sig);
        ot_buf_puts(&b, "; ");
        put_heap(&b, r);
        break;
    default:
        ot_buf_puts(&b, "died without a report of its own");
        if (sig) ot_buf_printf(&b, " (%s)", sig);
        else ot_buf_puts(&b, " (found afterwards: what killed it is not known)");
        ot_buf_puts(&b, "; ");
        put_heap(&b, r);
        break;
    }
    LINE_END();
    if (k->why && k->why[0]) {
        LINE_BEGIN();
        ot_buf_printf(&b, "how this was told: %s", k->why);
        LINE_END();
    }
    if (k->forwarded_signal && k->signal == 9 && k->by == OT_KILLED_SIGNAL) {
        LINE_BEGIN();
        ot_buf_printf(&b, "%s was sent to it first", ot_report_signal_name(k->forwarded_signal));
        if (k->died_realtime_ns > k->forwarded_realtime_ns && k->forwarded_realtime_ns) {
            ot_buf_puts(&b, ", ");
            put_ms(&b, k->died_realtime_ns - k->forwarded_realtime_ns);
            ot_buf_puts(&b, " before the SIGKILL");
        }
        ot_buf_puts(&b, ": a time limit or a stop (Slurm and Kubernetes send SIGTERM, then SIGKILL after a grace "
                        "period; timeout -k does the same)");
        LINE_END();
    }
    if (k->n_hist >= 2) {
        const ot_rec_sample_t *a = &k->hist[0], *z = &k->hist[k->n_hist - 1];
        LINE_BEGIN();
        ot_buf_puts(&b, "live host memory went from ");
        ot_buf_bytes(&b, a->live_host);
        ot_buf_puts(&b, " to ");
        ot_buf_bytes(&b, z->live_host);
        if (z->mono_ns > a->mono_ns) {
            ot_buf_puts(&b, " in the last ");
            put_ms(&b, z->mono_ns - a->mono_ns);
        }
        if (z->rss >= 0) {
            ot_buf_puts(&b, " (VmRSS ");
            ot_buf_bytes(&b, (uint64_t)z->rss);
            ot_buf_puts(&b, " at the end)");
        }
        LINE_END();
    }
    if (k->n_sv) diagnose_samples(r, sink, ctx, line, sizeof line);
    if (k->died_realtime_ns && k->state_realtime_ns && k->died_realtime_ns >= k->state_realtime_ns) {
        LINE_BEGIN();
        ot_buf_puts(&b, "its last state was written ");
        put_ms(&b, k->died_realtime_ns - k->state_realtime_ns);
        ot_buf_puts(&b, " before it died");
        if (k->torn) ot_buf_puts(&b, " (the update after it was torn by the kill)");
        LINE_END();
    } else if (k->torn) {
        LINE_BEGIN();
        ot_buf_puts(&b, "the newest update was torn by the kill: this is the state one update before");
        LINE_END();
    }
    if (k->failures_seen) {
        LINE_BEGIN();
        ot_buf_printf(&b, "%u allocation failures were seen before it died", k->failures_seen);
        if (k->last_report && k->last_report[0]) ot_buf_printf(&b, "; its last report: %s", k->last_report);
        LINE_END();
    }
    if (k->by == OT_KILLED_CGROUP_OOM || k->by == OT_KILLED_KERNEL_OOM) {
        LINE_BEGIN();
        ot_buf_puts(&b, k->by == OT_KILLED_CGROUP_OOM
                            ? "try: raise the container's or job's memory limit (docker --memory, Kubernetes limits, "
                              "Slurm --mem), or reduce the batch or model size; the top call sites below are where "
                              "the memory went"
                            : "try: stop other memory users, add swap, or reduce the batch or model size; the top "
                              "call sites below are where this process's memory went");
        LINE_END();
    }
}

static const char *by_words(ot_killed_by_t by)
{
    return by == OT_KILLED_CGROUP_OOM   ? "the cgroup OOM killer"
           : by == OT_KILLED_KERNEL_OOM ? "the kernel's OOM killer"
           : by == OT_KILLED_SIGNAL     ? "a signal from outside the process, not an OOM killer"
                                        : "unknown";
}

static const char *by_name(ot_killed_by_t by)
{
    return by == OT_KILLED_CGROUP_OOM   ? "cgroup_oom_killer"
           : by == OT_KILLED_KERNEL_OOM ? "kernel_oom_killer"
           : by == OT_KILLED_SIGNAL     ? "signal"
                                        : "unknown";
}

/* A text line of an event at realtime t: "oomtrace:   N ms before death: " (no time when the death
 * was not seen, or came first). */
static void put_event_line(ot_buf_t *b, const ot_report_killed_t *k, uint64_t t)
{
    ot_buf_puts(b, "oomtrace:   ");
    if (k->died_realtime_ns > t) {
        put_ms(b, k->died_realtime_ns - t);
        ot_buf_puts(b, " before death: ");
    }
}

/* At most 8 points spread over n samples, the first and the last among them: the shape of the
 * growth, not every sample. points(n) of them; the p-th is sample spread_at(p, points, n). */
static unsigned points(unsigned n) { return n < 8 ? n : 8; }
static unsigned spread_at(unsigned p, unsigned pts, unsigned n)
{
    return pts == 1 ? 0 : (unsigned)((uint64_t)p * (n - 1) / (pts - 1));
}

void ot_report_text_killed(ot_buf_t *b, const ot_report_t *r)
{
    const ot_report_killed_t *k = r->killed;
    ot_buf_printf(b, "oomtrace: killed: %s; killer: %s", k->signal ? ot_report_signal_name(k->signal) : "signal unknown",
                  by_words(k->by));
    if (k->cgroup_version) {
        ot_buf_printf(b, "; cgroup v%d %s %s ", k->cgroup_version, k->cgroup_path ? k->cgroup_path : "?",
                      k->limit_file ? k->limit_file : "limit");
        ot_report_put_bytes_or(b, k->cgroup_limit, "unlimited");
        ot_buf_puts(b, ", peak ");
        ot_report_put_bytes_or(b, k->cgroup_peak, "?");
    }
    ot_buf_printf(b, "\noomtrace: state file %s", k->state_file ? k->state_file : "?");
    if (k->supervisor_pid) ot_buf_printf(b, " (read by the supervisor, pid %d)", k->supervisor_pid);
    ot_buf_putc(b, '\n');
    unsigned from = k->n_large > 8 ? k->n_large - 8 : 0;
    if (k->n_large) ot_buf_printf(b, "oomtrace: the last %u large allocations (newest last):\n", k->n_large - from);
    for (unsigned i = from; i < k->n_large; i++) {
        const ot_rec_large_t *l = &k->large[i];
        put_event_line(b, k, l->realtime_ns);
        ot_buf_bytes(b, l->size);
        ot_buf_printf(b, " %s from ", ot_kind_name(l->kind));
        ot_report_put_site_name(b, (const uintptr_t *)l->ips, l->depth);
        ot_buf_puts(b, ", live host then ");
        ot_buf_bytes(b, l->live_host);
        ot_buf_putc(b, '\n');
    }
    from = k->n_fail > 4 ? k->n_fail - 4 : 0;
    if (k->n_fail)
        ot_buf_printf(b, "oomtrace: the last %u allocation failures (newest last; %u in all):\n", k->n_fail - from,
                      k->failures_seen > k->n_fail ? k->failures_seen : k->n_fail);
    for (unsigned i = from; i < k->n_fail; i++) {
        const ot_rec_failure_t *e = &k->fail[i];
        put_event_line(b, k, e->realtime_ns);
        ot_buf_printf(b, "%s(", e->api);
        ot_buf_u64(b, e->size);
        ot_buf_printf(b, ") failed (%s)", e->error_name[0] ? e->error_name : "?");
        if (e->report[0]) ot_buf_printf(b, ", report %s", e->report);
        ot_buf_putc(b, '\n');
    }
    if (k->n_hist) {
        ot_buf_printf(b, "oomtrace: memory history (%u samples), live host / device / VmRSS:\n", k->n_hist);
        unsigned pts = points(k->n_hist);
        const ot_rec_sample_t *z = &k->hist[k->n_hist - 1];
        for (unsigned p = 0; p < pts; p++) {
            const ot_rec_sample_t *s = &k->hist[spread_at(p, pts, k->n_hist)];
            ot_buf_puts(b, "oomtrace:   -");
            put_ms(b, z->mono_ns - s->mono_ns);
            ot_buf_puts(b, ": ");
            ot_buf_bytes(b, s->live_host);
            ot_buf_puts(b, " / ");
            ot_buf_bytes(b, s->live_device);
            ot_buf_puts(b, " / ");
            ot_report_put_bytes_or(b, s->rss, "?");
            if (s->cgroup_usage >= 0) {
                ot_buf_puts(b, ", cgroup ");
                ot_buf_bytes(b, (uint64_t)s->cgroup_usage);
            }
            ot_buf_putc(b, '\n');
        }
    }
    if (k->n_sv) {
        ot_buf_printf(b, "oomtrace: the supervisor's samples (%u, every %llu ms), RSS / cgroup usage:\n", k->n_sv,
                      (unsigned long long)(OT_SAMPLE_PERIOD_NS / 1000000));
        unsigned pts = points(k->n_sv);
        for (unsigned p = 0; p < pts; p++) {
            const ot_killed_sample_t *s = &k->sv[spread_at(p, pts, k->n_sv)];
            put_event_line(b, k, s->realtime_ns);
            ot_report_put_bytes_or(b, s->rss, "?");
            ot_buf_puts(b, " / ");
            ot_report_put_bytes_or(b, s->cgroup_usage, "?");
            ot_buf_putc(b, '\n');
        }
    }
}

static void json_ns_time(ot_buf_t *b, uint64_t ns)
{
    if (!ns) {
        ot_buf_puts(b, "null");
        return;
    }
    ot_buf_putc(b, '"');
    ot_report_put_time_utc(b, (time_t)(ns / 1000000000));
    ot_buf_putc(b, '"');
}

void ot_report_json_killed(ot_buf_t *b, const ot_report_t *r)
{
    const ot_report_killed_t *k = r->killed;
    ot_buf_puts(b, ",\"killed\":{\"signal\":");
    if (k->signal) ot_buf_i64(b, k->signal);
    else ot_buf_puts(b, "null");
    ot_buf_puts(b, ",\"signal_name\":");
    ot_buf_json_str(b, k->signal ? ot_report_signal_name(k->signal) : NULL);
    ot_buf_printf(b, ",\"killer\":\"%s\",\"why\":", by_name(k->by));
    ot_buf_json_str(b, k->why);
    ot_buf_puts(b, ",\"cgroup\":");
    if (k->cgroup_version) {
        ot_buf_printf(b, "{\"version\":%d,\"path\":", k->cgroup_version);
        ot_buf_json_str(b, k->cgroup_path);
        ot_buf_puts(b, ",\"limit_file\":");
        ot_buf_json_str(b, k->limit_file);
        ot_buf_puts(b, ",\"limit\":");
        ot_buf_json_i64_or_null(b, k->cgroup_limit);
        ot_buf_puts(b, ",\"peak\":");
        ot_buf_json_i64_or_null(b, k->cgroup_peak);
        ot_buf_puts(b, ",\"usage\":");
        ot_buf_json_i64_or_null(b, k->cgroup_usage);
        ot_buf_putc(b, '}');
    } else {
        ot_buf_puts(b, "null");
    }
    ot_buf_puts(b, ",\"supervisor_pid\":");
    if (k->supervisor_pid) ot_buf_i64(b, k->supervisor_pid);
    else ot_buf_puts(b, "null");
    ot_buf_puts(b, ",\"state_file\":");
    ot_buf_json_str(b, k->state_file);
    ot_buf_puts(b, ",\"state_time\":");
    json_ns_time(b, k->state_realtime_ns);
    ot_buf_puts(b, ",\"died_time\":");
    json_ns_time(b, k->died_realtime_ns);
    ot_buf_printf(b, ",\"torn\":%s,\"forwarded_signal\":", k->torn ? "true" : "false");
    ot_buf_json_str(b, k->forwarded_signal ? ot_report_signal_name(k->forwarded_signal) : NULL);
    ot_buf_printf(b, ",\"failures_seen\":%u,\"reports_written\":%u,\"last_report\":", k->failures_seen,
                  k->reports_written);
    ot_buf_json_str(b, k->last_report && k->last_report[0] ? k->last_report : NULL);
    ot_buf_puts(b, ",\"large\":[");
    for (unsigned i = 0; i < k->n_large; i++) {
        const ot_rec_large_t *l = &k->large[i];
        ot_buf_puts(b, i ? ",{\"time_ns\":" : "{\"time_ns\":");
        ot_buf_u64(b, l->realtime_ns);
        ot_buf_printf(b, ",\"size\":%llu,\"kind\":\"%s\",\"device\":", (unsigned long long)l->size,
                      ot_kind_name(l->kind));
        if (l->device >= 0) ot_buf_i64(b, l->device);
        else ot_buf_puts(b, "null");
        ot_buf_printf(b, ",\"live_host\":%llu,\"live_device\":%llu,\"stack\":", (unsigned long long)l->live_host,
                      (unsigned long long)l->live_device);
        ot_report_json_stack(b, (const uintptr_t *)l->ips, l->depth);
        ot_buf_putc(b, '}');
    }
    ot_buf_puts(b, "],\"failures\":[");
    for (unsigned i = 0; i < k->n_fail; i++) {
        const ot_rec_failure_t *e = &k->fail[i];
        ot_buf_puts(b, i ? ",{\"time_ns\":" : "{\"time_ns\":");
        ot_buf_u64(b, e->realtime_ns);
        ot_buf_puts(b, ",\"api\":");
        ot_buf_json_str(b, e->api);
        ot_buf_printf(b, ",\"size\":%llu,\"error\":", (unsigned long long)e->size);
        ot_buf_json_str(b, e->error_name[0] ? e->error_name : NULL);
        ot_buf_printf(b, ",\"error_code\":%d,\"device\":%s,\"report\":", e->error_code, e->device ? "true" : "false");
        ot_buf_json_str(b, e->report[0] ? e->report : NULL);
        ot_buf_putc(b, '}');
    }
    ot_buf_puts(b, "],\"history\":[");
    for (unsigned i = 0; i < k->n_hist; i++) {
        const ot_rec_sample_t *s = &k->hist[i];
        ot_buf_printf(b, "%s{\"time_ns\":%llu,\"mono_ns\":%llu,\"live_host\":%llu,\"live_device\":%llu,\"rss\":",
                      i ? "," : "", (unsigned long long)s->realtime_ns, (unsigned long long)s->mono_ns,
                      (unsigned long long)s->live_host, (unsigned long long)s->live_device);
        ot_buf_json_i64_or_null(b, s->rss);
        ot_buf_puts(b, ",\"cgroup_usage\":");
        ot_buf_json_i64_or_null(b, s->cgroup_usage);
        ot_buf_putc(b, '}');
    }
    ot_buf_puts(b, "],\"supervisor_samples\":[");
    for (unsigned i = 0; i < k->n_sv; i++) {
        const ot_killed_sample_t *s = &k->sv[i];
        ot_buf_printf(b, "%s{\"time_ns\":%llu,\"rss\":", i ? "," : "", (unsigned long long)s->realtime_ns);
        ot_buf_json_i64_or_null(b, s->rss);
        ot_buf_puts(b, ",\"cgroup_usage\":");
        ot_buf_json_i64_or_null(b, s->cgroup_usage);
        ot_buf_putc(b, '}');
    }
    ot_buf_puts(b, "]}");
}
