/* Device facts for a report: name, PCI bus id, UUID, free/total memory from the driver itself, and
 * every process on the device from NVML. Runs inside a report, after a failure: it may find nothing
 * (no driver, no device, no NVML) and must then say why, never fail. It calls the driver's own
 * entry points, never our wrappers, and loads libcuda or NVML only when may_load allows it. */
#include <dlfcn.h>
#include <unistd.h>

#include "cuda_internal.h"

/* ---------------------------------------------------------------- driver side */

static void say_cu(char *out, size_t cap, const ot_cuda_driver_t *d, const char *call, CUresult r)
{
    const char *text = NULL;
    if (d->cuGetErrorString) d->cuGetErrorString(r, &text);
    ot_buf_t b;
    ot_buf_init(&b, out, cap, -1);
    ot_buf_printf(&b, "%s failed: %s (%d)", call, ot_cuda_error_name((int)r), (int)r);
    if (text) ot_buf_printf(&b, ": %s", text);
    ot_buf_cstr(&b);
}

static void format_uuid(const CUuuid *u, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    ot_buf_t b;
    ot_buf_init(&b, out, cap, -1);
    ot_buf_puts(&b, "GPU-");
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) ot_buf_putc(&b, '-');
        unsigned char c = (unsigned char)u->bytes[i];
        ot_buf_putc(&b, hex[c >> 4]);
        ot_buf_putc(&b, hex[c & 15]);
    }
    ot_buf_cstr(&b);
}

/* free/total of one device, through a context that already exists: the current one, or the
 * device's primary context when it is active. Never creates a context (that costs device memory). */
static bool device_memory(const ot_cuda_driver_t *d, int ordinal, ot_device_info_t *out)
{
    if (!d->cuMemGetInfo_v2) {
        ot_strlcpy(out->unavailable, "the driver has no cuMemGetInfo_v2", sizeof out->unavailable);
        return false;
    }
    size_t free_b = 0, total_b = 0;
    CUresult r;
    CUdevice cur;
    if (d->cuCtxGetDevice && d->cuCtxGetDevice(&cur) == CUDA_SUCCESS && cur == ordinal) {
        r = d->cuMemGetInfo_v2(&free_b, &total_b);
    } else {
        unsigned flags = 0;
        int active = 0;
        if (!d->cuDevicePrimaryCtxGetState || !d->cuDevicePrimaryCtxRetain || !d->cuCtxPushCurrent_v2 ||
            !d->cuCtxPopCurrent_v2 || d->cuDevicePrimaryCtxGetState(ordinal, &flags, &active) != CUDA_SUCCESS ||
            !active) {
            ot_strlcpy(out->unavailable, "this process has no context on this GPU (free memory not asked, to "
                       "avoid creating one)", sizeof out->unavailable);
            return false;
        }
        CUcontext ctx = NULL, popped = NULL;
        r = d->cuDevicePrimaryCtxRetain(&ctx, ordinal);
        if (r == CUDA_SUCCESS) {
            r = d->cuCtxPushCurrent_v2(ctx);
            if (r == CUDA_SUCCESS) {
                r = d->cuMemGetInfo_v2(&free_b, &total_b);
                d->cuCtxPopCurrent_v2(&popped);
            }
            if (d->cuDevicePrimaryCtxRelease_v2) d->cuDevicePrimaryCtxRelease_v2(ordinal);
        }
    }
    if (r != CUDA_SUCCESS) {
        say_cu(out->unavailable, sizeof out->unavailable, d, "cuMemGetInfo", r);
        return false;
    }
    out->free = free_b;
    out->total = total_b;
    return true;
}

static void device_identity(const ot_cuda_driver_t *d, int ordinal, ot_device_info_t *out)
{
    CUdevice dev = ordinal;
    if (d->cuDeviceGet && d->cuDeviceGet(&dev, ordinal) != CUDA_SUCCESS) dev = ordinal;
    if (d->cuDeviceGetName && d->cuDeviceGetName(out->name, (int)sizeof out->name, dev) != CUDA_SUCCESS)
        out->name[0] = 0;
    if (d->cuDeviceGetPCIBusId &&
        d->cuDeviceGetPCIBusId(out->pci_bus_id, (int)sizeof out->pci_bus_id, dev) != CUDA_SUCCESS)
        out->pci_bus_id[0] = 0;
    CUuuid u;
    CUresult r = CUDA_ERROR_NOT_FOUND;
    if (d->cuDeviceGetUuid_v2) r = d->cuDeviceGetUuid_v2(&u, dev);
    else if (d->cuDeviceGetUuid) r = d->cuDeviceGetUuid(&u, dev);
    if (r == CUDA_SUCCESS) format_uuid(&u, out->uuid, sizeof out->uuid);
}

/* ---------------------------------------------------------------- NVML side */

typedef struct {
#define OT_NV_FIELD(ret, sym, params) ot_fn_##sym sym;
    OT_NVML_CALLED(OT_NV_FIELD)
#undef OT_NV_FIELD
} nvml_t;

typedef struct {
    void *handle;
    nvml_t f;
    bool up;          /* nvmlInit_v2 succeeded (shut down at the end of the probe) */
    char why[200];    /* why there is no process list, when there is none */
} nvml_session_t;

static void nvml_open(nvml_session_t *s, bool may_load)
{
    ot_memset(s, 0, sizeof *s);
    s->handle = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!s->handle && may_load) s->handle = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!s->handle) {
        ot_strlcpy(s->why,
                   may_load ? "NVML (libnvidia-ml.so.1) not found: other processes on this GPU cannot be listed; "
                              "run nvidia-smi to see them"
                            : "NVML not loaded, and nothing is loaded while host memory is short",
                   sizeof s->why);
        return;
    }
#define OT_NV_RESOLVE(ret, sym, params) s->f.sym = (ot_fn_##sym)ot_real_dlsym(s->handle, #sym);
    OT_NVML_CALLED(OT_NV_RESOLVE)
#undef OT_NV_RESOLVE
    if (!s->f.nvmlInit_v2) {
        ot_strlcpy(s->why, "NVML is too old (no nvmlInit_v2)", sizeof s->why);
        return;
    }
    nvmlReturn_t r = s->f.nvmlInit_v2();
    if (r != NVML_SUCCESS) {
        ot_buf_t b;
        ot_buf_init(&b, s->why, sizeof s->why, -1);
        ot_buf_printf(&b, "nvmlInit failed: %s (%d)", s->f.nvmlErrorString ? s->f.nvmlErrorString(r) : "?", (int)r);
        ot_buf_cstr(&b);
        return;
    }
    s->up = true;
}

static void nvml_close(nvml_session_t *s)
{
    if (s->up && s->f.nvmlShutdown) s->f.nvmlShutdown();
    /* The handle stays: unloading NVML inside a report is not worth the risk. */
}

/* One process list, as (pid, used) pairs. Which call and struct, and why:
 * - nvmlDeviceGetComputeRunningProcesses_v2 with nvmlProcessInfo_v2_t (pid, usedGpuMemory,
 *   gpuInstanceId, computeInstanceId: 24 bytes) has kept that layout in every driver that has it.
 * - The _v3 calls are avoided: R535 made them write a 32-byte struct (usedGpuCcProtectedMemory)
 *   without a version bump, later drivers went back to 24 bytes, and some write 16.
 * - Drivers without _v2 get the unversioned call, whose v1 struct (16 bytes) never changed.
 * The buffer is sized for 32-byte entries whatever we ask for, so even a driver that writes a larger
 * struct than declared cannot overrun it; entries that do not look like a process (pid 0, more
 * memory than the device has) make us fall back to the next call rather than report garbage. */
#define NV_STACK_ENTRIES 48
#define NV_MAX_STRIDE 32

typedef struct {
    uint32_t pid;
    uint64_t used;
} nv_proc_t;

typedef nvmlReturn_t (*nv_list_fn)(nvmlDevice_t, unsigned int *, void *);

static int nv_call(nv_list_fn fn, nvmlDevice_t dev, size_t stride, uint64_t total, nv_proc_t *out, int max,
                   nvmlReturn_t *err)
{
    unsigned char stack_buf[NV_STACK_ENTRIES * NV_MAX_STRIDE] __attribute__((aligned(8)));
    unsigned char *buf = stack_buf;
    size_t map_bytes = 0;
    unsigned cap = NV_STACK_ENTRIES, count = 0;
    nvmlReturn_t r = NVML_ERROR_UNKNOWN;
    /* Grow on "insufficient size": the count can change between calls, so try a few times. */
    for (int attempt = 0; attempt < 4; attempt++) {
        count = cap;
        r = fn(dev, &count, buf);
        if (r != NVML_ERROR_INSUFFICIENT_SIZE) break;
        unsigned want = count > cap ? count * 2 : cap * 2;
        if (map_bytes) ot_munmap(buf, map_bytes);
        map_bytes = (size_t)want * NV_MAX_STRIDE;
        buf = ot_mmap(map_bytes);
        if (!buf) {
            map_bytes = 0;
            buf = stack_buf;
            cap = NV_STACK_ENTRIES;
            r = NVML_ERROR_INSUFFICIENT_SIZE;
            break;
        }
        cap = want;
    }
    int n = -1;
    if (r == NVML_SUCCESS) {
        if (count > cap) count = cap;
        n = 0;
        for (unsigned i = 0; i < count; i++) {
            const unsigned char *e = buf + (size_t)i * stride;
            uint32_t pid;
            uint64_t used;
            ot_memcpy(&pid, e, 4);
            ot_memcpy(&used, e + 8, 8);
            bool unknown = used == (uint64_t)(unsigned long long)NVML_VALUE_NOT_AVAILABLE;
            if (pid == 0 || (!unknown && total && used > total)) {
                n = -1; /* not the layout we asked for */
                r = NVML_ERROR_UNKNOWN;
                break;
            }
            if (n < max) out[n++] = (nv_proc_t){pid, unknown ? UINT64_MAX : used};
        }
    }
    if (map_bytes) ot_munmap(buf, map_bytes);
    *err = r;
    return n;
}

/* Compute or graphics processes: _v2 first, then v1. Returns -1 when neither gave a usable list. */
static int nv_list(const nvml_t *f, nvmlDevice_t dev, bool graphics, uint64_t total, nv_proc_t *out, int max,
                   nvmlReturn_t *err)
{
    nv_list_fn v2 = (nv_list_fn)(graphics ? (void *)f->nvmlDeviceGetGraphicsRunningProcesses_v2
                                          : (void *)f->nvmlDeviceGetComputeRunningProcesses_v2);
    nv_list_fn v1 = (nv_list_fn)(graphics ? (void *)f->nvmlDeviceGetGraphicsRunningProcesses
                                          : (void *)f->nvmlDeviceGetComputeRunningProcesses);
    int n = -1;
    *err = NVML_ERROR_FUNCTION_NOT_FOUND;
    if (v2) n = nv_call(v2, dev, sizeof(nvmlProcessInfo_v2_t), total, out, max, err);
    if (n < 0 && v1) n = nv_call(v1, dev, sizeof(nvmlProcessInfo_v1_t), total, out, max, err);
    return n;
}

/* Is this process in the host's pid namespace? NVML reports host pids. */
static int pid_namespace_state(void)
{
    char link[64];
    ssize_t n = readlink("/proc/self/ns/pid", link, sizeof link - 1);
    if (n <= 0) return -1; /* unknown */
    link[n] = 0;
    /* The initial pid namespace has the fixed inode PROC_PID_INIT_INO (0xEFFFFFFC). */
    return ot_strcmp(link, "pid:[4026531836]") == 0 ? 1 : 0;
}

static void self_comm(char *out, size_t cap)
{
    out[0] = 0;
    ssize_t n = ot_read_file("/proc/self/comm", out, cap);
    if (n <= 0) {
        out[0] = 0;
        return;
    }
    if ((size_t)n >= cap) n = (ssize_t)cap - 1;
    out[n] = 0;
    for (ssize_t i = 0; i < n; i++)
        if (out[i] == '\n') out[i] = 0;
}

static const char *base_name(const char *p)
{
    const char *b = p;
    for (; *p; p++)
        if (*p == '/') b = p + 1;
    return b;
}

/* NVML may give a full path or a name cut at 15 characters like /proc/PID/comm. */
static bool same_program(const char *nvml_name, const char *comm)
{
    const char *a = base_name(nvml_name);
    if (!*a || !*comm) return false;
    size_t la = ot_strlen(a), lc = ot_strlen(comm);
    if (la == lc) return ot_strcmp(a, comm) == 0;
    if (lc == 15 && la > 15) return ot_strncmp(a, comm, 15) == 0;
    return false;
}

static void nvml_processes(nvml_session_t *s, ot_device_info_t *out, int64_t self_bytes)
{
    if (!s->up) {
        ot_strlcpy(out->procs_note, s->why, sizeof out->procs_note);
        return;
    }
    const nvml_t *f = &s->f;
    nvmlDevice_t dev = NULL;
    nvmlReturn_t r = NVML_ERROR_NOT_FOUND;
    /* By UUID, not by index: CUDA and NVML number devices differently (CUDA_VISIBLE_DEVICES,
     * CUDA_DEVICE_ORDER). */
    if (out->uuid[0] && f->nvmlDeviceGetHandleByUUID) r = f->nvmlDeviceGetHandleByUUID(out->uuid, &dev);
    if (r != NVML_SUCCESS && out->pci_bus_id[0] && f->nvmlDeviceGetHandleByPciBusId_v2)
        r = f->nvmlDeviceGetHandleByPciBusId_v2(out->pci_bus_id, &dev);
    if (r != NVML_SUCCESS) {
        ot_buf_t b;
        ot_buf_init(&b, out->procs_note, sizeof out->procs_note, -1);
        ot_buf_printf(&b, "NVML does not know this GPU (%s): %s", out->uuid[0] ? out->uuid : out->pci_bus_id,
                      f->nvmlErrorString ? f->nvmlErrorString(r) : "?");
        ot_buf_cstr(&b);
        return;
    }
    if (!out->mem_known && f->nvmlDeviceGetMemoryInfo) {
        /* No context of ours on this device: NVML still knows its memory. */
        nvmlMemory_t m;
        if (f->nvmlDeviceGetMemoryInfo(dev, &m) == NVML_SUCCESS) {
            out->total = m.total;
            out->free = m.free;
            out->mem_known = true;
            out->unavailable[0] = 0;
        }
    }
    nv_proc_t procs[160];
    nvmlReturn_t e1, e2;
    int nc = nv_list(f, dev, false, out->total, procs, 128, &e1);
    if (nc < 0) {
        ot_buf_t b;
        ot_buf_init(&b, out->procs_note, sizeof out->procs_note, -1);
        ot_buf_printf(&b, "NVML could not list the processes on this GPU: %s (%d)",
                      f->nvmlErrorString ? f->nvmlErrorString(e1) : "?", (int)e1);
        ot_buf_cstr(&b);
        return;
    }
    int n = nc;
    nv_proc_t gfx[32];
    int ng = nv_list(f, dev, true, out->total, gfx, 32, &e2);
    for (int i = 0; i < ng; i++) {
        /* A process can be in both lists with the same memory: merge by pid, keep the larger. */
        int j = 0;
        while (j < n && procs[j].pid != gfx[i].pid) j++;
        if (j < n) {
            if (procs[j].used == UINT64_MAX || (gfx[i].used != UINT64_MAX && gfx[i].used > procs[j].used))
                procs[j].used = gfx[i].used;
        } else if (n < (int)(sizeof procs / sizeof procs[0])) {
            procs[n++] = gfx[i];
        }
    }
    /* Biggest holders first (unknown usage last). */
    for (int i = 1; i < n; i++) {
        nv_proc_t t = procs[i];
        uint64_t tu = t.used == UINT64_MAX ? 0 : t.used;
        int j = i - 1;
        while (j >= 0 && (procs[j].used == UINT64_MAX ? 0 : procs[j].used) < tu) {
            procs[j + 1] = procs[j];
            j--;
        }
        procs[j + 1] = t;
    }
    int keep = n < (int)(sizeof out->procs / sizeof out->procs[0]) ? n : (int)(sizeof out->procs / sizeof out->procs[0]);
    int host_ns = pid_namespace_state();
    pid_t me = (pid_t)getpid();
    char comm[64];
    self_comm(comm, sizeof comm);
    int self_at = -1;
    for (int i = 0; i < n; i++)
        if (host_ns == 1 && procs[i].pid == (uint32_t)me) self_at = i;
    if (self_at >= keep) { /* never drop our own entry */
        procs[keep - 1] = procs[self_at];
        self_at = keep - 1;
    }
    out->nprocs = keep;
    for (int i = 0; i < keep; i++) {
        out->procs[i].pid = procs[i].pid;
        out->procs[i].used = procs[i].used;
        out->procs[i].is_self = i == self_at;
        out->procs[i].name[0] = 0;
        if (f->nvmlSystemGetProcessName &&
            f->nvmlSystemGetProcessName(procs[i].pid, out->procs[i].name, sizeof out->procs[i].name) != NVML_SUCCESS)
            out->procs[i].name[0] = 0;
    }
    out->procs_known = true;
    ot_buf_t b;
    ot_buf_init(&b, out->procs_note, sizeof out->procs_note, -1);
    if (host_ns != 1) {
        /* NVML's pids are the host's; ours is not among them in a container. Find our entry the way
         * a container has to: by program name, narrowed by memory (we hold at least what we track). */
        int cand = -1, ncand = 0;
        uint64_t best = UINT64_MAX;
        for (int pass = 0; pass < 2 && ncand == 0; pass++) {
            for (int i = 0; i < keep; i++) {
                if (pass == 0 && !same_program(out->procs[i].name, comm)) continue;
                uint64_t u = out->procs[i].used;
                if (u == UINT64_MAX || (int64_t)u < self_bytes) continue;
                if (pass == 1 && self_bytes <= 0) continue; /* nothing to match by memory alone */
                ncand++;
                if (u - (uint64_t)self_bytes < best) {
                    best = u - (uint64_t)self_bytes;
                    cand = i;
                }
            }
            if (pass == 0 && ncand) break;
            if (pass == 1 && ncand != 1) cand = -1; /* memory alone must be unambiguous */
        }
        if (cand >= 0) {
            out->procs[cand].is_self = true;
            ot_buf_printf(&b, "%s: NVML lists host pids; this process is taken to be pid %u (%s%s), unsure",
                          host_ns == 0 ? "inside a container (own pid namespace)" : "pid namespace unknown",
                          out->procs[cand].pid, ncand == 1 ? "the only match" : "closest match",
                          same_program(out->procs[cand].name, comm) ? " by name and memory" : " by memory");
        } else {
            ot_buf_printf(&b, "%s: NVML lists host pids and this process (%s, pid %d here) could not be "
                              "identified among them; its own usage may be counted as another process's",
                          host_ns == 0 ? "inside a container (own pid namespace)" : "pid namespace unknown", comm,
                          (int)me);
        }
    } else if (self_at < 0 && self_bytes > 0) {
        ot_buf_puts(&b, "this process is not in NVML's list (no context on this GPU yet?)");
    }
    if (n > keep) ot_buf_printf(&b, "%s%d more processes not shown", b.len ? "; " : "", n - keep);
    ot_buf_cstr(&b);
}

/* ---------------------------------------------------------------- entry point */

static void unavailable_entry(ot_device_info_t *o, int index, const char *why, const char *why2)
{
    ot_memset(o, 0, sizeof *o);
    o->index = index;
    ot_buf_t b;
    ot_buf_init(&b, o->unavailable, sizeof o->unavailable, -1);
    ot_buf_puts(&b, why);
    if (why2 && *why2) ot_buf_printf(&b, ": %s", why2);
    ot_buf_cstr(&b);
    ot_strlcpy(o->procs_note, "no driver: processes not listed", sizeof o->procs_note);
}

int ot_cuda_probe_devices(ot_device_info_t *out, int max, int focus, bool may_load)
{
    if (!out || max <= 0) return 0;
    char why[160] = "";
    const ot_cuda_driver_t *d = ot_cuda_driver(may_load, why, sizeof why);
    if (!d) {
        if (!may_load && focus < 0) return 0;
        unavailable_entry(&out[0], focus >= 0 ? focus : 0,
                          may_load ? "the CUDA driver (libcuda.so.1) cannot be loaded"
                                   : "the CUDA driver (libcuda.so.1) is not loaded in this process",
                          why);
        return 1;
    }
    CUresult r;
    if (may_load && d->cuInit) {
        /* Already initialised in a CUDA program: then this only returns the driver's verdict, which
         * is the reason we want when initialisation is what failed (no device, driver too old). */
        r = d->cuInit(0);
        if (r != CUDA_SUCCESS) {
            char msg[200];
            say_cu(msg, sizeof msg, d, "cuInit", r);
            unavailable_entry(&out[0], focus >= 0 ? focus : 0, msg, NULL);
            return 1;
        }
    }
    int count = 0;
    r = d->cuDeviceGetCount ? d->cuDeviceGetCount(&count) : CUDA_ERROR_NOT_FOUND;
    if (r != CUDA_SUCCESS || count <= 0) {
        char msg[200];
        if (r == CUDA_SUCCESS) ot_strlcpy(msg, "the driver reports no CUDA device", sizeof msg);
        else if (r == CUDA_ERROR_NOT_INITIALIZED && !may_load)
            ot_strlcpy(msg, "the CUDA driver is loaded but this process never initialised it", sizeof msg);
        else say_cu(msg, sizeof msg, d, "cuDeviceGetCount", r);
        if (!may_load && focus < 0) return 0;
        unavailable_entry(&out[0], focus >= 0 ? focus : 0, msg, NULL);
        return 1;
    }
    nvml_session_t nv;
    nvml_open(&nv, may_load);
    ot_totals_t self;
    ot_live_totals(true, &self);
    int k = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < count && k < max; i++) {
            /* The failing device first, then the others in order. */
            if (pass == 0 ? i != focus : i == focus) continue;
            ot_device_info_t *o = &out[k++];
            ot_memset(o, 0, sizeof *o);
            o->index = i;
            device_identity(d, i, o);
            o->mem_known = device_memory(d, i, o);
            nvml_processes(&nv, o, (int64_t)self.bytes);
        }
    }
    if (focus >= count && k < max) {
        char msg[80];
        ot_buf_t b;
        ot_buf_init(&b, msg, sizeof msg, -1);
        ot_buf_printf(&b, "device %d does not exist (the driver sees %d)", focus, count);
        ot_buf_cstr(&b);
        /* Keep the failing device first, as report.c expects. */
        for (int j = k; j > 0; j--) out[j] = out[j - 1];
        unavailable_entry(&out[0], focus, msg, NULL);
        k++;
    }
    nvml_close(&nv);
    return k;
}
