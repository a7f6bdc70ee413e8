/* e2e target (recorder.sh, pressure.sh): allocates and touches MIB mebibytes in blocks of BLOCK KiB
 * from grow_buffers(), prints "ready <pid> <VmSize KiB>" and then ends as told:
 *   rec_grow MIB BLOCK_KIB [hold|exit|_exit|fork|forkexit|exec|small|slow]
 * hold: sleeps until killed (the test SIGKILLs it); exit / _exit: returns / calls _exit(0);
 * fork: a child that grows by MIB again and holds (its pid on a second "child <pid>" line), the
 * parent holds too; forkexit: a child that _exits at once after growing, the parent exits after
 * it; exec: execs /bin/true (the new image small); rawexec: execs itself with a raw execve system
 * call (no hook sees it) as "rec_grow MIB BLOCK_KIB hold"; spawn: vfork + _exit, vfork + exec of
 * /bin/true and posix_spawn of /bin/true, then holds; fail: a malloc that fails (2^60 bytes), then
 * holds; slow: one block every 20 ms, then holds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void **keep;
static size_t nkeep;
static void *volatile sink;

__attribute__((noinline)) static void grow_buffers(size_t mib, size_t block_kib, int slow)
{
    size_t block = block_kib * 1024, n = mib * 1024 / block_kib;
    keep = realloc(keep, (nkeep + n) * sizeof *keep);
    for (size_t i = 0; i < n; i++) {
        char *p = malloc(block);
        if (!p) { fprintf(stderr, "malloc failed\n"); exit(3); }
        memset(p, 1, block);
        keep[nkeep++] = p;
        if (slow) usleep(20000);
    }
}

static long vm_kib(void)
{
    long pages = -1;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f && fscanf(f, "%ld", &pages) != 1) pages = -1;
    if (f) fclose(f);
    return pages < 0 ? -1 : pages * (sysconf(_SC_PAGESIZE) / 1024);
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
    size_t kib = argc > 2 ? strtoul(argv[2], NULL, 10) : 1024;
    const char *mode = argc > 3 ? argv[3] : "hold";
    grow_buffers(mib, kib, !strcmp(mode, "slow"));
    /* Twice past the recorder's 100 ms, a flush (300 KiB) after each: the state on file is the
     * final one, and its history has a sample for each whatever the speed of the growth (a fast
     * growth may have made only the first sample). */
    for (int i = 0; i < 2; i++) {
        usleep(150000);
        sink = malloc(300 << 10);
    }
    printf("ready %d %ld\n", (int)getpid(), vm_kib());
    fflush(stdout);
    if (!strcmp(mode, "exit")) return 0;
    if (!strcmp(mode, "_exit")) _exit(0);
    if (!strcmp(mode, "exec")) { execl("/bin/true", "true", (char *)NULL); return 5; }
    if (!strcmp(mode, "rawexec")) {
        char *args[] = {argv[0], argv[1], argv[2], "hold", NULL};
        extern char **environ;
        syscall(SYS_execve, "/proc/self/exe", args, environ);
        return 5;
    }
    if (!strcmp(mode, "fail")) {
        sink = malloc((size_t)1 << 60);
        printf("failed %s\n", sink ? "no" : "yes");
        fflush(stdout);
    }
    if (!strcmp(mode, "spawn")) {
        pid_t c = vfork();
        if (c == 0) _exit(0);
        waitpid(c, NULL, 0);
        c = vfork();
        if (c == 0) { execl("/bin/true", "true", (char *)NULL); _exit(127); }
        waitpid(c, NULL, 0);
        extern char **environ;
        char *args[] = {"true", NULL};
        if (posix_spawn(&c, "/bin/true", NULL, NULL, args, environ) == 0) waitpid(c, NULL, 0);
        printf("spawned\n");
        fflush(stdout);
    }
    if (!strcmp(mode, "fork") || !strcmp(mode, "forkexit")) {
        pid_t c = fork();
        if (c == 0) {
            grow_buffers(mib, kib, 0);
            usleep(150000);
            sink = malloc(300 << 10);
            printf("child %d\n", (int)getpid());
            fflush(stdout);
            if (!strcmp(mode, "forkexit")) _exit(0);
            for (;;) pause();
        }
        if (!strcmp(mode, "forkexit")) { waitpid(c, NULL, 0); return 0; }
    }
    for (;;) pause();
}
