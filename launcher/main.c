/* oomtrace launcher: option parsing and the subcommand table. The default command runs a program
 * with liboomtrace.so preloaded (keeping any existing LD_PRELOAD) under the supervisor
 * (supervise.c), or by exec with --exec; `oomtrace postmortem` is postmortem.c. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h" /* OT_VERSION */
#include "launcher.h"

#ifndef OT_LIBDIR
#define OT_LIBDIR "/usr/local/lib"
#endif

struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
};
/* One table of subcommands, as git.c's commands[] and perf.c's: a first argument that names one
 * runs it (oomtrace -- NAME runs a program called NAME); anything else is a program to run. */
static const struct command commands[] = {
    {"postmortem", ot_cmd_postmortem, "reports for state files whose process died without one (see --help there)"},
    {NULL, NULL, NULL},
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: oomtrace [OPTIONS] [--] PROGRAM [ARGS...]\n"
            "       oomtrace postmortem [--report=TEMPLATE] [--log=DEST] [STATE_FILE | DIR]...\n"
            "Runs PROGRAM with liboomtrace.so preloaded. When an allocation fails, a report (what was\n"
            "asked for, free/total memory, limits, who holds memory, the failing stack) is written\n"
            "before the error is handed back. Otherwise the program runs unchanged and silently.\n"
            "The launcher stays PROGRAM's parent: it forwards signals to it, and when PROGRAM is\n"
            "killed (SIGKILL from the OOM killer, for one) it writes a \"killed\" report from the\n"
            "state file PROGRAM's recorder left behind, then dies by the same signal.\n"
            "\n"
            "  -o, --report=TEMPLATE     JSON report path (default oomtrace.%%e.%%p.%%n.json; none = off)\n"
            "                            %%p pid, %%h host, %%e program name, %%r rank, %%n report number\n"
            "  -l, --log=DEST            text report: stderr (default), none, or a path template\n"
            "  -s, --stacks=MODE         sampled (default), all (a stack for every allocation), none\n"
            "      --stack-depth=N       frames per stack (1-64, default 32)\n"
            "      --sample-bytes=SIZE   mean bytes between sampled small allocations (default 512K)\n"
            "      --stack-min-bytes=SIZE  allocations this big always get a stack (default 64K)\n"
            "      --max-reports=N       full reports per process; later failures are counted (default 3)\n"
            "      --no-cuda             do not intercept CUDA\n"
            "      --options=STRING      extra OOMTRACE_OPTIONS items (key=value:key=value)\n"
            "      --exec                replace the launcher with PROGRAM (no supervisor, no killed report)\n"
            "  -h, --help                this text\n"
            "  -V, --version             print the version\n"
            "\n"
            "Options are passed in OOMTRACE_OPTIONS; an existing OOMTRACE_OPTIONS is kept and these are\n"
            "appended (later items win). The exit status is PROGRAM's, a death by signal included.\n"
            "\n"
            "Commands:\n");
    for (const struct command *c = commands; c->name; c++) fprintf(out, "  %-12s %s\n", c->name, c->help);
}

static bool exists(const char *p)
{
    return access(p, R_OK) == 0;
}

static bool find_library(char *out, size_t cap)
{
    const char *env = getenv("OOMTRACE_LIB");
    if (env && *env) {
        snprintf(out, cap, "%s", env);
        return exists(out);
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = 0;
        char *dir = dirname(self);
        snprintf(out, cap, "%s/liboomtrace.so", dir);
        if (exists(out)) return true;
        snprintf(out, cap, "%s/../lib/liboomtrace.so", dir);
        if (exists(out)) {
            char real[PATH_MAX];
            if (realpath(out, real)) snprintf(out, cap, "%s", real);
            return true;
        }
    }
    snprintf(out, cap, "%s/liboomtrace.so", OT_LIBDIR);
    return exists(out);
}

/* Finds PROGRAM on PATH as execvp would, to warn about setuid and static binaries. */
static bool locate(const char *prog, char *out, size_t cap)
{
    if (strchr(prog, '/')) {
        snprintf(out, cap, "%s", prog);
        return access(out, X_OK) == 0;
    }
    const char *path = getenv("PATH");
    if (!path) path = "/usr/bin:/bin";
    while (*path) {
        const char *e = strchr(path, ':');
        size_t len = e ? (size_t)(e - path) : strlen(path);
        snprintf(out, cap, "%.*s/%s", (int)len, len ? path : ".", prog);
        if (access(out, X_OK) == 0) return true;
        path += len + (e ? 1 : 0);
    }
    return false;
}

static void warn_if_untraceable(const char *prog)
{
    char path[PATH_MAX];
    if (!locate(prog, path, sizeof path)) return;
    struct stat st;
    if (stat(path, &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID)) && getuid() != 0)
        fprintf(stderr, "oomtrace: warning: %s is setuid/setgid: the dynamic loader ignores LD_PRELOAD for it "
                        "(secure-execution mode), so nothing will be tracked\n", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    Elf64_Ehdr eh;
    if (read(fd, &eh, sizeof eh) == (ssize_t)sizeof eh && !memcmp(eh.e_ident, ELFMAG, SELFMAG) &&
        eh.e_ident[EI_CLASS] == ELFCLASS64) {
        bool interp = false;
        for (int i = 0; i < eh.e_phnum; i++) {
            Elf64_Phdr ph;
            if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (uint64_t)i * eh.e_phentsize)) != (ssize_t)sizeof ph)
                break;
            if (ph.p_type == PT_INTERP) interp = true;
        }
        if (!interp)
            fprintf(stderr, "oomtrace: warning: %s is statically linked: there is no dynamic malloc to "
                            "interpose, so nothing will be tracked\n", path);
    }
    close(fd);
}

static void add_opt(char *opts, size_t cap, const char *key, const char *val)
{
    size_t n = strlen(opts);
    snprintf(opts + n, cap - n, "%s%s%s%s", n ? ":" : "", key, key[0] ? "=" : "", val);
}

int ot_cmd_run(int argc, char **argv)
{
    enum { O_DEPTH = 256, O_SAMPLE, O_MIN, O_MAXREP, O_NOCUDA, O_OPTIONS, O_EXEC };
    static const struct option longopts[] = {
        {"report", required_argument, 0, 'o'},        {"log", required_argument, 0, 'l'},
        {"stacks", required_argument, 0, 's'},        {"stack-depth", required_argument, 0, O_DEPTH},
        {"sample-bytes", required_argument, 0, O_SAMPLE}, {"stack-min-bytes", required_argument, 0, O_MIN},
        {"max-reports", required_argument, 0, O_MAXREP}, {"no-cuda", no_argument, 0, O_NOCUDA},
        {"options", required_argument, 0, O_OPTIONS}, {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},             {"exec", no_argument, 0, O_EXEC},
        {0, 0, 0, 0}};
    ot_sv_opts_t sv = {false, ""};
    char opts[4096] = "";
    const char *old = getenv("OOMTRACE_OPTIONS");
    if (old && *old) snprintf(opts, sizeof opts, "%s", old);
    int c;
    /* '+': stop at the first non-option, so the program's own options are left alone. */
    while ((c = getopt_long(argc, argv, "+o:l:s:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': add_opt(opts, sizeof opts, "report", optarg); break;
        case 'l': add_opt(opts, sizeof opts, "log", optarg); break;
        case 's':
            if (strcmp(optarg, "sampled") && strcmp(optarg, "all") && strcmp(optarg, "none")) {
                fprintf(stderr, "oomtrace: bad --stacks '%s': valid values are sampled, all, none\n", optarg);
                return 2;
            }
            add_opt(opts, sizeof opts, "stacks", optarg);
            break;
        case O_DEPTH: add_opt(opts, sizeof opts, "stack_depth", optarg); break;
        case O_SAMPLE: add_opt(opts, sizeof opts, "sample_bytes", optarg); break;
        case O_MIN: add_opt(opts, sizeof opts, "stack_min_bytes", optarg); break;
        case O_MAXREP: add_opt(opts, sizeof opts, "max_reports", optarg); break;
        case O_NOCUDA: add_opt(opts, sizeof opts, "cuda", "0"); break;
        case O_OPTIONS: add_opt(opts, sizeof opts, "", optarg); break;
        case O_EXEC: sv.exec_only = true; break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("oomtrace %s\n", OT_VERSION); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return 2;
    }
    char lib[PATH_MAX];
    if (!find_library(lib, sizeof lib)) {
        fprintf(stderr, "oomtrace: cannot find liboomtrace.so (looked beside this launcher, in ../lib and in %s; "
                        "set OOMTRACE_LIB)\n", OT_LIBDIR);
        return 127;
    }
    char preload[8192];
    const char *existing = getenv("LD_PRELOAD");
    snprintf(preload, sizeof preload, "%s%s%s", lib, existing && *existing ? ":" : "", existing ? existing : "");
    setenv("LD_PRELOAD", preload, 1);
    if (opts[0]) setenv("OOMTRACE_OPTIONS", opts, 1);
    sv.options = opts;
    warn_if_untraceable(argv[optind]);
    return ot_supervise(argv + optind, &sv);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        for (const struct command *c = commands; c->name; c++)
            if (!strcmp(argv[1], c->name)) return c->fn(argc - 1, argv + 1);
    return ot_cmd_run(argc, argv);
}
