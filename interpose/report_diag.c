/* The diagnosis rules: which limit was hit and what to try, from the report's data alone. Each rule
 * hands its lines to a sink (the text or the JSON writer). No malloc. */
#include <errno.h>

#include "report_internal.h"

static uint64_t others_used(const ot_device_info_t *d, int *n_others)
{
    uint64_t sum = 0;
    int n = 0;
    for (int i = 0; i < d->nprocs; i++) {
        if (d->procs[i].is_self || d->procs[i].used == UINT64_MAX) continue;
        sum += d->procs[i].used;
        n++;
    }
    if (n_others) *n_others = n;
    return sum;
}

static void diag_device(const ot_report_t *r, ot_diag_sink_t sink, void *ctx, char *line, size_t cap)
{
    const ot_failure_t *f = r->f;
    ot_buf_t b;
#define LINE_BEGIN() ot_buf_init(&b, line, cap, -1)
#define LINE_END() (ot_buf_cstr(&b), sink(ctx, line))
    if (r->focus < 0) {
        LINE_BEGIN();
        ot_buf_puts(&b, "no information about the device could be read (CUDA interception off or no driver)");
        LINE_END();
        return;
    }
    const ot_device_info_t *d = &r->devices[r->focus];
    if (!d->mem_known) {
        LINE_BEGIN();
        ot_buf_printf(&b, "device memory of GPU %d is unavailable: %s", d->index,
                      d->unavailable[0] ? d->unavailable : "the driver gave no reason");
        LINE_END();
    }
    int nothers = 0;
    uint64_t others = others_used(d, &nothers);
    uint64_t self = r->device.bytes;
    bool said = false;
    if (d->mem_known && f->size > d->total) {
        LINE_BEGIN();
        ot_buf_puts(&b, "the request (");
        ot_buf_bytes(&b, f->size);
        ot_buf_puts(&b, ") is larger than the device's total memory (");
        ot_buf_bytes(&b, d->total);
        ot_buf_puts(&b, "): it can never succeed on this GPU; reduce the batch size or split the model");
        LINE_END();
        said = true;
    }
    if (d->mem_known && nothers > 0 && others >= d->total / 4 && others >= self) {
        LINE_BEGIN();
        ot_buf_puts(&b, "other processes hold ");
        ot_buf_bytes(&b, others);
        ot_buf_puts(&b, " of ");
        ot_buf_bytes(&b, d->total);
        ot_buf_printf(&b, " on GPU %d:", d->index);
        int shown = 0;
        for (int i = 0; i < d->nprocs && shown < 5; i++) {
            if (d->procs[i].is_self) continue;
            ot_buf_printf(&b, "%s pid %u (%s) ", shown ? "," : "", d->procs[i].pid,
                          d->procs[i].name[0] ? d->procs[i].name : "?");
            if (d->procs[i].used == UINT64_MAX) ot_buf_puts(&b, "unknown");
            else ot_buf_bytes(&b, d->procs[i].used);
            shown++;
        }
        LINE_END();
        LINE_BEGIN();
        ot_buf_puts(&b, "try: look at those processes (nvidia-smi lists them; top does not show GPU memory); stop "
                        "or wait for them, or run on another GPU (CUDA_VISIBLE_DEVICES)");
        LINE_END();
        said = true;
    } else if (d->mem_known && self >= d->total / 2) {
        LINE_BEGIN();
        ot_buf_puts(&b, "this process holds most of the device: ");
        ot_buf_bytes(&b, self);
        ot_buf_puts(&b, " of ");
        ot_buf_bytes(&b, d->total);
        if (r->n_device_sites) {
            const ot_site_info_t *si = &r->device_sites[0];
            const ot_frame_t *fr = ot_report_frame(si->depth ? si->ips[0] : 0);
            ot_buf_puts(&b, "; top site ");
            ot_buf_puts(&b, fr->function[0] ? fr->function : "??");
            ot_buf_puts(&b, " holds ");
            ot_buf_bytes(&b, si->live_bytes);
        }
        LINE_END();
        LINE_BEGIN();
        ot_buf_puts(&b, "try: a smaller batch size, a smaller model, or freeing tensors/blobs that are no longer needed");
        LINE_END();
        said = true;
    }
    bool listed = false;
    for (int i = 0; i < d->nprocs; i++) listed |= d->procs[i].is_self;
    if (d->mem_known && d->free >= f->size && self == 0 && !listed) {
        /* Nothing of ours on the device, and not among its processes: no context yet. Creating one
         * (the runtime does it in the first call) takes device memory too, hundreds of MiB. */
        LINE_BEGIN();
        ot_buf_puts(&b, "this process holds no device memory yet");
        if (d->procs_known) ot_buf_printf(&b, " and is not among GPU %d's processes", d->index);
        ot_buf_puts(&b, ": its first CUDA call creates a context, which takes device memory of its own "
                        "(hundreds of MiB on recent GPUs), so ");
        ot_buf_bytes(&b, d->free);
        ot_buf_puts(&b, d->procs_known ? " free was too little for the context and the request together"
                                       : " free may have been too little for the context and the request together");
        LINE_END();
        said = true;
    } else if (d->mem_known && d->free >= f->size) {
        LINE_BEGIN();
        ot_buf_puts(&b, "free memory (");
        ot_buf_bytes(&b, d->free);
        ot_buf_puts(&b, ") exceeds the request: fragmentation or a caching allocator's reserve (PyTorch: "
                        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, torch.cuda.empty_cache())");
        LINE_END();
        said = true;
    }
    if (!said && d->mem_known) {
        LINE_BEGIN();
        ot_buf_puts(&b, "the device is full: ");
        ot_buf_bytes(&b, d->free);
        ot_buf_puts(&b, " free of ");
        ot_buf_bytes(&b, d->total);
        ot_buf_puts(&b, ", this process holds ");
        ot_buf_bytes(&b, self);
        if (!d->procs_known) ot_buf_puts(&b, "; who holds the rest is unknown (no process list)");
        LINE_END();
    }
}

static void diag_host(const ot_report_t *r, ot_diag_sink_t sink, void *ctx, char *line, size_t cap)
{
    const ot_failure_t *f = r->f;
    const ot_host_mem_t *m = &r->mem;
    ot_buf_t b;
    bool said = false;
    uint64_t req = f->size;
    if (f->count && f->size == UINT64_MAX) {
        LINE_BEGIN();
        ot_buf_printf(&b, "nmemb (%llu) times size overflows size_t: the request itself is invalid",
                      (unsigned long long)f->count);
        LINE_END();
        return;
    }
    if (f->error_code == EINVAL) {
        LINE_BEGIN();
        ot_buf_printf(&b, "invalid argument, not a shortage of memory: alignment %llu must be a power of two "
                          "and a multiple of sizeof(void *)", (unsigned long long)f->alignment);
        LINE_END();
        return;
    }
    if (req >= (1ull << 47)) {
        LINE_BEGIN();
        ot_buf_puts(&b, "the request (");
        ot_buf_bytes(&b, req);
        ot_buf_puts(&b, ") exceeds any address space: most likely a negative or overflowed size computation");
        LINE_END();
        return;
    }
    if (m->rlimit_as >= 0 && m->vm_size >= 0 && (uint64_t)m->vm_size + req > (uint64_t)m->rlimit_as) {
        LINE_BEGIN();
        ot_buf_puts(&b, "RLIMIT_AS ");
        ot_buf_bytes(&b, (uint64_t)m->rlimit_as);
        ot_buf_puts(&b, ": ");
        ot_buf_bytes(&b, (uint64_t)m->vm_size);
        ot_buf_puts(&b, " of address space in use + ");
        ot_buf_bytes(&b, req);
        ot_buf_puts(&b, " requested");
        LINE_END();
        LINE_BEGIN();
        ot_buf_puts(&b, "try: raise the address-space limit (ulimit -v; the job scheduler's vmem limit), or reduce "
                        "the batch size or model size");
        LINE_END();
        said = true;
    }
    if (m->ptr_bits == 32 && m->vm_size >= 0 && (uint64_t)m->vm_size + req > (3ull << 30)) {
        LINE_BEGIN();
        ot_buf_puts(&b, "32-bit process: ");
        ot_buf_bytes(&b, (uint64_t)m->vm_size);
        ot_buf_puts(&b, " of a 3-4 GiB address space in use; try: a 64-bit build/OS, a smaller batch or model");
        LINE_END();
        said = true;
    }
    if (m->rlimit_data >= 0 && m->vm_data >= 0 && (uint64_t)m->vm_data + req > (uint64_t)m->rlimit_data) {
        LINE_BEGIN();
        ot_buf_puts(&b, "RLIMIT_DATA ");
        ot_buf_bytes(&b, (uint64_t)m->rlimit_data);
        ot_buf_puts(&b, ": ");
        ot_buf_bytes(&b, (uint64_t)m->vm_data);
        ot_buf_puts(&b, " of data segment in use + ");
        ot_buf_bytes(&b, req);
        ot_buf_puts(&b, " requested; try: raise it (ulimit -d)");
        LINE_END();
        said = true;
    }
    if (m->cgroup_limit >= 0 && m->cgroup_usage >= 0 && (uint64_t)m->cgroup_usage + req > (uint64_t)m->cgroup_limit) {
        LINE_BEGIN();
        ot_buf_printf(&b, "cgroup memory.max reached (%s): ", m->cgroup_version == 1 ? "v1 limit_in_bytes" : "v2");
        ot_buf_bytes(&b, (uint64_t)m->cgroup_usage);
        ot_buf_puts(&b, " used of ");
        ot_buf_bytes(&b, (uint64_t)m->cgroup_limit);
        ot_buf_puts(&b, "; try: raise the container/job memory limit, or reduce the batch or model size");
        LINE_END();
        said = true;
    }
    if (m->mem_total >= 0 && m->swap_total >= 0 && req > (uint64_t)(m->mem_total + m->swap_total)) {
        LINE_BEGIN();
        ot_buf_puts(&b, "the request is larger than total memory (RAM ");
        ot_buf_bytes(&b, (uint64_t)m->mem_total);
        ot_buf_puts(&b, " + swap ");
        ot_buf_bytes(&b, (uint64_t)m->swap_total);
        ot_buf_puts(&b, "); try: a smaller batch or model, more RAM, or a swap file");
        LINE_END();
        said = true;
    } else if (m->mem_available >= 0 && (uint64_t)m->mem_available < req &&
               (m->swap_free <= 0 || (uint64_t)(m->mem_available + m->swap_free) < req)) {
        LINE_BEGIN();
        ot_buf_puts(&b, "MemAvailable (");
        ot_buf_bytes(&b, (uint64_t)m->mem_available);
        ot_buf_puts(&b, ") below the request and ");
        if (m->swap_total <= 0) ot_buf_puts(&b, "no swap");
        else {
            ot_buf_puts(&b, "swap nearly full (");
            ot_buf_bytes(&b, (uint64_t)(m->swap_free > 0 ? m->swap_free : 0));
            ot_buf_puts(&b, " free)");
        }
        ot_buf_puts(&b, "; try: add a swap file, stop other memory users, or reduce the batch or model size");
        LINE_END();
        said = true;
    }
    if (!said && m->overcommit_memory == 2) {
        LINE_BEGIN();
        ot_buf_puts(&b, "strict overcommit (vm.overcommit_memory=2): the commit limit was probably reached");
        LINE_END();
        said = true;
    }
    if (!said) {
        LINE_BEGIN();
        ot_buf_puts(&b, "no limit explains it: address-space fragmentation, or memory taken by other processes "
                        "since the failure");
        LINE_END();
    }
    if (r->host.bytes && m->vm_size > 0 && r->host.bytes * 2 > (uint64_t)m->vm_size) {
        LINE_BEGIN();
        ot_buf_puts(&b, "this process's live heap is ");
        ot_buf_bytes(&b, r->host.bytes);
        ot_buf_printf(&b, " in %llu blocks: the top call sites below are where it went",
                      (unsigned long long)r->host.count);
        LINE_END();
    }
    if (f->may_recover) {
        LINE_BEGIN();
        ot_buf_puts(&b, "the program may recover: operator new calls the new-handler and retries, or the caller "
                        "handles the failure");
        LINE_END();
    }
#undef LINE_BEGIN
#undef LINE_END
}

void ot_report_diagnose(const ot_report_t *r, ot_diag_sink_t sink, void *ctx)
{
    static char line[1024];
    if (!r->f) return;
    if (r->f->device) diag_device(r, sink, ctx, line, sizeof line);
    else diag_host(r, sink, ctx, line, sizeof line);
}
