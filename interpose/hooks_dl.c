/* dlclose: forward, then drop the unwinder's address-keyed cache, since other code may later be
 * mapped where the closed library was (libunwind#16, and PITFALLS: unw_flush_cache after dlclose).
 * dlopen is deliberately not wrapped: glibc resolves a bare name against the RUNPATH of the
 * *calling* object, which a wrapper would change; RTLD_DEEPBIND is therefore left alone too. */
#include <dlfcn.h>

#include "internal.h"

typedef int (*dlclose_fn)(void *);
static dlclose_fn real_dlclose;

OT_EXPORT int dlclose(void *handle)
{
    dlclose_fn f = __atomic_load_n(&real_dlclose, __ATOMIC_ACQUIRE);
    if (OT_UNLIKELY(!f)) {
        f = (dlclose_fn)ot_next("dlclose");
        if (!f) return -1;
        __atomic_store_n(&real_dlclose, f, __ATOMIC_RELEASE);
    }
    int rc = f(handle);
    if (rc == 0) ot_stack_flush();
    return rc;
}
