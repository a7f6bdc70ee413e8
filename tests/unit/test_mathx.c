/* mathx.c: the sampler's ln and expm1 without libm, against libm's (linked into this test only). */
#include <math.h>
#include <stdint.h>

#include "harness.h"
#include "internal.h"

static double rel(double got, double want)
{
    if (got == want) return 0;
    return fabs(got - want) / fabs(want);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* The sampler's draws, u = (53 random bits + 1) / (2^53 + 1), and x from the smallest subnormal
 * to the largest double (the normal ones 0.1% apart). */
TEST(log_matches_libm)
{
    double worst = 0, at = 0;
    for (int i = 0; i < 1000000; i++) {
        double u = (double)((next() >> 11) + 1) / 9007199254740993.0;
        double r = rel(ot_log(u), log(u));
        if (r > worst) worst = r, at = u;
    }
    for (double x = 0x1p-1074; x < 0x1p-1022; x *= 2) { /* subnormals */
        double r = rel(ot_log(x), log(x));
        if (r > worst) worst = r, at = x;
    }
    for (double x = 0x1p-1022; x < 1.7e308; x *= 1.0009765625) {
        double r = rel(ot_log(x), log(x));
        if (r > worst) worst = r, at = x;
    }
    printf("  largest relative difference %.3g (at %.17g)\n", worst, at);
    EXPECT(worst < 1e-15);
    EXPECT(ot_log(1.0) == 0.0);
    EXPECT(ot_log(0.0) == -INFINITY);
    EXPECT(isnan(ot_log(-1.0)));
    EXPECT(isnan(ot_log(NAN)));
    EXPECT(ot_log(INFINITY) == INFINITY);
}

/* The weights' argument is -size / sample_bytes: 0 down to about -2^40; beyond, both signs. */
TEST(expm1_matches_libm)
{
    double worst = 0, at = 0;
    for (int i = 0; i < 1000000; i++) {
        double y = -(double)(next() >> 24) / (double)(1u << (next() % 40));
        double r = rel(ot_expm1(y), expm1(y));
        if (r > worst) worst = r, at = y;
    }
    for (double y = 1e-300; y < 709.7; y *= 1.0009765625) {
        double a = rel(ot_expm1(y), expm1(y)), b = rel(ot_expm1(-y), expm1(-y));
        if (a > worst) worst = a, at = y;
        if (b > worst) worst = b, at = -y;
    }
    printf("  largest relative difference %.3g (at %.17g)\n", worst, at);
    EXPECT(worst < 1e-15);
    EXPECT(ot_expm1(0.0) == 0.0);
    EXPECT(ot_expm1(-1e6) == -1.0);
    EXPECT(ot_expm1(710.0) == INFINITY);
    EXPECT(rel(ot_expm1(709.7827), expm1(709.7827)) < 1e-15); /* the largest finite results */
    EXPECT(isnan(ot_expm1(NAN)));
}

TEST_MAIN(log_matches_libm, expm1_matches_libm)
