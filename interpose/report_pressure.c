/* The pressure report's own section (event "pressure", pressure.c): the limit, the usage, the step
 * crossed and the stack of the allocation that crossed it. Reads only the report's data; no malloc. */
#include "report_internal.h"

static void put_fraction(ot_buf_t *b, double f, unsigned places)
{
    unsigned scale = places == 4 ? 10000 : 100, v = (unsigned)(f * scale + 0.5);
    ot_buf_printf(b, places == 4 ? "%u.%04u" : "%u.%02u", v / scale, v % scale);
}

void ot_report_text_pressure(ot_buf_t *b, const ot_report_t *r)
{
    const ot_pressure_event_t *p = r->pressure;
    ot_buf_printf(b, "oomtrace: pressure: %s ", p->usage_name);
    ot_buf_bytes(b, (uint64_t)p->usage);
    ot_buf_printf(b, " of %s ", p->limit_name);
    ot_buf_bytes(b, (uint64_t)p->limit);
    unsigned pct10 = (unsigned)(p->fraction * 1000 + 0.5);
    ot_buf_printf(b, " (%u.%u%%), step %u%%", pct10 / 10, pct10 % 10, (unsigned)(p->step * 100 + 0.5));
    if (p->next_step > 0) ot_buf_printf(b, ", next at %u%%\n", (unsigned)(p->next_step * 100 + 0.5));
    else ot_buf_puts(b, ", the last step\n");
    ot_buf_puts(b, "oomtrace: allocation that crossed it:\n");
    ot_report_text_stack(b, r->ips, r->depth);
}

void ot_report_json_pressure(ot_buf_t *b, const ot_report_t *r)
{
    const ot_pressure_event_t *p = r->pressure;
    ot_buf_puts(b, ",\"pressure\":{\"limit_name\":");
    ot_buf_json_str(b, p->limit_name);
    ot_buf_puts(b, ",\"usage_name\":");
    ot_buf_json_str(b, p->usage_name);
    ot_buf_puts(b, ",\"limit\":");
    ot_buf_json_i64_or_null(b, p->limit);
    ot_buf_puts(b, ",\"usage\":");
    ot_buf_json_i64_or_null(b, p->usage);
    ot_buf_puts(b, ",\"fraction\":");
    put_fraction(b, p->fraction, 4);
    ot_buf_puts(b, ",\"step\":");
    put_fraction(b, p->step, 2);
    ot_buf_puts(b, ",\"next_step\":");
    if (p->next_step > 0) put_fraction(b, p->next_step, 2);
    else ot_buf_puts(b, "null");
    ot_buf_puts(b, ",\"stack\":");
    ot_report_json_stack(b, r->ips, r->depth);
    ot_buf_putc(b, '}');
}
