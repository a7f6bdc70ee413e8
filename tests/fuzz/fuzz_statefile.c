/* libFuzzer harness for the state-file reader (launcher/statefile.c): any bytes must give a
 * validated copy or a message, never a crash, an out-of-bounds read, a hang or a huge allocation.
 * Every field of the copy is read back so that ASan sees any entry copied from outside the input. */
#include <stdio.h>
#include <string.h>

#include "statefile.h"

static volatile uint64_t sink;

static void touch(const void *p, size_t n)
{
    const unsigned char *c = p;
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++) s += c[i];
    sink += s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ot_sf_t s;
    char err[256];
    if (!ot_sf_parse(data, size, &s, err, sizeof err)) {
        if (!err[0] || !memchr(err, 0, sizeof err)) __builtin_trap(); /* a rejection always says why */
        return 0;
    }
    touch(s.sites, s.n_sites * sizeof *s.sites);
    touch(s.large, s.n_large * sizeof *s.large);
    touch(s.hist, s.n_hist * sizeof *s.hist);
    touch(s.fail, s.n_fail * sizeof *s.fail);
    touch(s.mods, s.n_mods * sizeof *s.mods);
    /* The promises the report writer relies on. */
    if (strlen(s.id.exe) >= sizeof s.id.exe || strlen(s.id.cmdline) >= sizeof s.id.cmdline) __builtin_trap();
    for (unsigned i = 0; i < s.n_sites; i++)
        if (s.sites[i].depth > OT_REC_MAX_FRAMES || s.sites[i].kind >= OT_REC_KINDS) __builtin_trap();
    for (unsigned i = 0; i < s.n_large; i++)
        if (s.large[i].depth > OT_REC_LARGE_FRAMES) __builtin_trap();
    for (unsigned i = 0; i < s.n_mods; i++)
        if (s.mods[i].path[0] != '/' || s.mods[i].build_id_len > sizeof s.mods[i].build_id) __builtin_trap();
    ot_sf_free(&s);
    return 0;
}
