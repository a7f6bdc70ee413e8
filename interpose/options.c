/* OOMTRACE_OPTIONS parsing ("key=value:key=value", the sanitizers' convention) and report path
 * templates. Runs at start-up before libc may be fully usable: no malloc, no stdio, no getenv. */
#include <unistd.h>

#include "internal.h"

ot_options_t ot_opt;

void ot_options_defaults(ot_options_t *o)
{
    ot_memset(o, 0, sizeof *o);
    ot_strlcpy(o->report, "oomtrace.%e.%p.%n.json", sizeof o->report);
    ot_strlcpy(o->log, "stderr", sizeof o->log);
    o->stacks = OT_STACKS_SAMPLED;
    o->stack_depth = 32;
    o->sample_bytes = 512 * 1024;
    o->stack_min_bytes = 64 * 1024;
    o->max_reports = 3;
    o->top_sites = 10;
    o->cuda = true;
    o->verbose = false;
    o->crash_signals = true;
    o->snapshot_signal = 0;
    o->recorder = true;
    o->recorder_bytes = 1024 * 1024;
    o->recorder_min_bytes = OT_RECORDER_MIN_BYTES;
    o->pressure = 0.9;
    o->leak_builtin_suppressions = true;
    o->leak_exitcode = 23;
    ot_strlcpy(o->libdw, "libdw.so.1", sizeof o->libdw);
}

/* A fraction "0", "1", "0.9", ".95": three decimals at most, no suffix. */
static bool parse_fraction(const char *v, size_t n, double *out)
{
    size_t i = 0;
    uint64_t whole = 0, frac = 0, scale = 1;
    bool any = false;
    while (i < n && v[i] >= '0' && v[i] <= '9' && whole < 10) whole = whole * 10 + (uint64_t)(v[i++] - '0'), any = true;
    if (i < n && v[i] == '.') {
        i++;
        while (i < n && v[i] >= '0' && v[i] <= '9' && scale < 1000000) {
            frac = frac * 10 + (uint64_t)(v[i++] - '0');
            scale *= 10;
            any = true;
        }
    }
    if (!any || i != n) return false;
    *out = (double)whole + (double)frac / (double)scale;
    return true;
}

static bool key_is(const char *k, size_t kl, const char *name)
{
    return ot_strlen(name) == kl && !ot_strncmp(k, name, kl);
}

static bool parse_bool(const char *v, size_t n, bool *out)
{
    if ((n == 1 && v[0] == '1') || (n == 4 && !ot_strncmp(v, "true", 4)) || (n == 3 && !ot_strncmp(v, "yes", 3)) ||
        (n == 2 && !ot_strncmp(v, "on", 2))) {
        *out = true;
        return true;
    }
    if ((n == 1 && v[0] == '0') || (n == 5 && !ot_strncmp(v, "false", 5)) || (n == 2 && !ot_strncmp(v, "no", 2)) ||
        (n == 3 && !ot_strncmp(v, "off", 3))) {
        *out = false;
        return true;
    }
    return false;
}

static void bad(ot_buf_t *err, const char *k, size_t kl, const char *v, size_t vl, const char *valid)
{
    ot_buf_puts(err, "oomtrace: ignoring bad option '");
    ot_buf_putn(err, k, kl);
    if (v) {
        ot_buf_putc(err, '=');
        ot_buf_putn(err, v, vl);
    }
    ot_buf_puts(err, "' in OOMTRACE_OPTIONS: ");
    ot_buf_puts(err, valid);
    ot_buf_putc(err, '\n');
}

static bool set_string(char *dst, size_t cap, const char *v, size_t n)
{
    if (n == 0 || n >= cap) return false;
    ot_memcpy(dst, v, n);
    dst[n] = 0;
    return true;
}

int ot_options_parse(const char *s, ot_options_t *o, ot_buf_t *err)
{
    static const char keys[] = "valid keys are report, log, stacks, stack_depth, sample_bytes, stack_min_bytes, "
                               "max_reports, top_sites, cuda, verbose, crash_signals, snapshot_signal, recorder, recorder_bytes, recorder_min_bytes, state_dir, pressure, "
                               "report_at_exit, leak_check, leak_exitcode, leak_min_bytes, leak_report_reachable, "
                               "leak_builtin_suppressions, suppressions, junit, libdw";
    int errors = 0;
    if (!s) return 0;
    while (*s) {
        const char *k = s;
        while (*s && *s != ':') s++;
        const char *end = s;
        if (*s == ':') s++;
        if (end == k) continue; /* empty item, e.g. "a=1::b=2" */
        const char *eq = k;
        while (eq < end && *eq != '=') eq++;
        size_t kl = (size_t)(eq - k);
        if (eq == end) {
            bad(err, k, kl, NULL, 0, "expected key=value");
            errors++;
            continue;
        }
        const char *v = eq + 1;
        size_t vl = (size_t)(end - v);
        uint64_t num;
        bool b;
        if (key_is(k, kl, "report")) {
            if (vl == 4 && !ot_strncmp(v, "none", 4)) o->report[0] = 0;
            else if (!set_string(o->report, sizeof o->report, v, vl)) {
                bad(err, k, kl, v, vl, "expected a path template (%p %h %e %r %n) or none");
                errors++;
            }
        } else if (key_is(k, kl, "log")) {
            if (!set_string(o->log, sizeof o->log, v, vl)) {
                bad(err, k, kl, v, vl, "expected stderr, none or a path template");
                errors++;
            }
        } else if (key_is(k, kl, "stacks")) {
            if (vl == 7 && !ot_strncmp(v, "sampled", 7)) o->stacks = OT_STACKS_SAMPLED;
            else if (vl == 3 && !ot_strncmp(v, "all", 3)) o->stacks = OT_STACKS_ALL;
            else if (vl == 4 && !ot_strncmp(v, "none", 4)) o->stacks = OT_STACKS_NONE;
            else {
                bad(err, k, kl, v, vl, "valid values are sampled, all, none");
                errors++;
            }
        } else if (key_is(k, kl, "stack_depth")) {
            if (!ot_parse_size(v, vl, &num) || num < 1 || num > OT_MAX_FRAMES) {
                bad(err, k, kl, v, vl, "expected a number from 1 to 64");
                errors++;
            } else {
                o->stack_depth = (unsigned)num;
            }
        } else if (key_is(k, kl, "sample_bytes")) {
            if (!ot_parse_size(v, vl, &num) || num < 1 || num > (1ull << 40)) {
                bad(err, k, kl, v, vl, "expected a size such as 512K (1 = a stack for every allocation)");
                errors++;
            } else {
                o->sample_bytes = num;
            }
        } else if (key_is(k, kl, "stack_min_bytes")) {
            if (!ot_parse_size(v, vl, &num)) {
                bad(err, k, kl, v, vl, "expected a size such as 64K");
                errors++;
            } else {
                o->stack_min_bytes = num;
            }
        } else if (key_is(k, kl, "max_reports")) {
            if (!ot_parse_size(v, vl, &num) || num > 1000000) {
                bad(err, k, kl, v, vl, "expected a number of full reports (0 to 1000000)");
                errors++;
            } else {
                o->max_reports = (unsigned)num;
            }
        } else if (key_is(k, kl, "top_sites")) {
            if (!ot_parse_size(v, vl, &num) || num > 1000) {
                bad(err, k, kl, v, vl, "expected a number from 0 to 1000");
                errors++;
            } else {
                o->top_sites = (unsigned)num;
            }
        } else if (key_is(k, kl, "cuda")) {
            if (!parse_bool(v, vl, &b)) {
                bad(err, k, kl, v, vl, "valid values are 0 and 1");
                errors++;
            } else {
                o->cuda = b;
            }
        } else if (key_is(k, kl, "recorder")) {
            if (!parse_bool(v, vl, &b)) {
                bad(err, k, kl, v, vl, "valid values are 0 and 1");
                errors++;
            } else {
                o->recorder = b;
            }
        } else if (key_is(k, kl, "recorder_bytes")) {
            if (!ot_parse_size(v, vl, &num) || num < 256 * 1024 || num > 64ull * 1024 * 1024) {
                bad(err, k, kl, v, vl, "expected a size from 256K to 64M");
                errors++;
            } else {
                o->recorder_bytes = num;
            }
        } else if (key_is(k, kl, "recorder_min_bytes")) {
            if (!ot_parse_size(v, vl, &num) || num > (1ull << 50)) {
                bad(err, k, kl, v, vl, "expected a size such as 8M (0: every process)");
                errors++;
            } else {
                o->recorder_min_bytes = num;
            }
        } else if (key_is(k, kl, "state_dir")) {
            if (!set_string(o->state_dir, sizeof o->state_dir, v, vl)) {
                bad(err, k, kl, v, vl, "expected a directory path template (%p %h %e %r)");
                errors++;
            }
        } else if (key_is(k, kl, "pressure")) {
            double f;
            if (!parse_fraction(v, vl, &f) || (f != 0 && (f < 0.5 || f >= 1))) {
                bad(err, k, kl, v, vl, "expected 0 (off) or a fraction from 0.5 to below 1, such as 0.9");
                errors++;
            } else {
                o->pressure = f;
            }
        } else if (key_is(k, kl, "verbose")) {
            if (!parse_bool(v, vl, &b)) {
                bad(err, k, kl, v, vl, "valid values are 0 and 1");
                errors++;
            } else {
                o->verbose = b;
            }
        } else if (key_is(k, kl, "crash_signals")) {
            if (!parse_bool(v, vl, &b)) {
                bad(err, k, kl, v, vl, "valid values are 0 and 1");
                errors++;
            } else {
                o->crash_signals = b;
            }
        } else if (key_is(k, kl, "snapshot_signal")) {
            int sig = (vl == 1 && v[0] == '0') || (vl == 3 && !ot_strncmp(v, "off", 3)) ? 0 : ot_signal_parse(v, vl);
            if (sig < 0 || sig == SIGKILL || sig == SIGSTOP || sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE ||
                sig == SIGILL || sig == SIGABRT || sig == SIGTRAP) {
                bad(err, k, kl, v, vl,
                    "expected a signal name or number such as SIGUSR2, USR2 or 12 (not SIGKILL, SIGSTOP or a crash "
                    "signal), or 0 for off");
                errors++;
            } else {
                o->snapshot_signal = sig;
            }
        } else if (key_is(k, kl, "report_at_exit") || key_is(k, kl, "leak_check") ||
                   key_is(k, kl, "leak_report_reachable") || key_is(k, kl, "leak_builtin_suppressions")) {
            bool *dst = key_is(k, kl, "report_at_exit")  ? &o->report_at_exit
                        : key_is(k, kl, "leak_check")     ? &o->leak_check
                        : key_is(k, kl, "leak_report_reachable") ? &o->leak_report_reachable
                                                                 : &o->leak_builtin_suppressions;
            if (!parse_bool(v, vl, &b)) {
                bad(err, k, kl, v, vl, "valid values are 0 and 1");
                errors++;
            } else {
                *dst = b;
            }
        } else if (key_is(k, kl, "leak_exitcode")) {
            if (!ot_parse_size(v, vl, &num) || num > 255) {
                bad(err, k, kl, v, vl, "expected an exit status from 0 to 255");
                errors++;
            } else {
                o->leak_exitcode = (unsigned)num;
            }
        } else if (key_is(k, kl, "leak_min_bytes")) {
            if (!ot_parse_size(v, vl, &num)) {
                bad(err, k, kl, v, vl, "expected a size such as 1K");
                errors++;
            } else {
                o->leak_min_bytes = num;
            }
        } else if (key_is(k, kl, "suppressions") || key_is(k, kl, "junit")) {
            bool sup = key_is(k, kl, "suppressions");
            char *dst = sup ? o->suppressions : o->junit;
            if (!set_string(dst, sizeof o->suppressions, v, vl)) {
                bad(err, k, kl, v, vl, sup ? "expected the path of an LSan-format suppression file"
                                           : "expected a path template (%p %h %e %r %n)");
                errors++;
            }
        } else if (key_is(k, kl, "libdw")) {
            if (!set_string(o->libdw, sizeof o->libdw, v, vl)) {
                bad(err, k, kl, v, vl, "expected a library name or path such as libdw.so.1, or none");
                errors++;
            }
        } else {
            bad(err, k, kl, NULL, 0, keys);
            errors++;
        }
    }
    /* The leak report groups every live block by its stack: every allocation needs one. */
    if (o->leak_check) o->stacks = OT_STACKS_ALL;
    return errors;
}

const char *ot_rank_string(void)
{
    static const char *const vars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK", "PMIX_RANK", NULL};
    for (int i = 0; vars[i]; i++) {
        const char *v = ot_getenv(vars[i]);
        if (v && *v) return v;
    }
    return NULL;
}

static void put_path_safe(ot_buf_t *b, const char *s)
{
    /* Values substituted into a path must not add directories. */
    for (; *s; s++) ot_buf_putc(b, *s == '/' ? '_' : *s);
}

bool ot_expand_template(const char *tmpl, unsigned report_no, char *out, size_t cap)
{
    ot_buf_t b;
    ot_buf_init(&b, out, cap, -1);
    for (const char *t = tmpl; *t; t++) {
        if (*t != '%' || !t[1]) {
            ot_buf_putc(&b, *t);
            continue;
        }
        t++;
        switch (*t) {
        case 'p': ot_buf_i64(&b, ot_state.pid ? ot_state.pid : getpid()); break;
        case 'h': put_path_safe(&b, ot_state.host[0] ? ot_state.host : "localhost"); break;
        case 'e': {
            const char *e = ot_state.exe, *base = e;
            for (; *e; e++)
                if (*e == '/') base = e + 1;
            put_path_safe(&b, *base ? base : "program");
            break;
        }
        case 'r': {
            const char *r = ot_rank_string();
            put_path_safe(&b, r ? r : "0");
            break;
        }
        case 'n': ot_buf_u64(&b, report_no); break;
        case '%': ot_buf_putc(&b, '%'); break;
        default: ot_buf_putc(&b, '%'); ot_buf_putc(&b, *t); break;
        }
    }
    ot_buf_cstr(&b);
    return !b.truncated;
}
