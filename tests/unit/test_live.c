/* live.c: exact totals and finding every record, wherever it is (own nursery, another thread's
 * nursery, the shared table), with blocks handed between threads. Also runs under TSan. */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "harness.h"
#include "internal.h"
#include "live_fast.h"

#ifdef OT_SANITIZER
#define N_PER_THREAD 20000
#else
#define N_PER_THREAD 200000
#endif
#define THREADS 4

static uint64_t key_of(int t, long i) { return ((uint64_t)(t + 1) << 36) | ((uint64_t)i << 4); }

static void totals(ot_totals_t *t) { ot_live_totals_kind(OT_KIND_HOST, t); }

static void setup(void)
{
    ot_options_defaults(&ot_opt);
    ot_opt.stacks = OT_STACKS_NONE; /* records only: stacks are tested elsewhere */
}

TEST(single_thread_exact)
{
    setup();
    ot_totals_t a, b;
    totals(&a);
    for (long i = 1; i <= 50000; i++) ot_live_record(key_of(0, i), (uint64_t)i % 100 + 1, OT_KIND_HOST, -1);
    totals(&b);
    EXPECT_EQ_U(b.count - a.count, 50000);
    EXPECT_EQ_U(b.total_count - a.total_count, 50000);
    EXPECT_EQ_U(b.total_bytes - a.total_bytes, 500 * 5050); /* sizes 1..100, 500 times over */
    EXPECT_EQ_U(b.bytes - a.bytes, b.total_bytes - a.total_bytes);
    uint64_t size;
    unsigned kind;
    EXPECT(ot_live_lookup(key_of(0, 77), &size, &kind) && size == 78 && kind == OT_KIND_HOST);
    for (long i = 1; i <= 50000; i++) {
        if (!ot_live_forget(key_of(0, i), &size, NULL) || size != (uint64_t)i % 100 + 1) {
            EXPECT(!"forget found the record with its size");
            return;
        }
    }
    EXPECT(!ot_live_forget(key_of(0, 1), NULL, NULL));
    EXPECT(!ot_live_lookup(key_of(0, 1), NULL, NULL));
    totals(&b);
    EXPECT_EQ_U(b.count, a.count);
    EXPECT_EQ_U(b.bytes, a.bytes);
}

TEST(stale_record_is_replaced)
{
    setup();
    ot_totals_t a, b;
    totals(&a);
    ot_live_record(0xabc0, 100, OT_KIND_HOST, -1);
    ot_live_record(0xabc0, 300, OT_KIND_HOST, -1); /* its free went past us */
    totals(&b);
    EXPECT_EQ_U(b.count - a.count, 1);
    EXPECT_EQ_U(b.bytes - a.bytes, 300);
    uint64_t size;
    EXPECT(ot_live_forget(0xabc0, &size, NULL) && size == 300);
    totals(&b);
    EXPECT_EQ_U(b.count, a.count);
}

/* A record whose nursery set is full takes a way of the set's buddy (the other set of its cache
 * line) before one moves to the table; with both full, one moves. Every record is found, by its
 * owner and by another thread, and the totals stay exact. On a thread of its own: a nursery whose
 * sets it can look at. */
#define BUDDY_KEYS 5
static uint64_t buddy_key[BUDDY_KEYS];
static void *buddy_free_other(void *arg)
{
    return (void *)(uintptr_t)ot_live_forget(*(uint64_t *)arg, NULL, NULL);
}
static void *buddy_case(void *arg)
{
    long *res = arg; /* [0] keys found, [1] records in the buddy, [2] in the table after 4, [3] after 5,
                      * [4] frees that found their record, [5] of them by another thread */
    ot_live_record(key_of(40, 0), 8, OT_KIND_HOST, -1); /* this thread's record and nursery */
    ot_live_forget(key_of(40, 0), NULL, NULL);
    nursery_t *n = ot_my_counters->nursery;
    unsigned set = UINT32_MAX;
    for (long i = 1; res[0] < BUDDY_KEYS && i < 100000000; i++) {
        uint64_t k = key_of(41, i);
        unsigned s = nursery_set(n, k);
        if (set == UINT32_MAX) {
            nursery_way_t *h = n->slot[s], *b = n->slot[nursery_buddy(s)];
            if (h[0].key || h[1].key || b[0].key || b[1].key) continue; /* an adopted nursery's records */
            set = s;
        }
        if (s == set) buddy_key[res[0]++] = k;
    }
    if (res[0] < BUDDY_KEYS) return NULL;
    uint64_t v;
    for (int i = 0; i < BUDDY_KEYS; i++) {
        ot_live_record(buddy_key[i], 100 + (uint64_t)i, OT_KIND_HOST, -1);
        if (i == 3)
            for (int j = 0; j <= 3; j++) res[2] += ot_table_lookup(buddy_key[j], &v);
    }
    nursery_way_t *b = n->slot[nursery_buddy(set)];
    for (int j = 0; j < BUDDY_KEYS; j++) {
        res[1] += b[0].key == buddy_key[j] || b[1].key == buddy_key[j];
        res[3] += ot_table_lookup(buddy_key[j], &v);
    }
    pthread_t th; /* the third record, in the buddy, freed by another thread */
    void *found = NULL;
    if (pthread_create(&th, NULL, buddy_free_other, &buddy_key[2]) == 0 && pthread_join(th, &found) == 0)
        res[5] = (long)(uintptr_t)found;
    res[4] = res[5];
    for (int j = 0; j < BUDDY_KEYS; j++) {
        uint64_t size;
        if (j != 2) res[4] += ot_live_forget(buddy_key[j], &size, NULL) && size == 100 + (uint64_t)j;
    }
    return NULL;
}

TEST(full_set_borrows_its_buddy)
{
    setup();
    ot_totals_t a, b;
    totals(&a);
    long res[6] = {0};
    pthread_t th;
    ASSERT(pthread_create(&th, NULL, buddy_case, res) == 0);
    pthread_join(th, NULL);
    ASSERT(res[0] == BUDDY_KEYS);
    printf("  %d records of one set: %ld in its buddy, %ld in the table after 4, %ld after 5\n", BUDDY_KEYS, res[1],
           res[2], res[3]);
    EXPECT_EQ_U(res[2], 0); /* two in the set, two in its buddy */
    EXPECT_EQ_U(res[1], 2);
    EXPECT_EQ_U(res[3], 1); /* the fifth found both full: one of the set's moved */
    EXPECT_EQ_U(res[5], 1);
    EXPECT_EQ_U(res[4], BUDDY_KEYS);
    totals(&b);
    EXPECT_EQ_U(b.count, a.count);
    EXPECT_EQ_U(b.bytes, a.bytes);
}

TEST(terabyte_blocks_keep_their_size)
{
    setup();
    ot_totals_t a, b;
    totals(&a);
    ot_live_record(0x7770, 1ull << 41, OT_KIND_HOST, -1);
    ot_live_record(0x7770, 1ull << 42, OT_KIND_HOST, -1); /* the first one's free went past us */
    totals(&b);
    EXPECT_EQ_U(b.bytes - a.bytes, 1ull << 42);
    uint64_t size;
    EXPECT(ot_live_forget(0x7770, &size, NULL) && size == 1ull << 42);
    totals(&b);
    EXPECT_EQ_U(b.bytes, a.bytes);
}

TEST(take_and_put_back)
{
    setup();
    ot_live_record(0xdef0, 64, OT_KIND_HOST, -1);
    uint64_t v;
    ASSERT(ot_live_take(0xdef0, &v));
    EXPECT(!ot_live_lookup(0xdef0, NULL, NULL));
    ot_live_put_back(0xdef0, v);
    uint64_t size;
    EXPECT(ot_live_lookup(0xdef0, &size, NULL) && size == 64);
    ASSERT(ot_live_take(0xdef0, &v));
    ot_live_release(0xdef0, v);
    EXPECT(!ot_live_lookup(0xdef0, NULL, NULL));
}

/* Each thread records its blocks and hands every other one to the next thread through a mailbox;
 * the receiver frees it. At the end every forget must have found its record. */
static _Atomic uint64_t mailbox[THREADS][1024];
static _Atomic long misses, handed;

static void *worker(void *arg)
{
    int t = (int)(long)arg, next = (t + 1) % THREADS;
    unsigned mpos = 0, rpos = 0;
    for (long i = 1; i <= N_PER_THREAD; i++) {
        uint64_t k = key_of(t, i);
        ot_live_record(k, 16 + (uint64_t)(i & 63), OT_KIND_HOST, -1);
        if (i & 1) {
            if (!ot_live_forget(k, NULL, NULL)) atomic_fetch_add(&misses, 1);
        } else {
            /* hand over; if the slot is still full, free it ourselves */
            uint64_t expected = 0;
            if (atomic_compare_exchange_strong(&mailbox[next][mpos], &expected, k)) atomic_fetch_add(&handed, 1);
            else if (!ot_live_forget(k, NULL, NULL)) atomic_fetch_add(&misses, 1);
            mpos = (mpos + 1) & 1023;
        }
        uint64_t got = atomic_exchange(&mailbox[t][rpos], 0);
        if (got && !ot_live_forget(got, NULL, NULL)) atomic_fetch_add(&misses, 1);
        rpos = (rpos + 1) & 1023;
    }
    return NULL;
}

TEST(cross_thread_frees_exact)
{
    setup();
    ot_totals_t a, b;
    totals(&a);
    pthread_t th[THREADS];
    for (long t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, worker, (void *)t);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    /* drain what is left in the mailboxes, from this (main) thread */
    for (int t = 0; t < THREADS; t++)
        for (int i = 0; i < 1024; i++) {
            uint64_t got = atomic_exchange(&mailbox[t][i], 0);
            if (got && !ot_live_forget(got, NULL, NULL)) atomic_fetch_add(&misses, 1);
        }
    EXPECT_EQ_U(atomic_load(&misses), 0);
    EXPECT(atomic_load(&handed) > 0);
    totals(&b);
    EXPECT_EQ_U(b.count, a.count);
    EXPECT_EQ_U(b.bytes, a.bytes);
    printf("  %ld blocks handed between threads\n", atomic_load(&handed));
}

/* Blocks recorded by threads that have exited are still found (their nurseries outlive them). */
static void *recorder(void *arg)
{
    for (long i = 1; i <= 1000; i++) ot_live_record(key_of(8, i), 8, OT_KIND_HOST, -1);
    return arg;
}

TEST(records_of_exited_threads)
{
    setup();
    pthread_t th;
    pthread_create(&th, NULL, recorder, NULL);
    pthread_join(th, NULL);
    long found = 0;
    for (long i = 1; i <= 1000; i++) found += ot_live_forget(key_of(8, i), NULL, NULL);
    EXPECT_EQ_U(found, 1000);
}

static void count_visit(uint64_t key, uint64_t val, void *ctx)
{
    uint64_t *acc = ctx;
    if ((key >> 36) == 9) acc[0]++, acc[1] += ot_unpack_size(val);
}

TEST(walk_sees_nursery_and_table)
{
    setup();
    /* more than the nursery's two ways per set can hold, so some land in the table */
    for (long i = 1; i <= 5000; i++) ot_live_record(key_of(8, i) | (9ull << 36), 10, OT_KIND_HOST, -1);
    uint64_t acc[2] = {0, 0};
    ot_live_walk(count_visit, acc);
    EXPECT_EQ_U(acc[0], 5000);
    EXPECT_EQ_U(acc[1], 50000);
    for (long i = 1; i <= 5000; i++) ot_live_forget(key_of(8, i) | (9ull << 36), NULL, NULL);
    acc[0] = acc[1] = 0;
    ot_live_walk(count_visit, acc);
    EXPECT_EQ_U(acc[0], 0);
}

/* After our thread-exit destructor has released the thread's block (for a new thread to reuse),
 * destructors that run later on the same thread still allocate and free: that must neither corrupt
 * the block's new owner nor lose the totals. */
static pthread_key_t late_key;
static _Atomic long late_recorded;
static void late_destructor(void *arg)
{
    long t = (long)arg;
    ot_live_forget(key_of(10, t * 4 + 1), NULL, NULL); /* recorded while the thread was alive */
    ot_live_record(key_of(10, t * 4 + 2), 32, OT_KIND_HOST, -1); /* too late: not recorded */
    /* the thread's block may already belong to another thread: nothing was written to it */
    if (ot_live_forget(key_of(10, t * 4 + 2), NULL, NULL)) atomic_fetch_add(&late_recorded, 1);
}

static void *late_thread(void *arg)
{
    long t = (long)arg;
    ot_live_record(key_of(10, t * 4 + 1), 16, OT_KIND_HOST, -1);
    ot_live_record(key_of(10, t * 4 + 3), 8, OT_KIND_HOST, -1); /* freed by main later */
    pthread_setspecific(late_key, arg);
    return NULL;
}

TEST(late_destructors_after_release)
{
    setup();
    ot_live_record(1ull << 40, 1, OT_KIND_HOST, -1); /* our key exists before the test's */
    ot_live_forget(1ull << 40, NULL, NULL);
    ASSERT(pthread_key_create(&late_key, late_destructor) == 0);
    ot_totals_t a, b;
    totals(&a);
    for (long t = 1; t <= 200; t++) {
        pthread_t th;
        pthread_create(&th, NULL, late_thread, (void *)t);
        pthread_join(th, NULL);
    }
    long found = 0;
    for (long t = 1; t <= 200; t++) found += ot_live_forget(key_of(10, t * 4 + 3), NULL, NULL);
    EXPECT_EQ_U(found, 200);
    EXPECT_EQ_U(atomic_load(&late_recorded), 0);
    totals(&b);
    EXPECT_EQ_U(b.count, a.count);
    EXPECT_EQ_U(b.bytes, a.bytes);
}

/* The lean host paths (live_fast.h and what they fall back to, as the malloc hooks use them) mixed
 * with the general ones, under the default sampled policy: sampled blocks (a call site), blocks big
 * enough for a full stack, full nursery sets (eviction to the table), stale same-address records
 * and blocks freed by another thread. Totals and per-block sizes stay exact. */
static _Atomic uint64_t host_box[THREADS][256];
static _Atomic long host_misses;

/* The pair the malloc/free hooks use: the inline own-nursery path, then live.c. */
static void rec_host(uint64_t k, uint64_t size)
{
    if (!ot_live_record_host_fast(k, size)) ot_live_record(k, size, OT_KIND_HOST, -1);
}
static bool forget_host(uint64_t k) { return ot_live_forget_host_fast(k) || ot_live_forget_host(k); }

static void site_counts(uint64_t *allocs, uint64_t *live)
{
    *allocs = *live = 0;
    for (uint32_t id = 1; id <= ot_sites_count(); id++) {
        ot_site_info_t si;
        if (!ot_sites_get(id, &si)) continue;
        *allocs += si.total_count;
        *live += si.live_count;
    }
}

/* The lean path counts bytes towards the next sample too: 10 MiB in 256-byte blocks with a sample
 * every 64 KiB on average gives about 160 sampled blocks. */
TEST(lean_path_samples)
{
    ot_options_defaults(&ot_opt);
    ot_opt.stacks = OT_STACKS_SAMPLED;
    ot_opt.sample_bytes = 64 * 1024;
    uint64_t a0, l0, a1, l1;
    site_counts(&a0, &l0);
    for (long i = 1; i <= 40960; i++) {
        rec_host(key_of(12, i), 256);
        forget_host(key_of(12, i));
    }
    site_counts(&a1, &l1);
    printf("  %llu of 40960 blocks sampled\n", (unsigned long long)(a1 - a0));
    EXPECT(a1 - a0 > 50 && a1 - a0 < 500);
    EXPECT_EQ_U(l1, l0);
    setup();
}

static uint64_t host_size(long i) { return (i % 97 == 0) ? 70000 + (uint64_t)i % 5 : 8 + (uint64_t)(i * 7) % 300; }

static void *host_worker(void *arg)
{
    int t = (int)(long)arg, next = (t + 1) % THREADS;
    for (long i = 1; i <= N_PER_THREAD / 4; i++) {
        uint64_t k = key_of(t + 20, i);
        if (i & 2) rec_host(k, host_size(i));
        else ot_live_record(k, host_size(i), OT_KIND_HOST, -1);
        if (i % 3 == 0) {
            uint64_t expected = 0;
            if (!atomic_compare_exchange_strong(&host_box[next][i & 255], &expected, k))
                if (!forget_host(k)) atomic_fetch_add(&host_misses, 1);
        } else if (i % 3 == 1) {
            if (!forget_host(k)) atomic_fetch_add(&host_misses, 1);
        } /* else: left live until the end */
        uint64_t got = atomic_exchange(&host_box[t][i & 255], 0);
        if (got && !((i & 4) ? forget_host(got) : ot_live_forget(got, NULL, NULL)))
            atomic_fetch_add(&host_misses, 1);
    }
    return NULL;
}

TEST(host_paths_exact)
{
    ot_options_defaults(&ot_opt);
    ot_opt.stacks = OT_STACKS_SAMPLED;
    ot_opt.sample_bytes = 64 * 1024; /* many sampled blocks, each with a call site */
    ot_totals_t a, b;
    totals(&a);
    /* a stale record: the same address recorded twice through the lean path */
    rec_host(0xfee0, 40);
    rec_host(0xfee0, 24);
    totals(&b);
    EXPECT_EQ_U(b.count - a.count, 1);
    EXPECT_EQ_U(b.bytes - a.bytes, 24);
    EXPECT(forget_host(0xfee0));
    EXPECT(!forget_host(0xfee0));

    pthread_t th[THREADS];
    for (long t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, host_worker, (void *)t);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < THREADS; t++)
        for (int i = 0; i < 256; i++) {
            uint64_t got = atomic_exchange(&host_box[t][i], 0);
            if (got && !forget_host(got)) atomic_fetch_add(&host_misses, 1);
        }
    EXPECT_EQ_U(atomic_load(&host_misses), 0);
    /* what was left live: every i % 3 == 2, with its exact size */
    uint64_t left = 0, bytes = 0;
    for (int t = 0; t < THREADS; t++)
        for (long i = 2; i <= N_PER_THREAD / 4; i += 3) {
            uint64_t size = 0;
            if (!ot_live_lookup(key_of(t + 20, i), &size, NULL) || size != host_size(i)) {
                EXPECT(!"a block left live is found with its size");
                return;
            }
            left++;
            bytes += size;
        }
    totals(&b);
    EXPECT_EQ_U(b.count - a.count, left);
    EXPECT_EQ_U(b.bytes - a.bytes, bytes);
    for (int t = 0; t < THREADS; t++)
        for (long i = 2; i <= N_PER_THREAD / 4; i += 3) forget_host(key_of(t + 20, i));
    totals(&b);
    EXPECT_EQ_U(b.count, a.count);
    EXPECT_EQ_U(b.bytes, a.bytes);
    /* Sampled and big blocks had call sites: every one of them was taken off its site again. */
    uint64_t site_allocs, site_live;
    site_counts(&site_allocs, &site_live);
    EXPECT(site_allocs > 100);
    EXPECT_EQ_U(site_live, 0);
    setup();
}

/* A record's stack starts at the caller of the function that expands ot_live_record (a hook),
 * whatever that function's own frame looks like. */
static volatile int origin_sink;
__attribute__((noipa)) static void hook_like(uint64_t k)
{
    ot_live_record(k, 4096, OT_KIND_DEVICE, 7);
    origin_sink++;
}
__attribute__((noipa)) static void caller_of_hook(uint64_t k)
{
    hook_like(k);
    origin_sink++;
}

TEST(record_stack_starts_at_hook_caller)
{
    setup();
    ot_opt.stacks = OT_STACKS_ALL;
    caller_of_hook(key_of(13, 1));
    ot_site_info_t si = {0};
    bool found = false;
    for (uint32_t id = 1; id <= ot_sites_count() && !found; id++)
        found = ot_sites_get(id, &si) && si.kind == OT_KIND_DEVICE && si.device == 7 && si.depth > 0;
    ASSERT(found);
    ot_frame_t fr;
    ot_symbolize_begin();
    ot_symbolize(si.ips[0] - 1, &fr);
    EXPECT_STR(fr.function, "caller_of_hook");
    EXPECT(ot_live_forget(key_of(13, 1), NULL, NULL));
    setup();
}

/* A thread's walk cache: six buffers with sampled stacks, sixteen with stacks=all, also where it
 * adopts the counters of an exited thread that had fewer. */
static void *walk_cache_worker(void *arg)
{
    rec_host(key_of(14, 1), 64);
    *(unsigned *)arg = ot_walk_cache ? ot_walk_cache->nbufs : 0;
    EXPECT(forget_host(key_of(14, 1)));
    return NULL;
}

TEST(walk_cache_by_stacks_mode)
{
    static const ot_stacks_mode_t modes[] = {OT_STACKS_SAMPLED, OT_STACKS_ALL, OT_STACKS_SAMPLED};
    unsigned nbufs[3];
    for (int m = 0; m < 3; m++) {
        ot_options_defaults(&ot_opt);
        ot_opt.stacks = modes[m];
        pthread_t th;
        ASSERT(pthread_create(&th, NULL, walk_cache_worker, &nbufs[m]) == 0);
        pthread_join(th, NULL);
    }
    /* The second thread may adopt the first's counters, and gets sixteen all the same; the third
     * may adopt the second's, and keeps their larger mapping. */
    EXPECT_EQ_U(nbufs[0], 6);
    EXPECT_EQ_U(nbufs[1], 16);
    EXPECT(nbufs[2] == 6 || nbufs[2] == 16);
    setup();
}

/* The peak is folded in per PEAK_GRANULE of change on each thread: a level reached and left
 * again, never asked for while it lasted, still shows within a granule per thread. */
static void *peak_worker(void *arg)
{
    for (long i = 1; i <= 4096; i++) ot_live_record(key_of(10, i), 1024, OT_KIND_HOST, -1);
    return arg;
}

TEST(peak_follows_the_level)
{
    setup();
    ot_totals_t a, b;
    ot_live_totals(false, &a);
    const uint64_t high = 16u << 20;
    for (long i = 1; i <= 4096; i++) ot_live_record(key_of(11, i), high / 4096, OT_KIND_HOST, -1);
    for (long i = 1; i <= 4096; i++) ot_live_forget(key_of(11, i), NULL, NULL);
    ot_live_totals(false, &b);
    EXPECT_EQ_U(b.bytes, a.bytes);
    EXPECT(b.peak_bytes + PEAK_GRANULE >= a.bytes + high);
    EXPECT(b.peak_bytes <= (a.peak_bytes > a.bytes + high ? a.peak_bytes : a.bytes + high));
    /* Allocated on one thread, freed on another: each thread's own difference goes negative on
     * the freeing side; the sum, and so the level and the peak, stay right. */
    uint64_t peak0 = b.peak_bytes;
    pthread_t th;
    pthread_create(&th, NULL, peak_worker, NULL);
    pthread_join(th, NULL);
    ot_live_totals(false, &b);
    EXPECT_EQ_U(b.bytes, a.bytes + 4096 * 1024);
    for (long i = 1; i <= 4096; i++) ot_live_forget(key_of(10, i), NULL, NULL);
    ot_live_totals(false, &b);
    EXPECT_EQ_U(b.bytes, a.bytes);
    EXPECT(b.peak_bytes >= peak0);
    printf("  peak %llu KiB for a level of %llu KiB\n", (unsigned long long)b.peak_bytes >> 10,
           (unsigned long long)(a.bytes + high) >> 10);
}

/* Past HINT_MIN_THREADS nurseries, a free of another thread's block looks first in the nursery
 * that the owner hint of its granule names, and the inline malloc path writes that hint too. Twelve
 * threads, all alive at once (each keeps its own nursery), hand blocks round a ring. */
#define MANY 12
static pthread_barrier_t many_alive;
static _Atomic uint64_t many_box[MANY][256];
static _Atomic long many_misses;

static void *many_worker(void *arg)
{
    int t = (int)(long)arg, next = (t + 1) % MANY;
    rec_host(key_of(30 + t, 1), 32); /* this thread's nursery */
    pthread_barrier_wait(&many_alive);
    for (long i = 2; i <= N_PER_THREAD / 8; i++) {
        uint64_t k = key_of(30 + t, i);
        rec_host(k, 8 + (uint64_t)i % 200);
        uint64_t expected = 0;
        if (!(i & 1) || !atomic_compare_exchange_strong(&many_box[next][i & 255], &expected, k))
            if (!forget_host(k)) atomic_fetch_add(&many_misses, 1);
        uint64_t got = atomic_exchange(&many_box[t][i & 255], 0);
        if (got && !forget_host(got)) atomic_fetch_add(&many_misses, 1);
    }
    if (!forget_host(key_of(30 + t, 1))) atomic_fetch_add(&many_misses, 1);
    return NULL;
}

/* Records one block through the inline path; returns this thread's nursery id + 1, or 0 if the
 * inline path declined. */
static void *record_one(void *arg)
{
    uint64_t first = key_of(46, 1);
    rec_host(first, 16); /* a new thread's first record sets up its counters (out of line) */
    forget_host(first);
    if (!ot_live_record_host_fast((uint64_t)(uintptr_t)arg, 48)) return NULL;
    return (void *)(uintptr_t)(ot_my_counters->nid + 1);
}

/* A new thread's first record, through either path, goes to its nursery, and the inline free
 * finds it there (the nursery is looked in once the thread has filled it: take_nursery); a thread
 * that has recorded nothing finds nothing inline and frees through live.c. */
static _Atomic int first_inline_found[3];
static void *first_record_paths(void *arg)
{
    int how = (int)(intptr_t)arg;
    uint64_t k = key_of(47, how + 1);
    if (how == 2) { /* records nothing: the block is another thread's */
        atomic_store(&first_inline_found[how], ot_live_forget_host_fast(key_of(47, 100)) ? 1 : 2);
        return NULL;
    }
    if (how == 0) ot_live_record(k, 24, OT_KIND_HOST, -1);
    else rec_host(k, 24);
    atomic_store(&first_inline_found[how], ot_live_forget_host_fast(k) ? 1 : 2);
    return NULL;
}

TEST(first_record_is_freed_inline)
{
    ot_options_defaults(&ot_opt);
    ot_opt.stacks = OT_STACKS_SAMPLED;
    ot_opt.sample_bytes = 1ull << 40;
    ot_totals_t a, b;
    totals(&a);
    rec_host(key_of(47, 100), 40); /* this thread's block, freed by the third thread */
    for (int how = 0; how < 3; how++) {
        pthread_t th;
        ASSERT(pthread_create(&th, NULL, first_record_paths, (void *)(intptr_t)how) == 0);
        pthread_join(th, NULL);
    }
    EXPECT_EQ_U(atomic_load(&first_inline_found[0]), 1); /* the general path's first record */
    EXPECT_EQ_U(atomic_load(&first_inline_found[1]), 1); /* the inline path's (live.c's first fill) */
    EXPECT_EQ_U(atomic_load(&first_inline_found[2]), 2); /* nothing recorded: not looked for inline */
    EXPECT(forget_host(key_of(47, 100)));                /* still live, found by live.c */
    totals(&b);
    EXPECT_EQ_U(b.count, a.count);
    EXPECT_EQ_U(b.bytes, a.bytes);
}

TEST(many_threads_find_by_hint)
{
    ot_options_defaults(&ot_opt);
    ot_opt.stacks = OT_STACKS_SAMPLED;
    ot_opt.sample_bytes = 1ull << 40; /* no sampled block: every record may take the inline path */
    ot_totals_t a, b;
    totals(&a);
    pthread_barrier_init(&many_alive, NULL, MANY);
    pthread_t th[MANY];
    for (long t = 0; t < MANY; t++) pthread_create(&th[t], NULL, many_worker, (void *)t);
    for (int t = 0; t < MANY; t++) pthread_join(th[t], NULL);
    pthread_barrier_destroy(&many_alive);
    for (int t = 0; t < MANY; t++)
        for (int i = 0; i < 256; i++) {
            uint64_t got = atomic_exchange(&many_box[t][i], 0);
            if (got && !forget_host(got)) atomic_fetch_add(&many_misses, 1);
        }
    ASSERT(atomic_load(&ot_n_nurseries) > HINT_MIN_THREADS);
    EXPECT_EQ_U(atomic_load(&many_misses), 0);
    totals(&b);
    EXPECT_EQ_U(b.count, a.count);
    EXPECT_EQ_U(b.bytes, a.bytes);
    /* The inline path itself names the recording thread as the owner (the hint held another id
     * before), and this thread's free of the block finds it. */
    uint64_t k = key_of(45, 1);
    atomic_store(&ot_owner_hint[hint_index(k)], 0xffff);
    pthread_t r;
    void *nid1 = NULL;
    pthread_create(&r, NULL, record_one, (void *)(uintptr_t)k);
    pthread_join(r, &nid1);
    ASSERT(nid1 != NULL);
    EXPECT_EQ_U(atomic_load(&ot_owner_hint[hint_index(k)]), (uintptr_t)nid1 - 1);
    EXPECT(forget_host(k));
    totals(&b);
    EXPECT_EQ_U(b.count, a.count);
    EXPECT_EQ_U(b.bytes, a.bytes);
    setup();
}

/* A free of a block this thread did not record looks first where the thread's last such search
 * found its record: in that other thread's nursery, or in the table. Either order must find every
 * record, also when the two alternate. The recording thread stays alive meanwhile, so that its
 * nursery stays its own. */
#define ORDER_BLOCKS (5 * NURSERY_SETS) /* more than a nursery holds */
static pthread_barrier_t order_recorded, order_freed;
static uint32_t order_nid;
static void *order_recorder(void *arg)
{
    for (long i = 1; i <= ORDER_BLOCKS; i++) ot_live_record(key_of(50, i), 24, OT_KIND_HOST, -1);
    order_nid = ot_my_counters->nid;
    pthread_barrier_wait(&order_recorded);
    pthread_barrier_wait(&order_freed);
    return arg;
}

TEST(search_order_follows_last_find)
{
    setup();
    ot_totals_t a, b;
    totals(&a);
    ot_live_record(key_of(51, 1), 8, OT_KIND_HOST, -1); /* this thread's counters and nursery */
    ASSERT(ot_live_forget(key_of(51, 1), NULL, NULL));
    ASSERT(ot_my_counters != NULL);
    pthread_barrier_init(&order_recorded, NULL, 2);
    pthread_barrier_init(&order_freed, NULL, 2);
    pthread_t th;
    pthread_create(&th, NULL, order_recorder, NULL);
    pthread_barrier_wait(&order_recorded);
    /* More blocks than the recorder's nursery holds: the rest went to the table. */
    static long in_table[ORDER_BLOCKS], in_nursery[ORDER_BLOCKS];
    long nt = 0, nn = 0;
    for (long i = 1; i <= ORDER_BLOCKS; i++) {
        uint64_t v;
        if (ot_table_lookup(key_of(50, i), &v)) in_table[nt++] = i;
        else in_nursery[nn++] = i;
    }
    ASSERT(nt > 100 && nn > 100);
    /* Alternately one of each, then (the longer list's tail) the same place again and again; each
     * kind of place freed in turn by the general search and by a host free (whose first look at
     * the last place is its own: live.c, ot_live_forget_host). */
    long found = 0, flag_wrong = 0;
    for (long j = 0; j < nt || j < nn; j++) {
        if (j < nn) {
            uint64_t k = key_of(50, in_nursery[j]);
            found += (j & 1) ? ot_live_forget(k, NULL, NULL) : forget_host(k);
            flag_wrong += ot_my_counters->found_in != order_nid + 1;
        }
        if (j < nt) {
            uint64_t k = key_of(50, in_table[j]);
            found += (j & 1) ? forget_host(k) : ot_live_forget(k, NULL, NULL);
            flag_wrong += ot_my_counters->found_in != 0;
        }
    }
    pthread_barrier_wait(&order_freed);
    pthread_join(th, NULL);
    pthread_barrier_destroy(&order_recorded);
    pthread_barrier_destroy(&order_freed);
    EXPECT_EQ_U(found, ORDER_BLOCKS);
    EXPECT_EQ_U(flag_wrong, 0);
    totals(&b);
    EXPECT_EQ_U(b.count, a.count);
    EXPECT_EQ_U(b.bytes, a.bytes);
    printf("  %ld in the recorder's nursery, %ld in the table\n", nn, nt);
}

/* A thread that keeps nearly everything it allocates sends its records straight to the table after
 * a window of evictions (live.c: long-lived phases); every record stays exact and findable. Each
 * part runs on a thread of its own: a fresh nursery, and counters whose phase starts over. */
#define PHASE_BLOCKS 60000
static void count_phase_visit(uint64_t key, uint64_t val, void *ctx)
{
    uint64_t *acc = ctx;
    if (key >> 36 == 61) acc[0]++, acc[1] += ot_unpack_size(val);
}

static void *phase_keeper(void *arg)
{
    long *res = arg; /* [0] in the table, [1] lookups wrong, [2] run entered, [3] walk count */
    for (long i = 1; i <= PHASE_BLOCKS; i++) ot_live_record(key_of(60, i), (uint64_t)(i % 50) + 1, OT_KIND_HOST, -1);
    res[2] = atomic_load(&ot_my_counters->k[OT_KIND_HOST].total_count) < ot_my_counters->window_start; /* in a run */
    for (long i = 1; i <= PHASE_BLOCKS; i++) {
        uint64_t v, size;
        res[0] += ot_table_lookup(key_of(60, i), &v);
        res[1] += !ot_live_lookup(key_of(60, i), &size, NULL) || size != (uint64_t)(i % 50) + 1;
    }
    uint64_t acc[2] = {0, 0};
    ot_live_walk(count_phase_visit, acc);
    res[3] = (long)acc[0];
    return NULL;
}

TEST(long_lived_phase_goes_to_the_table)
{
    setup();
    ot_totals_t a, b;
    totals(&a);
    long res[4] = {0, 0, 0, 0};
    pthread_t th;
    ASSERT(pthread_create(&th, NULL, phase_keeper, res) == 0);
    pthread_join(th, NULL);
    totals(&b);
    EXPECT_EQ_U(res[2], 1);
    /* every record is in the table but those that fill the nursery (2 ways x NURSERY_SETS) */
    EXPECT_EQ_U(res[0], PHASE_BLOCKS - 2 * NURSERY_SETS);
    EXPECT_EQ_U(res[1], 0);
    EXPECT_EQ_U(res[3], PHASE_BLOCKS);
    EXPECT_EQ_U(b.count - a.count, PHASE_BLOCKS);
    uint64_t bytes = 0, size;
    for (long i = 1; i <= PHASE_BLOCKS; i++) bytes += (uint64_t)(i % 50) + 1;
    EXPECT_EQ_U(b.bytes - a.bytes, bytes);
    long bad = 0;
    for (long i = 1; i <= PHASE_BLOCKS; i++) bad += !ot_live_forget(key_of(60, i), &size, NULL) || size != (uint64_t)(i % 50) + 1;
    EXPECT_EQ_U(bad, 0);
    totals(&b);
    EXPECT_EQ_U(b.count, a.count);
    EXPECT_EQ_U(b.bytes, a.bytes);
    printf("  %ld of %d records in the table\n", res[0], PHASE_BLOCKS);
}

/* In a run, a record of the same address still in the nursery is a block whose free went past us:
 * it is counted as freed, and one record (the new one) remains. */
static void *phase_stale(void *arg)
{
    long *res = arg;
    uint64_t k = key_of(61, 1), v;
    ot_live_record(k, 100, OT_KIND_HOST, -1); /* a fresh nursery: it stays there */
    res[0] = nursery_get(ot_my_counters->nursery, k, &v, false);
    ot_my_counters->window_start = atomic_load(&ot_my_counters->k[OT_KIND_HOST].total_count) + 100; /* a run */
    ot_live_record(k, 300, OT_KIND_HOST, -1);
    res[1] = nursery_get(ot_my_counters->nursery, k, &v, false);
    res[2] = ot_table_lookup(k, &v);
    return NULL;
}

TEST(long_lived_phase_frees_a_stale_nursery_record)
{
    setup();
    ot_totals_t a, b;
    totals(&a);
    long res[3] = {0, 0, 0};
    pthread_t th;
    ASSERT(pthread_create(&th, NULL, phase_stale, res) == 0);
    pthread_join(th, NULL);
    EXPECT_EQ_U(res[0], 1);
    EXPECT_EQ_U(res[1], 0);
    EXPECT_EQ_U(res[2], 1);
    totals(&b);
    EXPECT_EQ_U(b.count - a.count, 1);
    EXPECT_EQ_U(b.bytes - a.bytes, 300);
    uint64_t size;
    EXPECT(ot_live_forget(key_of(61, 1), &size, NULL) && size == 300);
    EXPECT(!ot_live_forget(key_of(61, 1), NULL, NULL));
    totals(&b);
    EXPECT_EQ_U(b.count, a.count);
}

/* Blocks freed soon after they were allocated never start a run, however many there are, even
 * where some of them are evicted: 3/8 of the nursery's ways hold records at a time (3,072 in a
 * first nursery; a thread that adopts a grown one gets more), scattered over its sets, so that the
 * lines whose two sets are both full send some to the table. */
static uint64_t churn_key(long i) { return key_of(62, (long)(((uint64_t)i * 0x9E3779B97F4A7C15ull) >> 44)); }
static void *phase_churn(void *arg)
{
    long *res = arg; /* [0] ever in a run, [1] frees that found their block in the table, [2] live */
    res[0] = res[1] = 0;
    ot_live_record(churn_key(0), 24, OT_KIND_HOST, -1); /* the thread's record and nursery */
    ot_live_forget(churn_key(0), NULL, NULL);
    long live = res[2] = (long)(ot_my_counters->nursery->mask + 1) * 3 / 4;
    for (long i = 1; i <= 200000; i++) {
        ot_live_record(churn_key(i), 24, OT_KIND_HOST, -1);
        res[0] |= atomic_load(&ot_my_counters->k[OT_KIND_HOST].total_count) < ot_my_counters->window_start; /* in a run */
        if (i > live) {
            uint64_t v;
            res[1] += ot_table_lookup(churn_key(i - live), &v);
            ot_live_forget(churn_key(i - live), NULL, NULL);
        }
    }
    for (long i = 200000 - live + 1; i <= 200000; i++) ot_live_forget(churn_key(i), NULL, NULL);
    return NULL;
}

TEST(churn_never_enters_a_long_lived_phase)
{
    setup();
    ot_totals_t a, b;
    totals(&a);
    long res[3] = {1, 0, 0};
    pthread_t th;
    ASSERT(pthread_create(&th, NULL, phase_churn, res) == 0);
    pthread_join(th, NULL);
    EXPECT_EQ_U(res[0], 0);
    EXPECT(res[1] > 0); /* some were evicted: the threshold, not the lack of evictions, kept it out */
    printf("  %ld of %ld frees found their block in the table (%ld live)\n", res[1], 200000 - res[2], res[2]);
    totals(&b);
    EXPECT_EQ_U(b.count, a.count);
}

/* A producer whose blocks another thread frees, in bursts larger than its nursery (bursty_pc):
 * once a window has evicted 1 in 4 and the producer freed few of them itself, it gets a nursery
 * of NURSERY_SETS_GROWN sets, which holds such bursts; bursts too large for that one too start a
 * run, whose records go to the table, where the consumer's frees look first. A producer that frees
 * half of the same blocks itself, or frees smaller bursts itself, keeps the first nursery and no
 * run (their evictions are well under 9 in 10). Every free finds its record, the old nursery's
 * included. */
#define BURSTS 6
/* The address of a producer's x-th block, as an allocator hands out blocks of mixed sizes: 2..16
 * granules after the one before (9 on average), so the blocks' nursery sets follow each other with
 * gaps and repeats, not one set after another as consecutive granules would. */
static uint64_t burst_key(long x)
{
    uint64_t h = (uint64_t)x * 0x9e3779b97f4a7c15ull;
    return key_of(63, 9 * x + (long)(h >> 61));
}
typedef struct {
    long burst, size, misses;
    int reverse;       /* frees the burst last block first */
    int halves;        /* the producer freed every other block already */
    uint32_t ring_src; /* out: the ring the consumer followed (nursery id + 1, 0: none) */
    long ring_steps;   /* out: how far its place in it moved over the burst's frees after the first */
} burst_job_t;
static void *burst_consumer(void *arg)
{
    burst_job_t *j = arg;
    uint32_t cur0 = 0;
    for (long i = 0; i < j->size; i++) {
        long k = j->reverse ? j->size - 1 - i : i;
        if (j->halves && (k & 1)) continue;
        j->misses += !ot_live_forget(burst_key(j->burst * j->size + k), NULL, NULL);
        if (i == 0) cur0 = ot_my_counters->ring_cur;
    }
    j->ring_src = ot_my_counters->ring_src;
    j->ring_steps = (long)(uint32_t)(ot_my_counters->ring_cur - cur0);
    return NULL;
}
typedef struct {
    int others;         /* another thread frees */
    int reverse;        /* it frees each burst last block first */
    int halves;         /* the producer frees every other block of a burst as it goes */
    long size;          /* blocks per burst */
    long run, misses;   /* out: ever in a run, frees that missed */
    long in_table;      /* out: the last burst's records in the table */
    unsigned sets;      /* out: the producer's nursery at the end */
    long grown_pages, grown_resident; /* out: the grown nursery's pages, resident when it was new */
    uint32_t nid;                     /* out: the producer's nursery id at the end */
    uint32_t last_ring_src;           /* out: the ring the last burst's consumer followed */
    long last_ring_steps;             /* out: and how far */
} burst_case_t;

/* Pages of [p, p + bytes) resident now (mincore), and *pages their number. */
static long resident_pages(const void *p, size_t bytes, long *pages)
{
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)4095;
    size_t n = ((uintptr_t)p + bytes - a + 4095) / 4096;
    static unsigned char vec[1024];
    *pages = (long)n;
    if (n > sizeof vec || mincore((void *)a, n * 4096, vec) != 0) return -1;
    long r = 0;
    for (size_t i = 0; i < n; i++) r += vec[i] & 1;
    return r;
}
static void *burst_producer(void *arg)
{
    burst_case_t *bc = arg;
    for (long b = 0; b < BURSTS; b++) {
        for (long i = 0; i < bc->size; i++) {
            /* Every other block through the hooks' inline path, which hands a grown (ringed)
             * nursery's fills to ot_live_record_host_fill: both write the ring the consumer
             * follows. */
            if (i & 1) rec_host(burst_key(b * bc->size + i), 32);
            else ot_live_record(burst_key(b * bc->size + i), 32, OT_KIND_HOST, -1);
            if (bc->halves && (i & 1)) bc->misses += !ot_live_forget(burst_key(b * bc->size + i), NULL, NULL);
            bc->run |= atomic_load(&ot_my_counters->k[OT_KIND_HOST].total_count) < ot_my_counters->window_start;
            nursery_t *n = ot_my_counters->nursery;
            if (!bc->grown_pages && n->mask + 1 == NURSERY_SETS_GROWN)
                bc->grown_resident = resident_pages(n, nursery_bytes(NURSERY_SETS_GROWN), &bc->grown_pages);
        }
        if (b == BURSTS - 1)
            for (long i = 0; i < bc->size; i++) {
                uint64_t v;
                bc->in_table += ot_table_lookup(burst_key(b * bc->size + i), &v);
            }
        burst_job_t j = {.burst = b, .size = bc->size, .reverse = bc->reverse, .halves = bc->halves};
        if (bc->others) {
            pthread_t th;
            if (pthread_create(&th, NULL, burst_consumer, &j) != 0) {
                bc->misses = -1;
                return NULL;
            }
            pthread_join(th, NULL);
        } else {
            burst_consumer(&j);
        }
        bc->misses += j.misses;
        bc->last_ring_src = j.ring_src;
        bc->last_ring_steps = j.ring_steps;
    }
    bc->sets = ot_my_counters->nursery->mask + 1;
    bc->nid = ot_my_counters->nid;
    return NULL;
}

TEST(blocks_others_free_grow_the_nursery)
{
    setup();
    ot_opt.stacks = OT_STACKS_SAMPLED; /* the inline path's mode (rec_host) */
    ot_opt.sample_bytes = 1ull << 40; /* no sampled block */
    /* Bursts of nearly 1.5 nurseries' records (two ways a set), at addresses spread as an
     * allocator's are (burst_key): the windows inside a burst evict a third to two thirds of their
     * allocations (a producer's share, not a keeper's: note_eviction). SELF's bursts, of a third
     * as many blocks, freed by the producer itself, evict too few for either. (A thread's first
     * burst several windows long looks like a producer's whoever frees it: it grows.) HALVES'
     * bursts live as long as GROWS', but the producer frees every other block as it goes: it frees
     * too much of what it allocates to be taken for a producer, and keeps its nursery. */
    const long burst = 3L * NURSERY_SETS - NURSERY_SETS / 16;
    /* In this order: each case's thread takes the record an earlier one left (its nursery too). */
    enum { GROWS, HALVES, SELF, OVERFLOWS, REVERSED };
    burst_case_t cases[] = {[GROWS] = {.others = 1, .size = burst},
                            [HALVES] = {.others = 1, .size = 2 * burst, .halves = 1},
                            [SELF] = {.others = 0, .size = NURSERY_SETS},
                            [OVERFLOWS] = {.others = 1, .size = 5 * NURSERY_SETS_GROWN / 2},
                            [REVERSED] = {.others = 1, .size = burst, .reverse = 1}};
    for (unsigned c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        burst_case_t *bc = &cases[c];
        ot_totals_t a, b;
        totals(&a);
        pthread_t th;
        ASSERT(pthread_create(&th, NULL, burst_producer, bc) == 0);
        pthread_join(th, NULL);
        totals(&b);
        const char *by = bc->halves ? "both threads, half each" : bc->others ? "another thread" : "the producer";
        printf("  bursts of %ld freed by %s: nursery of %u sets, %s, %ld of the last burst in the table\n", bc->size,
               by, bc->sets, bc->run ? "a run" : "no run", bc->in_table);
        bool grows = bc->others && !bc->halves;
        EXPECT_EQ_U(bc->misses, 0);
        EXPECT_EQ_U(b.count, a.count);
        EXPECT_EQ_U(b.bytes, a.bytes);
        EXPECT_EQ_U(bc->sets, grows ? NURSERY_SETS_GROWN : NURSERY_SETS);
        /* Faulted in for writing when it was mapped: a set read before its first write would map
         * the zero page, and the write replace it with a TLB flush on every CPU (ot_prefault). */
        if (grows) {
            printf("  the grown nursery, one record after it was mapped: %ld of %ld pages resident\n",
                   bc->grown_resident, bc->grown_pages);
            EXPECT(bc->grown_pages > 200);
            EXPECT_EQ_U(bc->grown_resident, bc->grown_pages);
        }
        /* The last burst went to the grown nursery (GROWS) and was freed by another thread in
         * allocation order: the consumer followed the producer's ring, one place per free. */
        if (c == GROWS) {
            printf("  the last burst's consumer followed ring %u (the producer's nursery %u) %ld places for %ld frees\n",
                   bc->last_ring_src, bc->nid, bc->last_ring_steps, bc->size - 1);
            EXPECT_EQ_U(bc->last_ring_src, bc->nid + 1);
            /* (A few more where its search for a set skipped entries: a hint, not a count.) */
            EXPECT(bc->last_ring_steps >= bc->size - 1 && bc->last_ring_steps < bc->size + 64);
        }
        /* Freed in the other order, the consumer never finds its place in the ring for long: its
         * place moves on a few times at most (it backs off after each miss: live.c, ring_prefetch),
         * while every free still finds its record (misses 0, totals exact, above). */
        if (c == REVERSED) {
            printf("  freed last block first: %ld places for %ld frees\n", bc->last_ring_steps, bc->size - 1);
            EXPECT(bc->last_ring_steps < bc->size / 16);
        }
        EXPECT_EQ_U(bc->run, c == OVERFLOWS);
        /* The grown nursery holds nearly all of a burst: only the blocks of a set that more than
         * two of them fall in go to the table (249 of 24,064 when this was written). */
        if (c == GROWS || c == REVERSED) EXPECT(bc->in_table * 64 < bc->size);
        if (c == SELF) EXPECT(bc->in_table > 0);     /* evicted, but too few for a run */
        if (c == OVERFLOWS) EXPECT(bc->in_table >= bc->size - 2 * NURSERY_SETS_GROWN); /* all the nursery cannot hold */
    }
}

/* ------------------------------------------------------------------ thread handoff churn
 * Short-lived threads, two at a time, each handed its lane's live set by the thread before it: it
 * frees a third of the set (blocks that an exited thread recorded, in its nursery or the table),
 * records replacements and exits. 10,000 threads: every free finds its record, the totals are
 * exact, and the memory the records take (nurseries, walk caches, table) stays bounded, because an
 * exited thread's block and nursery go to the next thread. */
#ifdef OT_SANITIZER
#define HANDOFF_THREADS 1000
#else
#define HANDOFF_THREADS 10000
#endif
#define HANDOFF_LIVE 3000
typedef struct {
    uint64_t keys[HANDOFF_LIVE];
    uint64_t seq, rng;
} lane_t;
static lane_t handoff_lane[2];
static _Atomic long handoff_misses;

static void *handoff_worker(void *arg)
{
    lane_t *l = arg;
    for (int i = 0; i < HANDOFF_LIVE / 3; i++) {
        l->rng ^= l->rng << 13, l->rng ^= l->rng >> 7, l->rng ^= l->rng << 17;
        uint64_t *k = &l->keys[l->rng % HANDOFF_LIVE];
        if (!ot_live_forget(*k, NULL, NULL)) atomic_fetch_add(&handoff_misses, 1);
        /* Addresses come back (an allocator reuses them) or are new, as in a real heap. */
        *k = (l->rng & 1) ? *k : ((uint64_t)(12 + (l - handoff_lane)) << 36) | (++l->seq << 5);
        ot_live_record(*k, 8 + (l->rng >> 8) % 1000, OT_KIND_HOST, -1);
    }
    return NULL;
}

static uint64_t rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0, rss = 0;
    if (f && fscanf(f, "%lu %lu", &pages, &rss) != 2) rss = 0;
    if (f) fclose(f);
    return (uint64_t)rss * 4;
}

TEST(thread_handoff_churn)
{
    setup();
    ot_totals_t a, b;
    totals(&a);
    /* What the table maps for this test: earlier tests may have left a larger table and spares
     * behind (bursts of 81,920 blocks through it), which shrink only as later removes check. */
    ot_table_stats_t st_start;
    ot_table_stats(&st_start);
    for (int n = 0; n < 2; n++) {
        lane_t *l = &handoff_lane[n];
        l->rng = 0x9e3779b97f4a7c15ull * (uint64_t)(n + 1);
        for (int i = 0; i < HANDOFF_LIVE; i++) {
            l->keys[i] = ((uint64_t)(12 + n) << 36) | (++l->seq << 5);
            ot_live_record(l->keys[i], 100, OT_KIND_HOST, -1);
        }
    }
    uint64_t rss0 = 0, rss1 = 0;
    uint32_t nurs0 = 0;
    ot_table_stats_t st0 = {0}, st1;
    for (int t = 0; t < HANDOFF_THREADS; t += 2) {
        pthread_t th[2];
        for (int n = 0; n < 2; n++) ASSERT(pthread_create(&th[n], NULL, handoff_worker, &handoff_lane[n]) == 0);
        for (int n = 0; n < 2; n++) pthread_join(th[n], NULL);
        if (t == HANDOFF_THREADS / 10) { /* once the first threads' memory is there to reuse */
            rss0 = rss_kib();
            nurs0 = atomic_load(&ot_n_nurseries);
            ot_table_stats(&st0);
        }
    }
    rss1 = rss_kib();
    ot_table_stats(&st1);
    totals(&b);
    uint32_t nurs1 = atomic_load(&ot_n_nurseries);
    printf("  %d threads: %ld misses; %u nurseries (%u at a tenth); RSS %lu KiB -> %lu KiB; table %lu KiB "
           "(%lu at the start, %lu at a tenth), %lu mmap and %lu munmap in the last nine tenths\n",
           HANDOFF_THREADS, atomic_load(&handoff_misses), nurs1, nurs0, (unsigned long)rss0, (unsigned long)rss1,
           (unsigned long)(st1.mapped_bytes >> 10), (unsigned long)(st_start.mapped_bytes >> 10),
           (unsigned long)(st0.mapped_bytes >> 10), (unsigned long)(st1.maps - st0.maps),
           (unsigned long)(st1.unmaps - st0.unmaps));
    EXPECT_EQ_U(atomic_load(&handoff_misses), 0);
    EXPECT_EQ_U(b.count - a.count, 2 * HANDOFF_LIVE);
    EXPECT_EQ_U(nurs1, nurs0); /* exited threads' nurseries were all reused */
#ifndef OT_SANITIZER
    EXPECT(rss1 < rss0 + 8 * 1024); /* (ThreadSanitizer keeps memory of every thread it saw) */
#endif
    EXPECT(st1.mapped_bytes < st_start.mapped_bytes + (4u << 20)); /* this test's records add < 4 MiB */
    EXPECT(st1.maps - st0.maps <= 16);
    /* Every record is still found, with its size counted. */
    for (int n = 0; n < 2; n++)
        for (int i = 0; i < HANDOFF_LIVE; i++)
            if (!ot_live_forget(handoff_lane[n].keys[i], NULL, NULL)) atomic_fetch_add(&handoff_misses, 1);
    EXPECT_EQ_U(atomic_load(&handoff_misses), 0);
    totals(&b);
    EXPECT_EQ_U(b.count, a.count);
    EXPECT_EQ_U(b.bytes, a.bytes);
}

TEST_MAIN(walk_cache_by_stacks_mode, full_set_borrows_its_buddy, long_lived_phase_goes_to_the_table, blocks_others_free_grow_the_nursery, long_lived_phase_frees_a_stale_nursery_record, churn_never_enters_a_long_lived_phase, record_stack_starts_at_hook_caller, peak_follows_the_level, lean_path_samples, single_thread_exact, walk_sees_nursery_and_table, late_destructors_after_release, stale_record_is_replaced, terabyte_blocks_keep_their_size, take_and_put_back, cross_thread_frees_exact,
          records_of_exited_threads, host_paths_exact, first_record_is_freed_inline, many_threads_find_by_hint, search_order_follows_last_find, thread_handoff_churn)
