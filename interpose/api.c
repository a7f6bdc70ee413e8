/* The public opt-in API of include/oomtrace.h. */
#include "oomtrace.h"

#include "internal.h"

OT_EXPORT int oomtrace_report(const char *reason)
{
    if (!ot_ready()) return -1;
    return ot_report_event("snapshot", reason);
}

OT_EXPORT int oomtrace_get_totals(oomtrace_totals_t *out)
{
    if (!out) return -1;
    ot_totals_t h, d;
    ot_live_totals(false, &h);
    ot_live_totals(true, &d);
    out->host_bytes = h.bytes;
    out->host_count = h.count;
    out->host_peak_bytes = h.peak_bytes;
    out->device_bytes = d.bytes;
    out->device_count = d.count;
    out->device_peak_bytes = d.peak_bytes;
    return 0;
}

OT_EXPORT const char *oomtrace_version(void)
{
    return OT_VERSION;
}
