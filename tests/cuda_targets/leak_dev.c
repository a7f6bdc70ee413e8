/* Device leaks against the CUDA test doubles (tests/e2e/leak_check.sh): a device block whose
 * address a global holds (reachable), one whose address is overwritten (lost), a pinned host block
 * held from a malloc'd struct (reachable) and one dropped (lost), a managed block dropped (lost). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_runtime_api.h"

#define MiB (1ull << 20)
void *g_dev;            /* reachable device block */
struct holder { void *pinned; } *g_holder;

__attribute__((noinline)) static void dev_kept(void) { cudaMalloc(&g_dev, 3 * MiB); }
__attribute__((noinline)) static void dev_lost(void)
{
    void *volatile p;
    cudaMalloc((void **)&p, 5 * MiB);
    p = NULL;
}
__attribute__((noinline)) static void pinned_kept(void)
{
    g_holder = malloc(sizeof *g_holder);
    cudaMallocHost(&g_holder->pinned, 2 * MiB);
}
__attribute__((noinline)) static void pinned_lost(void)
{
    void *volatile p;
    cudaMallocHost((void **)&p, 1 * MiB);
    p = NULL;
}
__attribute__((noinline)) static void managed_lost(void)
{
    void *volatile p;
    cudaMallocManaged((void **)&p, 4 * MiB, cudaMemAttachGlobal);
    p = NULL;
}
__attribute__((noinline)) static void scrub(void)
{
    volatile char buf[65536];
    memset((char *)buf, 0, sizeof buf);
    __asm__ volatile("" : : "r"(buf) : "memory");
}

int main(void)
{
    dev_kept();
    dev_lost();
    pinned_kept();
    pinned_lost();
    managed_lost();
    scrub();
    return 0;
}
