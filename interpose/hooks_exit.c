/* _exit and _Exit: a process leaving without running its destructors (a fork child's usual way,
 * Python's os._exit) is still a normal exit, so its flight-recorder file goes first; then the real
 * call. Never returns; a vfork child's _exit leaves the parent's file alone (the recorder checks). */
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

typedef void (*exit_fn)(int);

static __attribute__((noreturn)) void leave(int status)
{
    ot_recorder_close();
    static void *slot;
    exit_fn f = (exit_fn)__atomic_load_n(&slot, __ATOMIC_ACQUIRE);
    if (!f) {
        f = (exit_fn)ot_next("_exit");
        __atomic_store_n(&slot, (void *)f, __ATOMIC_RELEASE);
    }
    if (f) f(status);
    for (;;) syscall(SYS_exit_group, status);
}

OT_EXPORT void _exit(int status) { leave(status); }
OT_EXPORT void _Exit(int status) { leave(status); }
