/* Gathering a report's data from the live process: identity, the host's memory and limits, the
 * live totals, the devices, the top call sites. Runs inside a failing allocation or a signal
 * handler: no malloc (the probes read /proc with raw syscalls). */
#include <sys/syscall.h>
#include <unistd.h>

#include "report_internal.h"

static uint32_t top_ids[OT_REPORT_MAX_SITES];
static ot_asmap_t as_mem;
static ot_cg_usage_t cg_mem;

static unsigned gather_sites(ot_site_info_t *out, unsigned max, bool device)
{
    unsigned n = ot_sites_top(top_ids, max, device), k = 0;
    for (unsigned i = 0; i < n; i++)
        if (ot_sites_get(top_ids[i], &out[k])) k++;
    return k;
}

void ot_report_gather(ot_report_t *r, const char *event, const ot_failure_t *f, const char *reason)
{
    r->event = event;
    r->f = f;
    r->reason = reason;
    r->proc = ot_report_process();
    r->opt = (ot_report_opts_t){ot_opt.stacks, ot_opt.sample_bytes, ot_opt.stack_min_bytes, ot_opt.stack_depth,
                                ot_opt.max_reports, ot_opt.top_sites};
    r->tid = (long)syscall(SYS_gettid);
    r->when = time(NULL);
    ot_probe_host(&r->mem);
    ot_live_totals(false, &r->host);
    ot_live_totals(true, &r->device);
    for (unsigned k = 0; k < OT_KIND_COUNT; k++) ot_live_totals_kind(k, &r->by_kind[k]);
    r->ndev = 0;
    r->focus = -1;
    /* Not from a signal handler: the driver's and NVML's locks may be held by the interrupted code. */
    if (ot_opt.cuda && ot_cuda_active() && !r->in_signal) {
        int focus = f && f->device ? f->device_index : -1;
        r->ndev = ot_cuda_probe_devices(r->devices, OT_REPORT_MAX_DEVICES, focus, f ? f->device : true);
        if (r->ndev < 0) r->ndev = 0;
        if (f && f->device && r->ndev > 0) r->focus = 0;
    }
    /* The address space: read before the symbolizer maps ELF files of its own. smaps_rollup and
     * the cgroup's breakdown only where the cgroup limit binds or nearly (within a tenth); RSS also
     * where RAM is short (MemAvailable below the request and a twentieth of RAM). */
    uint64_t req = f && !f->device && !(f->count && f->size == UINT64_MAX) ? f->size : 0;
    const ot_host_mem_t *m = &r->mem;
    bool cg_tight = m->cgroup_limit > 0 && m->cgroup_usage >= 0 &&
                    (uint64_t)m->cgroup_usage + req >= (uint64_t)m->cgroup_limit - (uint64_t)m->cgroup_limit / 10;
    bool ram_short = m->mem_available >= 0 && m->mem_total > 0 &&
                     (uint64_t)m->mem_available < req + (uint64_t)m->mem_total / 20;
    r->as = ot_asmap_read_self(&as_mem, req, ot_opt.cuda && ot_cuda_active(), cg_tight || ram_short) ? &as_mem : NULL;
    r->cg = cg_tight && ot_cg_usage_read(m->cgroup_dir, m->cgroup_version, r->proc.pid, &cg_mem) ? &cg_mem : NULL;
    unsigned nsites = ot_opt.top_sites < OT_REPORT_MAX_SITES ? ot_opt.top_sites : OT_REPORT_MAX_SITES;
    r->n_host_sites = gather_sites(r->host_sites, nsites, false);
    /* The device diagnosis names the top device site even where no sites are listed. */
    r->n_device_sites = gather_sites(r->device_sites, nsites ? nsites : (f && f->device), true);
    ot_symbolize_begin();
}
