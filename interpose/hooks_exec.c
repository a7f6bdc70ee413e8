/* The exec family: the image about to be replaced gives up its flight-recorder file first (the new
 * image starts its own, under the same pid and start time, once it holds enough), and takes it up
 * again if the exec fails. Forwarding only: arguments, return value and errno are the real call's.
 * A vfork child passes straight through (the recorder checks the pid: the file is the parent's). */
#include <errno.h>
#include <stdarg.h>
#include <unistd.h>

#include "internal.h"

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execv_fn)(const char *, char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);
typedef int (*execveat_fn)(int, const char *, char *const[], char *const[], int);

static void *real(void **slot, const char *name)
{
    void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (OT_UNLIKELY(!f)) {
        f = ot_next(name);
        __atomic_store_n(slot, f, __ATOMIC_RELEASE);
    }
    return f;
}
#define REAL(type, name)                                                                           \
    static void *slot_##name;                                                                       \
    type f = (type)real(&slot_##name, #name);                                                       \
    if (OT_UNLIKELY(!f)) {                                                                          \
        errno = ENOSYS;                                                                             \
        return -1;                                                                                  \
    }

/* The failed call's errno survives the recorder's bookkeeping. */
static int after(int rc)
{
    int e = errno;
    ot_recorder_exec_failed();
    errno = e;
    return rc;
}

OT_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    REAL(execve_fn, execve);
    ot_recorder_before_exec();
    return after(f(path, argv, envp));
}

OT_EXPORT int execv(const char *path, char *const argv[])
{
    REAL(execv_fn, execv);
    ot_recorder_before_exec();
    return after(f(path, argv));
}

OT_EXPORT int execvp(const char *file, char *const argv[])
{
    REAL(execv_fn, execvp);
    ot_recorder_before_exec();
    return after(f(file, argv));
}

OT_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    REAL(execve_fn, execvpe);
    ot_recorder_before_exec();
    return after(f(file, argv, envp));
}

OT_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
    REAL(fexecve_fn, fexecve);
    ot_recorder_before_exec();
    return after(f(fd, argv, envp));
}

OT_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags)
{
    REAL(execveat_fn, execveat);
    ot_recorder_before_exec();
    return after(f(dirfd, path, argv, envp, flags));
}

/* execl, execlp, execle: the arguments gathered on the stack, as glibc does, then the vector form
 * (our own hook of it). After the NULL that ends the arguments, execle's envp. */
/* glibc declares arg nonnull; a caller may still pass NULL (an empty argv), so the compiler must not
 * fold the test away: first_ is laundered through an empty asm. */
#define GATHER(argv, arg, ap)                                                                      \
    va_list ap;                                                                                     \
    va_start(ap, arg);                                                                              \
    size_t n_ = 0;                                                                                  \
    const char *first_ = arg;                                                                       \
    __asm__("" : "+r"(first_));                                                                     \
    if (first_) {                                                                                   \
        n_ = 1;                                                                                     \
        while (va_arg(ap, const char *)) n_++;                                                      \
    }                                                                                               \
    va_end(ap);                                                                                     \
    char *argv[n_ + 1];                                                                             \
    va_start(ap, arg);                                                                              \
    if (n_) {                                                                                       \
        argv[0] = (char *)first_;                                                                   \
        for (size_t i_ = 1; i_ < n_; i_++) argv[i_] = va_arg(ap, char *);                           \
        (void)va_arg(ap, char *); /* the NULL */                                                   \
    }                                                                                               \
    argv[n_] = NULL

OT_EXPORT int execl(const char *path, const char *arg, ...)
{
    GATHER(argv, arg, ap);
    va_end(ap);
    return execv(path, argv);
}

OT_EXPORT int execlp(const char *file, const char *arg, ...)
{
    GATHER(argv, arg, ap);
    va_end(ap);
    return execvp(file, argv);
}

OT_EXPORT int execle(const char *path, const char *arg, ...)
{
    GATHER(argv, arg, ap);
    char *const *envp = va_arg(ap, char *const *);
    va_end(ap);
    return execve(path, argv, envp);
}
