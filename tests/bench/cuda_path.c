/* Bench workload: the cost of one device allocation through oomtrace's CUDA hooks. Loads a CUDA
 * runtime (in the suite: the test double of tests/doubles, over the driver double) the way
 * frameworks do, with dlopen(RTLD_GLOBAL), finds cudaMalloc/cudaFree as a program linked against
 * libcudart would see them (global lookup order, so a preloaded wrapper wins), keeps 64 blocks live
 * and times PAIRS cudaMalloc+cudaFree pairs. usage: cuda_path LIBCUDART [PAIRS] [SIZE]. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "now.h"

#define LIVE 64

typedef int (*malloc_fn)(void **, size_t);
typedef int (*free_fn)(void *);

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: cuda_path LIBCUDART [PAIRS] [SIZE]\n");
        return 2;
    }
    long pairs = argc > 2 ? atol(argv[2]) : 1000000;
    size_t size = argc > 3 ? (size_t)atol(argv[3]) : 1 << 20;
    if (!dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL)) {
        fprintf(stderr, "cuda_path: %s\n", dlerror());
        return 3;
    }
    malloc_fn cuda_malloc = (malloc_fn)dlsym(RTLD_DEFAULT, "cudaMalloc");
    free_fn cuda_free = (free_fn)dlsym(RTLD_DEFAULT, "cudaFree");
    if (!cuda_malloc || !cuda_free) {
        fprintf(stderr, "cuda_path: cudaMalloc/cudaFree not found in %s\n", argv[1]);
        return 3;
    }
    void *ring[LIVE] = {0};
    uint64_t sum = 0;
    int rc = cuda_free(NULL); /* the usual way to create the context up front */
    if (rc) {
        fprintf(stderr, "cuda_path: cudaFree(NULL) = %d\n", rc);
        return 3;
    }
    double t0 = 0;
    for (long i = -10000; i < pairs; i++) { /* 10000 untimed pairs warm everything up */
        if (i == 0) t0 = now();
        unsigned slot = (unsigned)i & (LIVE - 1);
        if (ring[slot] && (rc = cuda_free(ring[slot])) != 0) {
            fprintf(stderr, "cuda_path: cudaFree = %d\n", rc);
            return 3;
        }
        if ((rc = cuda_malloc(&ring[slot], size)) != 0) {
            fprintf(stderr, "cuda_path: cudaMalloc(%zu) = %d\n", size, rc);
            return 3;
        }
        sum += ring[slot] != NULL; /* device addresses are the double's business */
    }
    double t1 = now();
    for (unsigned i = 0; i < LIVE; i++)
        if (ring[i]) cuda_free(ring[i]);
    printf("@ns_per_pair %.1f\n@checksum %llu\n@ops %ld\n", pairs > 0 ? (t1 - t0) * 1e9 / (double)pairs : 0.0,
           (unsigned long long)sum, pairs);
    return 0;
}
