/* The process's recent allocation failures: one ring for the crash report and the flight recorder.
 * Filled on the failure path by any thread without a lock; never calls malloc. */
#include <stdatomic.h>
#include <time.h>

#include "internal.h"

/* A seqlock per slot: entry i is complete while its seq reads i + 1. A writer first takes the slot
 * (seq BUSY), so two laps never write one slot together, and a reader that sees i + 1 both before
 * and after its copy has a whole entry. Both sides copy the payload in relaxed atomic words: no data
 * race even while a copy is being made over. */
#define BUSY UINT64_MAX
#define WORDS (sizeof(ot_failure_note_t) / sizeof(uint64_t))
_Static_assert(sizeof(ot_failure_note_t) % sizeof(uint64_t) == 0, "the note is copied in words");
typedef struct {
    _Atomic uint64_t seq;
    uint64_t words[WORDS];
} slot_t;
static slot_t ring[OT_FAILURE_RING];
static _Atomic uint64_t claimed;


void ot_failures_note(const ot_failure_t *f, const char *report_path)
{
    ot_failure_note_t n;
    n.mono_ns = ot_clock_ns(CLOCK_MONOTONIC);
    n.realtime_ns = ot_clock_ns(CLOCK_REALTIME);
    n.api = f->api ? f->api : "";
    n.size = f->size;
    n.error_code = f->error_code;
    n.error_name = f->error_name ? f->error_name : "";
    n.device = f->device;
    n.device_index = f->device_index;
    ot_memset(n.report, 0, sizeof n.report);
    ot_strlcpy(n.report, report_path ? report_path : "", sizeof n.report);

    uint64_t i = atomic_fetch_add_explicit(&claimed, 1, memory_order_relaxed);
    slot_t *s = &ring[i % OT_FAILURE_RING];
    /* Bounded: this may run in a signal handler that interrupted this slot's writer. */
    for (unsigned tries = 0;; tries++) {
        uint64_t v = atomic_load_explicit(&s->seq, memory_order_relaxed);
        if (v != BUSY && v > i + 1) return; /* a later lap is already there */
        if (v != BUSY && atomic_compare_exchange_weak_explicit(&s->seq, &v, BUSY, memory_order_acquire,
                                                               memory_order_relaxed))
            break;
        if (tries > 1000) return; /* the slot stays busy: this note is given up, the total still counts it */
    }
    atomic_thread_fence(memory_order_release);
    const uint64_t *src = (const uint64_t *)(const void *)&n;
    for (unsigned k = 0; k < WORDS; k++) __atomic_store_n(&s->words[k], src[k], __ATOMIC_RELAXED);
    atomic_store_explicit(&s->seq, i + 1, memory_order_release);
}

uint64_t ot_failures_head(void) { return atomic_load_explicit(&claimed, memory_order_acquire); }

bool ot_failures_get(uint64_t i, ot_failure_note_t *out)
{
    slot_t *s = &ring[i % OT_FAILURE_RING];
    if (atomic_load_explicit(&s->seq, memory_order_acquire) != i + 1) return false;
    uint64_t *dst = (uint64_t *)(void *)out;
    for (unsigned k = 0; k < WORDS; k++) dst[k] = __atomic_load_n(&s->words[k], __ATOMIC_RELAXED);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&s->seq, memory_order_relaxed) != i + 1) return false;
    out->report[sizeof out->report - 1] = 0;
    return true;
}

unsigned ot_failures_recent(ot_failure_note_t *out, unsigned max)
{
    uint64_t head = ot_failures_head();
    uint64_t from = head > max ? head - max : 0;
    if (head - from > OT_FAILURE_RING) from = head - OT_FAILURE_RING;
    unsigned n = 0;
    for (uint64_t i = from; i < head; i++)
        if (ot_failures_get(i, &out[n])) n++;
    return n;
}
