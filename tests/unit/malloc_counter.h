/* Shared by the unit tests that prove a code path never calls malloc: the test binary's own
 * malloc family interposes everyone's, and counts calls while this thread's flag is set.
 * Not under sanitizers, which own malloc (HAVE_MALLOC_COUNTER is 0 there). */
#ifndef OT_MALLOC_COUNTER_H
#define OT_MALLOC_COUNTER_H
#include <stddef.h>
#ifndef OT_SANITIZER
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t m);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t a, size_t n);
extern void __libc_free(void *p);
static __thread int count_mallocs;
static int mallocs_seen;
#define OT_COUNT_CALL() do { if (count_mallocs) __atomic_add_fetch(&mallocs_seen, 1, __ATOMIC_RELAXED); } while (0)
void *malloc(size_t n);
void *calloc(size_t n, size_t m);
void *realloc(void *p, size_t n);
void *memalign(size_t a, size_t n);
void free(void *p);
void *malloc(size_t n) { OT_COUNT_CALL(); return __libc_malloc(n); }
void *calloc(size_t n, size_t m) { OT_COUNT_CALL(); return __libc_calloc(n, m); }
void *realloc(void *p, size_t n) { OT_COUNT_CALL(); return __libc_realloc(p, n); }
void *memalign(size_t a, size_t n) { OT_COUNT_CALL(); return __libc_memalign(a, n); }
void free(void *p) { __libc_free(p); }
#define HAVE_MALLOC_COUNTER 1
#else
#define HAVE_MALLOC_COUNTER 0
#endif
#endif
