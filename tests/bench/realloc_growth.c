/* Bench workload: realloc-heavy growth, as in string builders and vectors without a growth
 * factor. 64 buffers each grow by 1..64 bytes per step up to 8..16 KiB, then are freed and
 * started over. usage: realloc_growth [OPS]; prints a checksum. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define BUFS 64

static struct {
    unsigned char *p;
    size_t len, limit;
} buf[BUFS];

int main(int argc, char **argv)
{
    long ops = argc > 1 ? atol(argv[1]) : 5000000;
    uint64_t rng = 0xda3e39cb94b95bdbull, sum = 0;
    for (long i = 0; i < ops; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        unsigned b = (unsigned)(i & (BUFS - 1));
        if (!buf[b].limit) buf[b].limit = 8192 + (rng >> 32) % 8192;
        size_t len = buf[b].len + 1 + (rng >> 8) % 64;
        unsigned char *q = realloc(buf[b].p, len);
        if (!q) {
            fprintf(stderr, "realloc_growth: realloc(%zu) failed\n", len);
            return 1;
        }
        if (!buf[b].len) q[0] = (unsigned char)b; /* the checksum reads only bytes we wrote */
        q[len - 1] = (unsigned char)i;
        sum += q[0];
        buf[b].p = q;
        buf[b].len = len;
        if (len >= buf[b].limit) {
            sum += q[len - 1];
            free(q);
            buf[b].p = NULL;
            buf[b].len = 0;
            buf[b].limit = 0;
        }
    }
    for (unsigned b = 0; b < BUFS; b++) free(buf[b].p);
    printf("@checksum %llu\n@ops %ld\n", (unsigned long long)sum, ops);
    return 0;
}
