/* e2e target (host_fork_exec.sh): forks repeatedly while 4 other threads allocate and free without
 * pause, so a fork can land while any of them is inside the allocator or the tracker (table,
 * call-site table, unwinder). Each child allocates (small and stack-taking big blocks), frees and
 * exits normally; a child that is not done within 5 s counts as hung (deadlock) and is killed.
 *   fork_mt [FORKS] [fail]
 * With "fail", each child also makes one allocation fail (a report written in the child) and the
 * parent prints each child's pid. Prints "parent pid P" first and "forks N ok M hung H bad B" last;
 * exit status 0 only if every child exited 0 in time. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static atomic_int stop;

static void *churn(void *arg)
{
    uint64_t s = 88172645463325252ull + (uintptr_t)arg;
    void *slots[32] = {0};
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        unsigned i = (unsigned)(s % 32);
        if (slots[i]) {
            free(slots[i]);
            slots[i] = NULL;
        } else {
            size_t n = (s >> 8) % 4 == 0 ? 70000 + (s >> 20) % 50000 : 1 + (s >> 20) % 2000;
            slots[i] = (s >> 40) % 2 ? malloc(n) : calloc(1, n);
            if (slots[i]) memset(slots[i], 1, n < 32 ? n : 32);
        }
    }
    for (unsigned i = 0; i < 32; i++) free(slots[i]);
    return NULL;
}

static int fail_mode;

static __attribute__((noinline)) int child_work(void)
{
    if (fail_mode) {
        void *huge = malloc((size_t)1 << 50);
        if (huge) return 7;
    }
    char *a = malloc(100), *b = malloc(200000), *c = calloc(10, 1000);
    if (!a || !b || !c) return 5;
    b[0] = a[0] = c[0] = 1;
    char *d = realloc(a, 5000);
    if (!d) return 6;
    free(d);
    free(b);
    free(c);
    return 0;
}

int main(int argc, char **argv)
{
    int forks = argc > 1 ? atoi(argv[1]) : 40;
    fail_mode = argc > 2 && !strcmp(argv[2], "fail");
    printf("parent pid %d\n", (int)getpid());
    pthread_t th[4];
    for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, churn, (void *)(intptr_t)i);
    int ok = 0, hung = 0, bad = 0;
    for (int k = 0; k < forks; k++) {
        struct timespec pause = {0, 2000000};
        nanosleep(&pause, NULL);
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) { perror("fork"); bad++; continue; }
        if (pid == 0) exit(child_work());
        if (fail_mode) printf("child pid %d\n", (int)pid);
        int st = 0, waited_ms = 0;
        pid_t r;
        while ((r = waitpid(pid, &st, WNOHANG)) == 0 && waited_ms < 5000) {
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
            waited_ms++;
        }
        if (r == 0) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            printf("child %d (fork %d) hung for 5 s: killed\n", (int)pid, k);
            hung++;
            if (hung == 2) {
                printf("giving up after 2 hung children\n");
                forks = k + 1;
                break;
            }
        } else if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
            ok++;
        } else {
            printf("child %d (fork %d) ended badly: %s %d\n", (int)pid, k, WIFEXITED(st) ? "exit" : "signal",
                   WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            bad++;
        }
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    printf("forks %d ok %d hung %d bad %d\n", forks, ok, hung, bad);
    return ok == forks ? 0 : 1;
}
