/* The crash section of the reports (event "crash", written from signals.c's handler): the signal,
 * one story line tying it to the allocation failures before it, and the crashing thread's stack.
 * Reads only the report's data; no malloc, written into the writers' buffers. */
#include "report_internal.h"

/* "85 us", "0.3 ms", "12.5 s", "13 min" */
static void put_elapsed(ot_buf_t *b, uint64_t ns)
{
    if (ns < 100000) ot_buf_printf(b, "%llu us", (unsigned long long)(ns / 1000));
    else if (ns < 1000000000ull)
        ot_buf_printf(b, "%llu.%llu ms", (unsigned long long)(ns / 1000000), (unsigned long long)(ns / 100000 % 10));
    else if (ns < 600000000000ull)
        ot_buf_printf(b, "%llu.%llu s", (unsigned long long)(ns / 1000000000), (unsigned long long)(ns / 100000000 % 10));
    else ot_buf_printf(b, "%llu min", (unsigned long long)(ns / 60000000000ull));
}

static const char *verb(int sig)
{
    return sig == 6 ? "aborted" : "crashed";
}

static void put_failure(ot_buf_t *b, const ot_failure_note_t *n)
{
    ot_buf_printf(b, "%s(%llu) failed", n->api, (unsigned long long)n->size);
    if (n->device && n->device_index >= 0) ot_buf_printf(b, " on GPU %d", n->device_index);
}

void ot_report_crash_text(const ot_report_t *r, ot_buf_t *b)
{
    const ot_crash_t *c = r->crash;
    if (r->n_recent) {
        /* The story: what failed last, and how long before the signal. */
        const ot_failure_note_t *last = &r->recent[r->n_recent - 1];
        ot_buf_printf(b, "oomtrace: %s ", verb(c->signo));
        put_elapsed(b, c->mono_ns > last->mono_ns ? c->mono_ns - last->mono_ns : 0);
        ot_buf_puts(b, " after ");
        put_failure(b, last);
        if (last->report[0]) ot_buf_printf(b, ", report %s", last->report);
        ot_buf_putc(b, '\n');
        for (unsigned i = r->n_recent - 1; i-- > 0;) {
            const ot_failure_note_t *n = &r->recent[i];
            ot_buf_puts(b, "oomtrace:   and ");
            put_elapsed(b, c->mono_ns > n->mono_ns ? c->mono_ns - n->mono_ns : 0);
            ot_buf_puts(b, " before it: ");
            put_failure(b, n);
            if (n->report[0]) ot_buf_printf(b, ", report %s", n->report);
            ot_buf_putc(b, '\n');
        }
    } else {
        ot_buf_puts(b, "oomtrace: no allocation failed before the signal\n");
    }
    if (c->chained) {
        ot_buf_printf(b, "oomtrace: the program's own handler ran first, ");
        put_elapsed(b, c->mono_ns > c->first_ns ? c->mono_ns - c->first_ns : 0);
        ot_buf_printf(b, " before, for %s (%s)", ot_signal_name(c->first_signo),
                      ot_signal_code_name(c->first_signo, c->first_code));
        if (c->first_has_addr) {
            ot_buf_puts(b, " at address ");
            ot_buf_hex(b, c->first_addr);
        }
        if (c->first_pc) {
            ot_buf_puts(b, " in ");
            ot_report_put_where(b, ot_report_frame(c->first_pc + 1));
        }
        ot_buf_puts(b, ", then raised it again\n");
    }
    if (c->stack_overflow)
        ot_buf_puts(b, "oomtrace: stack overflow: the fault address lies just below the thread's stack pointer\n");
    ot_buf_puts(b, "oomtrace: crashing thread:\n");
    if (r->depth) ot_report_text_stack(b, r->ips, r->depth);
    else ot_buf_puts(b, "oomtrace:   (no stack: the thread was inside the unwinder)\n");
}

void ot_report_crash_json(const ot_report_t *r, ot_buf_t *b)
{
    const ot_crash_t *c = r->crash;
    ot_buf_puts(b, ",\"crash\":{\"signal\":");
    ot_buf_json_str(b, c->signame);
    ot_buf_printf(b, ",\"signo\":%d,\"code\":", c->signo);
    ot_buf_json_str(b, c->codename);
    ot_buf_printf(b, ",\"si_code\":%d,\"address\":", c->code);
    if (c->has_addr) {
        ot_buf_putc(b, '"');
        ot_buf_hex(b, c->addr);
        ot_buf_putc(b, '"');
    } else {
        ot_buf_puts(b, "null");
    }
    ot_buf_printf(b, ",\"stack_overflow\":%s,\"sender_pid\":", c->stack_overflow ? "true" : "false");
    ot_buf_json_i64_or_null(b, c->sent ? c->sender_pid : -1);
    ot_buf_printf(b, ",\"thread\":%ld,\"stack\":", c->tid);
    ot_report_json_stack(b, r->ips, r->depth);
    ot_buf_puts(b, ",\"program_handler_first\":");
    if (c->chained) {
        ot_buf_puts(b, "{\"signal\":");
        ot_buf_json_str(b, ot_signal_name(c->first_signo));
        ot_buf_puts(b, ",\"code\":");
        ot_buf_json_str(b, ot_signal_code_name(c->first_signo, c->first_code));
        ot_buf_puts(b, ",\"address\":");
        if (c->first_has_addr) {
            ot_buf_putc(b, '"');
            ot_buf_hex(b, c->first_addr);
            ot_buf_putc(b, '"');
        } else {
            ot_buf_puts(b, "null");
        }
        ot_buf_printf(b, ",\"us_before\":%llu}", (unsigned long long)((c->mono_ns - c->first_ns) / 1000));
    } else {
        ot_buf_puts(b, "null");
    }
    ot_buf_puts(b, ",\"failures_before\":[");
    for (unsigned i = 0; i < r->n_recent; i++) {
        const ot_failure_note_t *n = &r->recent[i];
        uint64_t ago = c->mono_ns > n->mono_ns ? c->mono_ns - n->mono_ns : 0;
        ot_buf_puts(b, i ? ",{\"api\":" : "{\"api\":");
        ot_buf_json_str(b, n->api);
        ot_buf_printf(b, ",\"size\":%llu,\"error\":", (unsigned long long)n->size);
        ot_buf_json_str(b, n->error_name);
        ot_buf_printf(b, ",\"device\":");
        ot_buf_json_i64_or_null(b, n->device ? n->device_index : -1);
        ot_buf_printf(b, ",\"us_before\":%llu,\"report\":", (unsigned long long)(ago / 1000));
        ot_buf_json_str(b, n->report[0] ? n->report : NULL);
        ot_buf_putc(b, '}');
    }
    ot_buf_puts(b, "]}");
}
