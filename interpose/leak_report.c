/* The leak check's report: groups the scan (leak.c) by call site, host and device apart, applies
 * LSan-format and built-in suppressions, writes text (log=), JSON (report=, event "leak_check") and
 * JUnit XML (junit=). Runs at exit only, after the other threads were let go: static buffers and
 * ot_mmap'd memory, raw writes; no malloc, no stdio, but for elfutils' libdw, which reads the
 * frames' file and line (symbolize_line.c) and is kept out when exit came from a signal handler.
 * Stacks and times through report_fmt.c's writers (one symbolizer); the log and the files are
 * report.c's (ot_report_log_fd, ot_report_open_file). */
#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "report_internal.h"

typedef struct {
    uint32_t site;
    uint8_t kind;
    uint8_t reachable;
    uint8_t suppressed; /* 1: by the file, 2: built in */
    int16_t rule;       /* index into rules[] */
    uint64_t bytes, count;
} group_t;

#define MAX_RULES 512
typedef struct {
    const char *pat;
    size_t len;
    bool builtin;
    uint64_t hits, bytes;
} rule_t;
static rule_t rules[MAX_RULES];
static unsigned nrules;
static char *supp_text;

static char out_mem[16384];
static ot_frame_t fr; /* a copy of the last frame symbolized */
static bool in_handler; /* exit was called from a signal handler: no file:line (libdw allocates) */

/* ---------------------------------------------------------------- suppressions */

/* Does s contain seg[0..n) at or after s, returning where it ends (NULL: not found). */
static const char *find_seg(const char *s, const char *seg, size_t n)
{
    if (!n) return s;
    for (; *s; s++)
        if (!ot_strncmp(s, seg, n)) return s + n;
    return NULL;
}

bool ot_leak_template_match(const char *t, size_t tl, const char *s)
{
    /* sanitizer_common's TemplateMatch: ^ anchors the start, $ the end, * is any run, else the
     * template is found anywhere in s. */
    if (!s || !*s) return false;
    const char *te = t + tl;
    bool start = false, star = false;
    if (t < te && *t == '^') start = true, t++;
    const char *s0 = s;
    while (t < te) {
        if (*t == '*') {
            t++, start = false, star = true;
            continue;
        }
        if (*t == '$') return !*s || star;
        if (!*s) return false;
        const char *seg = t;
        while (t < te && *t != '*' && *t != '$') t++;
        size_t n = (size_t)(t - seg);
        const char *hit = find_seg(s, seg, n);
        if (!hit) return false;
        if (start && hit - n != s0) return false;
        s = hit;
        start = false, star = false;
    }
    return true;
}

static void add_rule(const char *p, size_t n, bool builtin)
{
    if (nrules >= MAX_RULES || !n) return;
    rules[nrules++] = (rule_t){p, n, builtin, 0, 0};
}

/* Built-in suppressions: allocations glibc makes once per thread or module and keeps in places
 * the scan does not treat as pointers (see README, "Leak checks"). */
static const char *const builtin_functions[] = {
    "_dl_allocate_tls", /* glibc: a thread's static TLS and DTV, held by the thread descriptor */
    "__tls_get_addr",   /* glibc: dynamic TLS blocks, held by the DTV */
    "_dl_resize_dtv",   /* glibc: the DTV grown by dlopen */
    "_dl_update_slotinfo",
};
/* Modules whose own allocations (the first frames: the caller of malloc, or of operator new) are
 * one-time state of the CUDA runtime and driver. */
static const char *const builtin_modules[] = {"libcuda.so", "libcudart.so", "libnvidia-ml.so", "libcudadebugger.so"};

static void load_rules(void)
{
    nrules = 0;
    if (ot_opt.suppressions[0]) {
        const size_t cap = 1u << 20;
        supp_text = ot_mmap(cap);
        ssize_t n = supp_text ? ot_read_file(ot_opt.suppressions, supp_text, cap) : -1;
        if (n < 0) {
            ot_warn("cannot read suppressions=%s: %s", ot_opt.suppressions, ot_errno_name(errno));
        } else {
            for (char *p = supp_text; *p;) {
                char *line = p;
                while (*p && *p != '\n') p++;
                char *end = p;
                if (*p) p++;
                while (line < end && (*line == ' ' || *line == '\t')) line++;
                while (end > line && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r')) end--;
                if (line == end || *line == '#') continue;
                if (end - line > 5 && !ot_strncmp(line, "leak:", 5)) add_rule(line + 5, (size_t)(end - line - 5), false);
                /* Other kinds (race:, called_from_lib:, ...) belong to other sanitizers. */
            }
        }
    }
}

/* The program's own code, as opposed to the C and C++ runtimes and the loader. */
static bool own_module(const char *m) { return m && *m && !ot_report_runtime_module(m); }

static void symbolize_ret(uintptr_t ip) { fr = *ot_report_frame(ip); }

/* Which rule suppresses this site (-1: none); *builtin says whether it was a built-in one. */
static int match_site(uint32_t site, bool *builtin)
{
    ot_site_info_t si;
    if (!site || !ot_sites_get(site, &si)) return -1;
    bool ld_init = false, lib0 = false;
    for (unsigned i = 0; i < si.depth; i++) {
        symbolize_ret(si.ips[i]);
        const char *fn = fr.function, *mod = fr.module ? fr.module : "", *file = fr.file;
        for (unsigned r = 0; r < nrules; r++)
            if (ot_leak_template_match(rules[r].pat, rules[r].len, fn) ||
                ot_leak_template_match(rules[r].pat, rules[r].len, mod) ||
                ot_leak_template_match(rules[r].pat, rules[r].len, file)) {
                *builtin = false;
                return (int)r;
            }
        if (!ot_opt.leak_builtin_suppressions) continue;
        for (unsigned b = 0; b < sizeof builtin_functions / sizeof *builtin_functions; b++)
            if (!ot_strcmp(fn, builtin_functions[b])) {
                *builtin = true;
                return -2 - (int)b;
            }
        if (i < 3)
            for (unsigned b = 0; b < sizeof builtin_modules / sizeof *builtin_modules; b++)
                if (ot_strstr(mod, builtin_modules[b])) {
                    *builtin = true;
                    return -100 - (int)b;
                }
        if (i == 0 && ot_strstr(mod, "/libstdc++.so")) lib0 = true;
        if (ot_strstr(mod, "/ld-linux")) ld_init = true;
    }
    /* libstdc++'s emergency exception-handling pool (eh_alloc.cc), allocated by its constructor
     * while the loader runs it: kept for the life of the process. */
    if (ot_opt.leak_builtin_suppressions && lib0 && ld_init) {
        *builtin = true;
        return -200;
    }
    return -1;
}

static const char *rule_name(int r)
{
    if (r >= 0) return NULL;
    if (r == -200) return "libstdc++ emergency EH pool (built in)";
    if (r <= -100) return builtin_modules[-100 - r];
    return builtin_functions[-2 - r];
}

/* ---------------------------------------------------------------- grouping */

static group_t *groups;
static size_t ngroups;

static bool build_groups(const ot_leak_scan_t *sc)
{
    uint32_t nsites = ot_sites_count() + 1;
    size_t slots = (size_t)nsites * 2 + OT_KIND_COUNT * 2;
    group_t *by = ot_mmap(slots * sizeof(group_t));
    if (!by) return false;
    for (size_t i = 0; i < sc->n; i++) {
        const ot_leak_block_t *b = &sc->blocks[i];
        size_t at = b->site && b->site < nsites ? (size_t)b->site * 2 : (size_t)nsites * 2 + b->kind * 2;
        at += b->reachable;
        group_t *g = &by[at];
        if (!g->count) g->site = b->site < nsites ? b->site : 0, g->kind = b->kind, g->reachable = b->reachable;
        g->bytes += b->size, g->count++;
    }
    ngroups = 0;
    for (size_t i = 0; i < slots; i++)
        if (by[i].count) by[ngroups++] = by[i];
    groups = by;
    /* Largest first (shell sort: no recursion, no malloc). */
    for (size_t gap = ngroups / 2; gap; gap /= 2)
        for (size_t i = gap; i < ngroups; i++)
            for (size_t j = i; j >= gap && groups[j - gap].bytes < groups[j].bytes; j -= gap) {
                group_t t = groups[j];
                groups[j] = groups[j - gap], groups[j - gap] = t;
            }
    return true;
}

typedef struct {
    uint64_t bytes, count, sites;
} sum_t;
typedef struct {
    sum_t lost[2], reachable[2], suppressed[2], below_min[2]; /* [0] host, [1] device kinds */
} totals_t;

static bool listed(const group_t *g)
{
    if (g->reachable) return ot_opt.leak_report_reachable;
    return g->suppressed || g->bytes >= ot_opt.leak_min_bytes;
}

static void classify(totals_t *t)
{
    ot_memset(t, 0, sizeof *t);
    for (size_t i = 0; i < ngroups; i++) {
        group_t *g = &groups[i];
        int d = ot_kind_is_device(g->kind);
        g->rule = -1;
        sum_t *s;
        if (g->reachable) {
            s = &t->reachable[d];
        } else {
            bool builtin = false;
            int r = match_site(g->site, &builtin);
            g->rule = (int16_t)r;
            if (r != -1) {
                g->suppressed = builtin ? 2 : 1;
                if (r >= 0) rules[r].hits += g->count, rules[r].bytes += g->bytes;
                s = &t->suppressed[d];
            } else if (g->bytes < ot_opt.leak_min_bytes) {
                s = &t->below_min[d];
            } else {
                s = &t->lost[d];
            }
        }
        s->bytes += g->bytes, s->count += g->count, s->sites++;
    }
}

/* ---------------------------------------------------------------- output */

static void text_stack(ot_buf_t *b, uint32_t site)
{
    ot_site_info_t si;
    if (!site || !ot_sites_get(site, &si)) si.depth = 0, si.ips = NULL;
    ot_report_text_stack(b, si.ips, si.depth);
}

static void json_stack(ot_buf_t *b, uint32_t site)
{
    ot_site_info_t si;
    if (!site || !ot_sites_get(site, &si)) si.depth = 0, si.ips = NULL;
    ot_report_json_stack(b, si.ips, si.depth);
}

static const char *class_name(int d) { return d ? "device" : "host"; }

static void text_sum(ot_buf_t *b, const char *what, const sum_t *s)
{
    ot_buf_printf(b, "%s ", what);
    ot_buf_bytes(b, s[0].bytes);
    ot_buf_printf(b, " in %llu blocks at %llu sites host, ", (unsigned long long)s[0].count, (unsigned long long)s[0].sites);
    ot_buf_bytes(b, s[1].bytes);
    ot_buf_printf(b, " in %llu blocks at %llu sites device", (unsigned long long)s[1].count, (unsigned long long)s[1].sites);
}

static void write_text(int fd, const ot_leak_scan_t *sc, const totals_t *t, bool failed, int status)
{
    ot_buf_t b;
    ot_buf_init(&b, out_mem, sizeof out_mem, fd);
    const ot_report_proc_t proc = ot_report_process();
    ot_report_text_head(&b, &proc);
    ot_buf_puts(&b, "leak check at exit [");
    ot_report_put_time_utc(&b, time(NULL));
    ot_buf_puts(&b, "]\n");
    ot_buf_printf(&b, "oomtrace: %zu live blocks; %u other threads (%u stopped with registers by signal %d, %u without); "
                      "roots scanned: modules ", sc->n, sc->threads, sc->threads_with_regs, ot_world_signal(),
                  sc->threads_without_regs);
    ot_buf_bytes(&b, sc->roots_modules);
    ot_buf_puts(&b, ", stacks ");
    ot_buf_bytes(&b, sc->roots_stacks);
    ot_buf_printf(&b, ", %u program mappings ", sc->maps_scanned);
    ot_buf_bytes(&b, sc->roots_maps);
    ot_buf_printf(&b, "; %llu.%03llu s\n", (unsigned long long)(sc->ns / 1000000000),
                  (unsigned long long)(sc->ns / 1000000 % 1000));
    if (sc->incomplete) ot_buf_printf(&b, "oomtrace: note: %s\n", sc->note);
    const char *lines_note = in_handler ? "no file:line: exit was called from a signal handler" : ot_symbolize_lines_note();
    if (lines_note) ot_buf_printf(&b, "oomtrace: note: %s\n", lines_note);
    for (int pass = 0; pass < 3; pass++) { /* lost, suppressed, reachable */
        for (int d = 0; d < 2; d++)
            for (size_t i = 0; i < ngroups; i++) {
                const group_t *g = &groups[i];
                if (ot_kind_is_device(g->kind) != d || !listed(g)) continue;
                if ((pass == 0) != (!g->reachable && !g->suppressed) || (pass == 1) != (g->suppressed != 0) ||
                    (pass == 2) != (g->reachable != 0))
                    continue;
                ot_buf_printf(&b, "oomtrace: %s %s memory: ", pass == 0 ? "LOST" : pass == 1 ? "suppressed" : "reachable",
                              ot_kind_name(g->kind));
                ot_buf_bytes(&b, g->bytes);
                ot_buf_printf(&b, " (%llu bytes) in %llu block%s", (unsigned long long)g->bytes,
                              (unsigned long long)g->count, g->count == 1 ? "" : "s");
                if (g->suppressed) {
                    const char *rn = g->rule >= 0 ? NULL : rule_name(g->rule);
                    ot_buf_puts(&b, ", suppressed by ");
                    if (rn) ot_buf_printf(&b, "built-in '%s'", rn);
                    else {
                        ot_buf_puts(&b, "'leak:");
                        ot_buf_putn(&b, rules[g->rule].pat, rules[g->rule].len);
                        ot_buf_putc(&b, '\'');
                    }
                }
                ot_buf_puts(&b, ", allocated at:\n");
                text_stack(&b, g->site);
            }
    }
    ot_buf_puts(&b, "oomtrace: ");
    text_sum(&b, "lost:", t->lost);
    ot_buf_puts(&b, "\noomtrace: ");
    text_sum(&b, "suppressed:", t->suppressed);
    ot_buf_puts(&b, "\noomtrace: ");
    text_sum(&b, "reachable (not a failure):", t->reachable);
    if (!ot_opt.leak_report_reachable && (t->reachable[0].sites || t->reachable[1].sites))
        ot_buf_puts(&b, " (leak_report_reachable=1 lists them)");
    ot_buf_putc(&b, '\n');
    if (t->below_min[0].sites || t->below_min[1].sites) {
        ot_buf_puts(&b, "oomtrace: ");
        sum_t both[2] = {t->below_min[0], t->below_min[1]};
        text_sum(&b, "lost below leak_min_bytes (not listed, not failing):", both);
        ot_buf_putc(&b, '\n');
    }
    for (unsigned r = 0; r < nrules; r++)
        if (rules[r].hits) {
            ot_buf_printf(&b, "oomtrace: suppression used: %llu blocks, %llu bytes: leak:", (unsigned long long)rules[r].hits,
                          (unsigned long long)rules[r].bytes);
            ot_buf_putn(&b, rules[r].pat, rules[r].len);
            ot_buf_putc(&b, '\n');
        }
    if (failed) {
        ot_buf_puts(&b, "oomtrace: leak check FAILED: ");
        ot_buf_bytes(&b, t->lost[0].bytes + t->lost[1].bytes);
        ot_buf_printf(&b, " lost in %llu blocks", (unsigned long long)(t->lost[0].count + t->lost[1].count));
        if (status == 0) ot_buf_printf(&b, "; exit status %u (leak_exitcode)\n", ot_opt.leak_exitcode);
        else ot_buf_printf(&b, "; the program's own exit status %d is kept\n", status);
    } else {
        ot_buf_puts(&b, "oomtrace: leak check passed: no unsuppressed lost memory\n");
    }
    ot_buf_flush(&b);
}

static void json_sum(ot_buf_t *b, const char *k, const sum_t *s, bool comma)
{
    ot_buf_printf(b, "%s\"%s\":{", comma ? "," : "", k);
    for (int d = 0; d < 2; d++)
        ot_buf_printf(b, "%s\"%s\":{\"bytes\":%llu,\"count\":%llu,\"sites\":%llu}", d ? "," : "", class_name(d),
                      (unsigned long long)s[d].bytes, (unsigned long long)s[d].count, (unsigned long long)s[d].sites);
    ot_buf_putc(b, '}');
}

static void write_json(int fd, unsigned no, const ot_leak_scan_t *sc, const totals_t *t, bool failed, int status)
{
    ot_buf_t b;
    ot_buf_init(&b, out_mem, sizeof out_mem, fd);
    const ot_report_proc_t proc = ot_report_process();
    ot_report_json_head(&b, "leak_check", no, time(NULL), &proc);
    ot_buf_printf(&b, ",\"leak_check\":{\"passed\":%s,\"program_exit_status\":%d,\"exit_status\":%d,\"blocks\":%zu,"
                      "\"threads\":%u,\"threads_with_registers\":%u,\"threads_without_registers\":%u,\"signal\":%d,",
                  failed ? "false" : "true", status, failed && status == 0 ? (int)ot_opt.leak_exitcode : status, sc->n,
                  sc->threads, sc->threads_with_regs, sc->threads_without_regs, ot_world_signal());
    ot_buf_printf(&b, "\"roots\":{\"modules\":%llu,\"stacks\":%llu,\"registers\":%llu,\"maps\":%llu,\"maps_scanned\":%u},"
                      "\"scanned_block_bytes\":%llu,\"seconds\":%llu.%06llu,\"incomplete\":%s,\"note\":",
                  (unsigned long long)sc->roots_modules, (unsigned long long)sc->roots_stacks,
                  (unsigned long long)sc->roots_regs, (unsigned long long)sc->roots_maps, sc->maps_scanned,
                  (unsigned long long)sc->scanned_block_bytes, (unsigned long long)(sc->ns / 1000000000),
                  (unsigned long long)(sc->ns / 1000 % 1000000), sc->incomplete ? "true" : "false");
    ot_buf_json_str(&b, sc->incomplete ? sc->note : NULL);
    ot_buf_puts(&b, ",\"suppressions_file\":");
    ot_buf_json_str(&b, ot_opt.suppressions[0] ? ot_opt.suppressions : NULL);
    ot_buf_printf(&b, ",\"builtin_suppressions\":%s,\"min_bytes\":%llu},\"totals\":{",
                  ot_opt.leak_builtin_suppressions ? "true" : "false", (unsigned long long)ot_opt.leak_min_bytes);
    json_sum(&b, "lost", t->lost, false);
    json_sum(&b, "suppressed", t->suppressed, true);
    json_sum(&b, "reachable", t->reachable, true);
    json_sum(&b, "below_min_bytes", t->below_min, true);
    ot_buf_puts(&b, "},\"leaks\":[");
    bool first = true;
    for (size_t i = 0; i < ngroups; i++) {
        const group_t *g = &groups[i];
        if (!listed(g)) continue;
        ot_buf_puts(&b, first ? "{\"kind\":" : ",{\"kind\":");
        first = false;
        ot_buf_json_str(&b, ot_kind_name(g->kind));
        ot_buf_printf(&b, ",\"bytes\":%llu,\"count\":%llu,\"reachable\":%s,\"suppressed\":%s,\"suppression\":",
                      (unsigned long long)g->bytes, (unsigned long long)g->count, g->reachable ? "true" : "false",
                      g->suppressed ? "true" : "false");
        if (!g->suppressed) ot_buf_puts(&b, "null");
        else if (g->rule < 0) ot_buf_json_str(&b, rule_name(g->rule));
        else {
            char pat[600];
            ot_buf_t pb;
            ot_buf_init(&pb, pat, sizeof pat, -1);
            ot_buf_puts(&pb, "leak:");
            ot_buf_putn(&pb, rules[g->rule].pat, rules[g->rule].len);
            ot_buf_json_str(&b, ot_buf_cstr(&pb));
        }
        ot_buf_puts(&b, ",\"stack\":");
        json_stack(&b, g->site);
        ot_buf_putc(&b, '}');
    }
    ot_buf_puts(&b, "]}\n");
    ot_buf_flush(&b);
}

/* ---------------------------------------------------------------- JUnit */

static void xml_str(ot_buf_t *b, const char *s)
{
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '<') ot_buf_puts(b, "&lt;");
        else if (c == '>') ot_buf_puts(b, "&gt;");
        else if (c == '&') ot_buf_puts(b, "&amp;");
        else if (c == '"') ot_buf_puts(b, "&quot;");
        else if (c < 0x20 && c != '\n' && c != '\t') ot_buf_putc(b, '?');
        else ot_buf_putc(b, (char)c);
    }
}

/* The test case's name: the top two frames of the program's own code. */
static void case_name(ot_buf_t *b, const group_t *g)
{
    ot_site_info_t si;
    unsigned named = 0;
    ot_buf_printf(b, "%s leak", ot_kind_name(g->kind));
    if (g->site && ot_sites_get(g->site, &si))
        for (unsigned i = 0; i < si.depth && named < 2; i++) {
            symbolize_ret(si.ips[i]);
            if (!own_module(fr.module)) continue;
            ot_buf_puts(b, named ? " from " : " in ");
            xml_str(b, fr.function[0] ? fr.function : "??");
            named++;
            /* Where in that frame: two sites in the same functions get different names, and the
             * name stays the same from run to run (a CI's test history follows it). */
            const char *base = fr.module;
            for (const char *p = fr.module; *p; p++)
                if (*p == '/') base = p + 1;
            if (named == 2 || i + 1 == si.depth) {
                ot_buf_puts(b, " (");
                xml_str(b, base);
                ot_buf_printf(b, "+0x%lx)", (unsigned long)fr.offset);
            }
        }
    if (!named) ot_buf_printf(b, " at site %u", g->site);
}

static void write_junit(int fd, const totals_t *t, uint64_t ns)
{
    ot_buf_t b;
    ot_buf_init(&b, out_mem, sizeof out_mem, fd);
    unsigned long long fails = t->lost[0].sites + t->lost[1].sites;
    unsigned long long cases = fails ? fails : 1;
    const char *base = ot_state.exe;
    for (const char *p = ot_state.exe; *p; p++)
        if (*p == '/') base = p + 1;
    ot_buf_puts(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    ot_buf_printf(&b, "<testsuites name=\"oomtrace leak check\" tests=\"%llu\" failures=\"%llu\" errors=\"0\">\n", cases, fails);
    ot_buf_puts(&b, "  <testsuite name=\"oomtrace.leaks.");
    xml_str(&b, base);
    ot_buf_printf(&b, "\" tests=\"%llu\" failures=\"%llu\" errors=\"0\" skipped=\"0\" time=\"%llu.%03llu\" timestamp=\"",
                  cases, fails, (unsigned long long)(ns / 1000000000), (unsigned long long)(ns / 1000000 % 1000));
    ot_report_put_time_utc(&b, time(NULL));
    b.len--; /* the Z: JUnit's timestamp is a local ISO 8601 time without zone */
    ot_buf_printf(&b, "\" hostname=\"");
    xml_str(&b, ot_state.host);
    ot_buf_puts(&b, "\">\n");
    if (!fails) {
        ot_buf_puts(&b, "    <testcase classname=\"oomtrace.leaks.");
        xml_str(&b, base);
        ot_buf_puts(&b, "\" name=\"no lost memory\" time=\"0\"/>\n");
    }
    for (size_t i = 0; i < ngroups; i++) {
        const group_t *g = &groups[i];
        if (g->reachable || g->suppressed || g->bytes < ot_opt.leak_min_bytes) continue;
        ot_buf_puts(&b, "    <testcase classname=\"oomtrace.leaks.");
        xml_str(&b, base);
        ot_buf_puts(&b, "\" name=\"");
        case_name(&b, g);
        ot_buf_printf(&b, "\" time=\"0\">\n      <failure type=\"%s leak\" message=\"%llu bytes lost in %llu blocks\">",
                      ot_kind_name(g->kind), (unsigned long long)g->bytes, (unsigned long long)g->count);
        ot_buf_printf(&b, "%llu bytes of %s memory lost in %llu blocks (pid %d), allocated at:\n",
                      (unsigned long long)g->bytes, ot_kind_name(g->kind), (unsigned long long)g->count,
                      (int)ot_state.pid);
        ot_site_info_t si;
        if (g->site && ot_sites_get(g->site, &si))
            for (unsigned k = 0; k < si.depth; k++) {
                symbolize_ret(si.ips[k]);
                ot_buf_printf(&b, "    #%u %p in ", k, (void *)si.ips[k]);
                xml_str(&b, fr.function[0] ? fr.function : "??");
                if (fr.module && fr.module[0]) {
                    ot_buf_puts(&b, " (");
                    xml_str(&b, fr.module);
                    ot_buf_printf(&b, "+0x%lx)", (unsigned long)fr.offset);
                }
                if (fr.file[0]) {
                    ot_buf_putc(&b, ' ');
                    xml_str(&b, fr.file);
                    ot_buf_printf(&b, ":%d", fr.line);
                }
                ot_buf_putc(&b, '\n');
            }
        ot_buf_puts(&b, "</failure>\n    </testcase>\n");
    }
    ot_buf_puts(&b, "  </testsuite>\n</testsuites>\n");
    ot_buf_flush(&b);
}

/* ---------------------------------------------------------------- the check */

static int g_status; /* the status the program is exiting with, for the report's wording */
void ot_leak_set_status(int status) { g_status = status; }

bool ot_leak_check_run(void)
{
    static ot_leak_scan_t sc;
    if (!ot_leak_scan(&sc)) {
        ot_warn("leak check: out of memory for the scan; no leak check");
        return false;
    }
    load_rules();
    ot_symbolize_begin();
    if (!build_groups(&sc)) {
        ot_warn("leak check: out of memory for the report; no leak check");
        return false;
    }
    /* Frames with file and line (libdw allocates): the other threads run again, and this one is in
     * no allocator, unless exit was called from a signal handler that may have interrupted one. */
    bool lines = ot_strcmp(ot_opt.libdw, "none") != 0;
    in_handler = lines && ot_stack_in_signal_handler();
    ot_symbolize_lines_use(ot_opt.libdw);
    bool lines_were = ot_report_frames_with_lines(lines && !in_handler);
    totals_t t;
    classify(&t);
    bool failed = t.lost[0].count + t.lost[1].count > 0;
    int fd = ot_report_log_fd();
    if (fd >= 0) write_text(fd, &sc, &t, failed, g_status);
    char path[620];
    unsigned no = 0;
    if (ot_opt.report[0] && (fd = ot_report_open_file(ot_opt.report, path, sizeof path, &no)) >= 0) {
        write_json(fd, no, &sc, &t, failed, g_status);
        syscall(SYS_close, fd);
    }
    if (ot_opt.junit[0]) {
        if ((fd = ot_report_open_file(ot_opt.junit, path, sizeof path, NULL)) >= 0) {
            write_junit(fd, &t, sc.ns);
            syscall(SYS_close, fd);
        } else {
            ot_warn("leak check: cannot create junit=%s: %s", ot_opt.junit, ot_errno_name(errno));
        }
    }
    ot_report_frames_with_lines(lines_were);
    return failed;
}
