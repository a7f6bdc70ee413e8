/* Bench reference, not a tracker: an LD_PRELOAD malloc/free that only forwards to the next
 * definition (dlsym RTLD_NEXT, as oomtrace does). Its ratio on small_churn is the cost of
 * interposing at all, before anything is recorded. Built by tests/bench/bench.mk. */
#include <dlfcn.h>
#include <stddef.h>

void *malloc(size_t n);
void free(void *p);

extern void *__libc_malloc(size_t n);
extern void __libc_free(void *p);

static void *(*next_malloc)(size_t);
static void (*next_free)(void *);

__attribute__((constructor)) static void resolve(void)
{
    next_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    next_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
}

void *malloc(size_t n)
{
    /* Before the constructor ran (ld.so, dlsym itself): glibc's own entry points. */
    return next_malloc ? next_malloc(n) : __libc_malloc(n);
}

void free(void *p)
{
    if (next_free) next_free(p);
    else __libc_free(p);
}
