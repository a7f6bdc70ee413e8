/* Shared by the reference preloads: the next definitions of malloc and free (glibc's, found with
 * dlsym RTLD_NEXT as oomtrace finds them), resolved once at start-up. Before that (ld.so, dlsym
 * itself) glibc's own entry points answer. */
#ifndef BENCH_REF_NEXT_H
#define BENCH_REF_NEXT_H

#include <dlfcn.h>
#include <stddef.h>

extern void *__libc_malloc(size_t n);
extern void __libc_free(void *p);

static void *(*next_malloc)(size_t);
static void (*next_free)(void *);

__attribute__((constructor)) static void resolve_next(void)
{
    next_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    next_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
}

static inline void *call_next_malloc(size_t n) { return next_malloc ? next_malloc(n) : __libc_malloc(n); }

static inline void call_next_free(void *p)
{
    if (next_free) next_free(p);
    else __libc_free(p);
}

#endif
