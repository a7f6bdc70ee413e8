/* The live-allocation table: a lock-free hash map uint64 -> uint64 in mmap'd memory.
 * It runs inside malloc hooks and signal handlers: it never calls malloc, never takes a lock and
 * never waits for another thread to make progress.
 *
 * Keys. 0 is EMPTY. Keys >= 0xFFFF000000000000 are the table's own slot states (TOMB, CLOSED_E,
 * CLOSED_T, FWD(j), PEND(i), payload in the low 44 bits); callers' keys (addresses < 2^57, tagged
 * handles such as 1<<62 | h) never reach that range, and insert rejects them. Values are opaque.
 *
 * Slots are 16 bytes {key, val}, changed by a 16-byte CAS, or by an 8-byte CAS of the key alone
 * where the value cannot change meanwhile (cas_key: a remove, and steps 2 and 4 below), searched by
 * linear probing from home (the hash of the key's 256-byte granule scaled to cap, plus its 32-byte
 * step in the granule: see home()). That home is monotone in the hash to within 8 slots, so a
 * migration reads the old table and writes the new one front to back. Removal leaves TOMB with
 * whatever value was there (reused by later inserts, which CAS the pair they read); within one
 * table a slot never becomes EMPTY again, so a probe may stop at the first EMPTY.
 *
 * Generations. g_root is the oldest table still in use; root->next, when set, is the table being
 * migrated into. Only the root migrates, except where its target was rescued (below), so the chain
 * is two long but for that, and every operation looks at root first, then next: a key is always
 * found where it is, or its FWD is found where it was.
 * A migration is cut into chunks; each operation that sees one in progress migrates a chunk first.
 * One slot moves like this (i in the old table, j in the new):
 *   1. read old[i] = (k, v);
 *   2. claim an EMPTY new[j] on k's path: EMPTY -> (PEND(i), v)     invisible to searches
 *   3. old[i]: (k, v) -> (FWD(j), k)                                  the move; FWD is final
 *   4. new[j]: (PEND(i), v) -> (k, v)                                 anyone who sees FWD may do it
 * Steps 2 and 4 swap the key alone: step 2 claims with the key (an EMPTY slot's value is 0) and
 * stores v right after, before step 3 publishes the move, and nobody changes a PEND slot's value.
 * Each saves half of what a 16-byte CAS costs (cas_key): a process with threads moves every key
 * this way, 2.75 times per key while a table grows.
 * If 3 fails (the owner removed or updated k, or another helper won) the helper turns its own PEND
 * back into TOMB and retries. Step 4 is safe for late helpers because PEND is only ever written into
 * an EMPTY slot: PEND(i) at j can only be the winner's, so a stale helper cannot resurrect a key the
 * owner removed after the move.
 * Late inserts. An insert that looked at the old table before the migration began may still claim
 * one of its EMPTY or TOMB slots. While such an operation can be in flight, the migration turns those
 * slots into CLOSED_E / CLOSED_T (one CAS each) so nothing lands behind it. The migration's start
 * bumps the epoch; once no thread is inside an operation that announced an older epoch (the grace
 * period, checked like reclamation's), every insert sees the new table and goes there, so EMPTY and
 * TOMB slots are final as they are and cost a load instead of a CAS (a growth finds about a fifth
 * of its slots empty, a shrink four fifths). A chunk is done when one pass over it found every slot
 * final; the old table retires when every chunk is done (a bit per chunk after the slots).
 *
 * Rescue. A target sized for too few keys (a live count read wrong, or more inserts during the
 * migration than it has room for) fills before the root is migrated into it, and then neither can
 * finish: its keys can only move once the root's have. So the full target, n, is given a target
 * of its own, n2 (rescue), sized for the keys the chain holds, counted. From then on the root's
 * keys skip n and go to n2 (FWDH(2, j)), and n migrates into n2 too, but only after a grace period
 * that starts with n->next: an operation older than that may still be placing a root key in n
 * (it read n->next as NULL, as an insert reads a table's next), and n's own pass would take its
 * PEND for a loser's. After it, nothing new lands in n, so n's EMPTY and TOMB slots are final and
 * its passes never close. Whichever of the two migrations ends last makes n2 the root
 * (advance_root). A full n2 is rescued the same way, up to MAX_HOPS tables.
 * Not yet bounded: n is rescued only once it is full (an insert found no slot, or a sweep none),
 * and until n has migrated, a search there for a key it does not hold reads all of it. An
 * operation older than the rescue that stays in flight (a walk from a signal handler inside a
 * writer's operation) holds n's migration back, and a walk then costs one such search per key of
 * the tables after n (test_table with every target sized too small and walks in signal handlers:
 * seconds a walk). A bound on how far a key can lie from its home, kept per table, would end it.
 *
 * Alone. While glibc says the process has one thread (__libc_single_threaded), a migration pass
 * blocks every signal for its chunk and moves each key with plain stores, new[j] = (k, v) and then
 * old[i] = (FWD(j), k): the final states of steps 1-4, with nobody to see the states between.
 * No other thread exists, none can be created from inside the pass, and no signal handler can run
 * in it. An operation that the pass interrupted (the pass may run in a signal handler) writes only
 * by CAS, and every CAS checks the state it expects, so the pass's stores just make it retry, as
 * another helper's moves would. Where closing is due (see grace_passed) EMPTY and TOMB slots are
 * closed by a store too. Anything else (a FWD to finish, a PEND left behind, a target that is
 * migrating itself) goes the CAS way. The three CASes of a move are a locked instruction each,
 * which holds back the loads behind it: report_1m (growing to a million keys) spent 17% of its
 * time in migration passes, live_10m 22%. A thread created later sees the stores: pthread_create
 * clears the flag and publishes memory before the thread starts. glibc's malloc trusts the same
 * flag to skip its arena lock, so a program whose threads come from a bare clone() and allocate
 * is already unsafe without us. Blocking and unblocking signals costs two system calls, so a pass
 * made alone takes up to eight chunks at once, and one that would still move few keys keeps the CAS
 * way (migrate_chunks).
 *
 * Size. A migration sizes its target for the live count at FILL_PCT, or for the floor where one is
 * in force (a live count that came back soon after a shrink: migration_size), and takes a retired
 * table of about that size where one is kept (SPARES), so a count that swings costs neither a
 * chain of migrations per swing nor an mmap and munmap per migration.
 *
 * Reclamation. A thread announces the epoch it entered with in its own word (a seq_cst store; its
 * cost hides behind the CAS every operation does anyway); a retired table is unmapped once every
 * announced epoch is newer than its retirement. Nobody ever waits for that: the table stays in limbo
 * and a later operation tries again.
 *
 * Counting. Each thread owns a record with its live delta (summed when asked: exact when quiescent)
 * and its epoch word; records live in mmap'd chunks (a dead thread's is adopted by a new one), the
 * epoch words in a MADV_WIPEONFORK page so a fork child does not inherit announcements of threads
 * that do not exist there. Claims of EMPTY slots, which decide growth, are added to the table's
 * counter in small per-thread batches.
 *
 * Fork. The child keeps working. What other threads had in flight at the fork stays as it was: a
 * chunk of migration (re-swept by later operations), a table being created or unmapped (leaked,
 * shared copy-on-write with the parent), one count not yet applied (live off by one per such op), a
 * migration's start claimed (gen_t.starting: that table then migrates once it is full). */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "table.c packs {key, val} into one little-endian 128-bit word"
#endif
#ifndef MADV_WIPEONFORK
#define MADV_WIPEONFORK 18
#endif

/* ------------------------------------------------------------------ slot states */
#define RSV 0xFFFF000000000000ull
#define PAYLOAD ((1ull << 44) - 1)
#define KT(t) (RSV | ((uint64_t)(t) << 44))
enum { T_TOMB = 1, T_CLOSED_E, T_CLOSED_T, T_FWD, T_PEND };
#define K_EMPTY 0ull
#define K_TOMB KT(T_TOMB)
#define K_CLOSED_E KT(T_CLOSED_E)
#define K_CLOSED_T KT(T_CLOSED_T)
/* FWD(j): moved to slot j of the next table; FWDH(h, j): of the table h tables on (a table
 * rescued while the one before it still migrated: see "Rescue"). j takes the low 40 bits. */
#define FWD_J ((1ull << 40) - 1)
#define MAX_HOPS 16u
#define K_FWDH(h, j) (KT(T_FWD) | ((uint64_t)((h) - 1) << 40) | (j))
#define K_FWD(j) K_FWDH(1, j)
#define K_PEND(i) (KT(T_PEND) | (i))
static inline bool is_key(uint64_t x) { return x - 1 < RSV - 1; } /* a caller's key */
static inline bool is_fwd(uint64_t x) { return (x >> 44) == (KT(T_FWD) >> 44); }

typedef struct {
    uint64_t key, val;
} __attribute__((aligned(16))) slot_t;
typedef unsigned __int128 u128 __attribute__((may_alias));

static inline uint64_t ldkey(const slot_t *s) { return __atomic_load_n(&s->key, __ATOMIC_ACQUIRE); }
static inline uint64_t ldval(const slot_t *s) { return __atomic_load_n(&s->val, __ATOMIC_ACQUIRE); }
static inline u128 pack(uint64_t k, uint64_t v) { return (u128)k | ((u128)v << 64); }
static inline bool cas16(slot_t *s, uint64_t ek, uint64_t ev, uint64_t nk, uint64_t nv)
{
    return __sync_bool_compare_and_swap((u128 *)s, pack(ek, ev), pack(nk, nv));
}
/* An 8-byte CAS of a slot's key alone, where the value need not change with it and nobody else
 * changes it meanwhile: a remove (the TOMB keeps the value), the claim of an EMPTY slot (value 0)
 * and a PEND slot's step 4. Half the cost of cas16 (3 ns against 7 here, uncontended, in cache). */
static inline bool cas_key(slot_t *s, uint64_t ek, uint64_t nk)
{
    return __sync_bool_compare_and_swap(&s->key, ek, nk);
}
/* An atomic 16-byte read (a CAS that writes back what is there). For readers that do not own the key. */
static inline void read16(slot_t *s, uint64_t *k, uint64_t *v)
{
    u128 x = __sync_val_compare_and_swap((u128 *)s, 0, 0);
    *k = (uint64_t)x;
    *v = (uint64_t)(x >> 64);
}

/* ------------------------------------------------------------------ generations */
#define HDR 192                     /* gen_t, in front of the slots */
#define MIN_MAP (64u * 1024u)       /* the first table: 4083 slots */
#define CHUNK 512u                  /* slots per unit of migration work */
/* Chunks a one-thread process takes at once (help_migration), at most: its passes are made alone,
 * and each blocks and unblocks signals (two system calls, 0.5-0.7 us), once per 4096 slots
 * instead of per 512. A growth to 10 M keys is 64,000 chunks: live_10m's allocation phase 1.052
 * -> 1.019 s (median of 12 alternating pairs, faster in all 12). Such a pass makes one malloc take
 * 16-64 us: 5,800 of live_10m's 10 M mallocs did, against 700 with one chunk a pass (and 330-460
 * took longer either way). A table takes at least eight passes to migrate (a small table's growth
 * is not one long malloc). */
#define ALONE_CHUNKS 8u
/* Load right after a migration: 16 / 0.51 = 31.4 bytes per key, the most a table ever holds per
 * key outside a migration, within the 32-byte budget. Each growth is 80 / 51 = 1.57x: the lower
 * the load, the fewer migrations a growing table goes through (each moves every key). */
#define FILL_PCT 51
#define GROW_PCT 80                 /* used (live + TOMB) at which a table migrates */
#define SHRINK_PCT 20               /* live below which it migrates to a smaller one once live holds */
#define SHRINK_LOW_PCT 5            /* live below which it migrates to a smaller one anyway */
#define SHRINK_EVERY 1024u          /* removes per thread between shrink checks */
/* The floor (see shrink_check): how long a live count that came back after a shrink keeps later
 * shrinks from going below it, since the live count last came within half of it. */
#define FLOOR_HOLD_NS 1000000000ull
#define REGROW_NS 1000000000ull     /* a growth this soon after a shrink is a regrowth */
#define LONG_PROBE 1024u

typedef struct gen {
    uint64_t cap, map_bytes, id, grow_at, nchunks;
    struct gen *next;               /* atomic: migration target, set once */
    struct gen *limbo_next;
    uint64_t retire_epoch;
    uint64_t used __attribute__((aligned(64))); /* EMPTY slots claimed (batched) */
    uint64_t cursor __attribute__((aligned(64))); /* next chunk to hand out */
    uint64_t tail;                  /* rotating re-sweep once all chunks are handed out */
    uint64_t done;                  /* chunks done (each counted once, by the helper that set its bit) */
    uint64_t grace_epoch;           /* set with next: epoch after the migration began (0: not yet) */
    uint64_t grace_ok;              /* no operation older than grace_epoch is left */
    uint64_t shrink_prev;           /* live at the last shrink check + 1 (0: none yet) */
    uint64_t peak;                  /* the most live seen in this table (its sizing, shrink checks) */
    uint64_t starting;              /* a thread is mapping the migration target (start_migration) */
} gen_t;
_Static_assert(sizeof(gen_t) <= HDR, "gen_t must fit in front of the slots");

static inline slot_t *slots(const gen_t *g) { return (slot_t *)((char *)g + HDR); }
/* One bit per chunk after the slots, set when a pass over the chunk found every slot final. */
static inline uint64_t *chunk_word(const gen_t *g, uint64_t c) { return (uint64_t *)(slots(g) + g->cap) + c / 64; }
static inline bool chunk_is_done(const gen_t *g, uint64_t c)
{
    return (__atomic_load_n(chunk_word(g, c), __ATOMIC_ACQUIRE) >> (c % 64)) & 1;
}
/* Whole slots that the chunk bits of a table of cap slots take (a bound: it counts a chunk more). */
static inline uint64_t bits_slots(uint64_t cap) { return ((cap / CHUNK + 1) / 64 + 2) / 2; }
/* Blocks in the same 256-byte granule start their searches a few slots apart: from the granule's
 * base slot, scattered by the multiplicative hash, plus the block's 32-byte step inside the granule
 * (0..7; glibc's smallest chunk is 32 bytes). Blocks allocated one after another thus land in one
 * or two neighbouring lines (one cache miss for several inserts and frees instead of one each), and
 * mostly each in its own slot. With one shared home per granule, as before, every block probed past
 * the granule's blocks inserted before it: report_1m ran 1,354 instructions per block in the library,
 * 1,142 with the steps (callgrind). Tagged keys (handles, small integers) are hashed whole. A home is
 * monotone in the hash to within 8 slots, so a migration still reads the old table and writes the
 * new one front to back. */
static inline uint64_t home(uint64_t k, uint64_t cap)
{
    if (OT_UNLIKELY(k >= (1ull << 56))) return (uint64_t)(((u128)(k * 0x9E3779B97F4A7C15ull) * cap) >> 64);
    uint64_t h = (uint64_t)(((u128)((k >> 8) * 0x9E3779B97F4A7C15ull) * cap) >> 64) + ((k >> 5) & 7);
    return h >= cap ? h - cap : h;
}
static inline gen_t *ld_next(const gen_t *g) { return __atomic_load_n(&g->next, __ATOMIC_ACQUIRE); }
/* The table a FWD in g names (x: the FWD's key half). */
static inline gen_t *fwd_table(const gen_t *g, uint64_t x)
{
    for (uint64_t h = ((x >> 40) & (MAX_HOPS - 1)) + 1; h && g; h--) g = ld_next(g);
    return (gen_t *)g;
}

static gen_t *g_root;
/* Retired tables waiting for their grace period: {gen, retire epoch} pairs, taken out one at a time
 * with a CAS, so a fork in the middle of a reclaim loses at most the table being unmapped; the list
 * takes the overflow. */
#define LIMBO 64
static slot_t g_limbo_tab[LIMBO];
static gen_t *g_limbo;
static uint64_t g_pending; /* retired, not yet unmapped */
/* Reclaimed tables kept for the next table of their size: any up to SPARE_MAX, and up to
 * SPARE_SAME_MAX one of the root's size, which the next migration to drop tombstones maps again. */
#define SPARES 4
static gen_t *g_spare[SPARES];
#define SPARE_MAX (256u * 1024u)
#define SPARE_SAME_MAX (4u << 20)
static uint64_t g_epoch = 1;
static uint64_t g_ids;
static uint64_t g_mapped, g_slots, g_gens; /* for stats */
static uint64_t g_closing_passes, g_reading_passes, g_alone_passes;
static uint64_t g_maps, g_unmaps; /* mmap and munmap calls (stats) */
static uint64_t g_rescues;        /* tables rescued (stats) */
/* The floor: a live count that came back soon after a shrink (a regrowth, start_migration), below
 * which no shrink sizes the table until FLOOR_HOLD_NS passed without the live count reaching half
 * of it (g_floor_ns: when it last did). g_shrunk_*: the peak of the last table shrunk, and when. */
static uint64_t g_floor, g_floor_ns, g_shrunk_peak, g_shrunk_ns;
/* The root's slots and capacity for ot_table_prefetch, set whenever the root changes: a copy, because
 * the prefetch enters no operation, and reading g_root->cap could touch a table already unmapped. */
static slot_t *g_pf_slots;
static uint64_t g_pf_cap;

/* ------------------------------------------------------------------ per-thread records */
#define RECS 63
typedef struct {
    uint64_t active; /* epoch announced by the owner; 0 = outside the table */
    uint64_t pad[7];
} hot_t;
typedef struct {
    uint64_t tid, pid;
    int64_t live;    /* written only by the owner */
    uint64_t pad[5];
} cold_t;
typedef struct rchunk {
    hot_t hot[64];   /* page 0, MADV_WIPEONFORK; hot[63] unused */
    struct rchunk *next;
    uint64_t pad[7];
    cold_t cold[RECS];
} rchunk_t;
_Static_assert(sizeof(rchunk_t) == 8192, "record chunk is two pages");

static rchunk_t *g_chunks;

typedef struct {
    uint64_t *active;
    int64_t *live;
    uint64_t claim_gen; /* gen id the pending claims belong to */
    uint32_t claims, removes, ticks;
    bool retired;       /* this thread retired a table: try to reclaim on the way out */
} tstate_t;
static OT_TLS tstate_t ts;

#define THP_BYTES (2u << 20) /* one transparent huge page (x86-64, and arm64 with 4 KiB pages) */
/* Tables of THP_BYTES or more start on a THP_BYTES boundary and ask for huge pages: they are probed
 * at random, and with 4 KiB pages nearly every insert and remove also misses the TLB. Unaligned,
 * the pieces before the first boundary and after the last stay in 4 KiB pages, and each of those
 * pages faults twice in a migration (a read of the zero page, then the write). report_1m, growing
 * to 1 M keys, takes 21,300 page faults in all (its own 11,200 included), against 27,500 with
 * unaligned huge pages from 4 MiB only. Huge pages are best effort: only where THP is "madvise" or
 * "always"; under a tight RLIMIT_AS the exact size is mapped. */
/* A new table's pages are faulted in (ot_prefault) by the thread that maps it, for writing, before
 * anyone probes it. A migration fills a table at random, every page of it: left to fault on first
 * use, the first read of a page mapped the shared zero page and the first write then replaced it, a
 * second fault that flushes the TLB of every CPU the process runs on; and the threads that help
 * migrate took those faults together, in the same page tables, contending for their lock
 * (bursty_pc 8 threads, perf: 11% of the run in do_anonymous_page's pte lock and ptep_clear_flush's
 * IPIs under migrate_slot). */
static void *map(size_t bytes)
{
    char *p = MAP_FAILED;
    if (bytes >= THP_BYTES) {
        char *q = mmap(NULL, bytes + THP_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        __atomic_fetch_add(&g_maps, 1, __ATOMIC_RELAXED);
        if (q != MAP_FAILED) {
            p = (char *)(((uintptr_t)q + THP_BYTES - 1) & ~(uintptr_t)(THP_BYTES - 1));
            if (p > q) munmap(q, (size_t)(p - q));
            munmap(p + bytes, (size_t)(q + THP_BYTES - p));
            __atomic_fetch_add(&g_unmaps, 1 + (p > q), __ATOMIC_RELAXED);
        }
    }
    if (p == MAP_FAILED) {
        p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        __atomic_fetch_add(&g_maps, 1, __ATOMIC_RELAXED);
    }
    if (p == MAP_FAILED) return NULL;
    ot_mmap_register(p, bytes); /* the leak check must not read the keys as pointers */
#ifdef MADV_HUGEPAGE
    if (bytes >= THP_BYTES) madvise(p, bytes, MADV_HUGEPAGE);
#endif
    ot_prefault(p, bytes);
    __atomic_fetch_add(&g_mapped, bytes, __ATOMIC_RELAXED);
    return p;
}

static void unmap(void *p, size_t bytes)
{
    ot_mmap_unregister(p);
    munmap(p, bytes);
    __atomic_fetch_add(&g_unmaps, 1, __ATOMIC_RELAXED);
    __atomic_fetch_sub(&g_mapped, bytes, __ATOMIC_RELAXED);
}

static OT_NOINLINE bool rec_register(void)
{
    int saved = errno;
    uint64_t tid = (uint64_t)syscall(SYS_gettid), pid = (uint64_t)getpid();
    unsigned probes = 0;
    rchunk_t *c;
    int i = 0;
    for (c = __atomic_load_n(&g_chunks, __ATOMIC_ACQUIRE); c; c = c->next) {
        for (i = 0; i < RECS; i++) {
            cold_t *r = &c->cold[i];
            uint64_t t = __atomic_load_n(&r->tid, __ATOMIC_ACQUIRE);
            if (t == 0 && __atomic_compare_exchange_n(&r->tid, &t, tid, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
                goto claimed;
            /* A record of a dead thread of this process is adopted with its count, which stays
             * part of the sum. Records of another pid (a fork parent's threads) are never reused. */
            if (t && t != tid && probes < 32 && __atomic_load_n(&r->pid, __ATOMIC_RELAXED) == pid) {
                probes++;
                if (syscall(SYS_tgkill, (long)pid, (long)t, 0) != 0 && errno == ESRCH &&
                    __atomic_compare_exchange_n(&r->tid, &t, tid, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
                    goto claimed;
            }
        }
    }
    c = map(sizeof(rchunk_t));
    if (!c) {
        errno = saved;
        return false;
    }
    madvise(c, 4096, MADV_WIPEONFORK); /* best effort (Linux >= 4.14) */
    i = 0;
    c->cold[0].tid = tid;
    c->next = __atomic_load_n(&g_chunks, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(&g_chunks, &c->next, c, true, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
    }
claimed:
    __atomic_store_n(&c->cold[i].pid, pid, __ATOMIC_RELAXED);
    __atomic_store_n(&c->hot[i].active, 0, __ATOMIC_RELEASE); /* in case its last owner died inside */
    ts.live = &c->cold[i].live;
    ts.active = &c->hot[i].active;
    errno = saved;
    return true;
}

/* The calling thread's live delta changes by d. Only the owner writes it (ot_own_add). */
static inline void live_add(int64_t d) { ot_own_add(ts.live, (uint64_t)d); }

static int64_t live_sum(void)
{
    int64_t s = 0;
    for (rchunk_t *c = __atomic_load_n(&g_chunks, __ATOMIC_ACQUIRE); c; c = c->next)
        for (int i = 0; i < RECS; i++) s += __atomic_load_n(&c->cold[i].live, __ATOMIC_RELAXED);
    return s;
}

/* The clock c in ns (0 where it fails), errno kept. */
static uint64_t clock_ns(clockid_t c)
{
    struct timespec t;
    int e = errno;
    if (clock_gettime(c, &t) != 0) t.tv_sec = t.tv_nsec = 0;
    errno = e;
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* live_sum for a migration's size. A reader preempted in the middle of the sum reads the threads
 * that come after it later, and where keys cross threads (one thread inserts, another frees) the
 * sum is then off by what they did meanwhile: threads_stress under load once sized a target for
 * 12,576 keys while 25,800 were live. A sum that took longer than any unpreempted one could is
 * read again (a few times at most: a target too small is still safe, see "Rescue"). */
static int64_t live_sum_settled(void)
{
    int64_t s = 0;
    for (int i = 0; i < 4; i++) {
        uint64_t a = clock_ns(CLOCK_MONOTONIC);
        s = live_sum();
        if (clock_ns(CLOCK_MONOTONIC) - a < 50000) break;
    }
    return s;
}

/* ------------------------------------------------------------------ table memory */
/* A spare of a bytes (or slots) serves a table that wants b: from 1/16 less to half as much again.
 * The live count a migration sizes for is never quite the same twice (handoff_server: tables of
 * 34 to 48 pages in turn), so an exact match would map one anew nearly every time. A table made
 * from a larger spare starts below FILL_PCT, at 34% at the least: only tables up to SPARE_SAME_MAX
 * are kept, a few MiB more at the most. */
static inline bool near_size(uint64_t a, uint64_t b)
{
    return a >= b - b / 16 && a <= b + b / 2;
}

static gen_t *gen_new(uint64_t want_slots)
{
    if (want_slots > FWD_J / 2) return NULL; /* FWD's slot index */
    uint64_t bytes = (HDR + (want_slots + bits_slots(want_slots)) * sizeof(slot_t) + 4095) & ~4095ull;
    if (bytes < MIN_MAP) bytes = MIN_MAP;
    /* Churn of fresh addresses migrates a small table every few thousand inserts just to drop
     * tombstones: reusing the last one saves an mmap, its page faults and a munmap. */
    gen_t *g = NULL;
    for (int i = 0; i < SPARES && !g && bytes <= SPARE_SAME_MAX; i++) {
        gen_t *exp = NULL;
        /* Taken out before its size is read: only the taker may unmap it. */
        if (!__atomic_load_n(&g_spare[i], __ATOMIC_RELAXED) || !(g = __atomic_exchange_n(&g_spare[i], NULL, __ATOMIC_ACQUIRE)))
            continue;
        if (near_size(g->map_bytes, bytes)) {
            bytes = g->map_bytes;
            break;
        }
        if (!__atomic_compare_exchange_n(&g_spare[i], &exp, g, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
            unmap(g, g->map_bytes);
        g = NULL;
    }
    if (g) {
        __builtin_memset(g, 0, bytes);
    } else {
        int saved = errno;
        g = map(bytes);
        errno = saved;
        if (!g) return NULL;
    }
    uint64_t room = (bytes - HDR) / sizeof(slot_t); /* the slots, then the chunk bits */
    g->cap = room - bits_slots(room);
    g->map_bytes = bytes;
    g->id = __atomic_add_fetch(&g_ids, 1, __ATOMIC_RELAXED);
    g->grow_at = g->cap * GROW_PCT / 100;
    g->nchunks = (g->cap + CHUNK - 1) / CHUNK;
    __atomic_fetch_add(&g_slots, g->cap, __ATOMIC_RELAXED);
    __atomic_fetch_add(&g_gens, 1, __ATOMIC_RELAXED);
    return g;
}

/* Only for tables no thread can reach. */
static void gen_free(gen_t *g, bool keep)
{
    __atomic_fetch_sub(&g_slots, g->cap, __ATOMIC_RELAXED);
    __atomic_fetch_sub(&g_gens, 1, __ATOMIC_RELAXED);
    int saved = errno;
    /* g_pf_cap: the root's size (a copy: the root itself may be retired and unmapped meanwhile). */
    if (keep && (g->map_bytes <= SPARE_MAX ||
                 (g->map_bytes <= SPARE_SAME_MAX && near_size(g->cap, __atomic_load_n(&g_pf_cap, __ATOMIC_RELAXED))))) {
        for (int i = 0; i < SPARES; i++) {
            gen_t *exp = NULL;
            if (__atomic_compare_exchange_n(&g_spare[i], &exp, g, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) return;
        }
        /* All kept: the newest replaces one of another size (a size a growth or a shrink left
         * behind, not met again), else the last one of its own. Each is swapped out before its
         * size is read. */
        uint64_t want = g->map_bytes;
        for (int i = 0; i < SPARES && g; i++) {
            gen_t *old = __atomic_exchange_n(&g_spare[i], g, __ATOMIC_ACQ_REL);
            if (old && !near_size(old->map_bytes, want)) {
                unmap(old, old->map_bytes);
                old = NULL;
            }
            g = old;
        }
        if (!g) {
            errno = saved;
            return;
        }
    }
    unmap(g, g->map_bytes);
    errno = saved;
}

static void set_prefetch(const gen_t *g)
{
    __atomic_store_n(&g_pf_cap, g ? g->cap : 0, __ATOMIC_RELAXED);
    __atomic_store_n(&g_pf_slots, g ? slots(g) : NULL, __ATOMIC_RELAXED);
}

static OT_NOINLINE gen_t *create_root(void)
{
    gen_t *g = gen_new(0), *exp = NULL;
    if (!g) return NULL;
    if (__atomic_compare_exchange_n(&g_root, &exp, g, false, __ATOMIC_SEQ_CST, __ATOMIC_ACQUIRE)) {
        set_prefetch(g);
        return g;
    }
    gen_free(g, true); /* never published: nobody can hold it */
    return exp;
}

static uint64_t oldest_active(void)
{
    uint64_t min = UINT64_MAX;
    for (rchunk_t *c = __atomic_load_n(&g_chunks, __ATOMIC_ACQUIRE); c; c = c->next) {
        for (int i = 0; i < RECS; i++) {
            uint64_t a = __atomic_load_n(&c->hot[i].active, __ATOMIC_SEQ_CST);
            if (a && a < min) min = a;
        }
    }
    return min;
}

static void limbo_push(gen_t *g)
{
    for (int i = 0; i < LIMBO; i++)
        if (ldkey(&g_limbo_tab[i]) == 0 && cas16(&g_limbo_tab[i], 0, 0, (uint64_t)(uintptr_t)g, g->retire_epoch))
            return;
    g->limbo_next = __atomic_load_n(&g_limbo, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(&g_limbo, &g->limbo_next, g, true, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
    }
}

static void limbo_free(gen_t *g)
{
    gen_free(g, true);
    __atomic_fetch_sub(&g_pending, 1, __ATOMIC_RELAXED);
}

/* Unmap every retired table no thread can still be reading: announced epochs are either 0 or
 * newer than the retirement, and a thread entering later starts from the new root. Only tables
 * seen retired before the epochs are read qualify. */
static OT_NOINLINE void reclaim(void)
{
    struct {
        uint64_t p, e;
    } cand[LIMBO];
    int nc = 0;
    for (int i = 0; i < LIMBO; i++) {
        /* Key and value read apart may be torn; the CAS below only succeeds on the real pair. */
        cand[i].p = ldkey(&g_limbo_tab[i]);
        cand[i].e = ldval(&g_limbo_tab[i]);
        nc += cand[i].p != 0;
    }
    gen_t *list = __atomic_load_n(&g_limbo, __ATOMIC_RELAXED) ? __atomic_exchange_n(&g_limbo, NULL, __ATOMIC_ACQUIRE) : NULL;
    if (!nc && !list) return;
    /* Seq_cst loads after the retirements we saw (Dekker against op_enter): a thread we read as
     * 0 or newer either had not announced yet, and will then load the new root, or was outside. */
    uint64_t min = oldest_active();
    for (int i = 0; i < LIMBO; i++)
        if (cand[i].p && cand[i].e < min && cas16(&g_limbo_tab[i], cand[i].p, cand[i].e, 0, 0))
            limbo_free((gen_t *)(uintptr_t)cand[i].p);
    while (list) {
        gen_t *g = list;
        list = g->limbo_next;
        if (g->retire_epoch < min) limbo_free(g);
        else limbo_push(g);
    }
}

/* g is fully migrated: make its target the root and queue g for unmapping. */
static void advance_root(gen_t *g)
{
    for (;;) {
        gen_t *exp = g, *n = ld_next(g);
        if (!__atomic_compare_exchange_n(&g_root, &exp, n, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) return;
        set_prefetch(n);
        g->retire_epoch = __atomic_fetch_add(&g_epoch, 1, __ATOMIC_SEQ_CST);
        __atomic_fetch_add(&g_pending, 1, __ATOMIC_RELAXED);
        limbo_push(g);
        ts.retired = true;
        /* A rescued n may have finished its own migration while g was the root: its last chunk's
         * advance found g there. Seq_cst against that chunk's count and failed CAS. */
        if (!ld_next(n) || __atomic_load_n(&n->done, __ATOMIC_SEQ_CST) != n->nchunks) return;
        g = n;
    }
}

/* A pass over chunk c found every slot final: the first to say so counts it. */
static void chunk_done(gen_t *g, uint64_t c)
{
    uint64_t bit = 1ull << (c % 64);
    if (chunk_is_done(g, c) || (__atomic_fetch_or(chunk_word(g, c), bit, __ATOMIC_ACQ_REL) & bit)) return;
    if (__atomic_add_fetch(&g->done, 1, __ATOMIC_SEQ_CST) == g->nchunks) advance_root(g);
}

/* Can no insert land in g any more? True once every thread inside an operation announced an epoch
 * at least g's grace_epoch: it loaded the epoch after g->next was published, so its inserts see
 * g->next and go there. A thread seen outside (0) that enters later also sees it (Dekker, as in
 * reclaim: its seq_cst announcement comes before its loads of the tables). */
static bool grace_passed(gen_t *g)
{
    if (__atomic_load_n(&g->grace_ok, __ATOMIC_ACQUIRE)) return true;
    uint64_t e = __atomic_load_n(&g->grace_epoch, __ATOMIC_ACQUIRE);
    if (e == 0 || oldest_active() < e) return false;
    __atomic_store_n(&g->grace_ok, 1, __ATOMIC_RELEASE);
    return true;
}

/* ------------------------------------------------------------------ migration */
/* Step 4 for old[i] = (FWD(j), k), unless someone did it already. */
static void finish_fwd(gen_t *g, uint64_t i)
{
    slot_t *s = &slots(g)[i];
    uint64_t x = ldkey(s), k = ldval(s); /* FWD is final: both halves are stable */
    slot_t *t = &slots(fwd_table(g, x))[x & FWD_J];
    /* PEND(i) at j can only be the winner's placement (PEND is only written into EMPTY slots),
     * so if we still see it, step 4 is not done; if the CAS fails, someone else did it. Its value
     * was stored before the FWD we saw and nobody changes it: the key alone is swapped. */
    if (ldkey(t) != K_PEND(i)) return;
    cas_key(t, K_PEND(i), k);
}

enum { PLACE_OK, PLACE_STALE, PLACE_FULL };
/* Step 2: claim an EMPTY slot on k's path in n for (PEND(i), v). */
static int place(gen_t *n, uint64_t k, uint64_t i, uint64_t v, uint64_t *at)
{
    slot_t *s = slots(n);
    uint64_t cap = n->cap, p = home(k, cap);
    for (uint64_t c = 0; c < cap; c++) {
        uint64_t y = ldkey(&s[p]);
        if (y == K_EMPTY) {
            /* The key claims the slot (an EMPTY slot's value is 0), then the value follows: only
             * step 4, after our FWD, reads a PEND's value, and our FWD's CAS comes after this store. */
            if (cas_key(&s[p], K_EMPTY, K_PEND(i))) {
                __atomic_store_n(&s[p].val, v, __ATOMIC_RELAXED);
                *at = p;
                return PLACE_OK;
            }
            y = ldkey(&s[p]);
        }
        /* n itself migrating means our migration into it is complete: our slot is final. */
        if (y == K_CLOSED_E || y == K_CLOSED_T || is_fwd(y)) return PLACE_STALE;
        if (++p == cap) p = 0;
    }
    return PLACE_FULL;
}

/* Where g's keys go: its target n, or where n was rescued the newest table after it (*hops tables
 * on from g). Seq_cst: against the rescue's grace period, as an insert's load of next is. NULL
 * past MAX_HOPS. */
static inline gen_t *place_target(gen_t *n, unsigned *hops)
{
    gen_t *x;
    *hops = 1;
    while (OT_UNLIKELY((x = __atomic_load_n(&n->next, __ATOMIC_SEQ_CST)) != NULL)) {
        n = x;
        if (++*hops > MAX_HOPS) return NULL;
    }
    return n;
}

/* Brings old[i] to a final state (close: EMPTY and TOMB slots need closing, see grace_passed).
 * False if the target is full. placed counts keys placed in n itself. */
static bool migrate_slot(gen_t *g, gen_t *n, uint64_t i, uint64_t *placed, bool close)
{
    slot_t *s = &slots(g)[i];
    for (;;) {
        /* Two plain loads: the CAS below validates the pair, a torn read just fails and retries. */
        uint64_t x = ldkey(s), v = ldval(s);
        if (x == K_CLOSED_E || x == K_CLOSED_T) return true;
        if (is_fwd(x)) {
            finish_fwd(g, i);
            return true;
        }
        if (x == K_EMPTY) {
            if (!close || cas16(s, x, v, K_CLOSED_E, 0)) return true;
            continue;
        }
        if (!is_key(x)) { /* TOMB, or PEND left by a losing helper of the previous migration */
            if (!close || cas16(s, x, v, K_CLOSED_T, 0)) return true;
            continue;
        }
        uint64_t j;
        unsigned hops;
        gen_t *t = place_target(n, &hops);
        if (!t) return false;
        int r = place(t, x, i, v, &j);
        if (r == PLACE_FULL) return false;
        if (r == PLACE_STALE) continue;
        if (t == n) ++*placed;
        else __atomic_fetch_add(&t->used, 1, __ATOMIC_RELAXED);
        if (cas16(s, x, v, K_FWDH(hops, j), x)) {
            /* If this fails, someone who saw the FWD did it. */
            cas_key(&slots(t)[j], K_PEND(i), x);
            return true;
        }
        /* Lost: the owner changed (k, v) or another helper moved it. Our PEND is ours alone; if
         * this CAS fails, t's own migration already closed it. */
        cas16(&slots(t)[j], K_PEND(i), v, K_TOMB, 0);
    }
}

/* glibc 2.32 and later: true while the process has one thread (pthread_create clears it before the
 * thread exists). Weak: without it (another C library) no pass is made alone. */
extern char __libc_single_threaded __attribute__((weak));
#ifdef OT_TABLE_TEST_HOOKS
int ot_table_test_never_alone;
int64_t ot_table_test_live_error;
uint64_t ot_table_test_mask_ns;
void (*ot_table_test_alone_store)(uint64_t slot, uint64_t cap);
#define ALONE_STORE_HOOK(p, cap)                                                                   \
    do {                                                                                           \
        if (ot_table_test_alone_store) ot_table_test_alone_store(p, cap);                          \
    } while (0)
#else
#define ALONE_STORE_HOOK(p, cap) ((void)0)
#endif

/* Every signal blocked, the old mask in *saved: false if the kernel refused. And back. errno kept.
 * The kernel's signal set is 64 bits here (x86-64, arm64). */
static bool mask_all(uint64_t *saved)
{
    uint64_t all = ~0ull;
    int e = errno;
    long r = syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, saved, sizeof all);
    errno = e;
    return r == 0;
}

static void mask_restore(const uint64_t *saved)
{
    int e = errno;
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, saved, NULL, sizeof *saved);
    errno = e;
}

static inline bool libc_one_thread(void)
{
    return &__libc_single_threaded && __atomic_load_n(&__libc_single_threaded, __ATOMIC_RELAXED);
}

static inline bool one_thread(void)
{
#ifdef OT_TABLE_TEST_HOOKS
    if (ot_table_test_never_alone) return false;
#endif
    return libc_one_thread();
}

/* For a pass made alone, where one_thread() said yes: true with every signal blocked (the old mask
 * in *saved), else false with nothing changed. The flag is read again once signals are blocked,
 * in case a handler made a thread in between. A kernel that refuses the call leaves the pass to
 * the CAS way. */
static bool alone_begin(uint64_t *saved)
{
    if (!mask_all(saved)) return false;
    if (libc_one_thread()) return true;
    mask_restore(saved);
    return false;
}

/* What blocking and restoring every signal costs here, in ns: the fastest of three pairs, measured
 * the first time a pass might be made alone (0: not yet). 480-680 on this project's machine; a
 * sandbox that traps system calls (gVisor) can take microseconds, and there fewer passes are
 * worth making alone. A kernel that refuses the call gets a cost no pass can pay. */
static uint64_t g_mask_ns;
#define ALONE_SAVES_NS 8 /* wall time a key moved alone saves (7-10 ns: live_10m's growth) */

static uint64_t mask_ns(void)
{
#ifdef OT_TABLE_TEST_HOOKS
    if (ot_table_test_mask_ns) return ot_table_test_mask_ns;
#endif
    uint64_t best = __atomic_load_n(&g_mask_ns, __ATOMIC_RELAXED);
    if (OT_LIKELY(best != 0)) return best;
    best = UINT64_MAX / 4;
    for (int i = 0; i < 3; i++) {
        uint64_t old, a = clock_ns(CLOCK_MONOTONIC);
        if (!mask_all(&old)) break;
        mask_restore(&old);
        uint64_t t = clock_ns(CLOCK_MONOTONIC) - a + 1;
        if (t < best) best = t;
    }
    __atomic_store_n(&g_mask_ns, best, __ATOMIC_RELAXED);
    return best;
}

/* A whole slot by two plain stores: only for a pass made alone, where no one can see it half done. */
static inline void store2(slot_t *s, uint64_t k, uint64_t v)
{
    __atomic_store_n(&s->key, k, __ATOMIC_RELAXED);
    __atomic_store_n(&s->val, v, __ATOMIC_RELAXED);
}

/* migrate_slot in a pass made alone (see "Alone" above). */
static bool migrate_slot_alone(gen_t *g, gen_t *n, uint64_t i, uint64_t *placed, bool close)
{
    slot_t *s = &slots(g)[i];
    uint64_t x = ldkey(s), v = ldval(s);
    if (x == K_EMPTY || x == K_TOMB) {
        if (close) store2(s, x == K_EMPTY ? K_CLOSED_E : K_CLOSED_T, 0);
        return true;
    }
    if (x == K_CLOSED_E || x == K_CLOSED_T) return true;
    if (is_key(x)) {
        slot_t *t = slots(n);
        uint64_t cap = n->cap, p = home(x, cap);
        for (uint64_t c = 0; c < cap; c++) {
            uint64_t y = ldkey(&t[p]);
            if (y == K_EMPTY) {
                ALONE_STORE_HOOK(p, cap);
                store2(&t[p], x, v);
                store2(s, K_FWD(p), x);
                ++*placed;
                return true;
            }
            if (y == K_CLOSED_E || y == K_CLOSED_T || is_fwd(y)) break;
            if (++p == cap) p = 0;
        }
    }
    return migrate_slot(g, n, i, placed, close);
}

/* Chunks c0 .. c0 + cnt - 1 of g, in one pass: a pass made alone blocks signals once for all of
 * them. True if every slot was final or moved; the chunks passed before a failure count as done. */
static bool migrate_chunks(gen_t *g, gen_t *n, uint64_t c0, uint64_t cnt)
{
    uint64_t lo = c0 * CHUNK, hi = (c0 + cnt) * CHUNK < g->cap ? (c0 + cnt) * CHUNK : g->cap, placed = 0, mask, i;
    bool ok = true, close = !grace_passed(g);
    /* Alone only where the pass writes enough slots to pay for blocking signals (mask_ns): every
     * slot when closing, else the keys, which the sizes tell, n being sized for the live count
     * when the migration began, at FILL_PCT of its slots. At 660 ns that is a sixth of g's slots
     * for one chunk (87 keys): a growth moves about 400 a chunk, a shrink below 5% about 25, and
     * made alone one chunk at a time such a shrink cost live_10m's free phase 20 ms more than the
     * CAS way (29,000 chunks). writes100 is the slots written times 100 * g->cap, to stay in
     * integers. */
    uint64_t writes100 = (close ? CHUNK * 100 * g->cap : CHUNK * FILL_PCT * n->cap) * cnt;
    bool alone = one_thread() && !ld_next(n) && (u128)writes100 * ALONE_SAVES_NS > (u128)mask_ns() * 100 * g->cap &&
                 alone_begin(&mask);
    __atomic_fetch_add(close ? &g_closing_passes : &g_reading_passes, 1, __ATOMIC_RELAXED);
    if (alone) __atomic_fetch_add(&g_alone_passes, 1, __ATOMIC_RELAXED);
    for (i = lo; i < hi; i++) {
        /* Outside closing, a slot that is neither a key nor a FWD is final as it is (a load, no
         * call): most of a shrink's slots, a fifth of a growth's. */
        uint64_t x = ldkey(&slots(g)[i]);
        if (!close && !is_key(x) && !is_fwd(x)) continue;
        if (!(alone ? migrate_slot_alone(g, n, i, &placed, close) : migrate_slot(g, n, i, &placed, close))) {
            ok = false;
            break;
        }
    }
    if (alone) mask_restore(&mask);
    if (placed) __atomic_fetch_add(&n->used, placed, __ATOMIC_RELAXED);
    for (uint64_t c = c0; c < c0 + (ok ? cnt : (i - lo) / CHUNK); c++) chunk_done(g, c);
    return ok;
}

static bool migrate_chunk(gen_t *g, gen_t *n, uint64_t c) { return migrate_chunks(g, n, c, 1); }

/* One unit of work for an operation that found g migrating into n. Chunks are handed out once;
 * after that, operations re-sweep chunks round-robin so a stalled or vanished helper (a thread
 * that did not survive fork) cannot hold the migration open. */
static OT_NOINLINE void help_migration(gen_t *g, gen_t *n)
{
    if (__atomic_load_n(&g->cursor, __ATOMIC_RELAXED) < g->nchunks) {
        /* (test_table's never_alone makes the passes go the CAS way, over the same chunks.) */
        uint64_t k = libc_one_thread() ? g->nchunks / 8 : 1;
        k = k < 1 ? 1 : k > ALONE_CHUNKS ? ALONE_CHUNKS : k;
        uint64_t c = __atomic_fetch_add(&g->cursor, k, __ATOMIC_RELAXED);
        if (c < g->nchunks) {
            migrate_chunks(g, n, c, k < g->nchunks - c ? k : g->nchunks - c);
            return;
        }
    }
    if (__atomic_load_n(&g->done, __ATOMIC_ACQUIRE) < g->nchunks) {
        uint64_t c = __atomic_fetch_add(&g->tail, 1, __ATOMIC_RELAXED) % g->nchunks;
        if (!chunk_is_done(g, c)) migrate_chunk(g, n, c);
    }
}

/* A unit of work in the migration of a rescued table after the root (the first whose grace
 * period has passed: before it, keys of the table before it may still be on their way in). */
static OT_NOINLINE void help_chain(gen_t *t)
{
    for (gen_t *nx; (nx = ld_next(t)) != NULL; t = nx) {
        if (__atomic_load_n(&t->done, __ATOMIC_ACQUIRE) == t->nchunks) continue;
        if (grace_passed(t)) help_migration(t, nx);
        return;
    }
}

/* Finish g's migration ourselves. Every slot is final afterwards even if the counts of other
 * helpers are still on their way, so the root may advance now. */
static bool sweep(gen_t *g)
{
    gen_t *n = ld_next(g);
    if (!n) return true;
    for (uint64_t c = 0; c < g->nchunks; c++)
        if (!migrate_chunk(g, n, c)) return false;
    advance_root(g);
    return true;
}

static uint64_t now_ns(void) { return clock_ns(CLOCK_MONOTONIC_COARSE); }

/* The floor in force at now (0: none), refreshed where live came within half of it. */
static uint64_t floor_at(uint64_t now, uint64_t live)
{
    uint64_t f = __atomic_load_n(&g_floor, __ATOMIC_RELAXED);
    if (!f) return 0;
    if (live * 2 >= f) {
        __atomic_store_n(&g_floor_ns, now, __ATOMIC_RELAXED);
        return f;
    }
    if (now - __atomic_load_n(&g_floor_ns, __ATOMIC_RELAXED) <= FLOOR_HOLD_NS) return f;
    __atomic_store_n(&g_floor, 0, __ATOMIC_RELAXED);
    return 0;
}

static void raise_peak(gen_t *g, uint64_t live)
{
    if (live > __atomic_load_n(&g->peak, __ATOMIC_RELAXED)) __atomic_store_n(&g->peak, live, __ATOMIC_RELAXED);
}

/* The live count a migration of g sizes its target for: live, or the floor. A growth within
 * REGROW_NS of a shrink is a regrowth: the live count swings (a program that builds and frees a
 * working set over and over, threads that hand their blocks on), and each swing would otherwise
 * cost a shrink and a chain of growths, every one an mmap, a migration and a munmap with its TLB
 * shootdown (bursty_pc: 333 mmap and 298 munmap calls in 2.9 s, against the program's own 13 and
 * 5). The peak of the table shrunk, and a quarter more, becomes the floor: with room above the
 * peaks, the migrations that only drop tombstones all size for the floor, and so each finds the
 * table the last one retired as a spare (swinging_live_count_maps_bounded: 52 mmap calls in 290
 * swings with the floor at the peak, where live reached above it now and then). */
static uint64_t migration_size(gen_t *g, uint64_t live)
{
    uint64_t now = now_ns();
    raise_peak(g, live);
    uint64_t want = live * 100 / FILL_PCT;
    if (want > g->cap && __atomic_load_n(&g_shrunk_ns, __ATOMIC_RELAXED) &&
        now - __atomic_load_n(&g_shrunk_ns, __ATOMIC_RELAXED) <= REGROW_NS) {
        uint64_t p = __atomic_load_n(&g_shrunk_peak, __ATOMIC_RELAXED);
        p += p / 4;
        if (p > __atomic_load_n(&g_floor, __ATOMIC_RELAXED)) __atomic_store_n(&g_floor, p, __ATOMIC_RELAXED);
        __atomic_store_n(&g_floor_ns, now, __ATOMIC_RELAXED);
    }
    uint64_t f = floor_at(now, live);
    if (f > live) live = f;
    want = live * 100 / FILL_PCT;
    if (want < g->cap / 2) { /* a shrink: its peak is the floor if the count comes back */
        __atomic_store_n(&g_shrunk_peak, __atomic_load_n(&g->peak, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
        __atomic_store_n(&g_shrunk_ns, now, __ATOMIC_RELAXED);
    }
    return want;
}

/* Make n g's target, unless another thread made one first (n is then freed: nobody saw it).
 * Threads that announce the epoch bumped here or a later one see g->next (grace_passed). */
static bool publish_next(gen_t *g, gen_t *n)
{
    gen_t *exp = NULL;
    if (!__atomic_compare_exchange_n(&g->next, &exp, n, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
        gen_free(n, true);
        return false;
    }
    __atomic_store_n(&g->grace_epoch, __atomic_add_fetch(&g_epoch, 1, __ATOMIC_SEQ_CST), __ATOMIC_RELEASE);
    return true;
}

/* Keys in g's slots (a scan: for a rescue only). */
static uint64_t count_keys(const gen_t *g)
{
    uint64_t n = 0;
    for (uint64_t i = 0; i < g->cap; i++) n += is_key(ldkey(&slots(g)[i]));
    return n;
}

/* g, the newest table, is full (or past grow_at) while the tables before it still migrate into
 * it: give it a target of its own now (see "Rescue" above), sized for every key the chain holds
 * as counted, and a quarter more. Its own migration waits for the grace period that starts here. */
static OT_NOINLINE void rescue(gen_t *g)
{
    uint64_t keys = 0, hops = 0;
    for (gen_t *t = __atomic_load_n(&g_root, __ATOMIC_ACQUIRE); t; t = ld_next(t), hops++) keys += count_keys(t);
    if (hops > MAX_HOPS) return;
    uint64_t want = (keys + keys / 4 + 64) * 100 / FILL_PCT;
    gen_t *n = gen_new(want);
    if (!n) return;
    __atomic_store_n(&n->peak, keys, __ATOMIC_RELAXED);
    if (publish_next(g, n)) __atomic_fetch_add(&g_rescues, 1, __ATOMIC_RELAXED);
}

static void start_migration_as(gen_t *g)
{
    for (;;) {
        gen_t *r = __atomic_load_n(&g_root, __ATOMIC_ACQUIRE);
        if (r != g) {
            if (ld_next(g)) return; /* rescued already */
            gen_t *p = r;
            while (p && ld_next(p) != g) p = ld_next(p);
            if (!p) return; /* g is retired */
            /* Usually the root's migration into g is nearly done: finish it, then migrate g. A
             * sweep that fails met g full; a table further down the chain is rescued too. */
            if (p == r && sweep(r)) continue;
            rescue(g);
            return;
        }
        if (ld_next(g)) return;
        int64_t live = live_sum_settled();
#ifdef OT_TABLE_TEST_HOOKS
        live += ot_table_test_live_error;
#endif
        gen_t *n = gen_new(migration_size(g, live > 0 ? (uint64_t)live : 0));
        if (!n) return;
        __atomic_store_n(&n->peak, live > 0 ? (uint64_t)live : 0, __ATOMIC_RELAXED);
        publish_next(g, n);
        return;
    }
}

/* Start migrating g (grow, shrink, or drop tombstones; the size follows the live count, or the
 * floor). Where g still has room (!full), only the first thread to get here maps the target:
 * threads that crossed grow_at together each mapped one before, and all but one unmapped theirs
 * again (handoff_server: two mmap and munmap pairs for most migrations). Where g is full, every
 * thread may: none waits for a thread that was preempted while it maps. */
static OT_NOINLINE void start_migration(gen_t *g, bool full)
{
    uint64_t z = 0;
    if (full) {
        start_migration_as(g);
    } else if (!__atomic_load_n(&g->starting, __ATOMIC_RELAXED) &&
               __atomic_compare_exchange_n(&g->starting, &z, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        start_migration_as(g);
        __atomic_store_n(&g->starting, 0, __ATOMIC_RELEASE); /* g->next is set by now, or nobody could */
    }
}

static void note_claim(gen_t *g)
{
    if (ts.claim_gen != g->id) {
        ts.claim_gen = g->id;
        ts.claims = 0;
    }
    uint32_t batch = (uint32_t)(g->cap >> 9);
    batch = batch < 1 ? 1 : batch > 32 ? 32 : batch;
    if (++ts.claims < batch) return;
    uint64_t used = __atomic_add_fetch(&g->used, ts.claims, __ATOMIC_RELAXED);
    ts.claims = 0;
    if (used >= g->grow_at) start_migration(g, false);
}

/* ------------------------------------------------------------------ entering and leaving */
typedef struct {
    gen_t *root;
    bool set;
} op_t;

enum { OP_READ = 0, OP_HELP = 1, OP_CREATE = 2 };

static inline bool op_enter(op_t *op, int mode)
{
    if (OT_UNLIKELY(!ts.active) && !rec_register()) return false;
    op->set = false;
    /* A signal handler interrupting an operation reuses the outer announcement (older, so safe). */
    if (__atomic_load_n(ts.active, __ATOMIC_RELAXED) == 0) {
        op->set = true;
        __atomic_store_n(ts.active, __atomic_load_n(&g_epoch, __ATOMIC_ACQUIRE), __ATOMIC_SEQ_CST);
    }
    /* Seq_cst after the announcement: either the reclaimer sees us, or we see its new root. */
    gen_t *g = __atomic_load_n(&g_root, __ATOMIC_SEQ_CST);
    if (OT_UNLIKELY(!g) && (mode & OP_CREATE)) g = create_root();
    if (OT_LIKELY(g) && (mode & OP_HELP)) {
        gen_t *n = ld_next(g);
        if (OT_UNLIKELY(n != NULL)) {
            help_migration(g, n);
            if (OT_UNLIKELY(ld_next(n) != NULL)) help_chain(n);
            g = __atomic_load_n(&g_root, __ATOMIC_ACQUIRE);
        }
    }
    op->root = g;
    return true;
}

static inline void op_exit(op_t *op)
{
    if (op->set) __atomic_store_n(ts.active, 0, __ATOMIC_RELEASE);
    if (OT_UNLIKELY(__atomic_load_n(&g_pending, __ATOMIC_RELAXED) != 0) && (ts.retired || (++ts.ticks & 255) == 0)) {
        ts.retired = false;
        reclaim();
    }
}

/* ------------------------------------------------------------------ searching */
enum { F_MISS, F_LIVE, F_FWD };

/* Where k is in g. A key's slot lies between its home and the first EMPTY / CLOSED_E, and once
 * there it stays there (as k, or as FWD(j) with val k) until its owner removes it. */
static inline int find(const gen_t *g, uint64_t k, uint64_t *at)
{
    const slot_t *s = slots(g);
    uint64_t cap = g->cap, i = home(k, cap);
    for (uint64_t n = 0; n < cap; n++) {
        uint64_t x = ldkey(&s[i]);
        if (x == k) {
            *at = i;
            return F_LIVE;
        }
        if (x == K_EMPTY || x == K_CLOSED_E) return F_MISS;
        if (OT_UNLIKELY(is_fwd(x)) && ldval(&s[i]) == k) {
            *at = i;
            return F_FWD;
        }
        if (++i == cap) i = 0;
    }
    return F_MISS;
}

/* Follow FWD: make sure step 4 is done, then k is in the next table. */
static gen_t *follow(gen_t *g, uint64_t i)
{
    finish_fwd(g, i);
    return fwd_table(g, ldkey(&slots(g)[i]));
}

/* Value of k for a reader that may not own k (walk, lookup): the pair is read in one piece. */
static bool get(gen_t *g, uint64_t k, uint64_t *v)
{
    while (g) {
        uint64_t i, x;
        int r = find(g, k, &i);
        if (r == F_LIVE) {
            read16(&slots(g)[i], &x, v);
            if (x == k) return true;
            continue; /* moved or removed meanwhile: look again */
        }
        g = r == F_FWD ? follow(g, i) : ld_next(g);
    }
    return false;
}

/* Is there a FWD for k in g (it was moved out of g)? */
static bool has_fwd(const gen_t *g, uint64_t k)
{
    uint64_t i;
    return find(g, k, &i) == F_FWD;
}

/* ------------------------------------------------------------------ operations */
/* test_table's hooks (its own build of table.c only; internal.h): LATE_INSERT_HOOK parks an insert
 * in insert_in after it saw no newer table and before its CAS; a key's home; the oldest table's
 * mapping. */
#ifdef OT_TABLE_TEST_HOOKS
void (*ot_table_test_late_insert)(uint64_t key);
uint64_t ot_table_test_home(uint64_t key, uint64_t cap) { return home(key, cap); }
void ot_table_test_root_map(void **addr, size_t *bytes)
{
    gen_t *g = __atomic_load_n(&g_root, __ATOMIC_ACQUIRE);
    *addr = g;
    *bytes = g ? g->map_bytes : 0;
}
#define LATE_INSERT_HOOK(k)                                                                        \
    do {                                                                                           \
        if (ot_table_test_late_insert) ot_table_test_late_insert(k);                               \
    } while (0)
#else
#define LATE_INSERT_HOOK(k) ((void)0)
#endif

/* Returns 1 inserted, 0 replaced an existing entry, -1 out of memory. */
static int insert_in(gen_t *g, uint64_t k, uint64_t v, uint64_t *old)
{
    for (;;) {
        slot_t *s = slots(g);
        uint64_t cap = g->cap, i = home(k, cap), fr = UINT64_MAX, fk = 0, n;
        int st = F_MISS;
        for (n = 0; n < cap; n++) {
            uint64_t x = ldkey(&s[i]);
            if (x == k) {
                st = F_LIVE;
                break;
            }
            if (x == K_EMPTY) {
                if (fr == UINT64_MAX) fr = i, fk = x;
                break;
            }
            if (x == K_CLOSED_E) break;
            if (x == K_TOMB) {
                if (fr == UINT64_MAX) fr = i, fk = x;
            } else if (OT_UNLIKELY(is_fwd(x)) && ldval(&s[i]) == k) {
                st = F_FWD;
                break;
            }
            if (++i == cap) i = 0;
        }
        if (st == F_LIVE) {
            /* A free we never saw: keep one entry. Only a migrator can change the slot under us
             * ((k, v') -> (FWD(j), k)); the retry then finds the FWD. */
            uint64_t prev = ldval(&s[i]);
            if (cas16(&s[i], k, prev, k, v)) {
                if (old) *old = prev;
                return 0;
            }
            continue;
        }
        if (st == F_FWD) {
            g = follow(g, i);
            continue;
        }
        /* Seq_cst (a plain load on x86): the late-insert Dekker of grace_passed. */
        gen_t *nx = __atomic_load_n(&g->next, __ATOMIC_SEQ_CST);
        if (nx) { /* k is not in g, and g is no longer the newest table */
            g = nx;
            continue;
        }
        if (fr == UINT64_MAX || n >= LONG_PROBE) {
            if (fr == UINT64_MAX || __atomic_load_n(&g->used, __ATOMIC_RELAXED) >= cap / 2)
                start_migration(g, fr == UINT64_MAX);
            if (fr == UINT64_MAX) {
                if (!(g = ld_next(g))) return -1;
                continue;
            }
        }
        /* EMPTY slots hold val 0, TOMB slots the value of the key removed there. Failure: another
         * key or a PEND took it, or the migration closed it; k is still absent (only we insert
         * k), so scan again. */
        LATE_INSERT_HOOK(k);
        if (cas16(&s[fr], fk, fk == K_TOMB ? ldval(&s[fr]) : 0, k, v)) {
            if (fk == K_EMPTY) note_claim(g);
            return 1;
        }
    }
}

int ot_table_insert_replace(uint64_t key, uint64_t val, uint64_t *old)
{
    if (OT_UNLIKELY(!is_key(key))) return -1;
    op_t op;
    if (!op_enter(&op, OP_HELP | OP_CREATE)) return -1;
    int r = op.root ? insert_in(op.root, key, val, old) : -1;
    if (r > 0) live_add(1);
    op_exit(&op);
    return r;
}

bool ot_table_insert(uint64_t key, uint64_t val)
{
    return ot_table_insert_replace(key, val, NULL) >= 0;
}

/* A shrink moves every live key, so it waits while the live count is still falling fast (a program
 * freeing a large structure, or everything at exit): shrinking at 20% and again and again on the
 * way down would move most keys several times. Below SHRINK_LOW_PCT, or once the count holds
 * (fell by less than a quarter of a check's removes since the last check), it shrinks. */
static OT_NOINLINE void shrink_check(void)
{
    ts.removes = 0;
    gen_t *g = __atomic_load_n(&g_root, __ATOMIC_ACQUIRE);
    if (!g || ld_next(g) || g->map_bytes <= MIN_MAP) return;
    int64_t l = live_sum();
    uint64_t live = l > 0 ? (uint64_t)l : 0;
    uint64_t prev = __atomic_exchange_n(&g->shrink_prev, live + 1, __ATOMIC_RELAXED);
    bool falling = prev > live + 1 + SHRINK_EVERY / 4;
    raise_peak(g, live);
    /* With a floor in force the table keeps room for it (migration_size). */
    uint64_t f = __atomic_load_n(&g_floor, __ATOMIC_RELAXED) ? floor_at(now_ns(), live) : 0;
    if (f > live) live = f;
    if (live < g->cap * SHRINK_LOW_PCT / 100 || (live < g->cap * SHRINK_PCT / 100 && !falling)) start_migration(g, false);
}

/* Remove (nv == NULL) or update k. The owner is the only writer of (k, *) besides migrators. */
static bool change(uint64_t k, uint64_t *out, const uint64_t *nv)
{
    op_t op;
    if (!op_enter(&op, OP_HELP)) return false;
    bool ok = false;
    gen_t *g = op.root;
    while (g) {
        uint64_t i;
        int r = find(g, k, &i);
        if (r == F_LIVE) {
            slot_t *s = &slots(g)[i];
            uint64_t v = ldval(s);
            /* Valid states here: (k, v), or (FWD(j), k) if a migrator moved it since; a torn v
             * only makes the CAS fail and the retry sees the FWD. Only the owner changes k's
             * value, so a remove swaps the key alone (cas_key) and v is the value it removed. */
            if (nv ? cas16(s, k, v, k, *nv) : cas_key(s, k, K_TOMB)) {
                if (out) *out = v;
                ok = true;
                break;
            }
            continue;
        }
        g = r == F_FWD ? follow(g, i) : ld_next(g);
    }
    if (ok && !nv) {
        live_add(-1);
        if (OT_UNLIKELY(++ts.removes >= SHRINK_EVERY)) shrink_check();
    }
    op_exit(&op);
    return ok;
}

bool ot_table_remove(uint64_t key, uint64_t *val_out)
{
    return is_key(key) && change(key, val_out, NULL);
}

bool ot_table_update(uint64_t key, uint64_t val)
{
    return is_key(key) && change(key, NULL, &val);
}

/* The pair may be torn or stale (the table migrated, even unmapped): the address is then useless,
 * and a prefetch of it is dropped without a fault. */
void ot_table_prefetch(uint64_t key)
{
    slot_t *s = __atomic_load_n(&g_pf_slots, __ATOMIC_RELAXED);
    uint64_t cap = __atomic_load_n(&g_pf_cap, __ATOMIC_RELAXED);
    if (s) __builtin_prefetch(&s[home(key, cap)], 1, 3);
}

bool ot_table_lookup(uint64_t key, uint64_t *val_out)
{
    if (!is_key(key)) return false;
    op_t op;
    if (!op_enter(&op, OP_HELP)) return false;
    uint64_t v;
    bool ok = get(op.root, key, &v);
    if (ok && val_out) *val_out = v;
    op_exit(&op);
    return ok;
}

/* Walks the root, then (if a migration was running at the start) its target, and any table after
 * it. Keys moved during the walk are reported once: from the oldest table that held them, as
 * themselves or through their FWD, and skipped in later tables where an older one holds their
 * FWD. Keys inserted or removed during the walk may be missed. */
void ot_table_walk(ot_table_visit_fn fn, void *ctx)
{
    op_t op;
    if (!op_enter(&op, OP_READ)) return;
    gen_t *ch[MAX_HOPS + 2];
    unsigned nch = 0;
    for (gen_t *t = op.root; t && nch < MAX_HOPS + 2; t = ld_next(t)) ch[nch++] = t;
    for (unsigned c = 0; c < nch; c++) {
        gen_t *t = ch[c];
        for (uint64_t i = 0; i < t->cap; i++) {
            uint64_t x, v, k;
            if (ldkey(&slots(t)[i]) == K_EMPTY) continue;
            read16(&slots(t)[i], &x, &v);
            if (OT_LIKELY(c == 0) && is_key(x)) {
                fn(x, v, ctx);
                continue;
            }
            k = is_key(x) ? x : is_fwd(x) ? v : 0;
            if (!k) continue;
            bool seen = false; /* reported from an older table, as itself or through its FWD */
            for (unsigned m = 0; m < c && !seen; m++) seen = has_fwd(ch[m], k);
            if (seen) continue;
            if (is_key(x)) fn(k, v, ctx);
            else if (get(follow(t, i), k, &v)) fn(k, v, ctx);
        }
    }
    op_exit(&op);
}

void ot_table_stats(ot_table_stats_t *st)
{
    if (__atomic_load_n(&g_pending, __ATOMIC_RELAXED)) reclaim();
    int64_t live = live_sum();
    st->live = live > 0 ? (uint64_t)live : 0;
    st->capacity = __atomic_load_n(&g_slots, __ATOMIC_RELAXED);
    st->mapped_bytes = __atomic_load_n(&g_mapped, __ATOMIC_RELAXED);
    st->generations = (unsigned)__atomic_load_n(&g_gens, __ATOMIC_RELAXED);
    st->closing_passes = __atomic_load_n(&g_closing_passes, __ATOMIC_RELAXED);
    st->reading_passes = __atomic_load_n(&g_reading_passes, __ATOMIC_RELAXED);
    st->alone_passes = __atomic_load_n(&g_alone_passes, __ATOMIC_RELAXED);
    st->mask_ns = __atomic_load_n(&g_mask_ns, __ATOMIC_RELAXED);
    st->maps = __atomic_load_n(&g_maps, __ATOMIC_RELAXED);
    st->unmaps = __atomic_load_n(&g_unmaps, __ATOMIC_RELAXED);
    st->floor = __atomic_load_n(&g_floor, __ATOMIC_RELAXED);
    st->rescues = __atomic_load_n(&g_rescues, __ATOMIC_RELAXED);
}

/* Unit tests only, with no other thread inside the table. Record chunks are kept (threads keep
 * pointers to them); their counts restart from zero. */
void ot_table_reset_for_test(void)
{
    gen_t *g = __atomic_exchange_n(&g_root, NULL, __ATOMIC_SEQ_CST);
    set_prefetch(NULL);
    while (g) {
        gen_t *n = g->next;
        gen_free(g, false);
        g = n;
    }
    g = __atomic_exchange_n(&g_limbo, NULL, __ATOMIC_SEQ_CST);
    while (g) {
        gen_t *n = g->limbo_next;
        gen_free(g, false);
        g = n;
    }
    for (int i = 0; i < LIMBO; i++) {
        if ((g = (gen_t *)(uintptr_t)g_limbo_tab[i].key)) gen_free(g, false);
        g_limbo_tab[i].key = g_limbo_tab[i].val = 0;
    }
    __atomic_store_n(&g_pending, 0, __ATOMIC_RELAXED);
    g_floor = g_floor_ns = g_shrunk_peak = g_shrunk_ns = 0;
    for (int i = 0; i < SPARES; i++)
        if ((g = __atomic_exchange_n(&g_spare[i], NULL, __ATOMIC_SEQ_CST))) unmap(g, g->map_bytes);
    for (rchunk_t *c = __atomic_load_n(&g_chunks, __ATOMIC_ACQUIRE); c; c = c->next)
        for (int i = 0; i < RECS; i++) __atomic_store_n(&c->cold[i].live, 0, __ATOMIC_RELAXED);
    /* The caller's batches too, so that the same operations grow and shrink at the same points. */
    ts.claim_gen = 0;
    ts.claims = ts.removes = ts.ticks = 0;
}
