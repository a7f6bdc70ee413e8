/* Live allocations: exact per-kind totals (per-thread counters, summed on demand), where each live
 * block is recorded, and the stack policy (always above stack_min_bytes, byte-sampled below).
 * This is the malloc/free fast path: no locks, no shared counters touched per call.
 *
 * Where a host block is recorded: in its allocating thread's nursery when the nursery has room,
 * else in the shared lock-free table (table.c). The nursery is a small 2-way set-associative array
 * owned by one thread; a record never moves once written, so a free finds it in one of three
 * places: its own nursery, the table, or another thread's nursery. No CAS is needed anywhere:
 *  - only the owner fills a slot, and only while its key is 0;
 *  - only the thread freeing block k clears the slot holding k (two threads freeing k at once
 *    would be a double free), after reading the value; the owner refills it only once it reads 0;
 *  - a free happens after the malloc returned (program order), so the release store of the key
 *    is visible to whichever thread frees it.
 * Same-thread malloc/free pairs thus cost a few plain loads and stores instead of two atomic
 * read-modify-writes on the shared table. A free of a block that another thread allocated checks
 * the table, then the nursery that the owner hint names, then every nursery. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "live_fast.h"

static _Atomic(nursery_t *) nurseries[MAX_NURSERIES]; /* set once per id, after the id is taken */
_Atomic uint32_t ot_n_nurseries;
#define n_nurseries ot_n_nurseries
/* Which nursery last recorded a block of this granule's hash: where a cross-thread free looks first. */
_Atomic uint16_t ot_owner_hint[1u << HINT_BITS];

static _Atomic(thread_counters_t *) all_threads;
OT_TLS thread_counters_t *ot_my_counters;
#define my_counters ot_my_counters
static pthread_key_t counters_key;
static _Atomic int key_ready;

static _Atomic int64_t approx_level[2];
static _Atomic uint64_t peak_level[2];

/* Blocks of 2^40 bytes and more do not fit the table's size field; they are rare enough for a
 * small side table. */
#define BIG_SLOTS 64
static struct {
    _Atomic uint64_t key;
    _Atomic uint64_t size;
} big[BIG_SLOTS];

/* Set on a thread once its block is released: later destructors (and glibc's own clean-up) may
 * still malloc and free on it, and must not touch a block a new thread may own by then. */
static OT_TLS bool thread_gone;
/* Frees made by such threads are counted here, with atomic adds (several may be exiting at once). */
static kind_counters_t gone_counters[OT_KIND_COUNT];

static void counters_release(void *p)
{
    thread_counters_t *c = p;
    thread_gone = true;
    my_counters = NULL;
    ot_unwind_attach(NULL, 0);
    ot_sites_attach(NULL); /* this thread's pending call-site counts go to the sites */
    /* Its host level's part not yet folded into the global level (under PEAK_GRANULE) goes there
     * now: a record left idle would hold it back until a thread adopts the record, and the idle
     * records of exited threads that freed more than they allocated (consumers) kept the level,
     * and the peaks taken from it, above the live memory by up to PEAK_GRANULE each. */
    kind_counters_t *kc = &c->k[OT_KIND_HOST];
    host_level_fold(c, (int64_t)(atomic_load_explicit(&kc->total_bytes, memory_order_relaxed) -
                                 atomic_load_explicit(&kc->freed_bytes, memory_order_relaxed)), 1);
    /* Keep the counts (they still describe live memory); let the next new thread reuse the block. */
    atomic_store_explicit(&c->in_use, 0, memory_order_release);
}

static void ensure_key(void)
{
    int expected = 0;
    if (atomic_load_explicit(&key_ready, memory_order_acquire) == 2) return;
    if (atomic_compare_exchange_strong(&key_ready, &expected, 1)) {
        pthread_key_create(&counters_key, counters_release);
        atomic_store_explicit(&key_ready, 2, memory_order_release);
    }
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* Exponentially distributed gap with mean sample_bytes (as tcmalloc's heap sampler), so that
 * periodic allocation patterns cannot dodge the sampler. */
static int64_t next_sample_gap(thread_counters_t *c)
{
    double u = (double)((rng_next(&c->rng) >> 11) + 1) / 9007199254740993.0;
    double gap = -ot_log(u) * (double)ot_opt.sample_bytes;
    if (gap < 1) gap = 1;
    if (gap > 1e15) gap = 1e15;
    return (int64_t)gap;
}

/* The walk cache a thread attaches: with a stack for every allocation, the walker remembers more
 * walks (stacks met again among the last few cost no walk and no interning) and keeps the stack
 * memo; sampled stacks remember five, enough for a loop that makes its large blocks from a few
 * stacks in turn (tests/bench/np_loop.py: from 12.2% added instructions with one remembered to
 * 3.5%; with three, 8.1%). */
static size_t walk_bytes_wanted(void)
{
    return ot_opt.stacks == OT_STACKS_ALL    ? OT_UNWIND_CACHE_BYTES + OT_UNWIND_MEMO_BYTES
           : ot_opt.stacks == OT_STACKS_NONE ? 0
                                             : OT_UNWIND_CACHE_SAMPLED_BYTES;
}

/* A nursery id for a new nursery: false when all MAX_NURSERIES are taken. An id whose mapping then
 * fails stays unused (readers skip a NULL nursery). */
static bool nursery_id_take(uint32_t *id)
{
    uint32_t i = atomic_load_explicit(&n_nurseries, memory_order_relaxed);
    while (i < MAX_NURSERIES && !atomic_compare_exchange_weak(&n_nurseries, &i, i + 1)) {
    }
    *id = i;
    return i < MAX_NURSERIES;
}

/* A nursery of one set and its buddy, every way taken by a key no block has (keys are 16-byte
 * aligned): every fast path that looks there finds no free way (thread_counters_t.fast_nursery).
 * Never written. */
static struct {
    nursery_t n;
    nursery_way_t way[4];
} full_nursery_mem __attribute__((aligned(64))) = {.n = {.mask = 0}, .way = {{1, 0}, {1, 0}, {1, 0}, {1, 0}}};
_Static_assert(offsetof(nursery_t, slot) == sizeof(nursery_t), "the set follows the header");
nursery_t *const ot_full_nursery = &full_nursery_mem.n;

/* mem, mapped for a nursery of `sets` sets, becomes nursery `id`, published, and c's. */
static void nursery_publish(thread_counters_t *c, uint32_t id, void *mem, unsigned sets)
{
    nursery_t *n = mem;
    n->mask = sets - 1;
    atomic_store_explicit(&nurseries[id], n, memory_order_release);
    c->nursery = n;
    c->fast_nursery = ot_full_nursery; /* until its first record: nursery_in_use */
    c->take_nursery = NULL;
    c->ring_n = 0;
    c->nid = id;
}

static OT_NOINLINE thread_counters_t *counters_slow(void)
{
    ensure_key();
    thread_counters_t *c = NULL;
    for (thread_counters_t *t = atomic_load_explicit(&all_threads, memory_order_acquire); t; t = t->next) {
        int expected = 0;
        if (atomic_load_explicit(&t->in_use, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_strong(&t->in_use, &expected, 1)) {
            c = t;
            break;
        }
    }
    if (!c) {
        c = ot_perm_alloc(sizeof *c);
        if (!c) return NULL;
        atomic_store_explicit(&c->in_use, 1, memory_order_relaxed);
        /* A nursery of its own (none when out of ids or memory: the table takes everything), and
         * in the same mapping the record's pending site counts and its walk cache: one mmap for
         * the record instead of two (bursty_pc 8, strace -f: 92..98 mmap calls under oomtrace
         * before, 83..84 after, 25 without it). The id is taken first; one whose mapping failed
         * stays unused (readers skip a NULL nursery). */
        uint32_t id;
        if (nursery_id_take(&id)) {
            size_t nb = nursery_bytes(NURSERY_SETS), pb = (ot_sites_pend_bytes() + 63) & ~(size_t)63,
                   wb = walk_bytes_wanted();
            char *m = ot_mmap(nb + pb + wb);
            if (!m && wb) m = ot_mmap(nb + pb + (wb = 0)); /* a tight address-space limit: the walk apart */
            if (m) {
                nursery_publish(c, id, m, NURSERY_SETS);
                c->sites_pend = m + nb;
                if (wb) {
                    c->walk = m + nb + pb;
                    c->walk_bytes = (uint32_t)wb;
                    c->walk_embedded = 1;
                }
            }
        }
        c->next = atomic_load_explicit(&all_threads, memory_order_relaxed);
        while (!atomic_compare_exchange_weak_explicit(&all_threads, &c->next, c, memory_order_release,
                                                      memory_order_relaxed)) {
        }
    }
    /* A block adopted from an exited thread keeps its counts, not its phase. */
    c->window_start = atomic_load_explicit(&c->k[OT_KIND_HOST].total_count, memory_order_relaxed);
    c->window_evictions = 0;
    c->decided_n = c->window_start;
    c->run_len = 0;
    c->decided_freed = atomic_load_explicit(&c->k[OT_KIND_HOST].freed_count, memory_order_relaxed);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    c->rng = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)(uintptr_t)&ts ^ (uint64_t)gettid() ^ 0x9e3779b97f4a7c15ull;
    if (!c->rng) c->rng = 1;
    c->sample_left = next_sample_gap(c);
    size_t walk_bytes = walk_bytes_wanted();
    if (c->walk && c->walk_bytes < walk_bytes) { /* adopted from a thread that needed less */
        if (!c->walk_embedded) ot_munmap(c->walk, c->walk_bytes);
        c->walk = NULL;
        c->walk_embedded = 0;
    }
    if (!c->walk && ot_opt.stacks != OT_STACKS_NONE) {
        c->walk = ot_mmap(walk_bytes);
        /* Under a tight address-space limit, the remembered walks without the memo. */
        if (!c->walk && walk_bytes > OT_UNWIND_CACHE_BYTES) c->walk = ot_mmap(walk_bytes = OT_UNWIND_CACHE_BYTES);
        if (c->walk) c->walk_bytes = (uint32_t)walk_bytes;
    }
    ot_unwind_attach(c->walk, c->walk ? c->walk_bytes : 0);
    if (!c->sites_pend) c->sites_pend = ot_perm_alloc(ot_sites_pend_bytes());
    ot_sites_attach(c->sites_pend);
    my_counters = c;
    if (atomic_load_explicit(&key_ready, memory_order_acquire) == 2) pthread_setspecific(counters_key, c);
    return c;
}

static OT_NOINLINE thread_counters_t *counters_first_time(void)
{
    int e = errno;
    ot_in_hook++; /* pthread_setspecific and friends must not come back here */
    thread_counters_t *c = counters_slow();
    ot_in_hook--;
    errno = e;
    return c;
}

/* NULL on a thread that has released its block: its late allocations are not recorded. */
static inline thread_counters_t *counters(void)
{
    thread_counters_t *c = my_counters;
    if (OT_LIKELY(c != NULL)) return c;
    return thread_gone ? NULL : counters_first_time();
}

static void raise_peak(int cls, int64_t level)
{
    uint64_t p = atomic_load_explicit(&peak_level[cls], memory_order_relaxed);
    while (level > 0 && (uint64_t)level > p &&
           !atomic_compare_exchange_weak_explicit(&peak_level[cls], &p, (uint64_t)level, memory_order_relaxed,
                                                  memory_order_relaxed)) {
    }
}

OT_NOINLINE void ot_live_level_flush(int cls, int64_t delta)
{
    int64_t now = atomic_fetch_add_explicit(&approx_level[cls], delta, memory_order_relaxed) + delta;
    if (delta > 0) {
        raise_peak(cls, now);
        /* The pressure watch: one compare against the level its last reading left (pressure.c). */
        if (OT_UNLIKELY(cls == 0 && now >= __atomic_load_n(&ot_pressure_trigger, __ATOMIC_RELAXED)))
            ot_pressure_crossed(now);
    }
    ot_recorder_on_level(cls, now); /* the flight recorder's clock and distance checks (recorder.c) */
}

int64_t ot_live_approx_level(int cls)
{
    return atomic_load_explicit(&approx_level[cls != 0], memory_order_relaxed);
}

/* Weight of a sampled block: its size divided by the probability that the byte sampler picked
 * it, 1 - exp(-size/T), so that per-site sums are unbiased estimates. */
static uint64_t sample_weight(uint64_t size)
{
    double t = (double)ot_opt.sample_bytes;
    double p = -ot_expm1(-(double)size / t);
    if (p <= 0) return size;
    double w = (double)size / p;
    return w > 1.8e19 ? UINT64_MAX : (uint64_t)w;
}

static bool full_stack_for(uint64_t size, unsigned kind)
{
    return kind != OT_KIND_HOST || ot_opt.stacks == OT_STACKS_ALL || size >= ot_opt.stack_min_bytes;
}

static void big_put(uint64_t key, uint64_t size)
{
    for (int i = 0; i < BIG_SLOTS; i++) {
        uint64_t expected = 0;
        if (atomic_compare_exchange_strong(&big[i].key, &expected, key)) {
            atomic_store(&big[i].size, size);
            return;
        }
    }
    /* More than 64 blocks of a terabyte or more: sizes beyond this are reported as 1 TiB - 1. */
}

static uint64_t big_take(uint64_t key, bool remove)
{
    for (int i = 0; i < BIG_SLOTS; i++) {
        if (atomic_load(&big[i].key) == key) {
            uint64_t s = atomic_load(&big[i].size);
            if (remove) atomic_store(&big[i].key, 0);
            return s;
        }
    }
    return OT_SIZE_BIG;
}

static inline __attribute__((always_inline)) void account_free(uint64_t key, uint64_t val, uint64_t *size_out, unsigned *kind_out);


/* Moves the record in way `v` of this thread's set `w` to the table, leaving the way empty (true),
 * or leaves it where it is (false: no memory for the table). The way is marked MOVING first, with
 * a CAS, so that a thread freeing that block meanwhile (a cross-thread free) cannot take it from
 * the nursery while its copy goes into the table: it waits for the table instead (locate_elsewhere).
 * If that thread took the block first, the CAS fails and the way is simply empty. */
static OT_NOINLINE bool evict_way(nursery_way_t *w, int v)
{
    uint64_t k = atomic_load_explicit(&w[v].key, memory_order_relaxed);
    if (k == 0) return true;
    /* Already being moved: by this thread, interrupted by a signal handler that allocates. Leave
     * it to the interrupted move; the new record goes to the table. */
    if (OT_UNLIKELY(k & MOVING)) return false;
    if (!atomic_compare_exchange_strong_explicit(&w[v].key, &k, k | MOVING, memory_order_acq_rel,
                                                 memory_order_relaxed))
        return true; /* taken by its freeing thread just now: the way is empty */
    uint64_t val = atomic_load_explicit(&w[v].val, memory_order_relaxed), stale;
    int e = errno; /* the table may map memory */
    int ins = ot_table_insert_replace(k, val, &stale);
    errno = e;
    if (OT_UNLIKELY(ins < 0)) {
        atomic_store_explicit(&w[v].key, k, memory_order_release);
        return false;
    }
    if (OT_UNLIKELY(ins == 0)) account_free(k, stale, NULL, NULL); /* a record whose free went past us */
    atomic_store_explicit(&w[v].key, 0, memory_order_release);
    return true;
}

/* Long-lived phases. A thread that keeps nearly everything it allocates (building a large structure:
 * live_10m, report_1m) soon fills every nursery set, and from then on each new record moves an older
 * one to the table: the nursery written twice, a CAS to mark the way, and the table written in the
 * nursery's set order rather than in the order the blocks were allocated. When at least 9 in 10 of
 * DIRECT_WINDOW allocations evicted, the next DIRECT_RUN records go straight to the table, in
 * allocation order, with the next granule's table line prefetched (as a free in address order
 * does); then a window in the nursery decides again. A short-lived block in such a run costs a table
 * insert and remove instead of two nursery stores. Programs that free most of what they allocate
 * soon do not evict that much: cc1, python3 and the bench's churn, thread and realloc workloads
 * never entered a run (live_10m: 94% of its records went straight to the table). */
#define DIRECT_WINDOW 4096u
#define DIRECT_RUN 65536u
#define DIRECT_RUN_MAX (16u * DIRECT_RUN)

/* A thread whose blocks other threads free (a producer: bursty_pc, a server handing requests on)
 * and that evicts pays for every record twice: the move to the table besides the table's insert,
 * and its consumer's search a wrong first guess. So a window that evicted at least 1 in 4 of its
 * allocations, where the thread itself freed fewer than 1 in 8 of what it allocated since the last
 * decision, first gives the thread a nursery of NURSERY_SETS_GROWN sets (grow_nursery); once it
 * has one, such a window starts a run, whose records go to the table in allocation order, where
 * their consumers' frees look first. A producer whose blocks are freed before its sets fill
 * (producer_consumer) evicts too little for either. */
static bool grow_nursery(thread_counters_t *c);
static inline void note_eviction(thread_counters_t *c, uint64_t n)
{
    c->window_evictions++;
    if (n < c->window_start + DIRECT_WINDOW) return;
    uint64_t w = n - c->window_start, ev = c->window_evictions;
    uint64_t freed = atomic_load_explicit(&c->k[OT_KIND_HOST].freed_count, memory_order_relaxed);
    bool others_free = (freed - c->decided_freed) * 8 < n - c->decided_n;
    /* A thread that keeps what it allocates (9 in 10 evicted) goes to the table at once. */
    bool keeper = ev * 10 >= w * 9, producer = !keeper && ev * 4 >= w && others_free;
    bool run = keeper || (producer && !grow_nursery(c));
    c->decided_n = n;
    c->decided_freed = freed;
    /* Runs that follow each other grow, to DIRECT_RUN_MAX: each window back in the nursery costs
     * DIRECT_WINDOW records of the kind the runs avoid (bursty_pc 2 threads: 23 windows). */
    if (!run) c->run_len = 0;
    else if (!c->run_len) c->run_len = DIRECT_RUN;
    else if (c->run_len < DIRECT_RUN_MAX) c->run_len *= 2;
    c->window_start = run ? n + c->run_len : n;
    c->window_evictions = 0;
}

/* Gives c a nursery of NURSERY_SETS_GROWN sets, under a new id; false where it has one already or
 * none can be had (out of ids or memory). The old nursery stays where it is, published: its records
 * are found there by every search (its owner's too, which then looks as another thread would) and
 * taken out as their blocks are freed; nothing new goes there. An exited thread's record keeps the
 * larger nursery for the thread that adopts it. */
static bool grow_nursery(thread_counters_t *c)
{
    uint32_t id;
    if (c->nursery->mask + 1 >= NURSERY_SETS_GROWN || !nursery_id_take(&id)) return false;
    size_t nb = nursery_bytes(NURSERY_SETS_GROWN), rb = NURSERY_RING * sizeof(uint16_t);
    char *m = ot_mmap(nb + rb); /* keeps errno */
    if (!m) return false;
    /* Faulted in for writing now: its sets are read before they are first written (free_way), and
     * a page read first maps the zero page, whose replacement at the write flushes the TLB of every
     * CPU the process runs on (bursty_pc 8, perf: 4.7% of the samples in ptep_clear_flush's IPIs
     * under malloc before, none after). A producer that grows fills it anyway. */
    ot_prefault(m, nb + rb);
    ((nursery_t *)(void *)m)->ring = (_Atomic uint16_t *)(void *)(m + nb);
    nursery_publish(c, id, m, NURSERY_SETS_GROWN);
    return true;
}

/* A record is about to go into c's nursery (its first, or any later one: the same stores): the
 * inline free looks there from now on, and the inline fills take a nursery without a ring. Before
 * the record is filled: a free in a signal handler may look for it at once, and the out-of-line
 * paths do not look in the thread's own nursery. */
static inline __attribute__((always_inline)) void nursery_in_use(thread_counters_t *c)
{
    nursery_t *n = c->nursery;
    c->take_nursery = n;
    if (!n->ring) c->fast_nursery = n;
}

/* Which of a set's two keys, k0 or k1, is k (0: a free way): 0, 1, or -1 for neither. */
static inline int way_of(uint64_t k0, uint64_t k1, uint64_t k) { return k0 == k ? 0 : k1 == k ? 1 : -1; }

/* Records (key, val) in this thread's nursery (n: the thread's host allocation count). A way of
 * the set or its buddy that still holds the same key is a block whose free went past us
 * (RTLD_DEEPBIND): it is counted as freed and reused. When both ways of the set are taken, the
 * record takes a free way of the buddy; when those are taken too, one of the set's (in turn) moves
 * to the table: a block that has lived through a set's worth of newer allocations is likely to live
 * on, and the new one is likely to be freed soon, here, for the price of two plain stores. Without
 * this, a program that keeps many blocks (cc1) fills every set and sends nearly all its allocations
 * through the table. */
static inline __attribute__((always_inline)) bool nursery_put(thread_counters_t *c, uint64_t key, uint64_t val,
                                                               uint64_t n)
{
    unsigned set = nursery_set(c->nursery, key);
    nursery_way_t *w = c->nursery->slot[set], *b = c->nursery->slot[nursery_buddy(set)];
    uint64_t k0 = atomic_load_explicit(&w[0].key, memory_order_relaxed);
    uint64_t k1 = atomic_load_explicit(&w[1].key, memory_order_relaxed);
    uint64_t b0 = atomic_load_explicit(&b[0].key, memory_order_relaxed);
    uint64_t b1 = atomic_load_explicit(&b[1].key, memory_order_relaxed);
    int way = way_of(k0, k1, key);
    if (way < 0 && (way = way_of(b0, b1, key)) >= 0) w = b;
    if (OT_UNLIKELY(way >= 0)) {
        account_free(key, atomic_load_explicit(&w[way].val, memory_order_relaxed), NULL, NULL);
    } else if ((way = way_of(k0, k1, 0)) < 0) {
        if ((way = way_of(b0, b1, 0)) >= 0) {
            /* The set is full, its buddy is not: the buddy's way, on the line just read, instead
             * of a move to the table. With a third of the ways full, one new block in nine found
             * its set full: handoff_server 1 40 10000 4000 under callgrind moved 11.2% of its
             * mallocs' records to the table without the buddy and 4.0% with it, for 14% fewer
             * instructions added to the program (91.3 M, 78.3 M); small_churn pays 2
             * instructions a malloc/free pair (its frees find their record in the set first),
             * live_10m 10 a block. */
            w = b;
        } else {
            way = (int)(c->evict_turn++ & 1);
            note_eviction(c, n);
            if (!evict_way(w, way)) return false;
            /* This set's next eviction, a set's worth of allocations from now, takes the other
             * way or the one filled now (the thread's turn decides which): both lines will be
             * waiting in the cache. (The other way's alone: live_10m's allocation phase 6%
             * slower, 8 pairs of runs.) */
            uint64_t next = atomic_load_explicit(&w[way ^ 1].key, memory_order_relaxed);
            if (next) ot_table_prefetch(next & ~MOVING);
            ot_table_prefetch(key);
        }
    }
    nursery_in_use(c);
    fill_way(c, &w[way], key, val);
    if (OT_UNLIKELY(c->nursery->ring != NULL)) ring_note(c, key);
    return true;
}

/* The fill the fast paths leave to live.c (c->fast_nursery is ot_full_nursery: a nursery with a
 * ring, so that other threads' mallocs pay nothing for rings, or one not filled yet): a free way
 * of the set, the ring's entry (the set computed once), then the counts, whose rare fold is then
 * the last call. False, having changed nothing, where the set has no free way. */
static inline __attribute__((always_inline)) bool fill_left_to_us(thread_counters_t *c, uint64_t key, uint64_t val,
                                                                   uint64_t size)
{
    unsigned set = nursery_set(c->nursery, key);
    nursery_way_t *w = free_way_at(c->nursery, set, key);
    if (w == NULL) return false;
    nursery_in_use(c);
    fill_way(c, w, key, val);
    if (c->nursery->ring != NULL) ring_note_at(c, set);
    count_alloc(c, OT_KIND_HOST, size);
    return true;
}

/* The same where the fast path may not have left it to us (ot_live_record_host_sited). */
static inline __attribute__((always_inline)) bool fill_ringed(thread_counters_t *c, uint64_t key, uint64_t val,
                                                               uint64_t size)
{
    return c->fast_nursery == ot_full_nursery && fill_left_to_us(c, key, val, size);
}

/* Looks for key in nursery `id`, another thread's (NG_NO for an id not in use, or our own);
 * found, *where = id + 1 (locate_elsewhere's record of where). */
static inline int look_at(uint32_t id, uint32_t count, const nursery_t *own, uint64_t key, uint64_t *val, bool take,
                          uint32_t *where)
{
    nursery_t *n = id < count ? atomic_load_explicit(&nurseries[id], memory_order_acquire) : NULL;
    int r = n != NULL && n != own ? nursery_find(n, key, val, take, false) : NG_NO;
    if (r == NG_FOUND) *where = id + 1;
    return r;
}

/* A record of key was just found in nursery n (id where - 1), which has a ring: if key's set is
 * where this thread's place in that ring says, or a few entries on, the set NURSERY_RING_AHEAD
 * entries further is fetched for writing and the place moves on; false where key's set is not
 * found there (the caller guesses otherwise). bursty_pc 8 (1,250,000 blocks per producer): the
 * next chunk's set was the next free's in 28% of the frees that searched, the ring's place held in
 * all 4.5 M; perf put locate_elsewhere at 45..60% fewer samples, and the run at 2.23x the program
 * alone against 2.47x (median of 15, alternating). A consumer that frees in another order (or
 * whose blocks went to the table) does not find its place: it then leaves the ring alone for
 * RING_BACKOFF finds, so that it reads two of the ring's lines per that many frees, not per free. */
#define RING_SYNC 16
#define RING_BACKOFF 64
static inline __attribute__((always_inline)) bool ring_prefetch(thread_counters_t *me, uint32_t where, nursery_t *n,
                                                                 uint16_t set)
{
    if (me->ring_skip) {
        me->ring_skip--;
        return false;
    }
    if (me->ring_src != where) { /* another nursery's ring: from its start */
        me->ring_src = where;
        me->ring_cur = 0;
    }
    uint32_t at = me->ring_cur, m = NURSERY_RING - 1;
    unsigned j = 0;
    while (j < RING_SYNC && atomic_load_explicit(&n->ring[(at + j) & m], memory_order_relaxed) != set) j++;
    if (j == RING_SYNC) { /* out of order, or not in the ring: the place stays */
        me->ring_skip = RING_BACKOFF;
        return false;
    }
    at += j;
    unsigned ahead = atomic_load_explicit(&n->ring[(at + NURSERY_RING_AHEAD) & m], memory_order_relaxed);
    __builtin_prefetch(n->slot[ahead & n->mask], 1, 3);
    me->ring_cur = at + 1;
    return true;
}

/* A record of key (value val) was just found in nursery n, id where - 1, by thread me. Blocks a
 * thread frees of another's come in the order they were allocated: the set of one a few frees
 * ahead, from the owner's ring where it has one, else the next chunk's (as often as not one chunk
 * follows another), in that nursery is fetched now. */
static inline __attribute__((always_inline)) void prefetch_after_find_at(thread_counters_t *me, uint32_t where,
                                                                          nursery_t *n, unsigned set, uint64_t key,
                                                                          uint64_t val)
{
    bool ringed = n->ring && me && ring_prefetch(me, where, n, (uint16_t)set);
    if (!ringed) {
        uint64_t next = key + ((ot_unpack_size(val) + 8 + 15) & ~15ull);
        __builtin_prefetch(n->slot[nursery_set(n, next)], 1, 3);
    }
}

static inline void prefetch_after_find(thread_counters_t *me, uint32_t where, nursery_t *n, uint64_t key, uint64_t val)
{
    if (n) prefetch_after_find_at(me, where, n, nursery_set(n, key), key, val);
}

/* Finds a block's record wherever it is (own nursery, table, other nurseries) and, if take,
 * removes it. */
static OT_NOINLINE bool locate_elsewhere(uint64_t key, uint64_t *val, bool take, nursery_t *own, bool table_tried);

static inline __attribute__((always_inline)) bool locate(uint64_t key, uint64_t *val, bool take)
{
    thread_counters_t *c = my_counters;
    nursery_t *own = c ? c->nursery : NULL;
    if (own && nursery_get(own, key, val, take)) return true;
    return locate_elsewhere(key, val, take, own, false);
}

/* table_tried: the caller looked in the table just before (and missed): the first round skips it. */
static OT_NOINLINE bool locate_elsewhere(uint64_t key, uint64_t *val, bool take, nursery_t *own, bool table_tried)
{
    int e = errno; /* the table may unmap memory */
    thread_counters_t *me = my_counters;
    uint32_t count = atomic_load_explicit(&n_nurseries, memory_order_acquire);
    uint32_t last = (me != NULL ? me->found_in : 0) - 1, where = 0; /* last: a nursery id, or none */
    uint32_t hint = UINT32_MAX;
    bool hinted = count <= HINT_MIN_THREADS; /* the hint read (or not needed) */
    /* Where to look: the nursery where this thread's last search found its record (if it was one),
     * the table, the nursery the owner hint names (past HINT_MIN_THREADS nurseries), every other
     * nursery, then the table again. Records only ever move from a nursery to the table, so one
     * that was in no nursery when they were looked at is in the table at the look that follows. A
     * block another thread frees soon after allocating it is still in its owner's nursery
     * (producer_consumer: 91% of its searches), and a thread often frees the blocks of one other
     * thread: the first look finds them, with neither the table nor the shared hint read. A wrong
     * guess costs one nursery line more than the order without it.
     * A record being moved by its owner (evict_way) is in neither place for a moment: look again,
     * for a bounded time. The owner's move is a few hundred nanoseconds of lock-free work, unless it
     * was preempted; giving up leaves one record behind (counted as live), never a hang. Our own
     * nursery is only seen MOVING from a signal handler that interrupted our own move: no wait. */
    for (unsigned attempt = 0; attempt < 100000; attempt++) {
        bool moving = false;
        int r = look_at(last, count, own, key, val, take, &where);
        if (r == NG_FOUND) goto found;
        moving |= r == NG_MOVING;
        /* Skipped where the caller just missed there: the look after the nurseries still finds a
         * record that moved to the table meanwhile. (A consumer whose blocks lie half in their
         * producer's nursery and half in the table missed the table twice per wrong guess.) */
        if ((attempt > 0 || !table_tried) && (take ? ot_table_remove(key, val) : ot_table_lookup(key, val)))
            goto found;
        /* Read only now: a miss on its shared line where the first look found the record cost
         * bursty_pc 8 a quarter of its searches' time. */
        if (!hinted) {
            hinted = true;
            hint = atomic_load_explicit(&ot_owner_hint[hint_index(key)], memory_order_relaxed);
            if (hint == last) hint = UINT32_MAX;
        }
        r = look_at(hint, count, own, key, val, take, &where);
        if (r == NG_FOUND) goto found;
        moving |= r == NG_MOVING;
        for (uint32_t i = 0; i < count; i++) {
            if (i == last || i == hint) continue;
            r = look_at(i, count, own, key, val, take, &where);
            if (r == NG_FOUND) goto found;
            moving |= r == NG_MOVING;
        }
        if (!moving) {
            /* One that left its nursery after the table was looked at (or before the nurseries
             * were) is in the table now. */
            if (take ? ot_table_remove(key, val) : ot_table_lookup(key, val)) goto found;
            break;
        }
        if (attempt >= 64) sched_yield();
        else __builtin_ia32_pause();
    }
    errno = e;
    return false;
found:
    if (me != NULL) me->found_in = where; /* 0: the table */
    if (where != 0) prefetch_after_find(me, where, atomic_load_explicit(&nurseries[where - 1], memory_order_relaxed), key, *val);
    errno = e;
    return true;
}

/* A walk's note with what its early step needs: the call site's kind and device. */
typedef struct {
    ot_stack_note_t note; /* first: early gets a pointer to it */
    unsigned kind;
    int device;
} site_note_t;

/* The walker hands over a new walk's frames before filing the walk: hash them and prefetch the
 * call-site index, whose miss then overlaps that filing instead of stalling the intern after it. */
static void site_early(ot_stack_note_t *note, const uintptr_t *ips, unsigned n)
{
    site_note_t *sn = (site_note_t *)(void *)note;
    note->early_hash = ot_sites_prefetch(ips, n, sn->kind, sn->device);
}

/* This allocation's call site, from a walk of its stack (or from the walker's remembered walks,
 * which may hold a site noted under tag), interned; 0 if none. stacks=none interns the empty stack. */
static OT_NOINLINE uint32_t site_by_walk(const ot_origin_t *origin, uint32_t tag, unsigned kind, int device,
                                         uint32_t searched)
{
    /* The unwinder may allocate (its allocations must not be recorded) and set errno. */
    int e = errno;
    ot_in_hook++;
    uintptr_t ips[OT_MAX_FRAMES];
    uint32_t site;
    if (ot_opt.stacks != OT_STACKS_NONE) {
        site_note_t sn = {.note = {.tag = tag, .early = site_early, .searched = searched},
                          .kind = kind,
                          .device = device};
        unsigned depth = ot_stack_capture_at(ips, ot_opt.stack_depth, origin, &sn.note);
        if (sn.note.hit) {
            site = sn.note.value;
        } else {
            /* early_hash: the walker called site_early with these very frames */
            site = sn.note.early_hash ? ot_sites_intern_hashed(sn.note.early_hash, ips, depth, kind, device)
                                      : ot_sites_intern(ips, depth, kind, device);
            if (site) ot_unwind_note_set(sn.note.walk, sn.note.tag, site);
        }
    } else {
        static const uintptr_t none[1];
        site = ot_sites_intern(none, 0, kind, device);
    }
    ot_in_hook--;
    errno = e;
    return site;
}

/* Where a new block's record goes (its site counted already), and the thread's counts. */
static inline __attribute__((always_inline)) void place(thread_counters_t *c, uint64_t key, uint64_t size,
                                                        unsigned kind, uint32_t site)
{
    uint64_t val = ot_pack(size, kind, site);
    if (kind == OT_KIND_HOST && c->nursery) {
        uint64_t n = atomic_load_explicit(&c->k[OT_KIND_HOST].total_count, memory_order_relaxed);
        if (OT_LIKELY(n >= c->window_start)) {
            if (nursery_put(c, key, val, n)) goto counted;
        } else {
            /* A long-lived phase: to the table. A record of this address still in its nursery set
             * is a block whose free went past us (nursery_put's case): it is freed. (Its set
             * only, as the fast paths look: the buddy too cost live_10m 16 instructions a block.) */
            uint64_t old;
            nursery_way_t *home = c->nursery->slot[nursery_set(c->nursery, key)];
            if (OT_UNLIKELY(set_find(home, key, &old, true, true) == NG_FOUND)) account_free(key, old, NULL, NULL);
            ot_table_prefetch(key + 256);
        }
    }
    uint64_t stale;
    int e = errno; /* the table may map memory */
    int ins = ot_table_insert_replace(key, val, &stale);
    errno = e;
    if (OT_UNLIKELY(ins <= 0)) {
        if (ins < 0) return; /* out of memory: untracked */
        /* The address was still recorded: its free went past us (e.g. from a library opened with
         * RTLD_DEEPBIND, bound straight to libc). It is certainly free now: account it so. */
        account_free(key, stale, NULL, NULL);
    }
counted:
    /* After any stale record of this address was accounted (which takes its big entry, if any). */
    if (OT_UNLIKELY(size >= OT_SIZE_BIG)) big_put(key, size);
    count_alloc(c, kind, size);
}

/* What a caller of record_body already asked the walker, and found nothing: nothing, the thread's
 * last walk (ot_live_noted), or the other remembered walks too (ot_live_noted_others, whose
 * `searched` it passes on). */
enum { ASKED_NONE = 0, ASKED_LAST = 1, ASKED_ALL = 2 };

/* The body of ot_live_record_from, and of its host-only twins, where kind and device are constants
 * (the malloc family: the note tag, the stack policy and the nursery test fold away). */
static inline __attribute__((always_inline)) void record_body(const ot_origin_t *origin, uint64_t key, uint64_t size,
                                                              unsigned kind, int device, unsigned asked,
                                                              uint32_t searched)
{
    thread_counters_t *c = counters();
    if (OT_UNLIKELY(!c)) return;
    uint32_t site = 0;
    bool full = full_stack_for(size, kind);
    bool take = full ? ot_opt.stacks != OT_STACKS_NONE || kind != OT_KIND_HOST : false;
    if (!full && ot_opt.stacks == OT_STACKS_SAMPLED) {
        c->sample_left -= (int64_t)size;
        if (OT_UNLIKELY(c->sample_left <= 0)) {
            take = true;
            c->sample_left = next_sample_gap(c);
        }
    }
    if (OT_UNLIKELY(take)) {
        /* Loops allocate from a few places over and over: the walker recognises a stack among its
         * remembered walks (the last one inline, then the others, asked here before any set-up)
         * and hands back the site noted for it. Those probes and the site's counters allocate
         * nothing and leave errno alone, so only a walk needs the recursion guard and errno kept. */
        uint32_t tag = ot_opt.stacks != OT_STACKS_NONE ? ot_note_tag(kind, device) : 0;
        if (tag && asked < ASKED_LAST) site = ot_live_noted(origin, tag);
        if (tag && !site && asked < ASKED_ALL) site = ot_live_noted_others(origin, tag, &searched);
        if (!site) site = site_by_walk(origin, tag, kind, device, searched);
        if (site && !(full && ot_sites_owner_count(site, (int64_t)size, 1, size, 1)))
            ot_sites_on_alloc(site, full ? size : sample_weight(size), !full);
    }
    place(c, key, size, kind, site);
    if (OT_UNLIKELY(size >= ot_recorder_large_min)) ot_recorder_large(size, kind, device, site);
}

OT_NOINLINE void ot_live_record_host_sited(thread_counters_t *c, uint64_t key, uint64_t size, uint32_t site)
{
    if (!fill_ringed(c, key, ot_pack(size, OT_KIND_HOST, site), size)) place(c, key, size, OT_KIND_HOST, site);
}

void ot_live_record_from(const ot_origin_t *origin, uint64_t key, uint64_t size, unsigned kind, int device)
{
    record_body(origin, key, size, kind, device, ASKED_NONE, 0);
}

/* place() for a host block without a site, out of line (ot_live_record_host_fill's rare case). */
static OT_NOINLINE void place_host_unsited(thread_counters_t *c, uint64_t key, uint64_t size)
{
    place(c, key, size, OT_KIND_HOST, 0);
}

/* The fill ot_live_record_host_fast leaves to live.c (c->fast_nursery is ot_full_nursery): a
 * thread whose nursery has a ring, or that has not filled its nursery yet (nursery_in_use). A host
 * block below the full-stack size, not huge, not sampled (left: the sample gap after it, above
 * 0). A free way of its set takes it (fill_left_to_us); any other case is place()'s, as in
 * record_body without a stack. Called straight from the fast path, not
 * through ot_live_record_host_from, whose origin, second eligibility test and sampling branch cost
 * a ringed producer 30 instructions a malloc (bursty_pc 8 100000, callgrind); place() apart, so
 * that the fill saves no registers (16 instructions a fill less). */
OT_NOINLINE void ot_live_record_host_fill(thread_counters_t *c, uint64_t key, uint64_t size, int64_t left)
{
    c->sample_left = left;
    if (OT_UNLIKELY(!fill_left_to_us(c, key, size /* ot_pack(size, HOST, 0) */, size))) place_host_unsited(c, key, size);
}

void ot_live_record_host_from(const ot_origin_t *origin, uint64_t key, uint64_t size)
{
    record_body(origin, key, size, OT_KIND_HOST, -1, ASKED_NONE, 0);
}

/* ot_live_record_host_unnoted's walk: no remembered walk is this stack. */
static OT_NOINLINE void record_host_walked(const ot_origin_t *origin, uint64_t key, uint64_t size, uint32_t searched)
{
    record_body(origin, key, size, OT_KIND_HOST, -1, ASKED_ALL, searched);
}

/* stacks=all, a host block whose stack is not the thread's last walk (ot_live_record_all_fast
 * declined it for that alone: c and its nursery exist, the block is below the recorder's large
 * size). The other remembered walks and the memo are asked first; on a hit the site is counted and
 * the block placed as ot_live_record_all_fast places it, without record_body's set-up (its stack
 * policy, tag and sampling tests, nursery_put's stale-record search) and its saved registers;
 * otherwise the walk is record_body's, told what was asked. recursive_stacks 5000, callgrind:
 * 417.0 M -> 401.2 M instructions. */
OT_NOINLINE void ot_live_record_host_unnoted(const void *frame, uint64_t key, uint64_t size)
{
    ot_origin_t origin = ot_origin_of(frame);
    uint32_t searched = 0;
    uint32_t site = ot_live_noted_others(&origin, ot_note_tag(OT_KIND_HOST, -1), &searched);
    if (OT_UNLIKELY(site == 0)) {
        record_host_walked(&origin, key, size, searched);
        return;
    }
    ot_live_place_sited(my_counters, key, size, site);
}

/* A site's counts for a block of weight w that stops being live: by the owner thread inline
 * (sites_fast.h), else by sites.c. */
static inline __attribute__((always_inline)) void site_free(uint32_t site, uint64_t w)
{
    if (!ot_sites_owner_count(site, -(int64_t)w, -1, 0, 0)) ot_sites_on_free(site, w);
}

/* A record taken out (it was live until now) counted as freed, on the counters of c (this thread's,
 * or NULL once it has released them). */
static inline __attribute__((always_inline)) void account_free_on(thread_counters_t *c, uint64_t key, uint64_t val,
                                                                   uint64_t *size_out, unsigned *kind_out)
{
    uint64_t size = ot_unpack_size(val);
    unsigned kind = ot_unpack_kind(val);
    uint32_t site = ot_unpack_site(val);
    if (OT_UNLIKELY(size == OT_SIZE_BIG)) size = big_take(key, true);
    if (OT_LIKELY(c != NULL)) {
        count_free(c, kind, size);
    } else {
        atomic_fetch_add_explicit(&gone_counters[kind].freed_bytes, size, memory_order_relaxed);
        atomic_fetch_add_explicit(&gone_counters[kind].freed_count, 1, memory_order_relaxed);
    }
    if (site) site_free(site, full_stack_for(size, kind) ? size : sample_weight(size));
    if (size_out) *size_out = size;
    if (kind_out) *kind_out = kind;
}

static inline __attribute__((always_inline)) void account_free(uint64_t key, uint64_t val, uint64_t *size_out, unsigned *kind_out)
{
    account_free_on(counters(), key, val, size_out, kind_out);
}

OT_NOINLINE void ot_live_account_free(thread_counters_t *c, uint64_t key, uint64_t val)
{
    account_free_on(c, key, val, NULL, NULL);
}

/* account_free_on for a record that account_taken found to be a stacks=all host record, neither
 * huge nor sampled: its kind and its site's weight (the size) are known. */
OT_NOINLINE void ot_live_account_site_free(thread_counters_t *c, uint64_t val)
{
    count_free(c, OT_KIND_HOST, ot_unpack_size(val));
    site_free(ot_unpack_site(val), ot_unpack_size(val));
}

/* A program that frees many long-lived blocks often frees them in address order, up or down (a
 * container torn down, every block at exit): each granule's table line is then a cache miss the
 * free waits for. Prefetching the line of the next granule in the direction of this thread's
 * last such free hides it (report_1m's free phase, up or down: a quarter faster); frees in any
 * other order pay a few instructions and a useless prefetch, beside a table remove that costs far
 * more. */
static inline void prefetch_next_forget(thread_counters_t *c, uint64_t key)
{
    ot_table_prefetch(key >= c->last_forget ? key + 256 : key - 256);
    c->last_forget = key;
}

static OT_NOINLINE bool forget_elsewhere(uint64_t key, nursery_t *own, bool table_tried)
{
    uint64_t val;
    if (!locate_elsewhere(key, &val, true, own, table_tried)) return false;
    account_free(key, val, NULL, NULL);
    return true;
}

/* ot_live_forget_host's case of a thread whose last search found its record in another thread's
 * nursery (c->found_in, a consumer): that first look taken here, without the search's set-up
 * (errno kept, the hint, the loop) and two calls, the set computed once for the look and the
 * ring, and a plain host record accounted inline (account_taken). A miss leaves the search to
 * look there again in its turn, not first. bursty_pc 8 200000 under callgrind: the look apart from
 * the search, 69 instructions less per free, 15% of them; this path apart from the table's, with
 * the set once and account_taken, 6 more (bursty_pc 8 100000: 95.8 M -> 93.2 M added to free). */
static OT_NOINLINE bool forget_where_last(thread_counters_t *c, uint64_t key)
{
    uint32_t id = c->found_in - 1, count = atomic_load_explicit(&n_nurseries, memory_order_acquire);
    nursery_t *n = id < count ? atomic_load_explicit(&nurseries[id], memory_order_acquire) : NULL;
    if (OT_LIKELY(n != NULL) && OT_LIKELY(n != c->nursery)) {
        unsigned set = nursery_set(n, key);
        uint64_t val;
        if (nursery_find_at(n, set, key, &val, true, false) == NG_FOUND) {
            prefetch_after_find_at(c, id + 1, n, set, key, val);
            account_taken(c, key, val);
            return true;
        }
    }
    c->found_in = 0;
    return forget_elsewhere(key, c->nursery, false);
}

/* ot_live_forget_host's case of a thread whose last search did not end in another thread's
 * nursery: the table is where locate_elsewhere would look first (no nursery to try before it):
 * removed from there directly, without its search's set-up and two more calls (live_10m's free
 * phase: 85 instructions less per free, 11% faster). A miss goes on to the nurseries, and to the
 * table once more after them. */
static OT_NOINLINE bool forget_table_first(thread_counters_t *c, uint64_t key)
{
    prefetch_next_forget(c, key);
    uint64_t val;
    int e = errno; /* the table may unmap memory */
    bool found = ot_table_remove(key, &val);
    errno = e;
    if (found) {
        account_free(key, val, NULL, NULL);
        return true;
    }
    return forget_elsewhere(key, c->nursery, true);
}

/* A host free that ot_live_forget_host_fast declined: the record is not in this thread's nursery
 * (a long-lived block in the table, or another thread's block), or this thread has none. Only the
 * owner fills its nursery, so there is no need to look there again. Each case apart, so that this
 * saves no registers (a consumer's free: 16 instructions less). */
OT_NOINLINE bool ot_live_forget_host(uint64_t key)
{
    thread_counters_t *c = my_counters;
    if (OT_UNLIKELY(c == NULL) || OT_UNLIKELY(c->nursery == NULL)) return ot_live_forget(key, NULL, NULL);
    /* A thread whose last such free found the block in another thread's nursery (a consumer) most
     * likely finds this one there too: a table line would be fetched for nothing. */
    if (c->found_in != 0) return forget_where_last(c, key);
    return forget_table_first(c, key);
}

bool ot_live_forget(uint64_t key, uint64_t *size, unsigned *kind)
{
    uint64_t val;
    if (!locate(key, &val, true)) return false;
    account_free(key, val, size, kind);
    return true;
}

bool ot_live_lookup(uint64_t key, uint64_t *size, unsigned *kind)
{
    uint64_t val;
    if (!locate(key, &val, false)) return false;
    uint64_t s = ot_unpack_size(val);
    if (s == OT_SIZE_BIG) s = big_take(key, false);
    if (size) *size = s;
    if (kind) *kind = ot_unpack_kind(val);
    return true;
}

void ot_live_totals_kind(unsigned kind, ot_totals_t *out)
{
    int64_t b = 0, n = 0;
    uint64_t tb = 0, tn = 0;
    for (thread_counters_t *t = atomic_load_explicit(&all_threads, memory_order_acquire); t; t = t->next) {
        uint64_t ab = atomic_load_explicit(&t->k[kind].total_bytes, memory_order_relaxed);
        uint64_t an = atomic_load_explicit(&t->k[kind].total_count, memory_order_relaxed);
        b += (int64_t)(ab - atomic_load_explicit(&t->k[kind].freed_bytes, memory_order_relaxed));
        n += (int64_t)(an - atomic_load_explicit(&t->k[kind].freed_count, memory_order_relaxed));
        tb += ab;
        tn += an;
    }
    b -= (int64_t)atomic_load_explicit(&gone_counters[kind].freed_bytes, memory_order_relaxed);
    n -= (int64_t)atomic_load_explicit(&gone_counters[kind].freed_count, memory_order_relaxed);
    out->bytes = b > 0 ? (uint64_t)b : 0;
    out->count = n > 0 ? (uint64_t)n : 0;
    out->total_bytes = tb;
    out->total_count = tn;
    out->peak_bytes = 0;
}

void ot_live_totals(bool device, ot_totals_t *out)
{
    ot_memset(out, 0, sizeof *out);
    for (unsigned k = 0; k < OT_KIND_COUNT; k++) {
        if (ot_kind_is_device(k) != device) continue;
        ot_totals_t t;
        ot_live_totals_kind(k, &t);
        out->bytes += t.bytes;
        out->count += t.count;
        out->total_bytes += t.total_bytes;
        out->total_count += t.total_count;
    }
    raise_peak(device, (int64_t)out->bytes);
    out->peak_bytes = atomic_load_explicit(&peak_level[device], memory_order_relaxed);
}

const char *ot_kind_name(unsigned kind)
{
    static const char *const names[] = {"host", "device", "managed", "pinned", "vmm", "pool"};
    return kind < OT_KIND_COUNT ? names[kind] : "unknown";
}

bool ot_live_take(uint64_t key, uint64_t *val)
{
    return locate(key, val, true);
}

void ot_live_put_back(uint64_t key, uint64_t val)
{
    ot_table_insert(key, val);
}

void ot_live_release(uint64_t key, uint64_t val)
{
    account_free(key, val, NULL, NULL);
}

void ot_live_walk(ot_table_visit_fn fn, void *ctx)
{
    /* Nurseries first, then the table: a record never moves, so each block is visited once
     * (blocks allocated or freed during the walk may or may not be seen). No malloc, no locks. */
    uint32_t count = atomic_load_explicit(&n_nurseries, memory_order_acquire);
    for (uint32_t i = 0; i < count; i++) {
        nursery_t *n = atomic_load_explicit(&nurseries[i], memory_order_acquire);
        if (!n) continue;
        for (unsigned set = 0; set <= n->mask; set++)
            for (int way = 0; way < 2; way++) {
                uint64_t k = atomic_load_explicit(&n->slot[set][way].key, memory_order_acquire);
                /* A MOVING record is (or is about to be) in the table: the table walk has it. */
                if (k && !(k & MOVING)) fn(k, atomic_load_explicit(&n->slot[set][way].val, memory_order_relaxed), ctx);
            }
    }
    ot_table_walk(fn, ctx);
}
