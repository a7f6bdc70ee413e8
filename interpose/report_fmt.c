/* Pieces every report writer shares: frames and stacks (symbolized), times and sizes. No malloc:
 * the frame is static, so one report at a time (the caller's lock). */
#include <sys/syscall.h>
#include <unistd.h>

#include "report_internal.h"

static ot_frame_t frame_tmp;
/* This thread's frames get file and line (ot_symbolize_line, which allocates): set by the leak
 * report and the launcher only, and cleared by the signal-path entry points while they write. */
static OT_TLS bool frame_lines;

bool ot_report_runtime_module(const char *m)
{
    /* By the file name's start: asked for every frame of a report, so no search of the path. */
    static const struct { const char *s; size_t n; } sys[] = {
        {"libc.so", 7}, {"libstdc++.so", 12}, {"libgcc_s.so", 11}, {"ld-linux", 8}, {"libm.so", 7},
        {"libpthread.so", 13}, {"liboomtrace.so", 14}, {"libdl.so", 8}};
    if (!m) return false;
    const char *base = m;
    for (const char *p = m; *p; p++)
        if (*p == '/') base = p + 1;
    if (base == m || base[0] != 'l') return false; /* not a path; not lib* or ld-* */
    for (unsigned i = 0; i < sizeof sys / sizeof *sys; i++)
        if (!ot_strncmp(base, sys[i].s, sys[i].n)) return true;
    return false;
}

bool ot_report_frames_with_lines(bool on)
{
    bool was = frame_lines;
    frame_lines = on;
    return was;
}

const ot_frame_t *ot_report_frame(uintptr_t ret_addr)
{
    ot_symbolize(ret_addr > 0 ? ret_addr - 1 : ret_addr, &frame_tmp);
    /* Not in the C and C++ runtimes and the loader: not the program's code, and their separate
     * debug files (libc6-dbg) are large and compressed, ~80 ms a process to read. */
    if (frame_lines) {
        if (ot_report_runtime_module(frame_tmp.module)) frame_tmp.line_note = "runtime_not_looked_up";
        else ot_symbolize_line(&frame_tmp);
    }
    return &frame_tmp;
}

void ot_report_put_where(ot_buf_t *b, const ot_frame_t *fr)
{
    ot_buf_puts(b, fr->function[0] ? fr->function : "??");
    if (fr->module && fr->module[0]) ot_buf_printf(b, " (%s+0x%lx)", fr->module, (unsigned long)fr->offset);
}

void ot_report_text_stack(ot_buf_t *b, const uintptr_t *ips, unsigned depth)
{
    if (depth == 0) ot_buf_puts(b, "oomtrace:     (no stack recorded)\n");
    for (unsigned i = 0; i < depth; i++) {
        const ot_frame_t *fr = ot_report_frame(ips[i]);
        ot_buf_printf(b, "oomtrace:     #%u %p in ", i, (void *)ips[i]);
        ot_report_put_where(b, fr);
        if (fr->file[0]) ot_buf_printf(b, " %s:%d", fr->file, fr->line);
        ot_buf_putc(b, '\n');
    }
}

void ot_report_json_stack(ot_buf_t *b, const uintptr_t *ips, unsigned depth)
{
    ot_buf_putc(b, '[');
    for (unsigned i = 0; i < depth; i++) {
        const ot_frame_t *fr = ot_report_frame(ips[i]);
        ot_buf_puts(b, i ? ",{\"ip\":" : "{\"ip\":");
        ot_buf_putc(b, '"');
        ot_buf_hex(b, ips[i]);
        ot_buf_puts(b, "\",\"function\":");
        ot_buf_json_str(b, fr->function[0] ? fr->function : NULL);
        ot_buf_puts(b, ",\"module\":");
        ot_buf_json_str(b, fr->module && fr->module[0] ? fr->module : NULL);
        ot_buf_puts(b, ",\"offset\":\"");
        ot_buf_hex(b, fr->offset);
        ot_buf_puts(b, "\",\"file\":");
        ot_buf_json_str(b, fr->file[0] ? fr->file : NULL);
        ot_buf_puts(b, ",\"line\":");
        if (fr->line > 0) ot_buf_i64(b, fr->line);
        else ot_buf_puts(b, "null");
        if (!fr->file[0] && fr->line_note) {
            ot_buf_puts(b, ",\"line_note\":");
            ot_buf_json_str(b, fr->line_note);
        }
        ot_buf_putc(b, '}');
    }
    ot_buf_putc(b, ']');
}

ot_report_proc_t ot_report_process(void)
{
    /* A child made by a raw clone/fork syscall never ran our atfork handler: ask the kernel. */
    ot_state.pid = (pid_t)syscall(SYS_getpid);
    return (ot_report_proc_t){(int)ot_state.pid, ot_state.exe, ot_state.cmdline, ot_state.host, ot_rank_string()};
}

void ot_report_json_head(ot_buf_t *b, const char *event, unsigned report_no, time_t when, const ot_report_proc_t *p)
{
    ot_buf_puts(b, "{\"schema_version\":1,\"tool\":\"oomtrace " OT_VERSION "\",\"event\":");
    ot_buf_json_str(b, event);
    ot_buf_printf(b, ",\"report_number\":%u,\"time\":\"", report_no);
    ot_report_put_time_utc(b, when);
    ot_buf_printf(b, "\",\"process\":{\"pid\":%d,\"exe\":", p->pid);
    ot_buf_json_str(b, p->exe);
    ot_buf_puts(b, ",\"cmdline\":");
    ot_buf_json_str(b, p->cmdline);
    ot_buf_puts(b, ",\"host\":");
    ot_buf_json_str(b, p->host);
    ot_buf_puts(b, ",\"rank\":");
    ot_buf_json_str(b, p->rank);
    ot_buf_putc(b, '}');
}

void ot_report_text_head(ot_buf_t *b, const ot_report_proc_t *p)
{
    ot_buf_printf(b, "oomtrace: ==== pid %d (%s) ", p->pid, p->exe);
}

void ot_report_put_time_utc(ot_buf_t *b, time_t t)
{
    /* civil-from-days (H. Hinnant); gmtime_r is avoided because it may take the tz lock. */
    int64_t days = t / 86400, secs = t % 86400;
    if (secs < 0) secs += 86400, days--;
    days += 719468;
    int64_t era = (days >= 0 ? days : days - 146096) / 146097;
    int64_t doe = days - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t y = yoe + era * 400, doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153, d = doy - (153 * mp + 2) / 5 + 1, m = mp < 10 ? mp + 3 : mp - 9;
    if (m <= 2) y++;
    ot_buf_printf(b, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lldZ", (long long)y, (long long)m, (long long)d,
                  (long long)(secs / 3600), (long long)(secs / 60 % 60), (long long)(secs % 60));
}

void ot_report_put_bytes_or(ot_buf_t *b, int64_t v, const char *unknown)
{
    if (v < 0) ot_buf_puts(b, unknown);
    else ot_buf_bytes(b, (uint64_t)v);
}

void ot_report_put_pct(ot_buf_t *b, uint64_t part, uint64_t whole)
{
    if (!whole) return;
    ot_buf_printf(b, " (%llu%%)", (unsigned long long)(part * 100 / whole));
}

const char *ot_report_stacks_name(ot_stacks_mode_t m)
{
    return m == OT_STACKS_ALL ? "all" : m == OT_STACKS_NONE ? "none" : "sampled";
}

const char *ot_report_signal_name(int sig)
{
    static const char *const names[] = {
        [1] = "SIGHUP",   [2] = "SIGINT",   [3] = "SIGQUIT",  [4] = "SIGILL",   [5] = "SIGTRAP",
        [6] = "SIGABRT",  [7] = "SIGBUS",   [8] = "SIGFPE",   [9] = "SIGKILL",  [10] = "SIGUSR1",
        [11] = "SIGSEGV", [12] = "SIGUSR2", [13] = "SIGPIPE", [14] = "SIGALRM", [15] = "SIGTERM",
        [16] = "SIGSTKFLT", [17] = "SIGCHLD", [18] = "SIGCONT", [19] = "SIGSTOP", [20] = "SIGTSTP",
        [21] = "SIGTTIN", [22] = "SIGTTOU", [23] = "SIGURG",  [24] = "SIGXCPU", [25] = "SIGXFSZ",
        [26] = "SIGVTALRM", [27] = "SIGPROF", [28] = "SIGWINCH", [29] = "SIGIO", [30] = "SIGPWR",
        [31] = "SIGSYS"};
    static char other[24];
    if (sig > 0 && sig < (int)(sizeof names / sizeof names[0]) && names[sig]) return names[sig];
    ot_buf_t b;
    ot_buf_init(&b, other, sizeof other, -1);
    ot_buf_printf(&b, "signal %d", sig);
    return ot_buf_cstr(&b);
}

void ot_report_put_site_name(ot_buf_t *b, const uintptr_t *ips, unsigned depth)
{
    for (unsigned i = 0; i < depth && i < 2; i++) {
        const ot_frame_t *fr = ot_report_frame(ips[i]);
        if (i) ot_buf_puts(b, " \xe2\x86\x90 "); /* ← */
        ot_buf_puts(b, fr->function[0] ? fr->function : "??");
    }
    if (!depth) ot_buf_puts(b, "(no stack)");
}
