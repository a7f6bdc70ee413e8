/* The JSON report (report=, schema_version 1; README lists the fields). Reads only the report's
 * data; no malloc (a static buffer flushed to fd with raw writes). */
#include "report_internal.h"

typedef struct {
    ot_buf_t *b;
    unsigned n;
} json_list_t;

/* Counts its items: the buffer may have been flushed since the '[', so its last byte says nothing. */
static void json_diag_sink(void *ctx, const char *line)
{
    json_list_t *l = ctx;
    if (l->n++) ot_buf_putc(l->b, ',');
    ot_buf_json_str(l->b, line);
}

static void json_totals(ot_buf_t *b, const ot_totals_t *t)
{
    ot_buf_printf(b, "{\"bytes\":%llu,\"count\":%llu,\"peak_bytes\":%llu,\"total_bytes\":%llu,\"total_count\":%llu}",
                  (unsigned long long)t->bytes, (unsigned long long)t->count, (unsigned long long)t->peak_bytes,
                  (unsigned long long)t->total_bytes, (unsigned long long)t->total_count);
}

static void json_key_i64(ot_buf_t *b, const char *k, int64_t v, bool comma)
{
    if (comma) ot_buf_putc(b, ',');
    ot_buf_json_str(b, k);
    ot_buf_putc(b, ':');
    ot_buf_json_i64_or_null(b, v);
}

static void json_i64(ot_buf_t *b, const char *k, int64_t v)
{
    ot_buf_printf(b, ",\"%s\":", k);
    ot_buf_json_i64_or_null(b, v);
}

static void json_address_space(ot_buf_t *b, const ot_asmap_t *as)
{
    ot_buf_printf(b, ",\"address_space\":{\"total\":%llu,\"limit\":", (unsigned long long)as->total);
    ot_buf_json_i64_or_null(b, as->limit);
    ot_buf_printf(b, ",\"mappings\":%llu,\"pointer_bits\":%d,\"threads\":", (unsigned long long)as->mappings,
                  as->pointer_bits);
    if (as->threads) ot_buf_u64(b, as->threads);
    else ot_buf_puts(b, "null");
    json_i64(b, "rss", as->rss);
    json_i64(b, "rss_anonymous", as->rss_anon);
    json_i64(b, "swap", as->swap);
    ot_buf_puts(b, ",\"categories\":[");
    unsigned order[OT_AS_KINDS], n = ot_asmap_order(as, order);
    for (unsigned i = 0; i < n; i++) {
        const ot_as_cat_t *c = &as->cat[order[i]];
        ot_buf_printf(b, "%s{\"kind\":\"%s\",\"bytes\":%llu,\"count\":%llu,\"live\":%llu,\"top\":[", i ? "," : "",
                      ot_as_kind_name(order[i]), (unsigned long long)c->bytes, (unsigned long long)c->count,
                      (unsigned long long)c->live);
        for (unsigned t = 0; t < c->ntop; t++) {
            ot_buf_puts(b, t ? ",{\"name\":" : "{\"name\":");
            ot_buf_json_str(b, c->top[t].name);
            ot_buf_printf(b, ",\"bytes\":%llu}", (unsigned long long)c->top[t].bytes);
        }
        ot_buf_puts(b, "]}");
    }
    ot_buf_puts(b, "]}");
}

static void json_cgroup(ot_buf_t *b, const ot_cg_usage_t *u)
{
    ot_buf_printf(b, ",\"cgroup_usage\":{\"version\":%d", u->version);
    json_i64(b, "anonymous", u->anon);
    json_i64(b, "file", u->file);
    json_i64(b, "shmem", u->shmem);
    json_i64(b, "file_mapped", u->file_mapped);
    json_i64(b, "kernel", u->kernel);
    json_i64(b, "swap", u->swap);
    ot_buf_printf(b, ",\"processes_total\":%u,\"processes\":[", u->procs_total);
    for (unsigned i = 0; i < u->nprocs; i++) {
        ot_buf_printf(b, "%s{\"pid\":%d,\"name\":", i ? "," : "", u->procs[i].pid);
        ot_buf_json_str(b, u->procs[i].name);
        ot_buf_printf(b, ",\"rss\":%lld,\"self\":%s}", (long long)u->procs[i].rss, u->procs[i].self ? "true" : "false");
    }
    ot_buf_puts(b, "]}");
}

void ot_report_write_json(const ot_report_t *r, int fd)
{
    static char json_mem[16384];
    ot_buf_t b;
    ot_buf_init(&b, json_mem, sizeof json_mem, fd);
    const ot_failure_t *f = r->f;
    const ot_host_mem_t *m = &r->mem;
    ot_report_json_head(&b, r->event, r->report_no, r->when, &r->proc);
    if (r->reason) {
        ot_buf_puts(&b, ",\"reason\":");
        ot_buf_json_str(&b, r->reason);
    }
    ot_buf_puts(&b, ",\"failure\":");
    if (f) {
        ot_buf_puts(&b, "{\"api\":");
        ot_buf_json_str(&b, f->api);
        ot_buf_puts(&b, ",\"size\":");
        if (f->count && f->size == UINT64_MAX) ot_buf_puts(&b, "null");
        else ot_buf_u64(&b, f->size);
        ot_buf_puts(&b, ",\"count\":");
        if (f->count) ot_buf_u64(&b, f->count);
        else ot_buf_puts(&b, "null");
        ot_buf_puts(&b, ",\"element_size\":");
        if (f->count && (f->elem_size || !f->size)) ot_buf_u64(&b, f->elem_size);
        else ot_buf_puts(&b, "null");
        ot_buf_puts(&b, ",\"alignment\":");
        if (f->alignment) ot_buf_u64(&b, f->alignment);
        else ot_buf_puts(&b, "null");
        ot_buf_puts(&b, ",\"error\":");
        ot_buf_json_str(&b, f->error_name);
        ot_buf_printf(&b, ",\"error_code\":%d,\"thread\":%ld,\"device\":", f->error_code, r->tid);
        if (f->device && f->device_index >= 0) ot_buf_i64(&b, f->device_index);
        else ot_buf_puts(&b, "null");
        ot_buf_printf(&b, ",\"may_recover\":%s,\"note\":", f->may_recover ? "true" : "false");
        ot_buf_json_str(&b, f->note);
        ot_buf_puts(&b, ",\"stack\":");
        ot_report_json_stack(&b, r->ips, r->depth);
        ot_buf_putc(&b, '}');
    } else {
        ot_buf_puts(&b, "null");
    }
    if (r->crash) ot_report_crash_json(r, &b);
    if (r->killed) ot_report_json_killed(&b, r);
    if (r->pressure) ot_report_json_pressure(&b, r);
    ot_buf_puts(&b, ",\"host_memory\":{");
    json_key_i64(&b, "total", m->mem_total, false);
    json_key_i64(&b, "available", m->mem_available, true);
    json_key_i64(&b, "swap_total", m->swap_total, true);
    json_key_i64(&b, "swap_free", m->swap_free, true);
    json_key_i64(&b, "rlimit_as", m->rlimit_as, true);
    json_key_i64(&b, "rlimit_data", m->rlimit_data, true);
    json_key_i64(&b, "cgroup_limit", m->cgroup_limit, true);
    json_key_i64(&b, "cgroup_usage", m->cgroup_usage, true);
    ot_buf_puts(&b, ",\"cgroup_version\":");
    if (m->cgroup_version) ot_buf_i64(&b, m->cgroup_version);
    else ot_buf_puts(&b, "null");
    ot_buf_puts(&b, ",\"cgroup_path\":");
    ot_buf_json_str(&b, m->cgroup_version ? m->cgroup_path : NULL);
    json_key_i64(&b, "vm_size", m->vm_size, true);
    json_key_i64(&b, "vm_rss", m->vm_rss, true);
    json_key_i64(&b, "vm_peak", m->vm_peak, true);
    json_key_i64(&b, "vm_data", m->vm_data, true);
    json_key_i64(&b, "overcommit_memory", m->overcommit_memory, true);
    ot_buf_printf(&b, ",\"pointer_bits\":%d}", m->ptr_bits);
    if (r->as) json_address_space(&b, r->as);
    else ot_buf_puts(&b, ",\"address_space\":null");
    if (r->cg) json_cgroup(&b, r->cg);
    else ot_buf_puts(&b, ",\"cgroup_usage\":null");
    ot_buf_puts(&b, ",\"devices\":[");
    for (int i = 0; i < r->ndev; i++) {
        const ot_device_info_t *d = &r->devices[i];
        ot_buf_printf(&b, "%s{\"index\":%d,\"name\":", i ? "," : "", d->index);
        ot_buf_json_str(&b, d->name[0] ? d->name : NULL);
        ot_buf_puts(&b, ",\"pci_bus_id\":");
        ot_buf_json_str(&b, d->pci_bus_id[0] ? d->pci_bus_id : NULL);
        ot_buf_puts(&b, ",\"uuid\":");
        ot_buf_json_str(&b, d->uuid[0] ? d->uuid : NULL);
        if (d->mem_known)
            ot_buf_printf(&b, ",\"total\":%llu,\"free\":%llu,\"unavailable\":null", (unsigned long long)d->total,
                          (unsigned long long)d->free);
        else {
            ot_buf_puts(&b, ",\"total\":null,\"free\":null,\"unavailable\":");
            ot_buf_json_str(&b, d->unavailable[0] ? d->unavailable : "unknown");
        }
        ot_buf_puts(&b, ",\"processes\":");
        if (!d->procs_known) ot_buf_puts(&b, "null");
        else {
            ot_buf_putc(&b, '[');
            for (int p = 0; p < d->nprocs; p++) {
                ot_buf_printf(&b, "%s{\"pid\":%u,\"name\":", p ? "," : "", d->procs[p].pid);
                ot_buf_json_str(&b, d->procs[p].name[0] ? d->procs[p].name : NULL);
                ot_buf_puts(&b, ",\"used\":");
                if (d->procs[p].used == UINT64_MAX) ot_buf_puts(&b, "null");
                else ot_buf_u64(&b, d->procs[p].used);
                ot_buf_printf(&b, ",\"self\":%s}", d->procs[p].is_self ? "true" : "false");
            }
            ot_buf_putc(&b, ']');
        }
        ot_buf_puts(&b, ",\"processes_note\":");
        ot_buf_json_str(&b, d->procs_note[0] ? d->procs_note : NULL);
        ot_buf_putc(&b, '}');
    }
    ot_buf_puts(&b, "],\"live\":{\"host\":");
    json_totals(&b, &r->host);
    ot_buf_puts(&b, ",\"device\":");
    json_totals(&b, &r->device);
    ot_buf_puts(&b, ",\"by_kind\":{");
    for (unsigned k = 0; k < OT_KIND_COUNT; k++) {
        ot_buf_printf(&b, "%s\"%s\":", k ? "," : "", ot_kind_name(k));
        json_totals(&b, &r->by_kind[k]);
    }
    ot_buf_puts(&b, "}},\"sites\":[");
    bool first = true;
    for (int dev = 1; dev >= 0; dev--) {
        unsigned n = dev ? r->n_device_sites : r->n_host_sites;
        if (n > r->opt.top_sites) n = r->opt.top_sites;
        for (unsigned i = 0; i < n; i++) {
            const ot_site_info_t si = dev ? r->device_sites[i] : r->host_sites[i];
            ot_buf_puts(&b, first ? "{\"kind\":" : ",{\"kind\":");
            first = false;
            ot_buf_json_str(&b, ot_kind_name(si.kind));
            ot_buf_puts(&b, ",\"device\":");
            if (si.device >= 0) ot_buf_i64(&b, si.device);
            else ot_buf_puts(&b, "null");
            ot_buf_printf(&b,
                          ",\"bytes\":%llu,\"count\":%llu,\"peak_bytes\":%llu,\"total_bytes\":%llu,"
                          "\"total_count\":%llu,\"estimated\":%s,\"stack\":",
                          (unsigned long long)si.live_bytes, (unsigned long long)si.live_count,
                          (unsigned long long)si.peak_bytes, (unsigned long long)si.total_bytes,
                          (unsigned long long)si.total_count, si.estimated ? "true" : "false");
            ot_report_json_stack(&b, si.ips, si.depth);
            ot_buf_putc(&b, '}');
        }
    }
    ot_buf_puts(&b, "],\"diagnosis\":[");
    json_list_t diag = {&b, 0};
    ot_report_diagnose(r, json_diag_sink, &diag);
    ot_buf_printf(&b, "],\"suppressed_failures\":%u,\"options\":{\"stacks\":\"%s\",\"sample_bytes\":%llu,"
                      "\"stack_min_bytes\":%llu,\"stack_depth\":%u}}\n",
                  r->suppressed_failures, ot_report_stacks_name(r->opt.stacks),
                  (unsigned long long)r->opt.sample_bytes, (unsigned long long)r->opt.stack_min_bytes,
                  r->opt.stack_depth);
    ot_buf_flush(&b);
}
