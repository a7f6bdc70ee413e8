/* The text report (log=): what failed, the diagnosis, the failing stack, the devices, the host's
 * memory and limits, the live totals and the top call sites. Reads only the report's data; no malloc
 * (a static buffer flushed to fd with raw writes). */
#include "report_internal.h"

static void text_diag_sink(void *ctx, const char *line)
{
    ot_buf_t *b = ctx;
    ot_buf_puts(b, "oomtrace:   - ");
    ot_buf_puts(b, line);
    ot_buf_putc(b, '\n');
}



/* Where the address space went: one line per category that matters, largest first. */
static void text_address_space(ot_buf_t *b, const ot_asmap_t *as)
{
    ot_buf_puts(b, "oomtrace: address space: ");
    ot_buf_bytes(b, as->total);
    ot_buf_printf(b, " in %llu mappings", (unsigned long long)as->mappings);
    if (as->limit >= 0) {
        ot_buf_puts(b, " of RLIMIT_AS ");
        ot_buf_bytes(b, (uint64_t)as->limit);
    }
    if (as->cat[OT_AS_REQUEST].bytes) {
        ot_buf_puts(b, ", + ");
        ot_buf_bytes(b, as->cat[OT_AS_REQUEST].bytes);
        ot_buf_puts(b, " requested");
    }
    if (as->rss >= 0) {
        ot_buf_puts(b, "; RSS ");
        ot_buf_bytes(b, (uint64_t)as->rss);
        ot_buf_puts(b, " (anonymous ");
        ot_report_put_bytes_or(b, as->rss_anon, "?");
        ot_buf_puts(b, ", swapped ");
        ot_report_put_bytes_or(b, as->swap, "?");
        ot_buf_putc(b, ')');
    }
    ot_buf_puts(b, ":\n");
    unsigned order[OT_AS_KINDS], n = ot_asmap_order(as, order), small = 0;
    for (unsigned i = 0; i < n; i++) {
        unsigned k = order[i];
        const ot_as_cat_t *c = &as->cat[k];
        if (k == OT_AS_REQUEST) continue;
        if (c->bytes < (1u << 20) && c->bytes * 100 < as->total) {
            small++;
            continue;
        }
        ot_buf_printf(b, "oomtrace:   %s ", ot_as_kind_label(k));
        ot_buf_bytes(b, c->bytes);
        ot_report_put_pct(b, c->bytes, as->total);
        switch (k) {
        case OT_AS_HEAP:
            ot_buf_puts(b, ": [heap] ");
            ot_buf_bytes(b, as->heap_brk);
            ot_buf_printf(b, " and %llu mapping%s of large blocks; ", (unsigned long long)as->heap_mappings,
                          as->heap_mappings == 1 ? "" : "s");
            ot_buf_bytes(b, c->live);
            ot_buf_puts(b, " live");
            break;
        case OT_AS_ARENAS:
            ot_buf_printf(b, " in %llu arenas, ", (unsigned long long)c->count);
            ot_buf_bytes(b, c->live);
            ot_buf_puts(b, " live in them");
            break;
        case OT_AS_STACKS:
            ot_buf_printf(b, " in %llu stacks", (unsigned long long)c->count);
            if (as->threads) ot_buf_printf(b, " (%u threads)", as->threads);
            break;
        case OT_AS_OOMTRACE:
            ot_buf_puts(b, " (its tables, stacks and call sites)");
            break;
        default:
            ot_buf_printf(b, " in %llu mapping%s", (unsigned long long)c->count, c->count == 1 ? "" : "s");
        }
        for (unsigned t = 0; t < c->ntop && t < 3; t++) {
            ot_buf_puts(b, t ? ", " : ": ");
            ot_buf_printf(b, "%s ", c->top[t].name);
            ot_buf_bytes(b, c->top[t].bytes);
        }
        ot_buf_putc(b, '\n');
    }
    if (small) ot_buf_printf(b, "oomtrace:   (%u more categories under 1%% each)\n", small);
}

static void text_cgroup(ot_buf_t *b, const ot_cg_usage_t *u)
{
    ot_buf_puts(b, "oomtrace: cgroup usage: anonymous ");
    ot_report_put_bytes_or(b, u->anon, "?");
    ot_buf_puts(b, ", page cache ");
    ot_report_put_bytes_or(b, u->file, "?");
    ot_buf_puts(b, " (shared memory ");
    ot_report_put_bytes_or(b, u->shmem, "?");
    ot_buf_puts(b, ", mapped ");
    ot_report_put_bytes_or(b, u->file_mapped, "?");
    ot_buf_puts(b, "), kernel ");
    ot_report_put_bytes_or(b, u->kernel, "?");
    ot_buf_puts(b, ", swap ");
    ot_report_put_bytes_or(b, u->swap, "?");
    ot_buf_printf(b, "; %u processes:\n", u->procs_total);
    for (unsigned i = 0; i < u->nprocs; i++) {
        ot_buf_printf(b, "oomtrace:     pid %d %s%s RSS ", u->procs[i].pid, u->procs[i].name,
                      u->procs[i].self ? " (this process)" : "");
        ot_buf_bytes(b, (uint64_t)u->procs[i].rss);
        ot_buf_putc(b, '\n');
    }
}

void ot_report_write_text(const ot_report_t *r, int fd)
{
    static char text_mem[16384];
    ot_buf_t b;
    ot_buf_init(&b, text_mem, sizeof text_mem, fd);
    const ot_failure_t *f = r->f;
    const ot_host_mem_t *m = &r->mem;
    ot_report_text_head(&b, &r->proc);
    if (f) {
        ot_buf_printf(&b, "%s(", f->api);
        if (f->count) ot_buf_printf(&b, "%llu, ", (unsigned long long)f->count);
        if (f->alignment) ot_buf_printf(&b, "align %llu, ", (unsigned long long)f->alignment);
        /* calloc(nmemb, size) as the program called it; the total is on the next line */
        if (f->count && (f->elem_size || !f->size)) ot_buf_u64(&b, f->elem_size);
        else if (f->count && f->size == UINT64_MAX) ot_buf_puts(&b, "overflow");
        else ot_buf_u64(&b, f->size);
        ot_buf_printf(&b, ") failed: %s (%d)", f->error_name ? f->error_name : "error", f->error_code);
    } else {
        ot_buf_printf(&b, "%s%s%s", r->event, r->reason ? ": " : "", r->reason ? r->reason : "");
    }
    ot_buf_printf(&b, " [thread %ld, ", r->tid);
    ot_report_put_time_utc(&b, r->when);
    ot_buf_puts(&b, "]\n");
    if (f) {
        if (!(f->count && f->size == UINT64_MAX)) {
            ot_buf_puts(&b, "oomtrace: requested ");
            ot_buf_bytes(&b, f->size);
            ot_buf_printf(&b, " (%llu bytes)", (unsigned long long)f->size);
            if (f->device && r->focus >= 0) ot_buf_printf(&b, " on GPU %d", r->devices[r->focus].index);
            ot_buf_putc(&b, '\n');
        }
        if (f->note) ot_buf_printf(&b, "oomtrace: %s\n", f->note);
        ot_buf_puts(&b, "oomtrace: diagnosis:\n");
        ot_report_diagnose(r, text_diag_sink, &b);
        ot_buf_puts(&b, "oomtrace: failing call:\n");
        ot_report_text_stack(&b, r->ips, r->depth);
    }
    if (r->crash) ot_report_crash_text(r, &b);
    if (r->killed) {
        ot_buf_puts(&b, "oomtrace: diagnosis:\n");
        ot_report_diagnose(r, text_diag_sink, &b);
        ot_report_text_killed(&b, r);
    }
    if (r->pressure) ot_report_text_pressure(&b, r);
    for (int i = 0; i < r->ndev; i++) {
        const ot_device_info_t *d = &r->devices[i];
        ot_buf_printf(&b, "oomtrace: GPU %d %s%s%s%s%s: ", d->index, d->name, d->pci_bus_id[0] ? " bus " : "",
                      d->pci_bus_id, d->uuid[0] ? " " : "", d->uuid);
        if (d->mem_known) {
            ot_buf_bytes(&b, d->free);
            ot_buf_puts(&b, " free of ");
            ot_buf_bytes(&b, d->total);
        } else {
            ot_buf_printf(&b, "memory unavailable (%s)", d->unavailable);
        }
        ot_buf_putc(&b, '\n');
        if (d->procs_known) {
            for (int p = 0; p < d->nprocs; p++) {
                ot_buf_printf(&b, "oomtrace:     pid %u %s%s ", d->procs[p].pid, d->procs[p].name,
                              d->procs[p].is_self ? " (this process)" : "");
                if (d->procs[p].used == UINT64_MAX) ot_buf_puts(&b, "unknown");
                else ot_buf_bytes(&b, d->procs[p].used);
                ot_buf_putc(&b, '\n');
            }
        }
        if (d->procs_note[0]) ot_buf_printf(&b, "oomtrace:     (%s)\n", d->procs_note);
    }
    ot_buf_puts(&b, "oomtrace: host memory: MemTotal ");
    ot_report_put_bytes_or(&b, m->mem_total, "?");
    ot_buf_puts(&b, ", MemAvailable ");
    ot_report_put_bytes_or(&b, m->mem_available, "?");
    ot_buf_puts(&b, ", swap ");
    ot_report_put_bytes_or(&b, m->swap_free, "?");
    ot_buf_puts(&b, " free of ");
    ot_report_put_bytes_or(&b, m->swap_total, "?");
    ot_buf_puts(&b, "\noomtrace: this process: VmSize ");
    ot_report_put_bytes_or(&b, m->vm_size, "?");
    ot_buf_puts(&b, ", VmRSS ");
    ot_report_put_bytes_or(&b, m->vm_rss, "?");
    ot_buf_puts(&b, ", VmPeak ");
    ot_report_put_bytes_or(&b, m->vm_peak, "?");
    ot_buf_printf(&b, ", %d-bit\noomtrace: limits: RLIMIT_AS ", m->ptr_bits);
    ot_report_put_bytes_or(&b, m->rlimit_as, "unlimited");
    ot_buf_puts(&b, ", RLIMIT_DATA ");
    ot_report_put_bytes_or(&b, m->rlimit_data, "unlimited");
    if (m->cgroup_version) {
        ot_buf_printf(&b, ", cgroup v%d %s limit ", m->cgroup_version, m->cgroup_path);
        ot_report_put_bytes_or(&b, m->cgroup_limit, "unlimited");
        ot_buf_puts(&b, " usage ");
        ot_report_put_bytes_or(&b, m->cgroup_usage, "?");
    }
    ot_buf_putc(&b, '\n');
    if (r->as) text_address_space(&b, r->as);
    if (r->cg) text_cgroup(&b, r->cg);
    ot_buf_puts(&b, "oomtrace: live in this process: host ");
    ot_buf_bytes(&b, r->host.bytes);
    ot_buf_printf(&b, " in %llu blocks (peak ", (unsigned long long)r->host.count);
    ot_buf_bytes(&b, r->host.peak_bytes);
    ot_buf_puts(&b, ")");
    if (r->device.count || r->device.total_count) {
        ot_buf_puts(&b, ", device ");
        ot_buf_bytes(&b, r->device.bytes);
        ot_buf_printf(&b, " in %llu blocks (peak ", (unsigned long long)r->device.count);
        ot_buf_bytes(&b, r->device.peak_bytes);
        ot_buf_puts(&b, ")");
        const char *sep = " by kind:";
        for (unsigned k = 1; k < OT_KIND_COUNT; k++) {
            if (!r->by_kind[k].count) continue;
            ot_buf_printf(&b, "%s %s ", sep, ot_kind_name(k));
            ot_buf_bytes(&b, r->by_kind[k].bytes);
            sep = ",";
        }
    }
    ot_buf_putc(&b, '\n');
    for (int dev = (f && f->device) ? 1 : 0; dev >= 0; dev--) {
        unsigned n = dev ? r->n_device_sites : r->n_host_sites;
        if (n > r->opt.top_sites) n = r->opt.top_sites;
        if (!n) continue;
        ot_buf_printf(&b, "oomtrace: top %s call sites by live bytes:\n", dev ? "device" : "host");
        const ot_totals_t *tot = dev ? &r->device : &r->host;
        for (unsigned i = 0; i < n; i++) {
            const ot_site_info_t si = dev ? r->device_sites[i] : r->host_sites[i];
            ot_buf_printf(&b, "oomtrace:   %u. %s", i + 1, si.estimated ? "~" : "");
            ot_buf_bytes(&b, si.live_bytes);
            ot_report_put_pct(&b, si.live_bytes, tot->bytes);
            ot_buf_printf(&b, " in %s%llu %s block%s", si.estimated ? "~" : "", (unsigned long long)si.live_count,
                          ot_kind_name(si.kind), si.live_count == 1 ? "" : "s");
            if (si.device >= 0) ot_buf_printf(&b, " on GPU %d", si.device);
            ot_buf_puts(&b, ", peak ");
            ot_buf_bytes(&b, si.peak_bytes);
            ot_buf_puts(&b, si.estimated ? " (sampled: estimates)\n" : "\n");
            ot_report_text_stack(&b, si.ips, si.depth);
        }
    }
    if (r->suppressed_failures)
        ot_buf_printf(&b, "oomtrace: %u earlier failures were counted but not reported in full (max_reports=%u)\n",
                      r->suppressed_failures, r->opt.max_reports);
    if (r->json_path[0]) ot_buf_printf(&b, "oomtrace: report: %s\n", r->json_path);
    ot_buf_puts(&b, "oomtrace: ====\n");
    ot_buf_flush(&b);
}
