/* Replays files through the fuzz harness without libFuzzer (gcc with ASan/UBSan): the corpus as a
 * regression test where clang's fuzzer runtime is absent, and a way to rerun one crash file.
 * Prints "ok FILE: <what the reader said>" per file. */
#include <stdio.h>
#include <stdlib.h>

#include "statefile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) {
            perror(argv[i]);
            return 2;
        }
        static unsigned char buf[OT_SF_MAX_BYTES / 16];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        LLVMFuzzerTestOneInput(buf, n);
        ot_sf_t s;
        char err[256] = "valid";
        if (ot_sf_parse(buf, n, &s, err, sizeof err)) {
            printf("ok %s: valid, pid %d, %u sites, %u large, %u samples, %u modules%s\n", argv[i], s.id.pid,
                   s.n_sites, s.n_large, s.n_hist, s.n_mods, s.other_torn ? ", newest update torn" : "");
            ot_sf_free(&s);
        } else {
            printf("ok %s: %s\n", argv[i], err);
        }
    }
    return 0;
}
