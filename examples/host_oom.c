/* A Caffe-like program that runs out of host memory the way the second field report did:
 *   syncedmem.hpp:33] Check failed: *ptr host allocation of size 3763200 failed
 * It loads a model's weights, then runs a forward pass whose pooling layer asks for 3763200 bytes.
 * With --limit the program first caps its own address space (RLIMIT_AS) to just a little more than
 * the model needs, like a small 32-bit box would: the pooling layer's allocation then fails.
 *
 *   host_oom [--limit] [--batch N]
 *
 * Run it under oomtrace (make demo) to see which limit was hit and where the memory went. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define NOINLINE __attribute__((noinline))

typedef struct {
    const char *name;
    size_t size;
    void *cpu_ptr;
} SyncedMemory;

typedef struct {
    const char *name;
    SyncedMemory data;
} Blob;

static void log_fatal(const char *file, int line, const char *msg, size_t size)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    localtime_r(&ts.tv_sec, &tm);
    fprintf(stderr, "F%02d%02d %02d:%02d:%02d.%06ld %5d %s:%d] Check failed: *ptr %s%zu failed\n", tm.tm_mon + 1,
            tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000, 1, file, line, msg, size);
    fprintf(stderr, "*** Check failure stack trace: ***\n");
    abort();
}

/* caffe/syncedmem.hpp: CaffeMallocHost */
static NOINLINE void CaffeMallocHost(void **ptr, size_t size)
{
    *ptr = malloc(size);
    if (!*ptr) log_fatal("syncedmem.hpp", 33, "host allocation of size ", size);
}

static NOINLINE void *SyncedMemory_mutable_cpu_data(SyncedMemory *m)
{
    if (!m->cpu_ptr) {
        CaffeMallocHost(&m->cpu_ptr, m->size);
        memset(m->cpu_ptr, 0, m->size);
    }
    return m->cpu_ptr;
}

static NOINLINE float *Blob_mutable_cpu_data(Blob *b)
{
    return SyncedMemory_mutable_cpu_data(&b->data);
}

static Blob make_blob(const char *name, int n, int c, int h, int w)
{
    Blob b = {name, {name, (size_t)n * c * h * w * sizeof(float), NULL}};
    return b;
}

/* Net::CopyTrainedLayersFrom: weights of an AlexNet-like model (the fully connected layers dominate). */
static NOINLINE size_t Net_CopyTrainedLayersFrom(Blob *w, int nw)
{
    size_t total = 0;
    for (int i = 0; i < nw; i++) {
        Blob_mutable_cpu_data(&w[i]);
        total += w[i].data.size;
    }
    return total;
}

static NOINLINE void ConvolutionLayer_Forward_cpu(Blob *top)
{
    Blob_mutable_cpu_data(top);
}

static NOINLINE void PoolingLayer_Forward_cpu(Blob *top)
{
    Blob_mutable_cpu_data(top);
}

static NOINLINE void Net_ForwardFromTo(Blob *acts, int nacts)
{
    for (int i = 0; i < nacts; i++) {
        if (strstr(acts[i].name, "pool")) PoolingLayer_Forward_cpu(&acts[i]);
        else ConvolutionLayer_Forward_cpu(&acts[i]);
    }
}

static NOINLINE void Classifier_Predict(Blob *acts, int nacts)
{
    Net_ForwardFromTo(acts, nacts);
}

static long vm_size_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %ld kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb * 1024;
}

int main(int argc, char **argv)
{
    int batch = 1, limit = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--limit")) limit = 1;
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--limit] [--batch N]\n", argv[0]);
            return 2;
        }
    }
    Blob weights[] = {
        make_blob("conv1_w", 96, 3, 11, 11),   make_blob("conv2_w", 256, 48, 5, 5),
        make_blob("conv3_w", 384, 256, 3, 3),  make_blob("conv4_w", 384, 192, 3, 3),
        make_blob("conv5_w", 256, 192, 3, 3),  make_blob("fc6_w", 4096, 9216, 1, 1),
        make_blob("fc7_w", 4096, 4096, 1, 1),  make_blob("fc8_w", 1000, 4096, 1, 1),
    };
    /* conv1 output, then a pooling output of 3763200 bytes at batch 1 (96 x 98 x 100 floats). */
    Blob acts[] = {
        make_blob("conv1", batch, 96, 55, 55),
        make_blob("pool1", batch, 96, 98, 100),
    };
    size_t wbytes = 0, abytes = 0;
    for (size_t i = 0; i < sizeof weights / sizeof weights[0]; i++) wbytes += weights[i].data.size;
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) abytes += acts[i].data.size;
    if (limit) {
        /* Leave room for the weights, the first activation and 2 MiB, not for the pooling output. */
        struct rlimit rl;
        long vm = vm_size_bytes();
        rl.rlim_cur = rl.rlim_max = (rlim_t)vm + wbytes + acts[0].data.size + (2u << 20);
        setrlimit(RLIMIT_AS, &rl);
        printf("I0000 host_oom.c] address space capped at %.1f MiB (model needs %.1f MiB + %.1f MiB activations)\n",
               rl.rlim_cur / 1048576.0, wbytes / 1048576.0, abytes / 1048576.0);
    }
    size_t loaded = Net_CopyTrainedLayersFrom(weights, (int)(sizeof weights / sizeof weights[0]));
    printf("I0000 net.cpp:165] Memory required for data: %zu\n", abytes);
    printf("I0000 net.cpp:748] Loaded %zu bytes of weights\n", loaded);
    fflush(stdout);
    Classifier_Predict(acts, (int)(sizeof acts / sizeof acts[0]));
    printf("---------- Prediction for ./examples/images/cat.jpg ----------\n0.3134 - \"n02123045 tabby, tabby cat\"\n");
    return 0;
}
