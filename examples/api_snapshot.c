/* The opt-in API: the same binary runs with or without liboomtrace.so (all symbols are weak).
 *   build/examples/api_snapshot                       -> "oomtrace not loaded"
 *   build/oomtrace -- build/examples/api_snapshot     -> live totals and a snapshot report */
#include <stdio.h>
#include <stdlib.h>

#include "oomtrace.h"

int main(void)
{
    enum { N = 1000 };
    void *blocks[N];
    for (int i = 0; i < N; i++) blocks[i] = malloc(1024);
    if (!oomtrace_available()) {
        printf("oomtrace not loaded\n");
    } else {
        oomtrace_totals_t t;
        oomtrace_get_totals(&t);
        printf("oomtrace %s: %llu live host blocks, %llu bytes (peak %llu)\n", oomtrace_version(), t.host_count,
               t.host_bytes, t.host_peak_bytes);
        int n = oomtrace_report("after allocating the lookup tables");
        printf("snapshot report #%d written\n", n);
    }
    for (int i = 0; i < N; i++) free(blocks[i]);
    return 0;
}
