/* Shared by the test doubles (fake_cuda.c, fake_nvml.c): their configuration comes from the
 * environment (OT_FAKE_*), sizes with an optional K/M/G/T suffix. */
#ifndef OT_FAKE_ENV_H
#define OT_FAKE_ENV_H
#include <stdlib.h>

static unsigned long long env_size(const char *name, unsigned long long dflt)
{
    const char *s = getenv(name);
    if (!s || !*s) return dflt;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    switch (*end) {
    case 'T': case 't': v <<= 10; /* fallthrough */
    case 'G': case 'g': v <<= 10; /* fallthrough */
    case 'M': case 'm': v <<= 10; /* fallthrough */
    case 'K': case 'k': v <<= 10; break;
    default: break;
    }
    return v;
}
#endif
