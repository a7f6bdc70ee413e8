/* sites.c: deduplication, per-site statistics, top-N ordering, and concurrent interning. */
#include <pthread.h>
#include <stdatomic.h>

#include "harness.h"
#include "internal.h"

TEST(dedup_and_kinds)
{
    ot_sites_reset_for_test();
    uintptr_t a[] = {0x1000, 0x2000, 0x3000}, b[] = {0x1000, 0x2000, 0x3001};
    uint32_t ia = ot_sites_intern(a, 3, OT_KIND_HOST, -1);
    EXPECT(ia != 0);
    EXPECT_EQ_U(ot_sites_intern(a, 3, OT_KIND_HOST, -1), ia);
    EXPECT(ot_sites_intern(b, 3, OT_KIND_HOST, -1) != ia);
    EXPECT(ot_sites_intern(a, 2, OT_KIND_HOST, -1) != ia);
    uint32_t dev0 = ot_sites_intern(a, 3, OT_KIND_DEVICE, 0);
    EXPECT(dev0 != ia);
    EXPECT(ot_sites_intern(a, 3, OT_KIND_DEVICE, 1) != dev0);
    EXPECT(ot_sites_intern(a, 0, OT_KIND_DEVICE, 1) != 0);
    EXPECT_EQ_U(ot_sites_count(), 6);
    ot_site_info_t si;
    ASSERT(ot_sites_get(dev0, &si));
    EXPECT_EQ_U(si.depth, 3);
    EXPECT_EQ_U(si.ips[2], 0x3000);
    EXPECT_EQ_U(si.kind, OT_KIND_DEVICE);
    EXPECT_EQ_U(si.device, 0);
    EXPECT(!ot_sites_get(0, &si));
    EXPECT(!ot_sites_get(999, &si));
}

TEST(statistics_and_top)
{
    ot_sites_reset_for_test();
    uintptr_t s1[] = {1}, s2[] = {2}, s3[] = {3};
    uint32_t i1 = ot_sites_intern(s1, 1, OT_KIND_HOST, -1);
    uint32_t i2 = ot_sites_intern(s2, 1, OT_KIND_HOST, -1);
    uint32_t i3 = ot_sites_intern(s3, 1, OT_KIND_DEVICE, 0);
    ot_sites_on_alloc(i1, 100, false);
    ot_sites_on_alloc(i1, 200, false);
    ot_sites_on_free(i1, 100);
    ot_sites_on_alloc(i2, 1000, true);
    ot_sites_on_alloc(i3, 5000, false);
    ot_site_info_t si;
    ASSERT(ot_sites_get(i1, &si));
    EXPECT_EQ_U(si.live_bytes, 200);
    EXPECT_EQ_U(si.live_count, 1);
    EXPECT_EQ_U(si.peak_bytes, 300);
    EXPECT_EQ_U(si.total_bytes, 300);
    EXPECT_EQ_U(si.total_count, 2);
    EXPECT(!si.estimated);
    ASSERT(ot_sites_get(i2, &si));
    EXPECT(si.estimated);
    uint32_t ids[10];
    EXPECT_EQ_U(ot_sites_top(ids, 10, false), 2);
    EXPECT_EQ_U(ids[0], i2);
    EXPECT_EQ_U(ids[1], i1);
    EXPECT_EQ_U(ot_sites_top(ids, 1, false), 1);
    EXPECT_EQ_U(ids[0], i2);
    EXPECT_EQ_U(ot_sites_top(ids, 10, true), 1);
    EXPECT_EQ_U(ids[0], i3);
}

TEST(many_sites_top_is_sorted)
{
    ot_sites_reset_for_test();
    for (uintptr_t i = 1; i <= 20000; i++) {
        uintptr_t st[2] = {i * 7919 % 20011, i};
        uint32_t id = ot_sites_intern(st, 2, OT_KIND_HOST, -1);
        ASSERT(id != 0);
        ot_sites_on_alloc(id, st[0] + 1, false);
    }
    uint32_t ids[50];
    unsigned n = ot_sites_top(ids, 50, false);
    EXPECT_EQ_U(n, 50);
    ot_site_info_t prev, cur;
    ASSERT(ot_sites_get(ids[0], &prev));
    for (unsigned i = 1; i < n; i++) {
        ASSERT(ot_sites_get(ids[i], &cur));
        EXPECT(cur.live_bytes <= prev.live_bytes);
        prev = cur;
    }
}

#define THREADS 4
#define STACKS 2000
static _Atomic uint32_t seen[THREADS][STACKS];

static void *interner(void *arg)
{
    long t = (long)arg;
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < STACKS; i++) {
            int k = (i * 7 + (int)t * 517 + round) % STACKS; /* a permutation per round */
            uintptr_t st[3] = {0x400000u + (uintptr_t)k, 0x500000u + (uintptr_t)(k % 7), 0x600000};
            uint32_t id = ot_sites_intern(st, 3, OT_KIND_HOST, -1);
            atomic_store(&seen[t][k], id);
            ot_sites_on_alloc(id, 16, false);
            ot_sites_on_free(id, 16);
        }
    return NULL;
}

TEST(concurrent_interning_agrees)
{
    ot_sites_reset_for_test();
    pthread_t th[THREADS];
    for (long t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, interner, (void *)t);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    for (unsigned k = 0; k < STACKS; k++) {
        uint32_t id = atomic_load(&seen[0][k]);
        EXPECT(id != 0);
        for (unsigned t = 1; t < THREADS; t++)
            if (atomic_load(&seen[t][k]) != id) {
                EXPECT(atomic_load(&seen[t][k]) == id);
                return;
            }
        ot_site_info_t si;
        ASSERT(ot_sites_get(id, &si));
        EXPECT_EQ_U(si.live_bytes, 0);
        if (si.total_count != THREADS * 3) {
            EXPECT_EQ_U(si.total_count, THREADS * 3);
            return;
        }
    }
}

TEST_MAIN(dedup_and_kinds, statistics_and_top, many_sites_top_is_sorted, concurrent_interning_agrees)
