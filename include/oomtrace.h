/* oomtrace: opt-in API for programs that want to ask the preloaded library for a report or for
 * the live totals. Every function is declared weak: the same binary runs with or without
 * liboomtrace.so; check oomtrace_available() first (or test the function pointer yourself). */
#ifndef OOMTRACE_H
#define OOMTRACE_H

#ifdef __cplusplus
extern "C" {
#endif

#define OOMTRACE_API_VERSION 1

typedef struct oomtrace_totals {
    unsigned long long host_bytes;        /* live bytes requested through the malloc family */
    unsigned long long host_count;        /* live blocks */
    unsigned long long host_peak_bytes;   /* high-water mark of host_bytes */
    unsigned long long device_bytes;      /* live CUDA allocations (device, managed, pinned, VMM, pool) */
    unsigned long long device_count;
    unsigned long long device_peak_bytes;
} oomtrace_totals_t;

/* Writes a "snapshot" report now (text to the log destination, JSON to the report path).
 * reason: free text shown in the report, may be NULL. Returns the report number, or -1. */
int oomtrace_report(const char *reason) __attribute__((weak));

/* Fills *out with the exact live totals. Returns 0, or -1 if out is NULL. */
int oomtrace_get_totals(oomtrace_totals_t *out) __attribute__((weak));

/* The library's version string, e.g. "0.1.0". */
const char *oomtrace_version(void) __attribute__((weak));

/* Non-zero when liboomtrace.so is loaded into this process. */
static inline int oomtrace_available(void)
{
    return oomtrace_version != 0;
}

#ifdef __cplusplus
}
#endif
#endif
