/* The report writer: what failed, the memory context, what this process holds, a diagnosis, as
 * text (log=) and JSON (report=). Never calls malloc (static buffers, raw write) and preserves
 * errno, so it can run inside a failing allocation and later from a signal handler. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define MAX_DEVICES 16

/* One report at a time; the state below is only touched while holding report_busy. */
static atomic_flag report_busy = ATOMIC_FLAG_INIT;
static char text_mem[16384], json_mem[16384];
static ot_frame_t frame_tmp;
static ot_device_info_t devices[MAX_DEVICES];
static uint32_t top_ids[1000];
static int log_fd = -2; /* -2: not opened yet */
static pid_t log_pid;
static char log_opened_for[sizeof ot_opt.log]; /* the log= value log_fd was opened for */
static _Atomic unsigned report_counter;
static _Atomic unsigned failures_total, failures_suppressed;
static _Atomic unsigned refusals_total; /* refused requests (f->refused): not failures */
#define REFUSALS_IN_FULL 4                /* lines for the first refusals, then at powers of two */
/* Does the n-th refusal get its line? (Else the exit summary gives the total.) */
static inline bool refusal_has_line(unsigned n) { return n <= REFUSALS_IN_FULL || (n & (n - 1)) == 0; }

typedef struct {
    const char *event;
    const ot_failure_t *f;
    uintptr_t ips[OT_MAX_FRAMES];
    unsigned depth;
    ot_host_mem_t mem;
    ot_totals_t host, device, by_kind[OT_KIND_COUNT];
    int ndev;
    int focus; /* index into devices[] of the failing device, or -1 */
    unsigned report_no;
    char json_path[600];
    long tid;
    time_t when;
    const char *reason;
} report_t;

static report_t R; /* guarded by report_busy */

/* ---------------------------------------------------------------- helpers */

static void put_time_utc(ot_buf_t *b, time_t t)
{
    /* civil-from-days (H. Hinnant); gmtime_r is avoided because it may take the tz lock. */
    int64_t days = t / 86400, secs = t % 86400;
    if (secs < 0) secs += 86400, days--;
    days += 719468;
    int64_t era = (days >= 0 ? days : days - 146096) / 146097;
    int64_t doe = days - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t y = yoe + era * 400, doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153, d = doy - (153 * mp + 2) / 5 + 1, m = mp < 10 ? mp + 3 : mp - 9;
    if (m <= 2) y++;
    ot_buf_printf(b, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lldZ", (long long)y, (long long)m, (long long)d,
                  (long long)(secs / 3600), (long long)(secs / 60 % 60), (long long)(secs % 60));
}

static void put_bytes_or(ot_buf_t *b, int64_t v, const char *unknown)
{
    if (v < 0) ot_buf_puts(b, unknown);
    else ot_buf_bytes(b, (uint64_t)v);
}

static void put_pct(ot_buf_t *b, uint64_t part, uint64_t whole)
{
    if (!whole) return;
    ot_buf_printf(b, " (%llu%%)", (unsigned long long)(part * 100 / whole));
}

static int open_new_file(const char *path)
{
    return (int)syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
}

/* Creates the report file; never overwrites and never follows a symlink. If the expanded name is
 * taken, tries name.1, name.2, ... */
static int create_report_file(const char *path, char *final, size_t cap)
{
    ot_strlcpy(final, path, cap);
    int fd = open_new_file(final);
    for (int i = 1; fd < 0 && errno == EEXIST && i < 100; i++) {
        ot_buf_t b;
        ot_buf_init(&b, final, cap, -1);
        ot_buf_printf(&b, "%s.%d", path, i);
        ot_buf_cstr(&b);
        fd = open_new_file(final);
    }
    return fd;
}

static int get_log_fd(void)
{
    pid_t pid = ot_state.pid;
    if (log_fd != -2 && log_pid == pid && !ot_strcmp(log_opened_for, ot_opt.log)) return log_fd;
    if (log_fd > 2 && log_pid == pid) syscall(SYS_close, log_fd); /* log= changed (tests) */
    log_pid = pid;                                                 /* forked: a file of its own */
    ot_strlcpy(log_opened_for, ot_opt.log, sizeof log_opened_for);
    if (!ot_strcmp(ot_opt.log, "stderr")) return log_fd = 2;
    if (!ot_strcmp(ot_opt.log, "none")) return log_fd = -1;
    char path[600], final[620];
    if (!ot_expand_template(ot_opt.log, 0, path, sizeof path)) return log_fd = 2;
    log_fd = create_report_file(path, final, sizeof final);
    if (log_fd < 0) log_fd = 2;
    return log_fd;
}

/* ---------------------------------------------------------------- stacks */

/* Stack entries are return addresses: look up ip - 1 so that the frame is named after the call
 * site (a call to a noreturn function may be the last instruction of its function) and so that
 * `addr2line -e module offset` prints the line of the call. */
static void symbolize_return_address(uintptr_t ip)
{
    ot_symbolize(ip > 0 ? ip - 1 : ip, &frame_tmp);
}

/* "function (module+0xoffset)" of the frame just symbolized. */
static void put_frame_where(ot_buf_t *b)
{
    ot_buf_puts(b, frame_tmp.function[0] ? frame_tmp.function : "??");
    if (frame_tmp.module && frame_tmp.module[0])
        ot_buf_printf(b, " (%s+0x%lx)", frame_tmp.module, (unsigned long)frame_tmp.offset);
}

static void text_frame(ot_buf_t *b, unsigned i, uintptr_t ip)
{
    symbolize_return_address(ip);
    ot_buf_printf(b, "oomtrace:     #%u %p in ", i, (void *)ip);
    put_frame_where(b);
    if (frame_tmp.file[0]) ot_buf_printf(b, " %s:%d", frame_tmp.file, frame_tmp.line);
    ot_buf_putc(b, '\n');
}

static void text_stack(ot_buf_t *b, const uintptr_t *ips, unsigned depth)
{
    if (depth == 0) ot_buf_puts(b, "oomtrace:     (no stack recorded)\n");
    for (unsigned i = 0; i < depth; i++) text_frame(b, i, ips[i]);
}

static void json_stack(ot_buf_t *b, const uintptr_t *ips, unsigned depth)
{
    ot_buf_putc(b, '[');
    for (unsigned i = 0; i < depth; i++) {
        symbolize_return_address(ips[i]);
        ot_buf_puts(b, i ? ",{\"ip\":" : "{\"ip\":");
        ot_buf_putc(b, '"');
        ot_buf_hex(b, ips[i]);
        ot_buf_puts(b, "\",\"function\":");
        ot_buf_json_str(b, frame_tmp.function[0] ? frame_tmp.function : NULL);
        ot_buf_puts(b, ",\"module\":");
        ot_buf_json_str(b, frame_tmp.module && frame_tmp.module[0] ? frame_tmp.module : NULL);
        ot_buf_puts(b, ",\"offset\":\"");
        ot_buf_hex(b, frame_tmp.offset);
        ot_buf_puts(b, "\",\"file\":");
        ot_buf_json_str(b, frame_tmp.file[0] ? frame_tmp.file : NULL);
        ot_buf_puts(b, ",\"line\":");
        if (frame_tmp.line > 0) ot_buf_i64(b, frame_tmp.line);
        else ot_buf_puts(b, "null");
        ot_buf_putc(b, '}');
    }
    ot_buf_putc(b, ']');
}

/* ---------------------------------------------------------------- diagnosis */

typedef void (*diag_sink)(void *ctx, const char *line);

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

static void diag_device(diag_sink sink, void *ctx, char *line, size_t cap)
{
    const ot_failure_t *f = R.f;
    ot_buf_t b;
#define LINE_BEGIN() ot_buf_init(&b, line, cap, -1)
#define LINE_END() (ot_buf_cstr(&b), sink(ctx, line))
    if (R.focus < 0) {
        LINE_BEGIN();
        ot_buf_puts(&b, "no information about the device could be read (CUDA interception off or no driver)");
        LINE_END();
        return;
    }
    const ot_device_info_t *d = &devices[R.focus];
    if (!d->mem_known) {
        LINE_BEGIN();
        ot_buf_printf(&b, "device memory of GPU %d is unavailable: %s", d->index,
                      d->unavailable[0] ? d->unavailable : "the driver gave no reason");
        LINE_END();
    }
    int nothers = 0;
    uint64_t others = others_used(d, &nothers);
    uint64_t self = R.device.bytes;
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
        if (top_ids[0]) {
            ot_site_info_t si;
            if (ot_sites_get(top_ids[0], &si)) {
                symbolize_return_address(si.depth ? si.ips[0] : 0);
                ot_buf_puts(&b, "; top site ");
                ot_buf_puts(&b, frame_tmp.function[0] ? frame_tmp.function : "??");
                ot_buf_puts(&b, " holds ");
                ot_buf_bytes(&b, si.live_bytes);
            }
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

static void diag_host(diag_sink sink, void *ctx, char *line, size_t cap)
{
    const ot_failure_t *f = R.f;
    const ot_host_mem_t *m = &R.mem;
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
    if (R.host.bytes && m->vm_size > 0 && R.host.bytes * 2 > (uint64_t)m->vm_size) {
        LINE_BEGIN();
        ot_buf_puts(&b, "this process's live heap is ");
        ot_buf_bytes(&b, R.host.bytes);
        ot_buf_printf(&b, " in %llu blocks: the top call sites below are where it went",
                      (unsigned long long)R.host.count);
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

static void run_diagnosis(diag_sink sink, void *ctx)
{
    static char line[1024];
    if (!R.f) return;
    if (R.f->device) diag_device(sink, ctx, line, sizeof line);
    else diag_host(sink, ctx, line, sizeof line);
}

static void text_diag_sink(void *ctx, const char *line)
{
    ot_buf_t *b = ctx;
    ot_buf_puts(b, "oomtrace:   - ");
    ot_buf_puts(b, line);
    ot_buf_putc(b, '\n');
}

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

/* ---------------------------------------------------------------- text */

static void write_text(int fd)
{
    ot_buf_t b;
    ot_buf_init(&b, text_mem, sizeof text_mem, fd);
    const ot_failure_t *f = R.f;
    const ot_host_mem_t *m = &R.mem;
    ot_buf_printf(&b, "oomtrace: ==== pid %d (%s) ", (int)ot_state.pid, ot_state.exe);
    if (f) {
        ot_buf_printf(&b, "%s(", f->api);
        if (f->count) ot_buf_printf(&b, "%llu, ", (unsigned long long)f->count);
        if (f->alignment) ot_buf_printf(&b, "align %llu, ", (unsigned long long)f->alignment);
        if (f->count && f->size == UINT64_MAX) ot_buf_puts(&b, "overflow");
        else ot_buf_u64(&b, f->size);
        ot_buf_printf(&b, ") failed: %s (%d)", f->error_name ? f->error_name : "error", f->error_code);
    } else {
        ot_buf_printf(&b, "%s%s%s", R.event, R.reason ? ": " : "", R.reason ? R.reason : "");
    }
    ot_buf_printf(&b, " [thread %ld, ", R.tid);
    put_time_utc(&b, R.when);
    ot_buf_puts(&b, "]\n");
    if (f) {
        if (!(f->count && f->size == UINT64_MAX)) {
            ot_buf_puts(&b, "oomtrace: requested ");
            ot_buf_bytes(&b, f->size);
            ot_buf_printf(&b, " (%llu bytes)", (unsigned long long)f->size);
            if (f->device && R.focus >= 0) ot_buf_printf(&b, " on GPU %d", devices[R.focus].index);
            ot_buf_putc(&b, '\n');
        }
        if (f->note) ot_buf_printf(&b, "oomtrace: %s\n", f->note);
        ot_buf_puts(&b, "oomtrace: diagnosis:\n");
        run_diagnosis(text_diag_sink, &b);
        ot_buf_puts(&b, "oomtrace: failing call:\n");
        text_stack(&b, R.ips, R.depth);
    }
    for (int i = 0; i < R.ndev; i++) {
        const ot_device_info_t *d = &devices[i];
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
    put_bytes_or(&b, m->mem_total, "?");
    ot_buf_puts(&b, ", MemAvailable ");
    put_bytes_or(&b, m->mem_available, "?");
    ot_buf_puts(&b, ", swap ");
    put_bytes_or(&b, m->swap_free, "?");
    ot_buf_puts(&b, " free of ");
    put_bytes_or(&b, m->swap_total, "?");
    ot_buf_puts(&b, "\noomtrace: this process: VmSize ");
    put_bytes_or(&b, m->vm_size, "?");
    ot_buf_puts(&b, ", VmRSS ");
    put_bytes_or(&b, m->vm_rss, "?");
    ot_buf_puts(&b, ", VmPeak ");
    put_bytes_or(&b, m->vm_peak, "?");
    ot_buf_printf(&b, ", %d-bit\noomtrace: limits: RLIMIT_AS ", m->ptr_bits);
    put_bytes_or(&b, m->rlimit_as, "unlimited");
    ot_buf_puts(&b, ", RLIMIT_DATA ");
    put_bytes_or(&b, m->rlimit_data, "unlimited");
    if (m->cgroup_version) {
        ot_buf_printf(&b, ", cgroup v%d %s limit ", m->cgroup_version, m->cgroup_path);
        put_bytes_or(&b, m->cgroup_limit, "unlimited");
        ot_buf_puts(&b, " usage ");
        put_bytes_or(&b, m->cgroup_usage, "?");
    }
    ot_buf_puts(&b, "\noomtrace: live in this process: host ");
    ot_buf_bytes(&b, R.host.bytes);
    ot_buf_printf(&b, " in %llu blocks (peak ", (unsigned long long)R.host.count);
    ot_buf_bytes(&b, R.host.peak_bytes);
    ot_buf_puts(&b, ")");
    if (R.device.count || R.device.total_count) {
        ot_buf_puts(&b, ", device ");
        ot_buf_bytes(&b, R.device.bytes);
        ot_buf_printf(&b, " in %llu blocks (peak ", (unsigned long long)R.device.count);
        ot_buf_bytes(&b, R.device.peak_bytes);
        ot_buf_puts(&b, ")");
        const char *sep = " by kind:";
        for (unsigned k = 1; k < OT_KIND_COUNT; k++) {
            if (!R.by_kind[k].count) continue;
            ot_buf_printf(&b, "%s %s ", sep, ot_kind_name(k));
            ot_buf_bytes(&b, R.by_kind[k].bytes);
            sep = ",";
        }
    }
    ot_buf_putc(&b, '\n');
    for (int dev = (f && f->device) ? 1 : 0; dev >= 0; dev--) {
        unsigned n = ot_sites_top(top_ids, ot_opt.top_sites, dev);
        if (!n) continue;
        ot_buf_printf(&b, "oomtrace: top %s call sites by live bytes:\n", dev ? "device" : "host");
        ot_totals_t *tot = dev ? &R.device : &R.host;
        for (unsigned i = 0; i < n; i++) {
            ot_site_info_t si;
            if (!ot_sites_get(top_ids[i], &si)) continue;
            ot_buf_printf(&b, "oomtrace:   %u. %s", i + 1, si.estimated ? "~" : "");
            ot_buf_bytes(&b, si.live_bytes);
            put_pct(&b, si.live_bytes, tot->bytes);
            ot_buf_printf(&b, " in %s%llu %s block%s", si.estimated ? "~" : "", (unsigned long long)si.live_count,
                          ot_kind_name(si.kind), si.live_count == 1 ? "" : "s");
            if (si.device >= 0) ot_buf_printf(&b, " on GPU %d", si.device);
            ot_buf_puts(&b, ", peak ");
            ot_buf_bytes(&b, si.peak_bytes);
            ot_buf_puts(&b, si.estimated ? " (sampled: estimates)\n" : "\n");
            text_stack(&b, si.ips, si.depth);
        }
    }
    if (atomic_load(&failures_suppressed))
        ot_buf_printf(&b, "oomtrace: %u earlier failures were counted but not reported in full (max_reports=%u)\n",
                      atomic_load(&failures_suppressed), ot_opt.max_reports);
    if (R.json_path[0]) ot_buf_printf(&b, "oomtrace: report: %s\n", R.json_path);
    ot_buf_puts(&b, "oomtrace: ====\n");
    ot_buf_flush(&b);
}

/* ---------------------------------------------------------------- JSON */

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

static void write_json(int fd)
{
    ot_buf_t b;
    ot_buf_init(&b, json_mem, sizeof json_mem, fd);
    const ot_failure_t *f = R.f;
    const ot_host_mem_t *m = &R.mem;
    ot_buf_puts(&b, "{\"schema_version\":1,\"tool\":\"oomtrace " OT_VERSION "\",\"event\":");
    ot_buf_json_str(&b, R.event);
    ot_buf_printf(&b, ",\"report_number\":%u,\"time\":\"", R.report_no);
    put_time_utc(&b, R.when);
    ot_buf_printf(&b, "\",\"process\":{\"pid\":%d,\"exe\":", (int)ot_state.pid);
    ot_buf_json_str(&b, ot_state.exe);
    ot_buf_puts(&b, ",\"cmdline\":");
    ot_buf_json_str(&b, ot_state.cmdline);
    ot_buf_puts(&b, ",\"host\":");
    ot_buf_json_str(&b, ot_state.host);
    ot_buf_puts(&b, ",\"rank\":");
    ot_buf_json_str(&b, ot_rank_string());
    ot_buf_puts(&b, "}");
    if (R.reason) {
        ot_buf_puts(&b, ",\"reason\":");
        ot_buf_json_str(&b, R.reason);
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
        ot_buf_puts(&b, ",\"alignment\":");
        if (f->alignment) ot_buf_u64(&b, f->alignment);
        else ot_buf_puts(&b, "null");
        ot_buf_puts(&b, ",\"error\":");
        ot_buf_json_str(&b, f->error_name);
        ot_buf_printf(&b, ",\"error_code\":%d,\"thread\":%ld,\"device\":", f->error_code, R.tid);
        if (f->device && f->device_index >= 0) ot_buf_i64(&b, f->device_index);
        else ot_buf_puts(&b, "null");
        ot_buf_printf(&b, ",\"may_recover\":%s,\"note\":", f->may_recover ? "true" : "false");
        ot_buf_json_str(&b, f->note);
        ot_buf_puts(&b, ",\"stack\":");
        json_stack(&b, R.ips, R.depth);
        ot_buf_putc(&b, '}');
    } else {
        ot_buf_puts(&b, "null");
    }
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
    ot_buf_puts(&b, ",\"devices\":[");
    for (int i = 0; i < R.ndev; i++) {
        const ot_device_info_t *d = &devices[i];
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
    json_totals(&b, &R.host);
    ot_buf_puts(&b, ",\"device\":");
    json_totals(&b, &R.device);
    ot_buf_puts(&b, ",\"by_kind\":{");
    for (unsigned k = 0; k < OT_KIND_COUNT; k++) {
        ot_buf_printf(&b, "%s\"%s\":", k ? "," : "", ot_kind_name(k));
        json_totals(&b, &R.by_kind[k]);
    }
    ot_buf_puts(&b, "}},\"sites\":[");
    bool first = true;
    for (int dev = 1; dev >= 0; dev--) {
        unsigned n = ot_sites_top(top_ids, ot_opt.top_sites, dev);
        for (unsigned i = 0; i < n; i++) {
            ot_site_info_t si;
            if (!ot_sites_get(top_ids[i], &si)) continue;
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
            json_stack(&b, si.ips, si.depth);
            ot_buf_putc(&b, '}');
        }
    }
    ot_buf_puts(&b, "],\"diagnosis\":[");
    json_list_t diag = {&b, 0};
    run_diagnosis(json_diag_sink, &diag);
    ot_buf_printf(&b, "],\"suppressed_failures\":%u,\"options\":{\"stacks\":\"%s\",\"sample_bytes\":%llu,"
                      "\"stack_min_bytes\":%llu,\"stack_depth\":%u}}\n",
                  atomic_load(&failures_suppressed),
                  ot_opt.stacks == OT_STACKS_ALL ? "all" : ot_opt.stacks == OT_STACKS_NONE ? "none" : "sampled",
                  (unsigned long long)ot_opt.sample_bytes, (unsigned long long)ot_opt.stack_min_bytes,
                  ot_opt.stack_depth);
    ot_buf_flush(&b);
}

/* ---------------------------------------------------------------- entry points */

static bool lock_report(bool wait)
{
    /* Another thread may be writing a report; wait a little (never from a signal handler). */
    for (int i = 0; atomic_flag_test_and_set_explicit(&report_busy, memory_order_acquire); i++) {
        if (!wait || i > 20000) return false;
        sched_yield();
    }
    return true;
}

static void gather(const char *event, const ot_failure_t *f, const char *reason)
{
    /* A child made by a raw clone/fork syscall never ran our atfork handler: ask the kernel. */
    ot_state.pid = (pid_t)syscall(SYS_getpid);
    R.event = event;
    R.f = f;
    R.reason = reason;
    R.tid = (long)syscall(SYS_gettid);
    R.when = time(NULL);
    ot_probe_host(&R.mem);
    ot_live_totals(false, &R.host);
    ot_live_totals(true, &R.device);
    for (unsigned k = 0; k < OT_KIND_COUNT; k++) ot_live_totals_kind(k, &R.by_kind[k]);
    R.ndev = 0;
    R.focus = -1;
    if (ot_opt.cuda && ot_cuda_active()) {
        int focus = f && f->device ? f->device_index : -1;
        R.ndev = ot_cuda_probe_devices(devices, MAX_DEVICES, focus, f ? f->device : true);
        if (R.ndev < 0) R.ndev = 0;
        if (f && f->device && R.ndev > 0) R.focus = 0;
    }
    top_ids[0] = 0;
    if (f && f->device) ot_sites_top(top_ids, 1, true);
    ot_symbolize_begin();
}

static void emit(void)
{
    R.json_path[0] = 0;
    int jfd = -1;
    if (ot_opt.report[0]) {
        char path[600];
        if (ot_expand_template(ot_opt.report, R.report_no, path, sizeof path))
            jfd = create_report_file(path, R.json_path, sizeof R.json_path);
        if (jfd < 0) R.json_path[0] = 0;
    }
    int lfd = get_log_fd();
    if (lfd >= 0) write_text(lfd);
    if (jfd >= 0) {
        write_json(jfd);
        syscall(SYS_close, jfd);
    }
}

/* A request the driver or runtime refused (invalid value, not permitted, ...): not a shortage of
 * memory, and often a probe the program falls back from, so one line in the log names the call and
 * its caller, and no report is written or counted against max_reports. */
static void note_refusal(const ot_failure_t *f)
{
    unsigned n = atomic_fetch_add(&refusals_total, 1) + 1;
    if (!refusal_has_line(n)) return;
    if (!lock_report(true)) return;
    ot_in_hook++;
    ot_state.pid = (pid_t)syscall(SYS_getpid);
    int lfd = get_log_fd();
    if (lfd >= 0) {
        uintptr_t ip[1];
        unsigned depth = f->origin ? ot_stack_capture_exact_at(ip, 1, f->origin)
                                   : ot_stack_capture_exact(ip, 1, f->skip + 1);
        char line[1024];
        ot_buf_t b;
        ot_buf_init(&b, line, sizeof line, lfd);
        ot_buf_printf(&b, "oomtrace: %s(%llu) returned %s (%d)", f->api, (unsigned long long)f->size,
                      f->error_name ? f->error_name : "?", f->error_code);
        if (f->device && f->device_index >= 0) ot_buf_printf(&b, " on GPU %d", f->device_index);
        if (depth) {
            ot_symbolize_begin();
            symbolize_return_address(ip[0]);
            ot_buf_puts(&b, " in ");
            put_frame_where(&b);
        }
        ot_buf_puts(&b, ": the request was refused, not short of memory; no report");
        if (n > 1) ot_buf_printf(&b, " (%u refused requests so far)", n);
        ot_buf_putc(&b, '\n');
        ot_buf_flush(&b);
    }
    ot_in_hook--;
    atomic_flag_clear_explicit(&report_busy, memory_order_release);
}

void ot_report_failure(const ot_failure_t *f)
{
    int saved = errno;
    if (f->refused) {
        note_refusal(f);
        errno = saved;
        return;
    }
    unsigned seen = atomic_fetch_add(&failures_total, 1) + 1;
    if (seen > ot_opt.max_reports) {
        unsigned s = atomic_fetch_add(&failures_suppressed, 1) + 1;
        /* Count, and say so at 1, 2, 4, 8, ... suppressed failures: a failing loop cannot flood. */
        if ((s & (s - 1)) == 0) {
            int lfd = get_log_fd();
            if (lfd >= 0) {
                char line[256];
                ot_buf_t b;
                ot_buf_init(&b, line, sizeof line, lfd);
                ot_buf_printf(&b, "oomtrace: %u more allocation failures not reported in full (latest: %s of ",
                              s, f->api);
                ot_buf_bytes(&b, f->size);
                ot_buf_puts(&b, ")\n");
                ot_buf_flush(&b);
            }
        }
        errno = saved;
        return;
    }
    if (!lock_report(true)) {
        atomic_fetch_add(&failures_suppressed, 1);
        errno = saved;
        return;
    }
    ot_in_hook++;
    R.report_no = atomic_fetch_add(&report_counter, 1) + 1;
    R.depth = f->origin ? ot_stack_capture_exact_at(R.ips, ot_opt.stack_depth, f->origin)
                        : ot_stack_capture_exact(R.ips, ot_opt.stack_depth, f->skip + 1);
    gather("alloc_failure", f, NULL);
    /* libstdc++'s operator new loops: malloc fails, the new-handler runs, malloc is retried; only
     * when there is no handler does it throw. So a failure seen from operator new may yet succeed. */
    ot_failure_t fcopy;
    if (!f->may_recover && R.depth > 0) {
        symbolize_return_address(R.ips[0]);
        if (!ot_strncmp(frame_tmp.function, "operator new", 12)) {
            fcopy = *f;
            fcopy.may_recover = true;
            R.f = &fcopy;
        }
    }
    emit();
    ot_in_hook--;
    atomic_flag_clear_explicit(&report_busy, memory_order_release);
    errno = saved;
}

int ot_report_event(const char *event, const char *reason)
{
    int saved = errno;
    if (!lock_report(true)) {
        errno = saved;
        return -1;
    }
    ot_in_hook++;
    R.report_no = atomic_fetch_add(&report_counter, 1) + 1;
    R.depth = 0;
    gather(event, NULL, reason);
    emit();
    int n = (int)R.report_no;
    ot_in_hook--;
    atomic_flag_clear_explicit(&report_busy, memory_order_release);
    errno = saved;
    return n;
}

void ot_report_exit_summary(void)
{
    unsigned suppressed = atomic_load(&failures_suppressed), refused = atomic_load(&refusals_total);
    bool refusals_unsaid = !refusal_has_line(refused); /* false for 0: nothing to say */
    if ((!suppressed && !refusals_unsaid) || !lock_report(false)) return;
    ot_state.pid = (pid_t)syscall(SYS_getpid);
    int fd = get_log_fd();
    if (fd >= 0) {
        char line[256];
        ot_buf_t b;
        ot_buf_init(&b, line, sizeof line, fd);
        if (suppressed)
            ot_buf_printf(&b, "oomtrace: at exit: %u allocation failures in all, %u of them not reported in full "
                              "(max_reports=%u)\n", atomic_load(&failures_total), suppressed, ot_opt.max_reports);
        if (refusals_unsaid)
            ot_buf_printf(&b, "oomtrace: at exit: %u refused requests in all (not shortages of memory)\n", refused);
        ot_buf_flush(&b);
    }
    atomic_flag_clear_explicit(&report_busy, memory_order_release);
}

unsigned ot_report_failures_total(void) { return atomic_load(&failures_total); }

void ot_report_atfork_child(void)
{
    atomic_flag_clear(&report_busy);
    if (log_fd > 2) syscall(SYS_close, log_fd); /* the child writes to a file of its own */
    log_fd = -2;
}
