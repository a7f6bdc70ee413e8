/* The symbolizer's slow path: source file and line of an address, from the module's DWARF through
 * elfutils' libdwfl (libdw.so.1, Debian's libdw1), loaded with dlopen on first use so that
 * liboomtrace has no link dependency on it. libdw allocates with malloc and opens files: this runs
 * only where that is safe (the leak report at exit, once the other threads run again; the
 * launcher's post-mortems), never on a failure or signal path, whose frames stay symbolize.c's
 * malloc-free module+offset+function. Without libdw, or with libdw=none, frames have no file and
 * line and nothing else changes.
 *
 * Separate debug files are found by build-id under /usr/lib/debug/.build-id (Debian's -dbgsym
 * packages). debuginfod is never asked: a leak check at exit must not wait on the network.
 *
 * One query at a time: a busy flag, taken without waiting (a signal handler that interrupts a
 * lookup, or a second thread, gets no line instead of re-entering libdw). */
#include "internal.h"

#include <dlfcn.h>
#include <errno.h>

/* libdwfl's ABI, as its public header (elfutils/libdwfl.h, stable since 0.122) declares it; the
 * header itself is not needed to build. GElf_Word is a 32-bit word, Dwarf_Addr 64 bits. */
typedef struct Dwfl Dwfl;
typedef struct Dwfl_Module Dwfl_Module;
typedef struct Dwfl_Line Dwfl_Line;
typedef uint64_t dw_addr_t;
typedef struct {
    int (*find_elf)(Dwfl_Module *, void **, const char *, dw_addr_t, char **, void **);
    int (*find_debuginfo)(Dwfl_Module *, void **, const char *, dw_addr_t, const char *, const char *, uint32_t,
                          char **);
    int (*section_address)(Dwfl_Module *, void **, const char *, dw_addr_t, const char *, uint32_t, const void *,
                           dw_addr_t *);
    char **debuginfo_path;
} dw_callbacks_t;

static struct {
    Dwfl *(*begin)(const dw_callbacks_t *);
    void (*end)(Dwfl *);
    void (*report_begin)(Dwfl *);
    void (*report_begin_add)(Dwfl *);
    Dwfl_Module *(*report_elf)(Dwfl *, const char *, const char *, int, dw_addr_t, bool);
    int (*report_end)(Dwfl *, void *, void *);
    Dwfl_Line *(*module_getsrc)(Dwfl_Module *, dw_addr_t);
    const char *(*lineinfo)(Dwfl_Line *, dw_addr_t *, int *, int *, uint64_t *, uint64_t *);
} dw;
static dw_callbacks_t dw_cb;

/* 1: loaded; -1: dw_lib could not be loaded; 0: not tried. dw_lib "": off. */
static int dw_state;
static char dw_lib[256];
static char dw_note[400];
static Dwfl *dw_session;

/* Modules reported to the session, by path and load bias; mod NULL: libdwfl could not read it. */
#define DW_MODS 512
#define DW_POOL (128 * 1024)
static struct {
    uint32_t path; /* offset into dw_pool */
    uintptr_t bias;
    Dwfl_Module *mod;
} dw_mods[DW_MODS];
static unsigned dw_nmods, dw_last;
static char dw_pool[DW_POOL];
static size_t dw_pool_len;

/* Lines already looked up, by address and module (a report asks for each frame three or four
 * times: suppressions, text, JSON, JUnit; and sites share their callers). file NULL: none known.
 * The file names belong to the session: cleared with it. */
#define DW_HITS 4096
static struct {
    uintptr_t ip;
    Dwfl_Module *mod;
    const char *file;
    int line;
} dw_hits[DW_HITS];

static volatile int dw_busy;

static void set_note(const char *why)
{
    ot_buf_t b;
    ot_buf_init(&b, dw_note, sizeof dw_note, -1);
    ot_buf_printf(&b, "no file:line: %s %s", why, dw_lib);
    ot_buf_cstr(&b);
}

static bool resolve(void *h)
{
    struct { void **slot; const char *name; } fns[] = {
        {(void **)&dw.begin, "dwfl_begin"},
        {(void **)&dw.end, "dwfl_end"},
        {(void **)&dw.report_begin, "dwfl_report_begin"},
        {(void **)&dw.report_begin_add, "dwfl_report_begin_add"},
        {(void **)&dw.report_elf, "dwfl_report_elf"},
        {(void **)&dw.report_end, "dwfl_report_end"},
        {(void **)&dw.module_getsrc, "dwfl_module_getsrc"},
        {(void **)&dw.lineinfo, "dwfl_lineinfo"},
        {(void **)&dw_cb.find_elf, "dwfl_build_id_find_elf"},
        {(void **)&dw_cb.find_debuginfo, "dwfl_build_id_find_debuginfo"},
        {(void **)&dw_cb.section_address, "dwfl_offline_section_address"},
    };
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        if (!(*fns[i].slot = dlsym(h, fns[i].name))) {
            set_note("a libdwfl function is missing in");
            return false;
        }
    dw_cb.debuginfo_path = NULL; /* libdwfl's default: next to the file, .debug/, /usr/lib/debug */
    return true;
}

void ot_symbolize_lines_use(const char *lib)
{
    if (!lib || !ot_strcmp(lib, "none")) lib = "";
    if (!ot_strcmp(lib, dw_lib)) return;
    ot_strlcpy(dw_lib, lib, sizeof dw_lib);
    if (dw_state < 0) dw_state = 0, dw_note[0] = 0; /* another library: worth a try */
}

static bool load(void)
{
    if (dw_state) return dw_state > 0;
    if (!dw_lib[0]) return false;
    dw_state = -1;
    void *h = dlopen(dw_lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        set_note("cannot load elfutils' libdw (Debian package libdw1):");
    } else if (resolve(h)) {
        dw_state = 1;
        dw_note[0] = 0;
    } else {
        dlclose(h);
    }
    return dw_state > 0;
}

const char *ot_symbolize_lines_note(void) { return dw_note[0] ? dw_note : NULL; }

/* The session's module for this file loaded at bias, reported on first use. */
static Dwfl_Module *module_for(const char *path, uintptr_t bias)
{
    if (dw_last < dw_nmods && dw_mods[dw_last].bias == bias && !ot_strcmp(dw_pool + dw_mods[dw_last].path, path))
        return dw_mods[dw_last].mod;
    for (unsigned i = 0; i < dw_nmods; i++)
        if (dw_mods[i].bias == bias && !ot_strcmp(dw_pool + dw_mods[i].path, path)) {
            dw_last = i;
            return dw_mods[i].mod;
        }
    size_t plen = ot_strlen(path);
    if (dw_session && (dw_nmods == DW_MODS || dw_pool_len + plen + 1 > DW_POOL)) {
        /* Full: start a new session (a long-running launcher symbolizing many dead processes). */
        dw.end(dw_session);
        dw_session = NULL;
        ot_memset(dw_hits, 0, sizeof dw_hits);
    }
    if (!dw_session) {
        dw_nmods = 0;
        dw_pool_len = 0;
        if (!(dw_session = dw.begin(&dw_cb))) return NULL;
        dw.report_begin(dw_session);
    } else {
        dw.report_begin_add(dw_session);
    }
    /* ET_DYN: add_p_vaddr makes base the load bias (address = bias + p_vaddr); ET_EXEC ignores it. */
    Dwfl_Module *m = dw.report_elf(dw_session, path, path, -1, bias, true);
    if (dw.report_end(dw_session, NULL, NULL) != 0) m = NULL;
    if (plen + 1 <= DW_POOL - dw_pool_len) {
        ot_memcpy(dw_pool + dw_pool_len, path, plen + 1);
        dw_mods[dw_nmods] = (typeof(dw_mods[0])){(uint32_t)dw_pool_len, bias, m};
        dw_pool_len += plen + 1;
        dw_last = dw_nmods++;
    }
    return m;
}

bool ot_symbolize_line(ot_frame_t *fr)
{
    if (dw_state < 0 || !dw_lib[0]) {
        fr->line_note = "libdw_unavailable";
        return false;
    }
    if (!fr->module_file || !fr->module || fr->module[0] != '/') {
        fr->line_note = "module_not_file";
        return false;
    }
    if (__atomic_exchange_n(&dw_busy, 1, __ATOMIC_ACQUIRE)) {
        fr->line_note = "symbolizer_busy";
        return false;
    }
    int saved = errno;
    bool found = false;
    bool loaded = load();
    Dwfl_Module *m = loaded ? module_for(fr->module, fr->ip - fr->offset) : NULL;
    fr->line_note = !loaded ? "libdw_unavailable" : !m ? "module_unreadable" : "no_line_info";
    int line = 0;
    const char *file = NULL;
    if (m) {
        typeof(dw_hits[0]) *h = &dw_hits[(fr->ip ^ fr->ip >> 12) % DW_HITS];
        if (h->mod != m || h->ip != fr->ip) {
            Dwfl_Line *l = dw.module_getsrc(m, fr->ip);
            h->ip = fr->ip;
            h->mod = m;
            h->line = 0;
            h->file = l ? dw.lineinfo(l, NULL, &h->line, NULL, NULL, NULL) : NULL;
        }
        file = h->file;
        line = h->line;
    }
    if (file && file[0] && line > 0) {
        ot_strlcpy(fr->file, file, sizeof fr->file);
        fr->line = line;
        fr->line_note = NULL;
        found = true;
    }
    __atomic_store_n(&dw_busy, 0, __ATOMIC_RELEASE);
    errno = saved;
    return found;
}
