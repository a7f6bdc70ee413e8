/* dlsym/dlvsym hooks: how programs that dlopen libcuda (PyTorch) or carry a static runtime (nvcc's
 * default) reach the driver. A lookup of a CUDA name we wrap returns our wrapper around what the
 * real lookup found; every other lookup must behave exactly as if we were not here, at almost no
 * cost, and without loading anything or taking any lock of ours (a heavy dlsym hook is a known
 * cause of hangs).
 *
 * RTLD_NEXT means "after the caller's object", and glibc finds the caller from the return address.
 * So the entry points are assembly trampolines: they ask a tiny C filter whether the name is one of
 * ours and otherwise *jump* to the real function, which then sees the program's return address,
 * whatever the compiler and its flags. For our names the slow path gets the caller's return address
 * as an argument and emulates RTLD_NEXT and RTLD_DEFAULT relative to it.
 *
 * Both symbol versions a program may be bound to are exported: dlsym@GLIBC_2.2.5 (programs linked
 * before glibc 2.34, when dlsym lived in libdl) and dlsym@@GLIBC_2.34; same for dlvsym. */
#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>

#include "cuda_internal.h"

#if !defined(__x86_64__)
#error "hooks_dlsym.c: the trampolines are written for x86-64"
#endif

typedef void *(*dlsym_fn)(void *, const char *);
typedef void *(*dlvsym_fn)(void *, const char *, const char *);

/* Read by the trampolines. Set once, before the first jump through them. */
__attribute__((visibility("hidden"))) void *ot_dlsym_next_ptr;
__attribute__((visibility("hidden"))) void *ot_dlvsym_next_ptr;
static _Atomic int next_state; /* 0 not resolved, 1 resolving, 2 resolved */

int ot_dlsym_filter(const char *name);
void *ot_dlsym_slow(void *handle, const char *name, const void *caller);
void *ot_dlvsym_slow(void *handle, const char *name, const char *version, const void *caller);

/* Trampolines. The filter call keeps the stack 16-byte aligned and every argument register
 * preserved; the fast path is a plain jump, so the real function returns straight to the program. */
__asm__(".text\n"
        ".p2align 4\n"
        ".globl ot_dlsym_hook_new\n"
        ".type ot_dlsym_hook_new, @function\n"
        ".globl ot_dlsym_hook_old\n"
        ".type ot_dlsym_hook_old, @function\n"
        "ot_dlsym_hook_new:\n"
        "ot_dlsym_hook_old:\n"
        ".cfi_startproc\n"
        "    push %rdi\n"
        ".cfi_adjust_cfa_offset 8\n"
        "    push %rsi\n"
        ".cfi_adjust_cfa_offset 8\n"
        "    sub $8, %rsp\n"
        ".cfi_adjust_cfa_offset 8\n"
        "    mov %rsi, %rdi\n"
        "    call ot_dlsym_filter\n"
        "    add $8, %rsp\n"
        ".cfi_adjust_cfa_offset -8\n"
        "    pop %rsi\n"
        ".cfi_adjust_cfa_offset -8\n"
        "    pop %rdi\n"
        ".cfi_adjust_cfa_offset -8\n"
        "    test %eax, %eax\n"
        "    jnz 1f\n"
        "    jmp *ot_dlsym_next_ptr(%rip)\n"
        "1:  mov (%rsp), %rdx\n"
        "    jmp ot_dlsym_slow\n"
        ".cfi_endproc\n"
        ".size ot_dlsym_hook_new, .-ot_dlsym_hook_new\n"
        ".size ot_dlsym_hook_old, .-ot_dlsym_hook_old\n"
        "\n"
        ".p2align 4\n"
        ".globl ot_dlvsym_hook_new\n"
        ".type ot_dlvsym_hook_new, @function\n"
        ".globl ot_dlvsym_hook_old\n"
        ".type ot_dlvsym_hook_old, @function\n"
        "ot_dlvsym_hook_new:\n"
        "ot_dlvsym_hook_old:\n"
        ".cfi_startproc\n"
        "    push %rdi\n"
        ".cfi_adjust_cfa_offset 8\n"
        "    push %rsi\n"
        ".cfi_adjust_cfa_offset 8\n"
        "    push %rdx\n"
        ".cfi_adjust_cfa_offset 8\n"
        "    mov %rsi, %rdi\n"
        "    call ot_dlsym_filter\n"
        "    pop %rdx\n"
        ".cfi_adjust_cfa_offset -8\n"
        "    pop %rsi\n"
        ".cfi_adjust_cfa_offset -8\n"
        "    pop %rdi\n"
        ".cfi_adjust_cfa_offset -8\n"
        "    test %eax, %eax\n"
        "    jnz 1f\n"
        "    jmp *ot_dlvsym_next_ptr(%rip)\n"
        "1:  mov (%rsp), %rcx\n"
        "    jmp ot_dlvsym_slow\n"
        ".cfi_endproc\n"
        ".size ot_dlvsym_hook_new, .-ot_dlvsym_hook_new\n"
        ".size ot_dlvsym_hook_old, .-ot_dlvsym_hook_old\n"
        ".symver ot_dlsym_hook_new, dlsym@@GLIBC_2.34, remove\n"
        ".symver ot_dlsym_hook_old, dlsym@GLIBC_2.2.5, remove\n"
        ".symver ot_dlvsym_hook_new, dlvsym@@GLIBC_2.34, remove\n"
        ".symver ot_dlvsym_hook_old, dlvsym@GLIBC_2.2.5, remove\n");

/* ---------------------------------------------------------------- the real functions */

static void resolve_next(void)
{
    int expected = 0;
    if (!atomic_compare_exchange_strong(&next_state, &expected, 1)) {
        /* Another thread is resolving (a few lookups), or this thread re-entered: then the
         * pointers are still NULL and the filter sends the call to the slow path, which copes. */
        return;
    }
    /* What comes after us (libc, or another interposer preloaded after us), found by the real
     * dlvsym that resolve.c reads out of libc without calling any dlsym by name. */
    void *s = ot_real_dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!s) s = ot_real_dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    void *v = ot_real_dlvsym(RTLD_NEXT, "dlvsym", "GLIBC_2.34");
    if (!v) v = ot_real_dlvsym(RTLD_NEXT, "dlvsym", "GLIBC_2.2.5");
    __atomic_store_n(&ot_dlvsym_next_ptr, v, __ATOMIC_RELEASE);
    __atomic_store_n(&ot_dlsym_next_ptr, s, __ATOMIC_RELEASE);
    atomic_store(&next_state, 2);
}

static void *next_dlsym(void *h, const char *name)
{
    dlsym_fn f = (dlsym_fn)__atomic_load_n(&ot_dlsym_next_ptr, __ATOMIC_ACQUIRE);
    return f ? f(h, name) : ot_real_dlsym(h, name);
}

static void *next_dlvsym(void *h, const char *name, const char *version)
{
    dlvsym_fn f = (dlvsym_fn)__atomic_load_n(&ot_dlvsym_next_ptr, __ATOMIC_ACQUIRE);
    return f ? f(h, name, version) : ot_real_dlvsym(h, name, version);
}

/* ---------------------------------------------------------------- the filter (every call) */

/* Non-zero for the names we wrap; also for every name while the real functions are unknown, so
 * that the trampoline never jumps through a NULL pointer. */
__attribute__((visibility("hidden"), used)) int ot_dlsym_filter(const char *name)
{
    if (OT_UNLIKELY(atomic_load_explicit(&next_state, memory_order_acquire) != 2)) {
        resolve_next();
        if (!__atomic_load_n(&ot_dlsym_next_ptr, __ATOMIC_ACQUIRE) ||
            !__atomic_load_n(&ot_dlvsym_next_ptr, __ATOMIC_ACQUIRE))
            return 1;
    }
    if (OT_LIKELY(!name || name[0] != 'c' || name[1] != 'u')) return 0;
    return ot_cu_wraps_symbol(name) || ot_cudart_wraps_symbol(name);
}

/* ---------------------------------------------------------------- the slow path (our names) */

static struct link_map *object_of(const void *addr)
{
    Dl_info info;
    struct link_map *lm = NULL;
    if (!addr || !dladdr1(addr, &info, (void **)&lm, RTLD_DL_LINKMAP)) return NULL;
    return lm;
}

/* dlsym/dlvsym in one object's scope. A link_map is not a handle until dlopen has built its search
 * list (not done for start-up libraries): ask dlopen for the handle of an object already loaded. */
static void *lookup_in(struct link_map *l, const char *name, const char *version)
{
    void *h = dlopen(l->l_name && l->l_name[0] ? l->l_name : NULL, RTLD_LAZY | RTLD_NOLOAD);
    if (!h) return NULL;
    void *r = version ? next_dlvsym(h, name, version) : next_dlsym(h, name);
    dlclose(h);
    return r;
}

/* RTLD_NEXT as seen from `caller`: the first object after the caller's, in load order, that
 * defines the name itself. (glibc walks the caller's lookup scope; for objects in the global scope
 * that is this order. An RTLD_LOCAL library's own dependencies are not told apart: documented.) */
static void *emulate_next(const char *name, const char *version, const void *caller)
{
    struct link_map *me = object_of(caller);
    if (!me) return version ? next_dlvsym(RTLD_DEFAULT, name, version) : next_dlsym(RTLD_DEFAULT, name);
    for (struct link_map *l = me->l_next; l; l = l->l_next) {
        void *r = lookup_in(l, name, version);
        if (r && object_of(r) == l) return r;
    }
    return NULL;
}

/* RTLD_DEFAULT from a library loaded RTLD_LOCAL also sees that library's own dependencies. */
static void *emulate_default(const char *name, const char *version, const void *caller)
{
    void *r = version ? next_dlvsym(RTLD_DEFAULT, name, version) : next_dlsym(RTLD_DEFAULT, name);
    if (r) return r;
    struct link_map *me = object_of(caller);
    return me ? lookup_in(me, name, version) : NULL;
}

static void *after_lookup(const char *name, void *r, const void *caller)
{
    if (!r) return NULL;
    if (!ot_cu_wraps_symbol(name) && !ot_cudart_wraps_symbol(name)) return r; /* degraded early path */
    if (OT_UNLIKELY(ot_state.initialized == 0)) ot_init();
    if (ot_is_own_address(r)) {
        /* The lookup found our own export: we come first in the global scope. Without us it would
         * have gone on to the global scope after us, then (RTLD_DEFAULT) the caller's own
         * dependencies. Never answer for a symbol the process does not have. */
        void *alt = ot_next(name);
        if (!alt || ot_is_own_address(alt)) {
            struct link_map *me = object_of(caller);
            alt = me ? lookup_in(me, name, NULL) : NULL;
        }
        return alt && !ot_is_own_address(alt) ? r : NULL;
    }
    if (!ot_ready() || !ot_opt.cuda) return r;
    void *w = ot_cu_wrap_symbol(name, r);
    if (!w) w = ot_cudart_wrap_symbol(name, r);
    return w ? w : r;
}

__attribute__((visibility("hidden"))) void *ot_dlsym_slow(void *handle, const char *name, const void *caller)
{
    void *r;
    if (handle == RTLD_NEXT) r = emulate_next(name, NULL, caller);
    else if (handle == RTLD_DEFAULT) r = emulate_default(name, NULL, caller);
    else r = next_dlsym(handle, name);
    return name ? after_lookup(name, r, caller) : r;
}

__attribute__((visibility("hidden"))) void *ot_dlvsym_slow(void *handle, const char *name, const char *version,
                                                            const void *caller)
{
    void *r;
    if (handle == RTLD_NEXT) r = emulate_next(name, version, caller);
    else if (handle == RTLD_DEFAULT) r = emulate_default(name, version, caller);
    else r = next_dlvsym(handle, name, version);
    return name ? after_lookup(name, r, caller) : r;
}

/* ---------------------------------------------------------------- our own address range */

/* The linker marks our image's extent; hidden references bind to our own copies. */
extern const char __ehdr_start[] __attribute__((visibility("hidden")));
extern const char _end[] __attribute__((visibility("hidden")));

bool ot_is_own_address(const void *p)
{
    return (const char *)p >= __ehdr_start && (const char *)p < _end;
}
