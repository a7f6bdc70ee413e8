/* Tiny unit-test harness (in the spirit of jemalloc's): TEST(name){...}, EXPECT_* continue,
 * ASSERT_* stop the test, SKIP(reason) prints why. Output lines are counted by tests/run.sh:
 *   PASS name | FAIL name: file:line: expr | SKIP name: reason
 * main() is provided by TEST_MAIN(test1, test2, ...). */
#ifndef OT_HARNESS_H
#define OT_HARNESS_H
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

static int ot_t_failed_, ot_t_skipped_;
static char ot_t_skip_reason_[256];
#define TEST(name) static void name(void)
#define EXPECT(cond) do { if (!(cond)) { printf("  %s:%d: expected %s\n", __FILE__, __LINE__, #cond); ot_t_failed_ = 1; } } while (0)
#define ASSERT(cond) do { if (!(cond)) { printf("  %s:%d: required %s\n", __FILE__, __LINE__, #cond); ot_t_failed_ = 1; return; } } while (0)
#define EXPECT_EQ_U(a, b) do { unsigned long long a_ = (unsigned long long)(a), b_ = (unsigned long long)(b); \
    if (a_ != b_) { printf("  %s:%d: %s == %llu, expected %s == %llu\n", __FILE__, __LINE__, #a, a_, #b, b_); ot_t_failed_ = 1; } } while (0)
#define EXPECT_STR(a, b) do { const char *a_ = (a), *b_ = (b); \
    if (!a_ || !b_ || strcmp(a_, b_)) { printf("  %s:%d: %s == \"%s\", expected \"%s\"\n", __FILE__, __LINE__, #a, a_ ? a_ : "(null)", b_ ? b_ : "(null)"); ot_t_failed_ = 1; } } while (0)
#define EXPECT_CONTAINS(hay, needle) do { const char *h_ = (hay), *n_ = (needle); \
    if (!h_ || !strstr(h_, n_)) { printf("  %s:%d: \"%s\" not found in %s\n", __FILE__, __LINE__, n_, #hay); ot_t_failed_ = 1; } } while (0)
#define SKIP(...) do { snprintf(ot_t_skip_reason_, sizeof ot_t_skip_reason_, __VA_ARGS__); ot_t_skipped_ = 1; return; } while (0)

typedef void (*ot_t_fn_)(void);
/* Is name one of list's comma-separated names? */
static inline int ot_t_listed_(const char *list, const char *name)
{
    size_t l = strlen(name);
    for (const char *p = list; *p; p += strcspn(p, ","), p += *p == ',')
        if (strcspn(p, ",") == l && !strncmp(p, name, l)) return 1;
    return 0;
}
static inline int ot_t_run_(const char *names, ot_t_fn_ *fns, int n)
{
    int bad = 0;
    char buf[4096];
    strncpy(buf, names, sizeof buf - 1);
    buf[sizeof buf - 1] = 0;
    char *save = NULL, *tok = strtok_r(buf, ", ", &save);
    /* OT_TEST_ONLY=name[,name...]: run only those (to repeat one test). */
    const char *only = getenv("OT_TEST_ONLY");
    for (int i = 0; i < n; i++) {
        const char *nm = tok ? tok : "?";
        if (only && !ot_t_listed_(only, nm)) {
            tok = strtok_r(NULL, ", ", &save);
            continue;
        }
        ot_t_failed_ = ot_t_skipped_ = 0;
        fflush(stdout);
        fns[i]();
        if (ot_t_skipped_) printf("SKIP %s: %s\n", nm, ot_t_skip_reason_);
        else if (ot_t_failed_) { printf("FAIL %s\n", nm); bad = 1; }
        else printf("PASS %s\n", nm);
        fflush(stdout);
        tok = strtok_r(NULL, ", ", &save);
    }
    return bad;
}
#define TEST_MAIN(...) int main(void) { ot_t_fn_ fns_[] = { __VA_ARGS__ }; \
    return ot_t_run_(#__VA_ARGS__, fns_, (int)(sizeof fns_ / sizeof fns_[0])); }
#endif
