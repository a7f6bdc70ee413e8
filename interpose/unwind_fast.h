/* The walker's per-thread cache of walks (unwind.c), shared with the allocation path: its first
 * question, "is this the very stack of the last walk, with a call site noted for it?", is answered
 * inline there (ot_unwind_noted_inline) rather than through a call. unwind.c owns the buffers and
 * explains them; only it, live_fast.h and test_stack.c include this. */
#ifndef OOMTRACE_UNWIND_FAST_H
#define OOMTRACE_UNWIND_FAST_H

#include <stdbool.h>
#include <stdint.h>

#include <emmintrin.h>

#include "internal.h"

#define WALK_MAX (OT_MAX_FRAMES + 16)
typedef struct {
    uintptr_t ip, sp, bp;
    uintptr_t bpaddr; /* where the caller's rbp is restored from; 0: not saved (it is ours) */
    uintptr_t bprel;  /* bit 0: this frame's rbp may matter (a CFA based on it, its rule not known, or
                       * passed on to the caller); bit 1: stepped with a CFA from rsp and rbp passed on */
} wframe_t;
typedef struct {
    uint32_t n;        /* frames remembered */
    uint32_t complete; /* the walk ended there (outermost frame or a zero return address) */
    uint32_t cut;      /* it stopped at a depth limit instead: that max | skip << 16 (0: it did not) */
    uint32_t matters0; /* frame 0's rbp matters to some frame of this walk (build_checks) */
    /* Derived from f[] when the walk ends (build_checks), for validate: the checks in a flat list
     * of {address, value} (every return-address slot, and each saved rbp that matters), first[t]
     * the first check of the step from frame t to t + 1, frame[c] the frame check c vouches for;
     * and the return addresses in a row. The loop case, the same stack again, then costs a load
     * and a compare per check and a copy per frame. Frames a walk took over from the walk before
     * (a join) bring their part of these along, shifted, rather than being derived again. */
    uint32_t nchk, nips;
    uint32_t gen;      /* which walk this is, for notes (never 0) */
    uint32_t code_gen; /* g_code_gen when the walk began: frames of code since unmapped never join */
    uint32_t note_site; /* what ot_unwind_note_set attached, valid while note_key == {gen, tag} */
    uint64_t note_key;
    struct {
        uintptr_t at, val;
    } chk[2 * WALK_MAX];
    uint16_t first[WALK_MAX], frame[2 * WALK_MAX];
    uintptr_t ips[WALK_MAX];
    wframe_t f[WALK_MAX];
} wbuf_t;
#define WALK_BUFS 16 /* at most 16: memo_find compares their tags in one SSE2 register */
typedef struct ot_walk {
    uint32_t busy;
    uint32_t gens;     /* walks released so far */
    uint32_t stepped;  /* frames the last walk stepped with a rule rather than checked */
    uint32_t nbufs;    /* 2..WALK_BUFS, from the memory attached */
    uint32_t asked;    /* walks the last ot_unwind_noted_others compared with the stack */
    uint8_t order[WALK_BUFS]; /* buffers, most recently used first: order[0] holds the last walk */
    uint8_t tag[WALK_BUFS] __attribute__((aligned(16))); /* ot_walk_tag of each buffer's frame 0 (0: none) */
    /* For each buffer, the one that became the last walk after it, the last time another did
     * (+ 1; 0: none): the guess that ot_unwind_noted_others asks first, which a loop over a few
     * stacks in turn makes right every time. A guess, always checked. */
    uint8_t succ[WALK_BUFS];
    wbuf_t *last; /* &buf[order[0]] (set with it, under busy), for the allocation path's first question */
    /* The stack memo (unwind.c): many more noted stacks than the buffers hold, each kept only as
     * its frame 0, its checks and its note. NULL where the memory attached has no room for it. */
    struct memo_set *memo;
    struct memo_fps *memo_fps; /* the sets' fingerprints, after them */
    uint32_t memo_mask;        /* sets - 1 */
    uint32_t memo_kept_walk;   /* the walk (gen) of a stack the memo holds already: not kept again */
    const struct memo *memo_last; /* the memo entry that answered last (NULL: none since) */
    uint32_t guessed;             /* answers the memo's successor guess gave (memo_succ; for the tests) */
    struct memo_step_entry *steps; /* the memo's step cache, after its fingerprints (NULL: none) */
    uint32_t steps_gen;            /* ot_code_gen its entries were taken under */
    wbuf_t buf[];
} walk_t;
_Static_assert(sizeof(walk_t) + WALK_BUFS * sizeof(wbuf_t) <= OT_UNWIND_CACHE_BYTES,
               "OT_UNWIND_CACHE_BYTES too small");
_Static_assert(sizeof(walk_t) + 6 * sizeof(wbuf_t) <= OT_UNWIND_CACHE_SAMPLED_BYTES,
               "OT_UNWIND_CACHE_SAMPLED_BYTES too small");
_Static_assert(sizeof(walk_t) + 2 * sizeof(wbuf_t) <= OT_UNWIND_CACHE_MIN_BYTES,
               "OT_UNWIND_CACHE_MIN_BYTES too small");

/* The calling thread's walk cache (NULL: none attached). */
extern OT_TLS walk_t *ot_walk_cache;
/* Bumped by ot_unwind_flush (after dlclose): a remembered walk from before describes frames whose
 * code may be gone, and other code may now sit at the same addresses with other rules. */
extern OT_HIDDEN uint32_t ot_code_gen;

/* The first of walk m's checks from check c on that does not hold against the stack (the end
 * marker, &m->chk[m->nchk], if all do). A check's slot is read only once the checks before it
 * held: those frames are then this stack's own, so the slot lies in this stack's frames. */
static inline const __typeof__(((wbuf_t *)0)->chk[0]) *first_failing(const wbuf_t *m, unsigned c)
{
    const __typeof__(m->chk[0]) *k = &m->chk[c];
    while (*(const uintptr_t *)k->at == k->val) k++;
    return k;
}

/* Do all of walk m's checks hold (validate(m, 0) == m->n, without the frame arithmetic)? */
static inline bool holds_all(const wbuf_t *m)
{
    return first_failing(m, 0) == &m->chk[m->nchk];
}

static inline uint64_t note_key(uint32_t gen, uint32_t tag) { return (uint64_t)gen << 32 | tag; }

/* Can walk m stand for a request of (max, skip) whose frames all hold? If it reached the end of
 * the stack, always; if it stopped at its depth limit, under the same limit. */
static inline bool whole(const wbuf_t *m, unsigned max, unsigned skip)
{
    return m->complete || (m->cut != 0 && m->cut == (max | skip << 16));
}

/* Is remembered walk m this very stack from (ip, sp, bp)? Frame 0 equal (its rbp only where some
 * frame of the walk computes its CFA from it: matters0), every check holding, and m whole for the
 * request. The same induction as a join, over the whole walk. */
static inline bool is_stack(const wbuf_t *m, uintptr_t ip, uintptr_t sp, uintptr_t bp, uint32_t code_gen,
                            unsigned max, unsigned skip)
{
    return m->n && m->f[0].ip == ip && m->f[0].sp == sp && (m->f[0].bp == bp || !m->matters0) &&
           m->code_gen == code_gen && whole(m, max, skip) && holds_all(m);
}

/* Seven bits of (ip, sp), never 0: each buffer's frame 0 in one byte (walk_t.tag), so that the
 * buffers whose frame 0 may be a stack's are found with one compare of all of them. */
static inline uint8_t ot_walk_tag(uintptr_t ip, uintptr_t sp)
{
    return (uint8_t)(0x80u | (((ip ^ (sp << 7)) * 0x9E3779B97F4A7C15ull) >> 57));
}

/* The buffers of w whose frame 0 may be (ip, sp) and that hold a remembered walk: every buffer's,
 * except that with two buffers (the least memory a walk cache takes) the other one is only the
 * next walk's scratch. A bit per buffer. */
static inline unsigned ot_walk_candidates(const walk_t *w, uintptr_t ip, uintptr_t sp)
{
    __m128i tags = _mm_load_si128((const __m128i *)(const void *)w->tag);
    __m128i eq = _mm_cmpeq_epi8(tags, _mm_set1_epi8((char)ot_walk_tag(ip, sp)));
    unsigned mine = w->nbufs > 2 ? (1u << w->nbufs) - 1 : 1u << w->order[0];
    return (unsigned)_mm_movemask_epi8(eq) & mine;
}

/* Buffer order[r] becomes the most recently used: the last walk, which it follows. */
static inline void ot_walk_to_front(walk_t *w, unsigned r)
{
    uint8_t b = w->order[r];
    w->succ[w->order[0]] = (uint8_t)(b + 1);
    for (; r > 0; r--) w->order[r] = w->order[r - 1];
    w->order[0] = b;
    w->last = &w->buf[b];
}

/* Remembered walk m was found to be this very stack, with its note: the note, and *depth for max. */
static inline __attribute__((always_inline)) uint32_t ot_walk_noted_hit(walk_t *w, const wbuf_t *m, unsigned max,
                                                                        unsigned *depth)
{
    *depth = m->nips < max ? m->nips : max;
    w->stepped = 0;
    return m->note_site;
}

/* The record path's question before any walk: is this the very stack of the last walk, with a note
 * under tag? Then that note (and *depth), else 0 with nothing changed. The same test as the walk's
 * own same-stack case, without its set-up. It takes the buffers like a walk does: a signal
 * handler's walks in between would otherwise reuse the one being read (with two buffers, the
 * second of them does). */
static inline __attribute__((always_inline)) uint32_t ot_unwind_noted_inline(uintptr_t ip, uintptr_t sp, uintptr_t bp, unsigned max,
                                                                        uint32_t tag, unsigned *depth)
{
    walk_t *w = ot_walk_cache;
    if (!w || w->busy || !tag) return 0;
    w->busy = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    const wbuf_t *m = w->last;
    uint32_t site = 0;
    if (m->note_key == note_key(m->gen, tag) &&
        is_stack(m, ip, sp, bp, __atomic_load_n(&ot_code_gen, __ATOMIC_ACQUIRE), max, 0))
        site = ot_walk_noted_hit(w, m, max, depth);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    w->busy = 0;
    return site;
}

/* The same question for the other remembered walks, out of line (unwind.c), asked where the last
 * walk is not this stack: those whose frame 0 may be this one, the last walk's successor first.
 * The one found becomes the last walk, as in the walk's own search (memo_find). A loop that
 * allocates from a few stacks in turn finds them here rather than through the walker: np_loop.py's
 * four share frame 0 (numpy's allocation) and most frames above it, and come in a cycle, where the
 * successor is right every time and any fixed order would ask one of the three others first in
 * most rounds. *searched is set when no remembered walk is this stack (each that may be was
 * compared, the last one by ot_unwind_noted_inline), for the walk that follows (note.searched):
 * cc1 under stacks=all, half the time. */
/* Its two parts, out of line (unwind.c): the memo's successor guess alone (the site, or 0), in a run
 * of the memo's answers; then, where it is not this stack, the rest. */
uint32_t ot_unwind_noted_guess(uintptr_t ip, uintptr_t sp, uintptr_t bp, unsigned max, uint32_t tag, unsigned *depth);
uint32_t ot_unwind_noted_rest(uintptr_t ip, uintptr_t sp, uintptr_t bp, unsigned max, uint32_t tag, unsigned *depth,
                              uint32_t *searched);
static inline __attribute__((always_inline)) uint32_t ot_unwind_noted_others(uintptr_t ip, uintptr_t sp, uintptr_t bp,
                                                                            unsigned max, uint32_t tag, unsigned *depth,
                                                                            uint32_t *searched)
{
    uint32_t site = ot_unwind_noted_guess(ip, sp, bp, max, tag, depth);
    if (site) {
        *searched = 0;
        return site;
    }
    return ot_unwind_noted_rest(ip, sp, bp, max, tag, depth, searched);
}

#endif
