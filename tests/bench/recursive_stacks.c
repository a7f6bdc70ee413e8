/* Bench workload: a malloc-saturated program whose allocations come from many distinct, recursive
 * call stacks, as parser and bignum code makes them. Each round generates one arithmetic expression
 * (nested 1..12 parentheses deep), parses it by recursive descent into a tree of malloc'd nodes
 * (expr -> term -> unary -> primary -> expr ..., one more level of four mutually recursive functions
 * per parenthesis, plus calls f(a, b) and g(a, b, c)), evaluates it into heap-allocated bignums
 * (256-bit, Karatsuba multiplication that recurses and allocates its temporaries at every level),
 * and frees it all. The allocations are small (8..64 bytes) and short-lived, 5..40 frames deep, from
 * hundreds of distinct stacks. usage: recursive_stacks [ROUNDS [LEAK_EVERY]]; prints a checksum and the
 * number of allocations. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "now.h"

#define LIMBS 8 /* values are kept modulo 2^256: 8 limbs of 32 bits */
#define MAX_NEST 8
#define TEXT_MAX 8192

static long allocs;
/* The depth probe (scripts/bench.sh): with LEAK_EVERY, every LEAK_EVERY-th allocation leaks a twin
 * of the same size from the same call, so that leak checkers report the stacks they recorded. */
static long leak_every = LONG_MAX, leak_left = LONG_MAX;
static volatile uintptr_t leak_sink;
static __attribute__((noinline)) long leak(void *p)
{
    leak_sink = ~(uintptr_t)p; /* no pointer to it is kept */
    return leak_every;
}

/* malloc that counts and never returns NULL: a macro, so that every call site is the function's
 * own (a wrapper would turn all of them into one). */
#define ALLOC(n)                                                                                   \
    ({                                                                                             \
        void *p_ = malloc(n);                                                                      \
        if (!p_) {                                                                                 \
            fprintf(stderr, "recursive_stacks: malloc(%zu) failed\n", (size_t)(n));                \
            exit(1);                                                                               \
        }                                                                                          \
        allocs++;                                                                                  \
        if (--leak_left == 0) leak_left = leak(malloc(n));                                         \
        p_;                                                                                        \
    })

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) { return xorshift(&rng); }

/* ------------------------------------------------------------------ bignums */
typedef struct {
    unsigned n; /* limbs in use, 1..LIMBS (no leading zero limbs but for the value 0) */
    uint32_t d[];
} bn_t;

static bn_t *bn_new(unsigned n)
{
    bn_t *b = ALLOC(sizeof(bn_t) + n * sizeof(uint32_t));
    b->n = n;
    return b;
}

static bn_t *bn_trim(bn_t *b)
{
    if (b->n > LIMBS) b->n = LIMBS;
    while (b->n > 1 && b->d[b->n - 1] == 0) b->n--;
    return b;
}

static bn_t *bn_from(const uint32_t *d, unsigned n)
{
    if (n == 0) {
        bn_t *z = bn_new(1);
        z->d[0] = 0;
        return z;
    }
    bn_t *b = bn_new(n);
    memcpy(b->d, d, n * sizeof *d);
    return bn_trim(b);
}

static bn_t *bn_add(const bn_t *a, const bn_t *b)
{
    unsigned n = (a->n > b->n ? a->n : b->n) + 1;
    bn_t *r = bn_new(n);
    uint64_t c = 0;
    for (unsigned i = 0; i < n; i++) {
        c += (uint64_t)(i < a->n ? a->d[i] : 0) + (i < b->n ? b->d[i] : 0);
        r->d[i] = (uint32_t)c;
        c >>= 32;
    }
    return bn_trim(r);
}

/* a - b modulo 2^256 */
static bn_t *bn_sub(const bn_t *a, const bn_t *b)
{
    bn_t *r = bn_new(LIMBS);
    int64_t c = 0;
    for (unsigned i = 0; i < LIMBS; i++) {
        c += (int64_t)(i < a->n ? a->d[i] : 0) - (int64_t)(i < b->n ? b->d[i] : 0);
        r->d[i] = (uint32_t)c;
        c >>= 32;
    }
    return bn_trim(r);
}

static bn_t *bn_neg(const bn_t *a)
{
    bn_t *z = bn_new(1);
    z->d[0] = 0;
    bn_t *r = bn_sub(z, a);
    free(z);
    return r;
}

/* The full product of x[0..n) and y[0..n) into r[0..2n), schoolbook below 4 limbs, else Karatsuba
 * with its three half-size products and sums in fresh memory at every level. */
static void kara(uint32_t *r, const uint32_t *x, const uint32_t *y, unsigned n)
{
    if (n < 4) {
        memset(r, 0, 2 * n * sizeof *r);
        for (unsigned i = 0; i < n; i++) {
            uint64_t c = 0;
            for (unsigned j = 0; j < n; j++) {
                c += (uint64_t)x[i] * y[j] + r[i + j];
                r[i + j] = (uint32_t)c;
                c >>= 32;
            }
            r[i + n] = (uint32_t)c;
        }
        return;
    }
    unsigned h = n / 2, m = n - h; /* low halves of h limbs, high of m >= h */
    uint32_t *z0 = ALLOC(2 * h * sizeof *z0);
    uint32_t *z2 = ALLOC(2 * m * sizeof *z2);
    uint32_t *sx = ALLOC((m + 1) * sizeof *sx);
    uint32_t *sy = ALLOC((m + 1) * sizeof *sy);
    uint32_t *z1 = ALLOC(2 * (m + 1) * sizeof *z1);
    kara(z0, x, y, h);
    kara(z2, x + h, y + h, m);
    uint64_t cx = 0, cy = 0;
    for (unsigned i = 0; i < m; i++) {
        cx += (uint64_t)x[h + i] + (i < h ? x[i] : 0);
        cy += (uint64_t)y[h + i] + (i < h ? y[i] : 0);
        sx[i] = (uint32_t)cx;
        sy[i] = (uint32_t)cy;
        cx >>= 32;
        cy >>= 32;
    }
    sx[m] = (uint32_t)cx;
    sy[m] = (uint32_t)cy;
    kara(z1, sx, sy, m + 1);
    /* z1 -= z0 + z2, then r = z0 + z1 << 32h + z2 << 64h */
    int64_t c = 0;
    for (unsigned i = 0; i < 2 * (m + 1); i++) {
        c += (int64_t)z1[i] - (i < 2 * h ? z0[i] : 0) - (i < 2 * m ? z2[i] : 0);
        z1[i] = (uint32_t)c;
        c >>= 32;
    }
    memcpy(r, z0, 2 * h * sizeof *r);
    memcpy(r + 2 * h, z2, 2 * m * sizeof *r);
    uint64_t a = 0;
    for (unsigned i = 0; i < 2 * (m + 1) && h + i < 2 * n; i++) {
        a += (uint64_t)r[h + i] + z1[i];
        r[h + i] = (uint32_t)a;
        a >>= 32;
    }
    for (unsigned i = h + 2 * (m + 1); a && i < 2 * n; i++) {
        a += r[i];
        r[i] = (uint32_t)a;
        a >>= 32;
    }
    free(z1);
    free(sy);
    free(sx);
    free(z2);
    free(z0);
}

static bn_t *bn_mul(const bn_t *a, const bn_t *b)
{
    unsigned n = a->n > b->n ? a->n : b->n;
    uint32_t *x = ALLOC(n * sizeof *x), *y = ALLOC(n * sizeof *y), *p = ALLOC(2 * n * sizeof *p);
    memset(x, 0, n * sizeof *x);
    memset(y, 0, n * sizeof *y);
    memcpy(x, a->d, a->n * sizeof *x);
    memcpy(y, b->d, b->n * sizeof *y);
    kara(p, x, y, n);
    bn_t *r = bn_from(p, 2 * n < LIMBS ? 2 * n : LIMBS);
    free(p);
    free(y);
    free(x);
    return r;
}

/* ------------------------------------------------------------------ the expression text
 * One round's expression: a template nested into itself `nest` times ('@' is the hole, '#' a
 * random number), around a number, a sum or a product at the bottom. One template per round keeps the
 * stacks to hundreds (depth x template x call site) where templates mixed at random would make
 * nearly every stack a new one. */
static const char *const templates[] = {
    "(@)", "#+(@)", "(@)*#", "-(@)", "f(@,#)", "g(#,@,#)", "#*(@)-#", "f(#,-(@))",
};
#define NTEMPLATES (sizeof templates / sizeof templates[0])

static void gen_number(char *t, size_t *at)
{
    uint64_t r = next();
    unsigned digits = 1 + (unsigned)(r >> 58) % 19; /* 1..19 digits */
    for (uint64_t x = next(); digits--; x /= 10) t[(*at)++] = (char)('0' + x % 10);
}

static void gen(char *t, size_t *at, const char *tpl, int nest)
{
    if (*at > TEXT_MAX - 256) {
        fprintf(stderr, "recursive_stacks: expression text too long\n");
        exit(1);
    }
    if (nest == 0) { /* the bottom: a number, a product or a sum of two */
        gen_number(t, at);
        unsigned op = (unsigned)(next() % 3);
        if (op) {
            t[(*at)++] = op == 1 ? '*' : '+';
            gen_number(t, at);
        }
        return;
    }
    for (const char *c = tpl; *c; c++) {
        if (*c == '@') gen(t, at, tpl, nest - 1);
        else if (*c == '#') gen_number(t, at);
        else t[(*at)++] = *c;
    }
}

/* ------------------------------------------------------------------ the parser */
enum { N_NUM, N_NEG, N_ADD, N_SUB, N_MUL, N_CALL };
typedef struct node {
    int op;
    unsigned nargs;
    struct node *a, *b;
    struct node **args; /* N_CALL */
    bn_t *num;          /* N_NUM */
} node_t;

typedef struct {
    const char *p;
} parser_t;

static node_t *parse_expr(parser_t *ps);

static node_t *parse_primary(parser_t *ps)
{
    if (*ps->p == '(') {
        ps->p++;
        node_t *e = parse_expr(ps);
        ps->p++; /* ')' */
        return e;
    }
    if (*ps->p == 'f' || *ps->p == 'g') {
        unsigned n = *ps->p == 'f' ? 2 : 3;
        ps->p += 2; /* name, '(' */
        node_t *c = ALLOC(sizeof *c);
        c->op = N_CALL;
        c->nargs = n;
        c->args = ALLOC(n * sizeof *c->args);
        c->args[0] = parse_expr(ps);
        ps->p++; /* ',' */
        c->args[1] = parse_expr(ps);
        if (n == 3) {
            ps->p++;
            c->args[2] = parse_expr(ps);
        }
        ps->p++; /* ')' */
        return c;
    }
    /* A decimal number into limbs: d = d * 10 + digit, modulo 2^256. */
    uint32_t d[LIMBS] = {0};
    unsigned n = 0;
    while (*ps->p >= '0' && *ps->p <= '9') {
        uint64_t c = (uint64_t)(*ps->p++ - '0');
        for (unsigned i = 0; i < n; i++) {
            c += (uint64_t)d[i] * 10;
            d[i] = (uint32_t)c;
            c >>= 32;
        }
        if (c && n < LIMBS) d[n++] = (uint32_t)c;
    }
    node_t *num = ALLOC(sizeof *num);
    num->op = N_NUM;
    num->num = bn_from(d, n);
    return num;
}

static node_t *parse_unary(parser_t *ps)
{
    if (*ps->p == '-') {
        ps->p++;
        node_t *u = ALLOC(sizeof *u);
        u->op = N_NEG;
        u->a = parse_unary(ps);
        return u;
    }
    return parse_primary(ps);
}

static node_t *parse_term(parser_t *ps)
{
    node_t *l = parse_unary(ps);
    while (*ps->p == '*') {
        ps->p++;
        node_t *m = ALLOC(sizeof *m);
        m->op = N_MUL;
        m->a = l;
        m->b = parse_unary(ps);
        l = m;
    }
    return l;
}

static node_t *parse_expr(parser_t *ps)
{
    node_t *l = parse_term(ps);
    while (*ps->p == '+' || *ps->p == '-') {
        int op = *ps->p++ == '+' ? N_ADD : N_SUB;
        node_t *s = ALLOC(sizeof *s);
        s->op = op;
        s->a = l;
        s->b = parse_term(ps);
        l = s;
    }
    return l;
}

/* ------------------------------------------------------------------ evaluation */
static bn_t *eval(const node_t *e);

/* f(a, b) = a * b + a; g(a, b, c) = a * (b - c) */
static bn_t *eval_call(const node_t *e)
{
    bn_t **v = ALLOC(e->nargs * sizeof *v);
    for (unsigned i = 0; i < e->nargs; i++) v[i] = eval(e->args[i]);
    bn_t *r;
    if (e->nargs == 2) {
        bn_t *p = bn_mul(v[0], v[1]);
        r = bn_add(p, v[0]);
        free(p);
    } else {
        bn_t *s = bn_sub(v[1], v[2]);
        r = bn_mul(v[0], s);
        free(s);
    }
    for (unsigned i = 0; i < e->nargs; i++) free(v[i]);
    free(v);
    return r;
}

static bn_t *eval(const node_t *e)
{
    switch (e->op) {
    case N_NUM: return bn_from(e->num->d, e->num->n);
    case N_NEG: {
        bn_t *a = eval(e->a), *r = bn_neg(a);
        free(a);
        return r;
    }
    case N_CALL: return eval_call(e);
    default: break;
    }
    bn_t *a = eval(e->a), *b = eval(e->b), *r;
    r = e->op == N_ADD ? bn_add(a, b) : e->op == N_SUB ? bn_sub(a, b) : bn_mul(a, b);
    free(b);
    free(a);
    return r;
}

static void free_tree(node_t *e)
{
    if (!e) return;
    if (e->op == N_NUM) {
        free(e->num);
    } else if (e->op == N_CALL) {
        for (unsigned i = 0; i < e->nargs; i++) free_tree(e->args[i]);
        free(e->args);
    } else {
        free_tree(e->a);
        if (e->op != N_NEG) free_tree(e->b);
    }
    free(e);
}

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 200000;
    if (argc > 2 && atol(argv[2]) > 0) leak_left = leak_every = atol(argv[2]);
    static char text[TEXT_MAX];
    uint64_t sum = 0;
    for (long i = 0; i < rounds; i++) {
        size_t at = 0;
        uint64_t r = next();
        gen(text, &at, templates[r % NTEMPLATES], 1 + (int)((r >> 32) % MAX_NEST));
        text[at] = 0;
        parser_t ps = {text};
        node_t *tree = parse_expr(&ps);
        bn_t *v = eval(tree);
        for (unsigned k = 0; k < v->n; k++) sum = sum * 1000003 + v->d[k];
        free(v);
        free_tree(tree);
    }
    printf("@checksum %llu\n@ops %ld\n", (unsigned long long)sum, allocs);
    return 0;
}
