/* Bench reference, not a tracker: the least work an exact per-block record can do when threads
 * free each other's blocks, as a lower bound for oomtrace's default mode on handoff_server and
 * bursty_pc. ideal_record.c (32 KiB per thread, one thread's frees only) is the floor of a program
 * whose blocks die on the thread that made them; here a free finds the record wherever it is. Each
 * thread keeps its records in a 2-way set-associative array of its own, of the size of oomtrace's
 * grown nursery (32,768 sets, 1 MiB: enough for bursty_pc's 65,536 blocks in flight per producer;
 * or, built as ideal_xthread_small, of its first nursery), with oomtrace's set function,
 * published in a shared list. A free looks in its own array, then in
 * the array where its last cross-thread find was, then in every other one, and clears the way it
 * finds. The counts are per thread, as oomtrace's. An exited thread's array, records and all, goes
 * to the next new thread (as oomtrace's nurseries do): handoff_server starts a thousand threads, 16
 * at a time, and a free that searched every array ever made cost that floor 15x the program alone.
 * It has none of what makes a tracker usable: a full set silently overwrites a record, a way is
 * cleared with a plain store (no protocol with its owner), there is no table, no recursion guard,
 * no option, no sampling, no peak, and at most MAXT arrays. realloc/calloc are not wrapped. Built
 * by tests/bench/bench.mk. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>

#include "next.h"

void *malloc(size_t n);
void free(void *p);

/* 32,768 sets: oomtrace's grown nursery (bursty_pc's producers need it); ideal_xthread_small.c
 * builds it with NURSERY_SETS, oomtrace's nursery before it grows (handoff_server's threads never
 * grow). */
#ifndef IDEAL_SETS
#define IDEAL_SETS 32768
#endif
#define SETS IDEAL_SETS
#define MAXT 1024
#define TLS __thread __attribute__((tls_model("initial-exec")))
typedef struct {
    _Atomic uint64_t key, size;
} way_t;
static way_t (*_Atomic arrays[MAXT])[2];
static _Atomic int array_used[MAXT]; /* 1 while a live thread has array i */
static _Atomic unsigned n_arrays;
static pthread_key_t exit_key;
static _Atomic int key_state; /* 0: not made, 1: being made, 2: made */
static TLS way_t (*mine)[2];
static TLS int mine_state; /* 0: none yet, 1: mapped, 2: none to be had */
static TLS unsigned last_found;
static TLS uint64_t allocated_bytes, allocated_count, freed_bytes, freed_count;

/* At a thread's exit: its array (the id + 1 in v) for the next new thread. */
static void release_mine(void *v)
{
    atomic_store_explicit(&array_used[(uintptr_t)v - 1], 0, memory_order_release);
    mine = NULL;
    mine_state = 2; /* destructors that allocate later keep no record */
}

static inline unsigned set_of(uint64_t k)
{
    return (unsigned)(((k >> 4) ^ (k >> 14) ^ (k >> 27)) & (SETS - 1));
}

static void make_mine(void)
{
    mine_state = 2;
    int ks = 0;
    if (atomic_compare_exchange_strong(&key_state, &ks, 1)) {
        pthread_key_create(&exit_key, release_mine); /* may malloc: mine_state 2 meanwhile */
        atomic_store(&key_state, 2);
    }
    if (atomic_load(&key_state) != 2) return; /* another thread is making the key: no record */
    unsigned count = atomic_load(&n_arrays), id;
    if (count > MAXT) count = MAXT;
    for (id = 0; id < count; id++) { /* an exited thread's array */
        int expected = 0;
        if (atomic_load_explicit(&arrays[id], memory_order_acquire) &&
            atomic_compare_exchange_strong(&array_used[id], &expected, 1))
            break;
    }
    if (id == count) {
        id = atomic_fetch_add(&n_arrays, 1);
        if (id >= MAXT) return;
        void *m = mmap(NULL, sizeof(way_t) * 2 * SETS, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) return;
        atomic_store(&array_used[id], 1);
        atomic_store_explicit(&arrays[id], m, memory_order_release);
    }
    mine = atomic_load_explicit(&arrays[id], memory_order_acquire);
    mine_state = 1;
    pthread_setspecific(exit_key, (void *)(uintptr_t)(id + 1));
}

void *malloc(size_t n)
{
    void *p = call_next_malloc(n);
    if (p) {
        if (__builtin_expect(mine_state == 0, 0)) make_mine();
        if (mine_state == 1) {
            uint64_t k = (uint64_t)(uintptr_t)p;
            way_t *w = mine[set_of(k)];
            int way = atomic_load_explicit(&w[0].key, memory_order_relaxed) == 0 ? 0 : 1;
            atomic_store_explicit(&w[way].size, n, memory_order_relaxed);
            atomic_store_explicit(&w[way].key, k, memory_order_release);
        }
        allocated_bytes += n;
        allocated_count++;
    }
    return p;
}

/* Takes k's record from array a: true where it was there. */
static inline int take(way_t (*a)[2], uint64_t k)
{
    if (!a) return 0;
    way_t *w = a[set_of(k)];
    for (int way = 0; way < 2; way++)
        if (atomic_load_explicit(&w[way].key, memory_order_acquire) == k) {
            freed_bytes += atomic_load_explicit(&w[way].size, memory_order_relaxed);
            freed_count++;
            atomic_store_explicit(&w[way].key, 0, memory_order_relaxed);
            return 1;
        }
    return 0;
}

void free(void *p)
{
    if (p) {
        uint64_t k = (uint64_t)(uintptr_t)p;
        if (!take(mine, k)) {
            unsigned count = atomic_load_explicit(&n_arrays, memory_order_acquire);
            if (count > MAXT) count = MAXT;
            if (!(last_found < count && take(atomic_load_explicit(&arrays[last_found], memory_order_acquire), k)))
                for (unsigned i = 0; i < count; i++) {
                    way_t (*a)[2] = atomic_load_explicit(&arrays[i], memory_order_acquire);
                    if (i != last_found && a != mine && take(a, k)) {
                        last_found = i;
                        break;
                    }
                }
        }
    }
    call_next_free(p);
}
