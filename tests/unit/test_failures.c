/* failures.c: the one ring of recent allocation failures (the crash report's story, the flight
 * recorder's section): the last ones in order, laps skipped, and whole entries only while other
 * threads write (also built with TSan). */
#include <pthread.h>
#include <stdatomic.h>

#include "harness.h"
#include "internal.h"

static ot_failure_t failure(const char *api, uint64_t size)
{
    return (ot_failure_t){.api = api, .size = size, .error_code = 12, .error_name = "ENOMEM", .device_index = -1};
}

TEST(the_last_ones_oldest_first)
{
    uint64_t base = ot_failures_head();
    ot_failure_note_t out[OT_RECENT_FAILURES];
    for (uint64_t i = 1; i <= 40; i++) {
        ot_failure_t f = failure("malloc", i);
        ot_failures_note(&f, i == 40 ? "/tmp/r.40.json" : "");
    }
    EXPECT_EQ_U(ot_failures_head(), base + 40);
    unsigned n = ot_failures_recent(out, OT_RECENT_FAILURES);
    ASSERT(n == OT_RECENT_FAILURES);
    for (unsigned i = 0; i < n; i++) EXPECT_EQ_U(out[i].size, 37 + i);
    EXPECT_STR(out[3].report, "/tmp/r.40.json");
    EXPECT_STR(out[3].error_name, "ENOMEM");
    EXPECT_EQ_U(out[3].error_code, 12);
    EXPECT(out[3].mono_ns >= out[0].mono_ns && out[3].realtime_ns > 0);
    /* an entry a later lap replaced is gone, not returned as the newer one */
    ot_failure_note_t one;
    EXPECT(!ot_failures_get(base + 40 - OT_FAILURE_RING - 1, &one));
    EXPECT(ot_failures_get(base + 40 - OT_FAILURE_RING, &one) && one.size == 40 - OT_FAILURE_RING + 1);
    /* asking for more than the ring holds gives the ring */
    ot_failure_note_t all[OT_FAILURE_RING + 8];
    EXPECT_EQ_U(ot_failures_recent(all, OT_FAILURE_RING + 8), OT_FAILURE_RING);
}

/* Writers note failures whose size encodes the api string's index (error code 99: theirs, not the
 * test before's); the reader, running for as long as any writer does, checks that every entry it
 * gets is one writer's whole entry. */
static const char *const apis[4] = {"malloc", "cudaMalloc", "cuMemAlloc_v2", "posix_memalign"};
static atomic_int writers_done;
static void *writer(void *arg)
{
    uintptr_t w = (uintptr_t)arg;
    for (uint64_t i = 0; i < 20000; i++) {
        ot_failure_t f = failure(apis[w], (i << 2) | w);
        f.error_code = 99;
        ot_failures_note(&f, w & 1 ? "/tmp/odd.json" : "");
    }
    atomic_fetch_add(&writers_done, 1);
    return NULL;
}

static void check_recent(unsigned *seen, unsigned *bad)
{
    ot_failure_note_t out[OT_RECENT_FAILURES];
    unsigned n = ot_failures_recent(out, OT_RECENT_FAILURES);
    for (unsigned i = 0; i < n; i++) {
        if (out[i].error_code != 99) continue;
        unsigned w = (unsigned)(out[i].size & 3);
        (*seen)++;
        if (strcmp(out[i].api, apis[w]) || strcmp(out[i].report, w & 1 ? "/tmp/odd.json" : "")) (*bad)++;
    }
}

TEST(whole_entries_while_others_write)
{
    pthread_t t[4];
    for (uintptr_t w = 0; w < 4; w++) pthread_create(&t[w], NULL, writer, (void *)w);
    unsigned bad = 0, seen = 0;
    while (atomic_load(&writers_done) < 4) check_recent(&seen, &bad);
    for (int w = 0; w < 4; w++) pthread_join(t[w], NULL);
    check_recent(&seen, &bad);
    EXPECT_EQ_U(bad, 0);
    EXPECT(seen >= OT_RECENT_FAILURES);
}

TEST_MAIN(the_last_ones_oldest_first, whole_entries_while_others_write)
