/* The CUDA family's core side, linked without any hook: the device probe in a process without CUDA
 * (must answer "nothing" or say why, never load anything it was told not to), the stream table of
 * stream-ordered blocks, and error names. */
#include <dlfcn.h>

#include "harness.h"
#include "cuda_internal.h"

static int cuda_loaded(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (h) dlclose(h);
    return h != NULL;
}

TEST(probe_without_cuda_loads_nothing)
{
    if (cuda_loaded()) SKIP("libcuda.so.1 is already loaded in this process");
    ot_device_info_t d[4];
    EXPECT_EQ_U(ot_cuda_probe_devices(d, 4, -1, false), 0);
    EXPECT(!cuda_loaded());
    EXPECT(!ot_cuda_active());
}

TEST(probe_host_failure_with_focus_says_not_loaded)
{
    if (cuda_loaded()) SKIP("libcuda.so.1 is already loaded in this process");
    ot_device_info_t d[4];
    ASSERT(ot_cuda_probe_devices(d, 4, 0, false) == 1);
    EXPECT(!d[0].mem_known);
    EXPECT_CONTAINS(d[0].unavailable, "not loaded");
    EXPECT(!cuda_loaded());
}

TEST(probe_device_failure_without_driver_says_why)
{
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (h) {
        dlclose(h);
        SKIP("a CUDA driver is installed here: covered by the e2e tests");
    }
    ot_device_info_t d[4];
    ASSERT(ot_cuda_probe_devices(d, 4, 1, true) == 1);
    EXPECT_EQ_U(d[0].index, 1);
    EXPECT(!d[0].mem_known);
    EXPECT_CONTAINS(d[0].unavailable, "cannot be loaded");
    EXPECT_CONTAINS(d[0].unavailable, "libcuda.so.1");
    EXPECT(!d[0].procs_known);
}

TEST(stream_table_put_take)
{
    uint64_t s = 0;
    EXPECT(!ot_cuda_stream_of(0x7000, &s));
    ot_cuda_stream_put(0x7000, 11);
    ot_cuda_stream_put(0x7010, 12);
    EXPECT(ot_cuda_stream_of(0x7000, &s) && s == 11);
    ot_cuda_stream_put(0x7000, 13); /* same key: replaced */
    EXPECT(ot_cuda_stream_of(0x7000, &s) && s == 13);
    EXPECT(ot_cuda_stream_take(0x7000, &s) && s == 13);
    EXPECT(!ot_cuda_stream_of(0x7000, NULL));
    EXPECT(ot_cuda_stream_of(0x7010, &s) && s == 12); /* a probe chain through a tombstone */
    /* Many keys on top of tombstones: every one still found. */
    int ok = 1;
    for (uint64_t k = 1; k <= 3000; k++) ot_cuda_stream_put(k << 8, k);
    for (uint64_t k = 1; k <= 3000; k++) ok &= ot_cuda_stream_take(k << 8, &s) && s == k;
    EXPECT(ok);
    EXPECT(!ot_cuda_stream_of(1 << 8, NULL));
    EXPECT(!ot_cuda_stream_of(0, NULL));
}

TEST(error_names)
{
    EXPECT_STR(ot_cuda_error_name(2), "CUDA_ERROR_OUT_OF_MEMORY");
    EXPECT_STR(ot_cuda_error_name(100), "CUDA_ERROR_NO_DEVICE");
    EXPECT_STR(ot_cudart_error_name_fallback(2), "cudaErrorMemoryAllocation");
    EXPECT_STR(ot_cudart_error_name_fallback(35), "cudaErrorInsufficientDriver");
    EXPECT(ot_cuda_error_name(123456) != NULL);
}

TEST_MAIN(probe_without_cuda_loads_nothing, probe_host_failure_with_focus_says_not_loaded,
          probe_device_failure_without_driver_says_why, stream_table_put_take, error_names)
