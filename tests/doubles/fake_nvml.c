/* Test double of NVML (built as libnvidia-ml.so.1): lists the simulated "other process" and this
 * process on the devices of the driver double, with NVML's calling conventions (host pids, the
 * insufficient-size protocol, three process-struct layouts). Same environment as the driver double,
 * plus:
 *   OT_FAKE_GPU_OTHER_PID=4242, OT_FAKE_GPU_OTHER_NAME=python3   the other process
 *   OT_FAKE_NVML_EXTRA_PROCS=N    N more small processes (to make callers grow their buffer)
 *   OT_FAKE_NVML_PID_OFFSET=N     report this process as pid+N (a host pid seen from a container)
 *   OT_FAKE_NVML_INIT_ERROR=N     nvmlInit_v2 returns N
 *   OT_FAKE_NVML_V3_STRIDE=32     the _v3 calls write R535's 32-byte struct instead of 24 bytes
 *   OT_FAKE_NVML_NO_V2=1          the _v2 process calls are absent (NVML_ERROR_FUNCTION_NOT_FOUND)
 * The devices' used memory comes from the driver double (ot_fake_cuda_used) when it is loaded. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_abi.h"
#include "fake_env.h"

#define API __attribute__((visibility("default")))
#define MAX_PROCS 80

static int inited;
static struct nvmlDevice_st {
    int index;
} devs[8];

static int dev_count(void) { int n = (int)env_size("OT_FAKE_GPU_COUNT", 1); return n > 8 ? 8 : n; }

static unsigned long long self_used(int dev)
{
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!h) return 0;
    unsigned long long (*f)(int) = (unsigned long long (*)(int))dlsym(h, "ot_fake_cuda_used");
    unsigned long long v = f ? f(dev) : 0;
    dlclose(h);
    return v;
}

struct proc { unsigned pid; unsigned long long used; };

static int procs_on(int dev, struct proc *out)
{
    int n = 0;
    unsigned long long other = env_size("OT_FAKE_GPU_OTHER_USED", 0);
    if (other && dev == (int)env_size("OT_FAKE_GPU_OTHER_DEVICE", 0))
        out[n++] = (struct proc){(unsigned)env_size("OT_FAKE_GPU_OTHER_PID", 4242), other};
    unsigned long long mine = self_used(dev);
    if (mine) out[n++] = (struct proc){(unsigned)(getpid() + env_size("OT_FAKE_NVML_PID_OFFSET", 0)), mine};
    int extra = (int)env_size("OT_FAKE_NVML_EXTRA_PROCS", 0);
    for (int i = 0; i < extra && n < MAX_PROCS && dev == 0; i++) out[n++] = (struct proc){900000u + (unsigned)i, 1 << 20};
    return n;
}

API nvmlReturn_t nvmlInit_v2(void)
{
    int e = (int)env_size("OT_FAKE_NVML_INIT_ERROR", 0);
    if (e) return (nvmlReturn_t)e;
    for (int i = 0; i < 8; i++) devs[i].index = i;
    inited++;
    return NVML_SUCCESS;
}
API nvmlReturn_t nvmlInit(void) { return nvmlInit_v2(); }

API nvmlReturn_t nvmlShutdown(void)
{
    if (!inited) return NVML_ERROR_UNINITIALIZED;
    inited--;
    return NVML_SUCCESS;
}

API const char *nvmlErrorString(nvmlReturn_t r)
{
    switch ((int)r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    default: return "Unknown Error";
    }
}

API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n)
{
    if (!inited) return NVML_ERROR_UNINITIALIZED;
    *n = (unsigned)dev_count();
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d)
{
    if (!inited) return NVML_ERROR_UNINITIALIZED;
    if ((int)i >= dev_count() || !d) return NVML_ERROR_INVALID_ARGUMENT;
    *d = &devs[i];
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus, nvmlDevice_t *d)
{
    if (!inited) return NVML_ERROR_UNINITIALIZED;
    unsigned dom, b, dv, fn;
    if (!bus || sscanf(bus, "%x:%x:%x.%x", &dom, &b, &dv, &fn) != 4) return NVML_ERROR_INVALID_ARGUMENT;
    int i = (int)b - 0x10;
    if (i < 0 || i >= dev_count()) return NVML_ERROR_NOT_FOUND;
    *d = &devs[i];
    return NVML_SUCCESS;
}

static void uuid_of(int i, char *out, size_t cap)
{
    unsigned char u[16];
    for (int k = 0; k < 16; k++) u[k] = (unsigned char)(0xa0 + k + 16 * i);
    snprintf(out, cap, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2],
             u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}

API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int len)
{
    if (!inited) return NVML_ERROR_UNINITIALIZED;
    if (!d || !uuid) return NVML_ERROR_INVALID_ARGUMENT;
    char u[96];
    uuid_of(d->index, u, sizeof u);
    if (strlen(u) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(uuid, u);
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *d)
{
    if (!inited) return NVML_ERROR_UNINITIALIZED;
    if (!uuid || !d) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < dev_count(); i++) {
        char u[96];
        uuid_of(i, u, sizeof u);
        if (!strcmp(u, uuid)) {
            *d = &devs[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
    if (!inited) return NVML_ERROR_UNINITIALIZED;
    if (!d || !m) return NVML_ERROR_INVALID_ARGUMENT;
    m->total = env_size("OT_FAKE_GPU_TOTAL", 16ull << 30);
    struct proc p[MAX_PROCS];
    int n = procs_on(d->index, p);
    m->used = 0;
    for (int i = 0; i < n; i++) m->used += p[i].used;
    m->free = m->used > m->total ? 0 : m->total - m->used;
    return NVML_SUCCESS;
}

/* One writer for every layout: stride 16 (v1), 24 (v2, and v3 before R535), 32 (v3 in R535). */
static nvmlReturn_t list(nvmlDevice_t d, unsigned int *count, void *infos, size_t stride, int graphics)
{
    if (!inited) return NVML_ERROR_UNINITIALIZED;
    if (!d || !count) return NVML_ERROR_INVALID_ARGUMENT;
    struct proc p[MAX_PROCS];
    int n = graphics ? 0 : procs_on(d->index, p);
    if (*count < (unsigned)n) {
        *count = (unsigned)n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (n && !infos) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < n; i++) {
        unsigned char *e = (unsigned char *)infos + (size_t)i * stride;
        memset(e, 0, stride);
        memcpy(e, &p[i].pid, 4);
        memcpy(e + 8, &p[i].used, 8);
        if (stride >= 24) memset(e + 16, 0xff, 8); /* gpuInstanceId, computeInstanceId: no MIG */
    }
    *count = (unsigned)n;
    return NVML_SUCCESS;
}

static int no_v2(void) { return env_size("OT_FAKE_NVML_NO_V2", 0) != 0; }
static size_t v3_stride(void) { return env_size("OT_FAKE_NVML_V3_STRIDE", 24) == 32 ? 32 : 24; }

API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_v1_t *i) { return list(d, c, i, 16, 0); }
API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_v2_t *i)
{
    return no_v2() ? NVML_ERROR_FUNCTION_NOT_FOUND : list(d, c, i, 24, 0);
}
API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *c, void *i) { return list(d, c, i, v3_stride(), 0); }
API nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_v1_t *i) { return list(d, c, i, 16, 1); }
API nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_v2_t *i)
{
    return no_v2() ? NVML_ERROR_FUNCTION_NOT_FOUND : list(d, c, i, 24, 1);
}
API nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t d, unsigned int *c, void *i) { return list(d, c, i, v3_stride(), 1); }

API nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int len)
{
    if (!inited) return NVML_ERROR_UNINITIALIZED;
    if (!name || !len) return NVML_ERROR_INVALID_ARGUMENT;
    const char *other = getenv("OT_FAKE_GPU_OTHER_NAME");
    if (pid == (unsigned)env_size("OT_FAKE_GPU_OTHER_PID", 4242)) {
        snprintf(name, len, "%s", other && *other ? other : "python3");
        return NVML_SUCCESS;
    }
    if (pid == (unsigned)(getpid() + env_size("OT_FAKE_NVML_PID_OFFSET", 0))) {
        char comm[64] = "";
        FILE *f = fopen("/proc/self/comm", "r");
        if (f) {
            if (fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = 0;
            fclose(f);
        }
        snprintf(name, len, "%s", comm);
        return NVML_SUCCESS;
    }
    if (pid >= 900000u) {
        snprintf(name, len, "worker%u", pid - 900000u);
        return NVML_SUCCESS;
    }
    return NVML_ERROR_NOT_FOUND;
}
