/* A fast DWARF-CFI unwinder for ot_stack_capture (stacks=all and sampled stacks): what libunwind's
 * x86-64 fast trace does, with a shared cache and less work per frame. Correct for code built
 * without frame pointers: every frame's CFA comes from the module's .eh_frame, never from a guess.
 *
 * Per frame (ip, sp, bp): the rule for ip - 1 (a return address: look up the call) says where the
 * CFA is (sp + k or bp + k), that the return address is at CFA - 8, and where the caller's rbp was
 * saved (CFA + k, or not at all). Rules come from a global cache of 2^14 entries {ip ^ rule, rule},
 * 4-way set associative (a set is one cache line): a torn read (two writers racing for one entry)
 * fails the xor check but by a coincidence of bits, so readers need no lock and no 16-byte
 * atomics. A miss decodes the FDE through the module's .eh_frame_hdr search table (~1 us) and
 * caches the result, including "unsupported".
 *
 * Anything this walker does not model makes it give up, and the caller then asks libunwind for the
 * whole stack: a CFA defined by an expression or another register, a return address not at CFA - 8,
 * rbp restored from anything but a CFA slot, signal frames (augmentation 'S'), code outside any
 * module or without an FDE, odd pointer encodings. So the stacks are libunwind's stacks, only
 * faster when the frames are ordinary ones (checked frame by frame against libunwind in
 * tests/unit/test_stack.c and, on real programs, tests/e2e/unwind_verify.sh), except after a
 * dlclose, where libunwind's fast trace can misread and this walker, flushed, does not.
 * A per-thread cache of the last stack (further down) skips the steps a thread shares with it.
 *
 * Modules: a table of {span, eh_frame_hdr} built with dl_iterate_phdr (at start-up outside any hook,
 * again when an ip is found in no known module, with exponential back-off, and after dlclose).
 * Readers use a sequence counter and give up (libunwind fallback) while a rebuild runs; rebuilds
 * are serialised by a try-lock, never waited on. dl_iterate_phdr takes the loader lock: the same
 * exposure libunwind has on its own cache misses (PITFALLS: libunwind#16), no new one.
 *
 * Nothing here allocates; memory is static or the caller's (ot_unwind_attach). Not meant for
 * signal handlers (the failure path uses ot_stack_capture_exact), but safe if an allocating handler
 * gets here: a rule-cache write it interrupted fails the xor check, an interrupted module rebuild
 * reads as busy (libunwind takes the capture), and the per-thread cache is skipped while busy. */
#include <link.h>
#include <stdint.h>
#ifdef OT_UNWIND_VERIFY
#include <stdlib.h> /* abort */
#endif

#include <emmintrin.h>

#include "internal.h"
#include "unwind_fast.h"

/* ------------------------------------------------------------------ modules */
#define MAX_MODS 512
typedef struct {
    uintptr_t lo, hi;   /* span of the PT_LOAD segments */
    uintptr_t hdr;      /* .eh_frame_hdr in memory, 0 if none */
} mod_t;

static mod_t g_mods[MAX_MODS];
static unsigned g_nmods;
static unsigned g_mod_seq;       /* even: stable; odd: a rebuild is writing */
static int g_mod_lock;           /* try-lock for rebuilders */
static unsigned long long g_mod_adds; /* dlpi_adds at the last rebuild */
static unsigned g_unknown;       /* lookups that found no module since the last useful rebuild */

typedef struct {
    mod_t *out;
    unsigned n;
    unsigned long long adds;
} collect_t;

static int collect(struct dl_phdr_info *info, size_t size, void *arg)
{
    collect_t *c = arg;
    uintptr_t lo = UINTPTR_MAX, hi = 0, hdr = 0;
    if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds) c->adds = info->dlpi_adds;
    for (unsigned i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD) {
            uintptr_t a = info->dlpi_addr + ph->p_vaddr;
            if (a < lo) lo = a;
            if (a + ph->p_memsz > hi) hi = a + ph->p_memsz;
        } else if (ph->p_type == PT_GNU_EH_FRAME) {
            hdr = info->dlpi_addr + ph->p_vaddr;
        }
    }
    if (hi > lo && c->n < MAX_MODS) c->out[c->n++] = (mod_t){lo, hi, hdr};
    return 0;
}

/* Rebuilds the module table. Returns false if another thread is doing it. */
static bool mods_rebuild(void)
{
    if (__atomic_exchange_n(&g_mod_lock, 1, __ATOMIC_ACQUIRE)) return false;
    static mod_t scratch[MAX_MODS];
    collect_t c = {scratch, 0, 0};
    dl_iterate_phdr(collect, &c);
    /* Sorted by lo for the binary search (insertion sort: a few hundred entries, rare). */
    for (unsigned i = 1; i < c.n; i++) {
        mod_t m = scratch[i];
        unsigned j = i;
        while (j > 0 && scratch[j - 1].lo > m.lo) {
            scratch[j] = scratch[j - 1];
            j--;
        }
        scratch[j] = m;
    }
    bool news = c.adds != g_mod_adds || c.n != g_nmods;
    /* Release stores: none of them can become visible before the odd count. */
    __atomic_fetch_add(&g_mod_seq, 1, __ATOMIC_ACQ_REL); /* odd */
    for (unsigned i = 0; i < c.n; i++) {
        __atomic_store_n(&g_mods[i].lo, scratch[i].lo, __ATOMIC_RELEASE);
        __atomic_store_n(&g_mods[i].hi, scratch[i].hi, __ATOMIC_RELEASE);
        __atomic_store_n(&g_mods[i].hdr, scratch[i].hdr, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&g_nmods, c.n, __ATOMIC_RELEASE);
    g_mod_adds = c.adds;
    if (news) __atomic_store_n(&g_unknown, 0, __ATOMIC_RELAXED);
    __atomic_fetch_add(&g_mod_seq, 1, __ATOMIC_RELEASE); /* even */
    __atomic_store_n(&g_mod_lock, 0, __ATOMIC_RELEASE);
    return true;
}

/* 1 found, 0 in no module, -1 table busy. Acquire loads: the second read of the sequence count
 * cannot move before them. */
static int mods_find(uintptr_t pc, mod_t *out)
{
    unsigned s1 = __atomic_load_n(&g_mod_seq, __ATOMIC_ACQUIRE);
    if (s1 & 1) return -1;
    unsigned lo = 0, hi = __atomic_load_n(&g_nmods, __ATOMIC_ACQUIRE);
    if (hi > MAX_MODS) return -1;
    int found = 0;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        uintptr_t mlo = __atomic_load_n(&g_mods[mid].lo, __ATOMIC_ACQUIRE);
        if (pc < mlo) {
            hi = mid;
        } else if (pc >= __atomic_load_n(&g_mods[mid].hi, __ATOMIC_ACQUIRE)) {
            lo = mid + 1;
        } else {
            out->lo = mlo;
            out->hi = __atomic_load_n(&g_mods[mid].hi, __ATOMIC_ACQUIRE);
            out->hdr = __atomic_load_n(&g_mods[mid].hdr, __ATOMIC_ACQUIRE);
            found = 1;
            break;
        }
    }
    if (__atomic_load_n(&g_mod_seq, __ATOMIC_RELAXED) != s1) return -1;
    return found;
}

/* ------------------------------------------------------------------ DWARF readers
 * All reads are bounded by the module span [lo, hi): a corrupt table gives "unsupported", not a
 * fault. */
typedef struct {
    const uint8_t *p, *end;
    bool bad;
} rd_t;

static inline uint8_t rd_u8(rd_t *r)
{
    if (r->p + 1 > r->end) {
        r->bad = true;
        return 0;
    }
    return *r->p++;
}

static uint64_t rd_fixed(rd_t *r, unsigned n)
{
    if (r->p + n > r->end) {
        r->bad = true;
        r->p = r->end;
        return 0;
    }
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++) v |= (uint64_t)r->p[i] << (8 * i); /* little-endian */
    r->p += n;
    return v;
}

static uint64_t rd_uleb(rd_t *r)
{
    uint64_t v = 0;
    unsigned shift = 0;
    for (;;) {
        uint8_t b = rd_u8(r);
        if (r->bad) return 0;
        if (shift < 64) v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80)) return v;
    }
}

static int64_t rd_sleb(rd_t *r)
{
    uint64_t v = 0;
    unsigned shift = 0;
    uint8_t b;
    do {
        b = rd_u8(r);
        if (r->bad) return 0;
        if (shift < 64) v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40)) v |= ~(uint64_t)0 << shift;
    return (int64_t)v;
}

enum {
    PE_ABSPTR = 0x00, PE_ULEB = 0x01, PE_UDATA2 = 0x02, PE_UDATA4 = 0x03, PE_UDATA8 = 0x04,
    PE_SLEB = 0x09, PE_SDATA2 = 0x0a, PE_SDATA4 = 0x0b, PE_SDATA8 = 0x0c,
    PE_PCREL = 0x10, PE_DATAREL = 0x30, PE_INDIRECT = 0x80, PE_OMIT = 0xff
};

/* An encoded pointer. `apply`: add the pcrel / datarel base (false for lengths such as pc_range).
 * Indirect pointers are read as the address of the pointer (only ever skipped here). */
static uintptr_t rd_enc(rd_t *r, uint8_t enc, uintptr_t datarel, bool apply)
{
    uintptr_t at = (uintptr_t)r->p, v;
    if (enc == PE_OMIT) {
        r->bad = true;
        return 0;
    }
    switch (enc & 0x0f) {
    case PE_ABSPTR: v = (uintptr_t)rd_fixed(r, 8); break;
    case PE_ULEB: v = (uintptr_t)rd_uleb(r); break;
    case PE_UDATA2: v = (uintptr_t)rd_fixed(r, 2); break;
    case PE_UDATA4: v = (uintptr_t)rd_fixed(r, 4); break;
    case PE_UDATA8: v = (uintptr_t)rd_fixed(r, 8); break;
    case PE_SLEB: v = (uintptr_t)rd_sleb(r); break;
    case PE_SDATA2: v = (uintptr_t)(int64_t)(int16_t)rd_fixed(r, 2); break;
    case PE_SDATA4: v = (uintptr_t)(int64_t)(int32_t)rd_fixed(r, 4); break;
    case PE_SDATA8: v = (uintptr_t)rd_fixed(r, 8); break;
    default: r->bad = true; return 0;
    }
    if (!apply || v == 0) return v;
    switch (enc & 0x70) {
    case 0: return v;
    case PE_PCREL: return v + at;
    case PE_DATAREL: return v + datarel;
    default: r->bad = true; return 0;
    }
}

/* ------------------------------------------------------------------ rules */
/* A rule packed in 64 bits:
 *   bits 0-1   kind: 0 none (empty cache entry), 1 step, 2 unsupported, 3 outermost frame
 *   bit  2     CFA base: 0 rsp, 1 rbp
 *   bit  3     rbp saved at CFA + bpoff (else unchanged)
 *   bits 8-31  bpoff, signed
 *   bits 32-63 cfaoff, signed */
enum { R_NONE = 0, R_STEP = 1, R_UNSUP = 2, R_LAST = 3 };
static inline uint64_t rule_pack(unsigned kind, bool cfa_bp, bool bp_saved, int32_t bpoff, int32_t cfaoff)
{
    return (uint64_t)kind | (uint64_t)cfa_bp << 2 | (uint64_t)bp_saved << 3 |
           (uint64_t)((uint32_t)bpoff & 0xffffff) << 8 | (uint64_t)(uint32_t)cfaoff << 32;
}
static inline unsigned rule_kind(uint64_t r) { return (unsigned)(r & 3); }
static inline bool rule_cfa_bp(uint64_t r) { return (r >> 2) & 1; }
static inline bool rule_bp_saved(uint64_t r) { return (r >> 3) & 1; }
static inline int32_t rule_bpoff(uint64_t r) { return (int32_t)((uint32_t)(r >> 8) << 8) >> 8; }
static inline int32_t rule_cfaoff(uint64_t r) { return (int32_t)(uint32_t)(r >> 32); }
/* The CFA a step rule gives from (sp, bp), in *cfa; false where it fails the walker's test: the
 * stack grows down, so every caller's CFA lies above its callee's sp, within 2^30 and 8-byte
 * aligned. Anything else is a corrupt or unmodelled stack (the walk asks libunwind; the memo does
 * not look). */
static inline __attribute__((always_inline)) bool cfa_ok(uintptr_t cfa, uintptr_t sp)
{
    return OT_LIKELY(cfa - sp - 1 < (1u << 30)) && OT_LIKELY((cfa & 7) == 0);
}
static inline __attribute__((always_inline)) bool rule_cfa(uint64_t rule, uintptr_t sp, uintptr_t bp, uintptr_t *cfa)
{
    *cfa = (rule_cfa_bp(rule) ? bp : sp) + (uintptr_t)(intptr_t)rule_cfaoff(rule);
    return cfa_ok(*cfa, sp);
}

#define X86_RBP 6
#define X86_RSP 7
#define X86_RA 16

/* The register rules this walker follows while running a CFA program. */
typedef struct {
    int8_t cfa_reg;     /* 6 or 7; -1 = something else (expression, another register) */
    int64_t cfa_off;
    uint8_t bp_how;     /* 0 same value, 1 at CFA + bp_off, 2 anything else */
    int64_t bp_off;
    uint8_t ra_how;     /* 0 at CFA + ra_off, 1 undefined (outermost), 2 anything else */
    int64_t ra_off;
} cfi_state_t;

typedef struct {
    uint64_t code_align;
    int64_t data_align;
    uint8_t fde_enc;
    bool signal_frame, has_z;
    const uint8_t *insns, *insns_end;
} cie_t;

static bool parse_cie(uintptr_t at, const mod_t *m, cie_t *cie)
{
    rd_t r = {(const uint8_t *)at, (const uint8_t *)m->hi, false};
    uint64_t len = rd_fixed(&r, 4);
    if (len == 0xffffffffu) len = rd_fixed(&r, 8);
    if (r.bad || len > (uint64_t)(r.end - r.p)) return false;
    r.end = r.p + len;
    if (rd_fixed(&r, 4) != 0) return false; /* CIE id in .eh_frame */
    uint8_t version = rd_u8(&r);
    if (version != 1 && version != 3) return false;
    const char *aug = (const char *)r.p;
    while (rd_u8(&r) != 0)
        if (r.bad) return false;
    cie->code_align = rd_uleb(&r);
    cie->data_align = rd_sleb(&r);
    uint64_t ra = version == 1 ? rd_u8(&r) : rd_uleb(&r);
    if (r.bad || ra != X86_RA) return false;
    cie->fde_enc = PE_ABSPTR;
    cie->signal_frame = false;
    cie->has_z = aug[0] == 'z';
    if (cie->has_z) {
        uint64_t alen = rd_uleb(&r);
        if (r.bad || alen > (uint64_t)(r.end - r.p)) return false;
        const uint8_t *aend = r.p + alen;
        for (const char *a = aug + 1; *a; a++) {
            if (*a == 'R') {
                cie->fde_enc = rd_u8(&r);
            } else if (*a == 'P') {
                uint8_t enc = rd_u8(&r);
                (void)rd_enc(&r, enc & 0x7f, 0, false);
            } else if (*a == 'L') {
                (void)rd_u8(&r);
            } else if (*a == 'S') {
                cie->signal_frame = true;
            } else {
                break; /* unknown: 'z' lets us skip the rest */
            }
            if (r.bad) return false;
        }
        r.p = aend;
    } else if (aug[0] != 0) {
        return false; /* "eh" and other pre-'z' augmentations */
    }
    cie->insns = r.p;
    cie->insns_end = r.end;
    return !r.bad;
}

#define REMEMBER_MAX 8

/* Runs a CFA program until the row that covers `target`. */
static bool run_cfa(const uint8_t *p, const uint8_t *end, const cie_t *cie, uintptr_t loc, uintptr_t target,
                    cfi_state_t *st, const cfi_state_t *initial)
{
    rd_t r = {p, end, false};
    cfi_state_t stack[REMEMBER_MAX];
    unsigned depth = 0;
    while (r.p < r.end) {
        uint8_t op = rd_u8(&r);
        uint64_t reg = 0, delta = 0;
        int64_t off = 0;
        switch (op >> 6) {
        case 1: /* DW_CFA_advance_loc */
            delta = (op & 0x3f) * cie->code_align;
            goto advance;
        case 2: /* DW_CFA_offset */
            reg = op & 0x3f;
            off = (int64_t)rd_uleb(&r) * cie->data_align;
            goto set_offset;
        case 3: /* DW_CFA_restore */
            reg = op & 0x3f;
            goto restore;
        default: break;
        }
        switch (op) {
        case 0x00: continue; /* nop */
        case 0x01: /* set_loc */
            loc = rd_enc(&r, cie->fde_enc, 0, true);
            if (loc > target) return !r.bad;
            continue;
        case 0x02: delta = rd_fixed(&r, 1) * cie->code_align; goto advance;
        case 0x03: delta = rd_fixed(&r, 2) * cie->code_align; goto advance;
        case 0x04: delta = rd_fixed(&r, 4) * cie->code_align; goto advance;
        case 0x05: /* offset_extended */
            reg = rd_uleb(&r);
            off = (int64_t)rd_uleb(&r) * cie->data_align;
            goto set_offset;
        case 0x06: /* restore_extended */
            reg = rd_uleb(&r);
            goto restore;
        case 0x07: /* undefined */
            reg = rd_uleb(&r);
            if (reg == X86_RA) st->ra_how = 1;
            else if (reg == X86_RBP) st->bp_how = 2;
            continue;
        case 0x08: /* same_value */
            reg = rd_uleb(&r);
            if (reg == X86_RBP) st->bp_how = 0;
            else if (reg == X86_RA) st->ra_how = 2;
            continue;
        case 0x09: /* register */
            reg = rd_uleb(&r);
            (void)rd_uleb(&r);
            if (reg == X86_RBP) st->bp_how = 2;
            else if (reg == X86_RA) st->ra_how = 2;
            continue;
        case 0x0a: /* remember_state */
            if (depth == REMEMBER_MAX) return false;
            stack[depth++] = *st;
            continue;
        case 0x0b: /* restore_state */
            if (depth == 0) return false;
            /* The whole row, CFA included, as libgcc's and libunwind's unwinders restore it. */
            *st = stack[--depth];
            continue;
        case 0x0c: /* def_cfa */
            reg = rd_uleb(&r);
            st->cfa_reg = reg == X86_RSP || reg == X86_RBP ? (int8_t)reg : -1;
            st->cfa_off = (int64_t)rd_uleb(&r);
            continue;
        case 0x0d: /* def_cfa_register */
            reg = rd_uleb(&r);
            st->cfa_reg = reg == X86_RSP || reg == X86_RBP ? (int8_t)reg : -1;
            continue;
        case 0x0e: /* def_cfa_offset */
            st->cfa_off = (int64_t)rd_uleb(&r);
            continue;
        case 0x0f: /* def_cfa_expression */
            st->cfa_reg = -1;
            r.p += rd_uleb(&r);
            continue;
        case 0x10: /* expression */
        case 0x16: /* val_expression */
            reg = rd_uleb(&r);
            if (reg == X86_RBP) st->bp_how = 2;
            else if (reg == X86_RA) st->ra_how = 2;
            r.p += rd_uleb(&r);
            continue;
        case 0x11: /* offset_extended_sf */
            reg = rd_uleb(&r);
            off = rd_sleb(&r) * cie->data_align;
            goto set_offset;
        case 0x12: /* def_cfa_sf */
            reg = rd_uleb(&r);
            st->cfa_reg = reg == X86_RSP || reg == X86_RBP ? (int8_t)reg : -1;
            st->cfa_off = rd_sleb(&r) * cie->data_align;
            continue;
        case 0x13: /* def_cfa_offset_sf */
            st->cfa_off = rd_sleb(&r) * cie->data_align;
            continue;
        case 0x14: /* val_offset */
        case 0x15: /* val_offset_sf */
            reg = rd_uleb(&r);
            if (op == 0x14) (void)rd_uleb(&r);
            else (void)rd_sleb(&r);
            if (reg == X86_RBP) st->bp_how = 2;
            else if (reg == X86_RA) st->ra_how = 2;
            continue;
        case 0x2e: /* GNU_args_size */
            (void)rd_uleb(&r);
            continue;
        case 0x2f: /* GNU_negative_offset_extended */
            reg = rd_uleb(&r);
            off = -(int64_t)rd_uleb(&r) * cie->data_align;
            goto set_offset;
        default:
            return false; /* an opcode we do not know: give up on this frame */
        }
    advance:
        if (r.bad) return false;
        loc += delta;
        if (loc > target) return true;
        continue;
    set_offset:
        if (r.bad) return false;
        if (reg == X86_RBP) {
            st->bp_how = 1;
            st->bp_off = off;
        } else if (reg == X86_RA) {
            st->ra_how = 0;
            st->ra_off = off;
        }
        continue;
    restore:
        if (r.bad || !initial) return !r.bad && initial != NULL;
        if (reg == X86_RBP) {
            st->bp_how = initial->bp_how;
            st->bp_off = initial->bp_off;
        } else if (reg == X86_RA) {
            st->ra_how = initial->ra_how;
            st->ra_off = initial->ra_off;
        }
        continue;
    }
    return !r.bad;
}

/* Binary search of .eh_frame_hdr's table (datarel sdata4 pairs, as every linker writes them). */
static uintptr_t find_fde(const mod_t *m, uintptr_t pc)
{
    if (!m->hdr) return 0;
    rd_t r = {(const uint8_t *)m->hdr, (const uint8_t *)m->hi, false};
    uint8_t version = rd_u8(&r), ptr_enc = rd_u8(&r), count_enc = rd_u8(&r), table_enc = rd_u8(&r);
    if (r.bad || version != 1 || table_enc != (PE_DATAREL | PE_SDATA4)) return 0;
    (void)rd_enc(&r, ptr_enc, m->hdr, true);
    uintptr_t count = rd_enc(&r, count_enc, m->hdr, true);
    if (r.bad || count == 0 || count > (uintptr_t)(r.end - r.p) / 8) return 0;
    const int32_t *tab = (const int32_t *)(const void *)r.p;
    uintptr_t lo = 0, hi = count;
    while (hi - lo > 1) {
        uintptr_t mid = (lo + hi) / 2;
        if (m->hdr + (intptr_t)tab[2 * mid] <= pc) lo = mid;
        else hi = mid;
    }
    if (m->hdr + (intptr_t)tab[2 * lo] > pc) return 0;
    return m->hdr + (intptr_t)tab[2 * lo + 1];
}

/* The rule for a return address `ip` (its call instruction is at ip - 1). */
static OT_NOINLINE uint64_t rule_build(uintptr_t ip)
{
    const uint64_t unsup = rule_pack(R_UNSUP, 0, 0, 0, 0);
    uintptr_t pc = ip - 1;
    mod_t m;
    int f = mods_find(pc, &m);
    if (f < 0) return 0; /* busy: do not cache */
    if (f == 0) {
        /* Code loaded since the last rebuild? Back off exponentially when rebuilds find nothing.
         * Not found is never cached: the module table may be behind (a dlopen, or a rebuild that
         * another thread was running), and a cached "unsupported" would outlive it. */
        unsigned u = __atomic_add_fetch(&g_unknown, 1, __ATOMIC_RELAXED);
        if ((u & (u - 1)) == 0 && mods_rebuild()) f = mods_find(pc, &m);
        if (f <= 0) return 0;
    }
    uintptr_t fde = find_fde(&m, pc);
    if (!fde || fde < m.lo || fde >= m.hi) return unsup;

    rd_t r = {(const uint8_t *)fde, (const uint8_t *)m.hi, false};
    uint64_t len = rd_fixed(&r, 4);
    if (len == 0xffffffffu) len = rd_fixed(&r, 8);
    if (r.bad || len == 0 || len > (uint64_t)(r.end - r.p)) return unsup;
    r.end = r.p + len;
    uintptr_t cie_field = (uintptr_t)r.p;
    uint32_t cie_ptr = (uint32_t)rd_fixed(&r, 4);
    if (r.bad || cie_ptr == 0 || cie_ptr > cie_field - m.lo) return unsup;
    cie_t cie;
    if (!parse_cie(cie_field - cie_ptr, &m, &cie) || cie.signal_frame) return unsup;
    uintptr_t start = rd_enc(&r, cie.fde_enc, 0, true);
    uintptr_t range = rd_enc(&r, cie.fde_enc & 0x0f, 0, false);
    if (r.bad || pc < start || pc - start >= range) return unsup;
    if (cie.has_z) {
        uint64_t alen = rd_uleb(&r);
        if (r.bad || alen > (uint64_t)(r.end - r.p)) return unsup;
        r.p += alen;
    }

    cfi_state_t st = {.cfa_reg = -1, .bp_how = 0, .ra_how = 2};
    if (!run_cfa(cie.insns, cie.insns_end, &cie, start, UINTPTR_MAX, &st, NULL)) return unsup;
    cfi_state_t initial = st;
    if (!run_cfa(r.p, r.end, &cie, start, pc, &st, &initial)) return unsup;

    if (st.ra_how == 1) return rule_pack(R_LAST, 0, 0, 0, 0);
    if (st.cfa_reg < 0 || st.ra_how != 0 || st.ra_off != -8 || st.bp_how == 2) return unsup;
    if (st.cfa_off < 8 || st.cfa_off > INT32_MAX) return unsup;
    if (st.bp_how == 1 && (st.bp_off < -(1 << 23) || st.bp_off >= (1 << 23))) return unsup;
    return rule_pack(R_STEP, st.cfa_reg == X86_RBP, st.bp_how == 1, (int32_t)st.bp_off, (int32_t)st.cfa_off);
}

/* ------------------------------------------------------------------ the rule cache */
/* Direct-mapped, 2^14 entries rebuilt 81,685 rules while gcc's cc1 compiled the bench's big.c with
 * stacks=all (9,270 with 2^18 entries: the rest were conflicts between return addresses that hash
 * alike). Four ways in one cache line keep the lookup at one line and the table at 256 KiB. A new
 * rule goes in front and the set's oldest falls out; hits write nothing, so threads that share the
 * code share the lines read-only. */
#define RC_SET_BITS 12
#define RC_WAYS 4
typedef struct {
    uint64_t check; /* ip ^ rule */
    uint64_t rule;
} rc_entry_t;
typedef struct {
    rc_entry_t way[RC_WAYS];
} __attribute__((aligned(64))) rc_set_t;
static rc_set_t g_rc[1u << RC_SET_BITS];
static uint64_t g_rc_builds;

static inline rc_set_t *rc_set(uintptr_t ip)
{
    return &g_rc[(uint64_t)(ip * 0x9E3779B97F4A7C15ull) >> (64 - RC_SET_BITS)];
}

static inline bool rc_hit(const rc_entry_t *e, uintptr_t ip, uint64_t *rule)
{
    uint64_t check = __atomic_load_n(&e->check, __ATOMIC_RELAXED);
    uint64_t r = __atomic_load_n(&e->rule, __ATOMIC_RELAXED);
    *rule = r;
    return (check ^ r) == ip && rule_kind(r) != R_NONE;
}

static inline void rc_put(rc_entry_t *e, uint64_t check, uint64_t rule)
{
    /* Rule first: a reader between the two stores pairs the new rule with the old check, which
     * fails the xor test unless the old and new rules happen to differ exactly as the old and the
     * looked-up addresses do (as with two writers racing, the rare case this cache accepts). */
    __atomic_store_n(&e->rule, rule, __ATOMIC_RELAXED);
    __atomic_store_n(&e->check, check, __ATOMIC_RELAXED);
}

static OT_NOINLINE uint64_t rule_miss(rc_set_t *set, uintptr_t ip)
{
    uint64_t rule = rule_build(ip);
    __atomic_fetch_add(&g_rc_builds, 1, __ATOMIC_RELAXED);
    if (rule_kind(rule) != R_NONE) {
        for (unsigned w = RC_WAYS - 1; w > 0; w--) {
            rc_entry_t *from = &set->way[w - 1];
            rc_put(&set->way[w], __atomic_load_n(&from->check, __ATOMIC_RELAXED),
                   __atomic_load_n(&from->rule, __ATOMIC_RELAXED));
        }
        rc_put(&set->way[0], ip ^ rule, rule);
    }
    return rule;
}

/* The cached rule for ip, or 0 (R_NONE) where the cache has none: builds nothing (the memo's probe
 * runs outside the recursion guard, and a build may reach dl_iterate_phdr). */
static inline uint64_t rule_cached(uintptr_t ip)
{
    rc_set_t *set = rc_set(ip);
    uint64_t rule;
    for (unsigned w = 0; w < RC_WAYS; w++)
        if (rc_hit(&set->way[w], ip, &rule)) return rule;
    return 0;
}

static inline uint64_t rule_for(uintptr_t ip)
{
    uint64_t rule = rule_cached(ip);
    return OT_LIKELY(rule_kind(rule) != R_NONE) ? rule : rule_miss(rc_set(ip), ip);
}

/* ------------------------------------------------------------------ the walk
 * A thread keeps the frames of its last walk, {ip, sp, bp} each, plus where the rule of each frame
 * read the caller's rbp from (0: not saved). The next walk steps frame by frame as usual until it
 * reaches a frame equal to a remembered one (same ip and sp, and the same rbp where this frame's
 * rbp matters to the remembered walk: bp_matters); from there it checks the remembered frames
 * against the live stack instead of stepping: the return-address slot of every frame still holds
 * the remembered ip, every saved rbp that matters the remembered value. That is exact, by
 * induction: a frame equal in (ip, sp) and in bp where a CFA depends on it has the same rule,
 * hence the same CFA and slots, and equal slot contents give an equal next frame. A walk that goes
 * on past the frames it took over takes their rbp from this stack (join_bp). The checks are
 * independent loads, not a chain of dependent lookups, so the frames a thread shares with its
 * previous allocation (the outer part of the stack, or all of it in a loop) cost about a load
 * each. A frame at a remembered sp with another ip (the caller of both allocations called from
 * another line) does not end the search: the stacks often meet again one frame further out, and
 * any frame equal in (ip, sp, bp) is a valid start for the checks, whatever came before it.
 *
 * The memory is the thread's (ot_unwind_attach, from live.c's per-thread record): 2 to 16 buffers
 * in least-recently-used order, the last walk first; a new walk takes the least recently used. A
 * walk re-entered on the same thread (a signal handler that allocates) does not use them. A walk
 * made before a dlclose is never joined or reused (code_gen). The caller may attach a note to the
 * last walk (live.c: the call site it interned). The very same stack again, as the last walk or as
 * any remembered one (memo_find: frame 0 equal, every check holding), hands its note back instead
 * of frames; a note lives as long as its buffer and carries its walk's generation. Whole matches
 * ignore a different rbp in frame 0 where no frame of the walk computes its CFA from it
 * (build_checks: matters0). */

/* The thread's walk cache (its types are in unwind_fast.h, where the allocation path's noted-stack
 * test reads them) and the dlclose generation. */
OT_TLS walk_t *ot_walk_cache;
uint32_t ot_code_gen;
static uint64_t g_fallbacks;

/* ------------------------------------------------------------------ the stack memo
 * Sixteen walks are few for a program that allocates from hundreds of stacks in turn: recursive
 * code (a parser, bignums) reaches each allocation through another path of the same few functions
 * at another depth, and its next allocation is seldom one of the last sixteen stacks. Walking such
 * a stack again, joined to the last walk or not, steps or copies every one of its frames and then
 * hashes and compares all of them to find the call site it already has. The memo keeps, per
 * thread, what a noted walk needs to be recognised and nothing else: its frame 0, its checks (the
 * same list validate and is_stack run) and its note. The same test as is_stack, hence as exact:
 * frame 0 equal in ip and sp (and rbp where it matters), the same code generation, a walk whole
 * for this request, and every check holding, each read only once those before it held.
 * Recognised there, the stack costs a load and a compare per check, with no walk and no interning.
 *
 * 8-way sets by frame 0 and the return addresses of frames 1 to 4 (memo_key: a recursive
 * function's allocation at one depth has one (ip, sp) for every path that leads there), replaced
 * in turn, with a fingerprint of the key per way beside the sets. Sized by measurement on
 * tests/bench/recursive_stacks (callgrind, instructions per 5,000 rounds under stacks=all, none
 * 121 M): 2 MiB 519 M, 4 MiB 464 M, 8 MiB 442 M, 64 MiB
 * 407 M; at 2 MiB, 16 ways 473 M (more compares per probe, more lines read), 8 ways keyed by frame 0
 * alone 528 M (those with 1 KiB entries, before they were compacted: below). Entries stay
 * valid across threads that adopt the memory (the test does not depend on the thread) and are
 * never trusted across a dlclose (code_gen). Read and written by the owning thread under its busy
 * flag only. A walk with more checks than an entry holds (deep stack_depth) is not kept.
 * Stacks that differ only past frame 4 share a key, hence a set and a fingerprint: recursive_stacks
 * has 2,142 stacks in 859 of the 1,024 sets, 14 of those sets with 9 to 19 stacks. Replaced in
 * turn within its set alone, such a group crowds itself out in a cycle (each walk evicting the
 * next stack due): at 60000 rounds, 25,008 of 27,175 keeps evicted an entry. A full set therefore
 * places a new entry in a free way of its buddy (the set whose index differs in the low bit), and
 * a probe that finds no hit in a full set asks the buddy too (memo_buddy); only where both are
 * full is a way replaced. Then 2,317 keeps, 119 of them evicting; paired runs, 60000 rounds
 * (20 pairs, median of the ratios, quartiles): 0.895 (0.884-0.923) of the time without. A way
 * freed later (a dropped keep) can leave a buddy's entry unasked: a walk, never a wrong answer. */
/* An entry's checks: each slot's value as a whole word, then the slots, each in 16 bits as words
 * from frame 0's sp (the entry matches only at that sp), two arrays (memo_val, memo_slot): 10 bytes
 * a check, and a compare of a slot with its value is a load, a compare and a branch. A walk with a
 * slot not so aligned or placed is not kept. Until this, a check took 8 bytes, its value a 32-bit
 * difference from one of four bases named by the offset's low bits (frame 0's ip, its sp, a far
 * base for another module's return addresses, 0), decoded on every compare: at the 8,192 entries
 * that 4 MiB held, recursive_stacks 20000 under callgrind with a 2 MiB last-level cache took
 * 1,773 M instructions and 802 K last-level read misses with 16-byte checks, 1,891 M and 136 K with
 * those; 100000 rounds, median of 11 runs alternating with the program alone, 6.45x -> 5.55x.
 * The return addresses of the key's frames (memo_key_live reads them off the stack for the probe,
 * stepping as the walk steps) are kept in the entry's first line too: equal, with frame 0 equal,
 * each key frame's CFA is the walk's by the same induction as the checks (a CFA taken from rbp
 * rests on a saved rbp, whose check stays), so its return-address check holds. A probe rejects a
 * way on that line alone and skips those checks where they lead the list (kfirst), reading a third
 * fewer (recursive_stacks 20000: 17.9 M checks read, 11.2 M; 1,785 M instructions, 1,752 M; 100000
 * rounds, 11 interleaved runs: 4.95x -> 4.77x). They stay in the list for the successor guess
 * (memo_succ), which takes no key step and so compares every check.
 * An entry is an odd number of lines: apart by that, the ways' first lines (the line every probe
 * reads) fall in every set of the caches, where 512 bytes apart they fell only in every eighth set
 * of L1 and of L2: for them, caches an eighth of their size (recursive_stacks 20000 under
 * callgrind with this machine's caches, 48 KiB 12-way L1 and 2 MiB 16-way L2 as the last level:
 * L2 read misses 519,620 -> 5,233 for the same instructions; 300000 rounds, 7 interleaved runs,
 * 4.79x -> 4.53x). It is thirteen lines, 832 bytes, 73 checks: a stack of 32 frames built with frame
 * pointers has a check for each frame's return address and one for its saved rbp, and at nine lines
 * (59 checks of 8 bytes) most of recursive_stacks_fp's were not kept and were walked every time
 * (28,460 of its keeps at 20000 rounds had more than 55 checks). 1,024 sets of eight: 6.5 MiB,
 * touched as it fills. Paired runs, 20 and 16 pairs, median ratio and quartiles, against nine lines
 * of 8-byte checks: recursive_stacks 60000 0.984 (0.968-1.019), recursive_stacks_fp 60000 0.870
 * (0.778-0.974). */
#define MEMO_BYTES 832   /* thirteen lines */
#define MEMO_CHK_AT 96   /* where the checks start, after the header */
#define MEMO_CHK ((MEMO_BYTES - MEMO_CHK_AT) / (8 + 2)) /* 73: a value and a slot each */
#define MEMO_WAYS 8
#define MEMO_KEY_FRAMES 5 /* frame 0 and frames 1-4: the key (memo_key) */
typedef struct memo {
    /* The first line: what a probe compares before it reads a check. */
    uintptr_t ip, sp;                   /* frame 0 */
    uintptr_t kip[MEMO_KEY_FRAMES - 1]; /* the return addresses of key frames 1..nkey-1, then 0 */
    uint32_t tag;                       /* the note's tag; 0: empty */
    uint32_t code_gen, cut;
    uint8_t nkey; /* frames in the key, frame 0 counted */
    uint8_t complete, matters0;
    uint8_t clock; /* way[0]'s: the set's next way to replace */
    /* The second line on: what a hit reads. */
    uintptr_t bp;  /* frame 0's, compared where it matters (matters0) */
    uint32_t site; /* the note */
    uint16_t nchk, nips;
    /* The entry that answered right after this one the last time this one answered (its index in
     * the memo + 1; 0: none): the guess ot_unwind_noted_guess tests first (memo_succ). */
    uint32_t succ, succ2;
    uint8_t kfirst; /* the leading checks that are key frames' return addresses: a probe skips them */
    /* The checks: nchk values (val), then their slots (slot: (slot - sp) / 8), memo_val, memo_slot. */
    uint64_t chk[(MEMO_BYTES - MEMO_CHK_AT) / 8];
} __attribute__((aligned(64))) memo_t;
_Static_assert(sizeof(memo_t) == MEMO_BYTES, "a memo entry is thirteen lines");
_Static_assert((sizeof(memo_t) / 64) % 2 == 1, "an odd number of lines apart, entries' first lines use every cache set");
_Static_assert(offsetof(memo_t, bp) == 64, "a probe's compares read the entry's first line only");
_Static_assert(offsetof(memo_t, chk) == MEMO_CHK_AT && MEMO_CHK * (8 + 2) <= sizeof(((memo_t *)0)->chk), "the checks fit");
typedef struct memo_set {
    memo_t way[MEMO_WAYS];
} memo_set_t;
/* Each set's fingerprints, in an array of their own after the sets: a probe reads its set's 16
 * bytes (16 KiB for all sets, where the ways' first lines lie 832 bytes apart) and compares
 * only the ways whose fingerprint is the key's, instead of reading the first line of all eight
 * (recursive_stacks 20000, stacks=all, callgrind: 2.5 of a probe's 5.1 first-level read misses were
 * those lines). A filter only: a way it names is compared in full. 0: the way holds no entry. */
typedef struct memo_fps {
    uint16_t fp[MEMO_WAYS];
} memo_fps_t;
_Static_assert(OT_UNWIND_MEMO_BYTES >= 2 * (sizeof(memo_set_t) + sizeof(memo_fps_t)), "OT_UNWIND_MEMO_BYTES too small");
_Static_assert(MEMO_WAYS == 8, "a set's fingerprints fill one SSE2 register");

typedef struct {
    memo_set_t *set;
    memo_fps_t *fps;
    uint16_t fp;
} memo_key_t;

/* One step of the walk from (ip, sp, bp) with rule, ip's cached rule (rule_cached), as the walk's
 * step takes it (rule_cfa): R_STEP, the caller's return address, sp and rbp in place; R_LAST where
 * the frame ends the stack; R_NONE where its rule is not cached now or the step fails the walk's
 * test (the walk would ask libunwind). */
static inline __attribute__((always_inline)) unsigned memo_step(uint64_t rule, uintptr_t *ip, uintptr_t *sp,
                                                                uintptr_t *bp)
{
    unsigned kind = rule_kind(rule);
    if (OT_UNLIKELY(kind != R_STEP)) return kind == R_LAST ? R_LAST : R_NONE;
    uintptr_t cfa;
    if (OT_UNLIKELY(!rule_cfa(rule, *sp, *bp, &cfa))) return R_NONE;
    if (rule_bp_saved(rule)) *bp = *(const uintptr_t *)(cfa + (uintptr_t)(intptr_t)rule_bpoff(rule));
    *ip = *(const uintptr_t *)(cfa - 8);
    *sp = cfa;
    return R_STEP;
}

/* The memo's step cache: the steps of the probe's key frames, in the plain case and pre-decoded,
 * per thread and direct-mapped by ip. The plain case: a CFA at a fixed offset from sp, that offset
 * 8-byte aligned in [8, 2^30], the caller's rbp saved at a non-zero offset from the CFA or not at
 * all; from an 8-byte aligned sp such a step passes the walker's test (rule_cfa) by construction,
 * so it needs neither the test nor the decoding. The probe stepped four key frames through the
 * shared rule cache: its set's hash, the ways' xor checks, the rule's fields and the test took 208
 * of its 499 instructions per allocation (recursive_stacks 5000, stacks=all, callgrind). An entry
 * is a copy of the rule cache's answer, as exact: rules change only when code is unmapped, and the
 * cache is emptied when ot_code_gen moves on (steps_gen). Frames whose CFA is rbp plus an offset
 * (code built with frame pointers: Fedora 38 and Ubuntu 24.04 build their packages so) have a
 * second table of their own at the same index, looked at only where the sp table has no entry, so
 * that the plain case's hit costs what it did; their step makes rule_cfa's test, as rbp can hold
 * anything. Without it every such key frame stepped through the shared rule cache
 * (recursive_stacks built with -fno-omit-frame-pointer, 5000 rounds, stacks=all, callgrind:
 * 492.7 M -> 455.8 M instructions; the same program without frame pointers 391.3 M -> 392.8 M).
 * Anything else steps as before. */
#define STEP_BITS 10
typedef struct memo_step_entry {
    uintptr_t ip;   /* 0: empty */
    int32_t cfaoff; /* the CFA - sp (the rbp table's: the CFA - rbp) */
    int32_t bpoff;  /* where the caller's rbp is saved, from the CFA; 0: not saved */
} step_entry_t;
_Static_assert(sizeof(step_entry_t) == 16, "a step entry is 16 bytes");
/* Two tables of STEP_ENTRIES: the sp table, then the rbp table at the same index. */
#define STEP_ENTRIES (1u << STEP_BITS)
#define STEP_BYTES (2 * STEP_ENTRIES * sizeof(step_entry_t))
_Static_assert(OT_UNWIND_MEMO_BYTES >= 1024 * (sizeof(memo_set_t) + sizeof(memo_fps_t)) + STEP_BYTES,
               "OT_UNWIND_MEMO_BYTES holds 1,024 sets, their fingerprints and the step cache");

static inline step_entry_t *step_slot(walk_t *w, uintptr_t ip)
{
    return &w->steps[(uint64_t)(ip * 0x9E3779B97F4A7C15ull) >> (64 - STEP_BITS)];
}

/* A step-cache entry's step from its frame's cfa: the caller's rbp, return address and sp in place. */
static inline __attribute__((always_inline)) unsigned step_entry_step(const step_entry_t *e, uintptr_t cfa,
                                                                      uintptr_t *ip, uintptr_t *sp, uintptr_t *bp)
{
    if (e->bpoff) *bp = *(const uintptr_t *)(cfa + (uintptr_t)(intptr_t)e->bpoff);
    *ip = *(const uintptr_t *)(cfa - 8);
    *sp = cfa;
    return R_STEP;
}

/* memo_step through the step cache (w busy, its steps attached and of this code generation), from
 * an 8-byte aligned sp (memo_key_live tests frame 0's): a cached sp-based step keeps it aligned (its
 * offset is), an rbp-based one is taken only where it passes the walker's test (cfa_ok), and a step
 * that does not is not taken (R_NONE: the walk then steps it itself). The test per sp-based step
 * this replaced cost the probe 5 instructions (recursive_stacks 5000, stacks=all: 1.9 M). */
static inline __attribute__((always_inline)) unsigned memo_step_cached(walk_t *w, uintptr_t *ip, uintptr_t *sp,
                                                                       uintptr_t *bp)
{
    step_entry_t *e = step_slot(w, *ip);
    if (OT_LIKELY(e->ip == *ip)) return step_entry_step(e, *sp + (uintptr_t)(intptr_t)e->cfaoff, ip, sp, bp);
    step_entry_t *f = e + STEP_ENTRIES; /* the rbp table */
    if (OT_LIKELY(f->ip == *ip)) {
        uintptr_t cfa = *bp + (uintptr_t)(intptr_t)f->cfaoff;
        return cfa_ok(cfa, *sp) ? step_entry_step(f, cfa, ip, sp, bp) : R_NONE;
    }
    uintptr_t from = *ip;
    uint64_t rule = rule_cached(from);
    unsigned k = memo_step(rule, ip, sp, bp);
    if (OT_UNLIKELY(*sp & 7) && k == R_STEP) return R_NONE;
    int32_t off = rule_cfaoff(rule), bpoff = rule_bpoff(rule);
    /* An sp-based step is kept where it passes the walker's test from every 8-byte aligned sp: its
     * offset does from sp 0 (cfa_ok). */
    step_entry_t *t = rule_cfa_bp(rule) ? f : cfa_ok((uintptr_t)(intptr_t)off, 0) ? e : NULL;
    if (k == R_STEP && t && (!rule_bp_saved(rule) || bpoff != 0)) {
        t->ip = from;
        t->cfaoff = off;
        t->bpoff = rule_bp_saved(rule) ? bpoff : 0;
    }
    return k;
}

/* A memo key: frame 0 (ip, sp) and the return addresses of frames 1 to 4 (0 for a frame not stepped
 * to). Frame 0 at one depth of a recursive function has one (ip, sp) for every path that leads
 * there, and the frames just above it often have one too: keyed by frame 1 alone, those paths
 * shared the key, the set and the fingerprint, crowded each other out of the set's eight ways, and
 * each probe read the headers and first checks of 3.3 ways. Measured on recursive_stacks 20000
 * under stacks=all (callgrind; instructions, first-level read misses, walks): frames 0-1: 1,897 M,
 * 10.39 M, 103,093; 0-2: 1,845 M, 9.14 M, 53,065; 0-3: 1,826 M, 7.50 M, 25,377; 0-4: 1,836 M,
 * 6.85 M, 6,612; 0-5: 1,891 M, 6.33 M. Frames 0-4: 100000 rounds, 15 interleaved runs, 11% less
 * time than frames 0-2. The frames are folded in as they come, so that the probe and the kept walk
 * compute the same key each their way; with one step and fold per frame, not the five-frame array
 * hashed afterwards, the same run takes 1,785 M instructions. */
static inline uint64_t memo_fold(uint64_t h, uintptr_t ip) { return (h ^ ip) * 0xC2B2AE3D27D4EB4Full; }
static inline memo_key_t memo_key(const walk_t *w, uint64_t h)
{
    h *= 0x9E3779B97F4A7C15ull;
    uint32_t s = (uint32_t)(h >> 40) & w->memo_mask;
    uint16_t fp = (uint16_t)(h >> 16);
    return (memo_key_t){&w->memo[s], &w->memo_fps[s], fp ? fp : 1};
}
/* The set beside mk's (its index with the low bit flipped), for the same key: where a full set
 * places more entries of its keys (memo_keep), and where a probe of a full set asks next. */
static inline memo_key_t memo_buddy(const walk_t *w, memo_key_t mk)
{
    size_t s = (size_t)(mk.set - w->memo) ^ 1;
    return (memo_key_t){&w->memo[s], &w->memo_fps[s], mk.fp};
}
static inline uint64_t memo_key_start(uintptr_t ip0, uintptr_t sp0) { return ip0 ^ (sp0 << 9) ^ (sp0 >> 3); }

/* One key frame more (memo_key_live): R_STEP with its return address folded into *h and kept in
 * *kip; R_LAST where the stack ends (a zero return address, or its last frame), which ends the
 * key; R_NONE where a step is not cached now. */
static inline __attribute__((always_inline)) unsigned memo_key_step(walk_t *w, uintptr_t *ip, uintptr_t *sp,
                                                                    uintptr_t *bp, uint64_t *h, uintptr_t *kip)
{
    if (*ip == 0) return R_LAST;
    unsigned k = memo_step_cached(w, ip, sp, bp);
    if (k == R_STEP) {
        *h = memo_fold(*h, *ip);
        *kip = *ip;
    }
    return k;
}

/* The key of the live stack from frame 0 (ip, sp, bp), for a request of max frames, read off it as
 * the walk reads it (memo_step): a frame is stepped to where max leaves room for it and the stack
 * goes on. A kept walk's key comes from its own frames (memo_keep_key), which hold the same values
 * where the stack is the same. False where a rule a step needs is not cached now: not looked for. */
static inline bool memo_key_live(walk_t *w, uintptr_t ip, uintptr_t sp, uintptr_t bp, unsigned max,
                                 memo_key_t *mk, uintptr_t kip[MEMO_KEY_FRAMES - 1], unsigned *nkey)
{
    if (OT_UNLIKELY(sp & 7)) return false; /* memo_step_cached's premise */
    uint64_t h = memo_key_start(ip, sp);
    if (memo_step_cached(w, &ip, &sp, &bp) != R_STEP) return false;
    h = memo_fold(h, ip);
    kip[0] = ip;
    _Static_assert(MEMO_KEY_FRAMES - 1 == 4, "kip[1..3] are cleared below");
    kip[1] = kip[2] = kip[3] = 0; /* three stores, where a loop after the steps cost 21 instructions */
    unsigned j = 2;
    if (OT_LIKELY(max >= MEMO_KEY_FRAMES)) {
        /* The usual request: a constant bound, so the loop unrolls (15 instructions a probe). */
        _Static_assert(MEMO_KEY_FRAMES == 5, "three steps below");
#pragma GCC unroll 3
        for (unsigned k; j < MEMO_KEY_FRAMES; j++)
            if ((k = memo_key_step(w, &ip, &sp, &bp, &h, &kip[j - 1])) != R_STEP) {
                if (k == R_NONE) return false;
                break;
            }
    } else {
        for (unsigned k; j < max; j++)
            if ((k = memo_key_step(w, &ip, &sp, &bp, &h, &kip[j - 1])) != R_STEP) {
                if (k == R_NONE) return false;
                break;
            }
    }
    *nkey = j;
    *mk = memo_key(w, h);
    return true;
}

/* Walk b's key, from its frames: a walk that ended, or was cut for a request of max frames, holds
 * exactly the frames a probe for it steps to. */
static inline memo_key_t memo_keep_key(const walk_t *w, const wbuf_t *b, unsigned *nkey)
{
    uint64_t h = memo_key_start(b->f[0].ip, b->f[0].sp);
    unsigned j = 1;
    for (; j < MEMO_KEY_FRAMES && j < b->n; j++) h = memo_fold(h, b->f[j].ip);
    *nkey = j;
    return memo_key(w, h);
}

/* Entry e's check k: the value its slot must hold, and the slot (in words from frame 0's sp). */
static inline const uint64_t *memo_val(const memo_t *e) { return e->chk; }
static inline const uint16_t *memo_slot(const memo_t *e) { return (const uint16_t *)(const void *)(e->chk + e->nchk); }

/* Do entry e's checks from check c on hold against the stack whose frame 0 is at sp? In order: a
 * check's slot is read only once those before it held (first_failing). */
static inline __attribute__((always_inline)) bool memo_checks_hold(const memo_t *e, unsigned c, uintptr_t sp)
{
    const uint64_t *val = memo_val(e), *stack = (const uint64_t *)sp;
    const uint16_t *slot = memo_slot(e);
    unsigned k = c, n = e->nchk;
    while (k < n && stack[slot[k]] == val[k]) k++;
    return k == n;
}

/* The entry named by an index + 1 (a successor link), or NULL for 0 or one past the memo. */
static inline const memo_t *memo_entry(const walk_t *w, uint32_t link)
{
    return link && link - 1 < (w->memo_mask + 1) * MEMO_WAYS ? &w->memo[0].way[link - 1] : NULL;
}

/* Entry e's tag and code generation as one word, as a question's tag_gen: code_gen << 32 | tag. */
static inline uint64_t memo_tag_gen(const memo_t *e)
{
    _Static_assert(offsetof(memo_t, code_gen) == offsetof(memo_t, tag) + 4, "tag, then code_gen");
    uint64_t tag_gen;
    __builtin_memcpy(&tag_gen, &e->tag, sizeof tag_gen);
    return tag_gen;
}

/* Can entry e stand for a request of max frames from rbp bp? Whole for the request (as whole() for
 * a walk) and frame 0's rbp equal where it matters. */
static inline bool memo_fits(const memo_t *e, uintptr_t bp, unsigned max)
{
    return (e->complete || (e->cut != 0 && e->cut == max)) && (!e->matters0 || e->bp == bp);
}

/* Is entry e this very stack from (ip, sp, bp), for a request of max frames under tag_gen? Frame 0
 * equal (its rbp where it matters) and every check holding, the key frames' return addresses among
 * them: the induction of is_stack over the entry's checks, with no step taken. */
static inline bool memo_is_stack(const memo_t *e, uintptr_t ip, uintptr_t sp, uintptr_t bp, uint64_t tag_gen,
                                 unsigned max)
{
    return e->ip == ip && e->sp == sp && memo_tag_gen(e) == tag_gen && memo_fits(e, bp, max) &&
           memo_checks_hold(e, 0, sp);
}

/* The memo's successor guess. A run of allocations that the memo answers one after another comes in
 * an order that repeats: recursive_stacks 30000, stacks=all: of 2,102,763 memo answers that followed
 * another, 1,854,726 (88%) were the entry that followed the same entry the time before. So each
 * entry remembers the entry that answered after it (succ) and the one before that (succ2), and the
 * next question tests those entries first, each as a whole, in place of the key steps, the
 * fingerprints and the ways' compares (memo_succ); succ's first lines are fetched ahead while the
 * program runs on to its next allocation. Of that run's 2.26 M allocations the guess answered
 * 1.90 M with succ alone, 2.07 M with both. Time, recursive_stacks 60000 under stacks=all, paired
 * runs in alternating order (20 pairs, median of the ratios, quartiles): succ with its prefetch
 * 0.755 (0.730-0.777) of the time without; succ2 then 0.973 (0.960-0.985). Fetching succ2's lines or
 * the site's line ahead too gained nothing measurable (1.027, 1.020). */

/* Entry e answered, after w->memo_last (if any): the link from that one to e, and the first two lines
 * of e's successor fetched ahead (its compares, and its first checks in the second line). */
static inline void memo_answered(walk_t *w, const memo_t *e)
{
    uint32_t link = (uint32_t)(e - w->memo[0].way) + 1;
    memo_t *prev = (memo_t *)(uintptr_t)w->memo_last;
    if (prev && prev->succ != link) {
        prev->succ2 = prev->succ;
        prev->succ = link;
    }
    w->memo_last = e;
    w->stepped = 0;
    const char *next = (const char *)memo_entry(w, e->succ);
    if (next) {
        __builtin_prefetch(next);
        __builtin_prefetch(next + 64);
    }
}

/* The entry a successor link of entry last names, if it is this very stack (memo_is_stack) and not
 * last itself; else NULL. */
static inline const memo_t *memo_guess(const walk_t *w, const memo_t *last, uint32_t link, uintptr_t ip,
                                       uintptr_t sp, uintptr_t bp, uint64_t tag_gen, unsigned max)
{
    const memo_t *e = memo_entry(w, link);
    return e && e != last && memo_is_stack(e, ip, sp, bp, tag_gen, max) ? e : NULL;
}

/* The memo's first question in a run of its answers (w->memo_last set): is this the stack of one of
 * the two entries that followed the last one before, the more recent first? Its site (and *depth),
 * else 0. Not the last entry itself: the same stack twice in a row goes to the walk
 * (ot_unwind_noted_others). */
static inline __attribute__((always_inline)) uint32_t memo_succ(walk_t *w, uintptr_t ip, uintptr_t sp, uintptr_t bp,
                                                                uint32_t code_gen, unsigned max, uint32_t tag,
                                                                unsigned *depth)
{
    const memo_t *last = w->memo_last;
    const uint64_t tag_gen = (uint64_t)code_gen << 32 | tag;
    const memo_t *e = memo_guess(w, last, last->succ, ip, sp, bp, tag_gen, max);
    if (!e && !(e = memo_guess(w, last, last->succ2, ip, sp, bp, tag_gen, max))) return 0;
    *depth = e->nips < max ? e->nips : max;
    memo_answered(w, e);
    w->guessed++;
    return e->site;
}

/* What a probe compares a way with: the entry's first 48 bytes (frame 0 and the key's return
 * addresses) in three SSE2 compares, then its tag and generation as one word (memo_tag_gen), the
 * key's length and the fit, then its checks past the key frames' (kfirst). The twelve compares and
 * branches the SSE2 ones replaced took 36 instructions a candidate (stack_depth=2, callgrind). */
typedef struct {
    __m128i x01, x23, x45;
    uint64_t tag_gen;
    uintptr_t sp, bp;
    unsigned max, nkey;
} memo_probe_t;
_Static_assert(offsetof(memo_t, ip) == 0 && offsetof(memo_t, sp) == 8 && offsetof(memo_t, kip) == 16 &&
                   offsetof(memo_t, tag) == 48 && offsetof(memo_t, code_gen) == 52 && MEMO_KEY_FRAMES - 1 == 4,
               "memo_set_find reads the entry's first line as laid out");

/* The entry of set mk that is the probed stack, or NULL; *full where the set has no free way. */
static inline __attribute__((always_inline)) const memo_t *memo_set_find(const memo_key_t *mk, const memo_probe_t *q, bool *full)
{
    const __m128i fps = _mm_loadu_si128((const __m128i *)(const void *)mk->fps->fp), zero = _mm_setzero_si128();
    *full = _mm_movemask_epi8(_mm_cmpeq_epi16(fps, zero)) == 0;
    unsigned cand = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi16(fps, _mm_set1_epi16((short)mk->fp)));
    for (; cand; cand &= cand - 1, cand &= cand - 1) { /* two mask bits per way */
        const memo_t *e = &mk->set->way[__builtin_ctz(cand) / 2];
        const __m128i *line = (const __m128i *)(const void *)e;
        __m128i d = _mm_or_si128(_mm_or_si128(_mm_xor_si128(_mm_load_si128(line), q->x01),
                                              _mm_xor_si128(_mm_load_si128(line + 1), q->x23)),
                                 _mm_xor_si128(_mm_load_si128(line + 2), q->x45));
        if (_mm_movemask_epi8(_mm_cmpeq_epi8(d, zero)) == 0xFFFF && memo_tag_gen(e) == q->tag_gen &&
            e->nkey == q->nkey && memo_fits(e, q->bp, q->max) && memo_checks_hold(e, e->kfirst, q->sp))
            return e;
    }
    return NULL;
}

/* The site noted under tag for the stack from (ip, sp, bp) if the memo holds it, else 0: its set,
 * then, where that is full, its buddy (memo_keep places entries there). */
static inline uint32_t memo_find_noted(walk_t *w, uintptr_t ip, uintptr_t sp, uintptr_t bp, uint32_t code_gen,
                                       unsigned max, uint32_t tag, unsigned *depth, const memo_t **hit)
{
    memo_key_t mk;
    uintptr_t kip[MEMO_KEY_FRAMES - 1];
    unsigned nkey;
    if (OT_UNLIKELY(w->steps_gen != code_gen)) { /* code was unmapped: steps taken before may be wrong */
        for (unsigned i = 0; i < 2 * STEP_ENTRIES; i++) w->steps[i].ip = 0;
        w->steps_gen = code_gen;
    }
    if (!memo_key_live(w, ip, sp, bp, max, &mk, kip, &nkey)) return 0;
    const memo_probe_t q = {_mm_set_epi64x((long long)sp, (long long)ip),
                            _mm_set_epi64x((long long)kip[1], (long long)kip[0]),
                            _mm_set_epi64x((long long)kip[3], (long long)kip[2]),
                            (uint64_t)code_gen << 32 | tag,
                            sp,
                            bp,
                            max,
                            nkey};
    bool full;
    const memo_t *e = memo_set_find(&mk, &q, &full);
    if (!e && full) {
        mk = memo_buddy(w, mk);
        e = memo_set_find(&mk, &q, &full);
    }
    if (!e) return 0;
    *depth = e->nips < max ? e->nips : max;
    *hit = e;
    return e->site;
}

/* The first free way of set mk (fingerprint 0), or MEMO_WAYS where it is full. */
static inline unsigned memo_free_way(const memo_key_t *mk)
{
    unsigned k = 0;
    while (k < MEMO_WAYS && mk->fps->fp[k]) k++;
    return k;
}

/* Walk b, just noted with site under tag, kept in the memo (w busy), unless its checks do not fit
 * an entry. */
static void memo_keep(walk_t *w, const wbuf_t *b, uint32_t tag, uint32_t site)
{
    if (b->n < 2 || !(b->complete || b->cut)) return;
    unsigned nkey;
    memo_key_t mk = memo_keep_key(w, b, &nkey);
    unsigned k = memo_free_way(&mk);
    if (k == MEMO_WAYS) { /* full: a free way of the buddy set, else the next way here in turn */
        memo_key_t bk = memo_buddy(w, mk);
        unsigned j = memo_free_way(&bk);
        if (j < MEMO_WAYS) {
            mk = bk;
            k = j;
        } else {
            k = mk.set->way[0].clock % MEMO_WAYS;
            mk.set->way[0].clock = (uint8_t)(k + 1);
        }
    }
    memo_set_t *set = mk.set;
    memo_t *e = &set->way[k];
    mk.fps->fp[k] = 0; /* until the entry is whole (w is busy: no probe runs meanwhile) */
    uintptr_t ip = b->f[0].ip, sp = b->f[0].sp;
    unsigned kfirst = 0;
    if (b->nchk > MEMO_CHK) goto drop;
    e->nchk = (uint16_t)b->nchk; /* where the slots start */
    uint64_t *val = e->chk;
    uint16_t *slot = (uint16_t *)(void *)(e->chk + b->nchk);
    for (unsigned c = 0; c < b->nchk; c++) {
        uintptr_t at = b->chk[c].at;
        unsigned t = b->frame[c];
        /* The return address of a key frame, in its slot: the probe's own step read it there (the
         * same slot where the frames before are the same) and compares it with kip, so a probe
         * skips those that lead the list (kfirst). They are kept for memo_succ, which takes no
         * step. */
        if (kfirst == c && t >= 1 && t < nkey && at == b->f[t].sp - 8 && b->chk[c].val == b->f[t].ip) kfirst++;
        if ((at & 7) != 0 || at < sp || (at - sp) / 8 > UINT16_MAX) goto drop;
        val[c] = b->chk[c].val;
        slot[c] = (uint16_t)((at - sp) / 8);
    }
    for (unsigned j = 1; j < MEMO_KEY_FRAMES; j++) e->kip[j - 1] = j < nkey ? b->f[j].ip : 0;
    e->nkey = (uint8_t)nkey;
    e->ip = ip;
    e->sp = sp;
    e->bp = b->f[0].bp;
    e->site = site;
    e->code_gen = b->code_gen;
    e->cut = b->cut;
    e->kfirst = (uint8_t)kfirst;
    e->succ = e->succ2 = 0;
    e->nips = (uint16_t)b->nips;
    e->complete = (uint8_t)b->complete;
    e->matters0 = (uint8_t)b->matters0;
    e->tag = tag;
    mk.fps->fp[k] = mk.fp;
    return;
drop: /* the way taken stays empty: a half-written entry must not match */
    e->tag = 0;
}

void ot_unwind_attach(void *mem, size_t bytes)
{
    walk_t *w = mem;
    if (w && bytes < sizeof(walk_t) + 2 * sizeof(wbuf_t)) w = NULL;
    if (w) {
        /* The memo after the buffers (its entries, if this memory had them, stay: see above). */
        w->memo = NULL;
        w->memo_mask = 0;
        w->steps = NULL;
        /* Then the sets, their fingerprints and the step cache (whose entries, from a thread that
         * had this memory, stay under their generation). */
        if (bytes >= OT_UNWIND_CACHE_BYTES + 2 * (sizeof(memo_set_t) + sizeof(memo_fps_t)) + STEP_BYTES) {
            size_t sets = (bytes - OT_UNWIND_CACHE_BYTES - STEP_BYTES) / (sizeof(memo_set_t) + sizeof(memo_fps_t)),
                   p = 1;
            while (p * 2 <= sets) p *= 2;
            w->memo = (memo_set_t *)(void *)((char *)mem + OT_UNWIND_CACHE_BYTES);
            w->memo_fps = (memo_fps_t *)(void *)(w->memo + p);
            w->memo_mask = (uint32_t)(p - 1);
            w->steps = (step_entry_t *)(void *)(w->memo_fps + p);
        }
        size_t fit = (bytes - sizeof(walk_t)) / sizeof(wbuf_t);
        w->nbufs = fit < WALK_BUFS ? (uint32_t)fit : WALK_BUFS;
        for (unsigned b = 0; b < w->nbufs; b++) {
            w->order[b] = (uint8_t)b;
            w->tag[b] = 0;
            w->succ[b] = 0;
            w->buf[b].n = 0;
            w->buf[b].note_key = 0;
        }
        w->last = &w->buf[0];
        w->memo_last = NULL;
        w->memo_kept_walk = 0;
        w->busy = 0;
    }
    ot_walk_cache = w;
}

/* Does frame x's rbp matter to walk b: does some frame from x out compute its CFA from that value,
 * reached through frames that pass rbp on unsaved? Only then is it checked, and only then is bp
 * exact in a remembered frame. Optimised code keeps data in rbp (deep_large's main: its loop count)
 * and the frames between it and the allocation pass it on; the same stack with another count is the
 * same stack wherever no frame needs rbp. Nothing is computed from the last frame of a walk that
 * ended, nor from that of a cut walk (a walk that goes on from there reads rbp again: join_bp);
 * past a walk that ran out of room, unknown frames may. The frames a scan passes are those up to
 * the next frame that saves rbp or needs it, so the scans of one walk's steps cover it once. */
static inline bool passes_bp_on(const wframe_t *f) { return !f->bpaddr && f->bprel == 3; }
static inline unsigned bp_matters(const wbuf_t *b, unsigned x)
{
    const wframe_t *f = &b->f[x], *last = &b->f[b->n - 1];
    while (f < last && passes_bp_on(f)) f++;
    if (f == last && (b->complete || b->cut)) return 0;
    return f->bpaddr ? (unsigned)(f->bprel & 1) : 1; /* a CFA from rbp, or frames not known */
}

/* The checks of the steps from frame t to t + 1 for t in [from, to), appended at b->chk[c]; frames
 * from..to - 1 get their first[] and ips[] (k: the next ips index). Returns the new c. */
static inline unsigned add_checks(wbuf_t *b, unsigned from, unsigned to, unsigned c, unsigned *k)
{
    for (unsigned t = from; t < to; t++) {
        b->first[t] = (uint16_t)c;
        if (b->f[t].ip) b->ips[(*k)++] = b->f[t].ip;
        if (t + 1 == b->n) break;
        b->frame[c] = (uint16_t)(t + 1);
        b->chk[c].at = b->f[t + 1].sp - 8;
        b->chk[c++].val = b->f[t + 1].ip;
        if (b->f[t].bpaddr && bp_matters(b, t + 1)) {
            b->frame[c] = (uint16_t)(t + 1);
            b->chk[c].at = b->f[t].bpaddr;
            b->chk[c++].val = b->f[t + 1].bp;
        }
    }
    return c;
}

/* dst[i] = src[i] + d (mod 2^16) for i < n, eight at a time. */
static inline void add16(uint16_t *dst, const uint16_t *src, unsigned n, uint16_t d)
{
    unsigned i = 0;
    __m128i dd = _mm_set1_epi16((short)d);
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)&dst[i],
                         _mm_add_epi16(_mm_loadu_si128((const __m128i *)(const void *)&src[i]), dd));
    for (; i < n; i++) dst[i] = (uint16_t)(src[i] + d);
}

/* Where a walk took its outer frames from the walk before (a join that held to the end of what it
 * copied): frames [at, at + cnt) of the new walk are frames [from, from + cnt) of old. Their checks,
 * first[] and ips[] are old's, shifted, instead of being derived again frame by frame. */
typedef struct {
    const wbuf_t *old;
    unsigned at, from, cnt;
} joined_t;

/* May walk b, which took frames at..at + cnt - 1 from walk o (frames from..), take o's checks of
 * the steps among them (but the last)? A check of rbp at a step from a frame that saves it depends
 * on the frames that pass rbp on after it, and only where those run to the last joined frame (whose
 * caller differs, or whose rule this walk applied) can the two walks judge it otherwise. */
static bool joined_checks_fit(const wbuf_t *b, const joined_t *jn)
{
    unsigned last = jn->at + jn->cnt - 1, t = last - 1;
    while (t > jn->at && passes_bp_on(&b->f[t])) t--;
    if (!b->f[t].bpaddr || t + 1 >= last) return true; /* no such check among the copied steps */
    return bp_matters(b, t + 1) == bp_matters(jn->old, jn->from + (t + 1 - jn->at));
}

static void build_checks(wbuf_t *b, const joined_t *jn)
{
    /* Does frame 0's rbp matter to the walk as a whole (matters0)? Only for a walk that matches
     * in full (same stack, memo_find): a partial join decides frame by frame (bp_matters). */
    b->matters0 = b->n ? bp_matters(b, 0) : 1;
    unsigned c = 0, k = 0;
    if (jn && jn->cnt >= 3 && jn->at + jn->cnt <= b->n && joined_checks_fit(b, jn)) {
        /* Steps inside the joined frames are old's steps from..from + cnt - 2, but the last of them:
         * its check depends on the last joined frame's bprel, which the walk rewrote if it stepped
         * on from there. So old's steps j0..j1 - 1 are copied, and from frame j1 on they are derived. */
        const wbuf_t *o = jn->old;
        unsigned j0 = jn->from, j1 = jn->from + jn->cnt - 2;
        c = add_checks(b, 0, jn->at, 0, &k);
        unsigned c0 = o->first[j0], c1 = o->first[j1], shift = c - c0;
        int dframe = (int)jn->at - (int)j0;
        __builtin_memcpy(&b->chk[c], &o->chk[c0], (c1 - c0) * sizeof b->chk[0]);
        add16(&b->frame[c], &o->frame[c0], c1 - c0, (uint16_t)dframe);
        add16(&b->first[jn->at], &o->first[j0], j1 - j0, (uint16_t)shift);
        /* ips: every joined frame but the last has a nonzero ip (only an ended walk's last frame
         * has none); old's ips index equals the frame index there */
        __builtin_memcpy(&b->ips[k], &o->ips[j0], (j1 - j0) * sizeof b->ips[0]);
        k += j1 - j0;
        c = add_checks(b, jn->at + (j1 - j0), b->n, c + (c1 - c0), &k);
    } else {
        c = add_checks(b, 0, b->n, 0, &k);
    }
    b->nchk = c;
    b->nips = k;
    /* A check that never holds ends the list, so validate's loop needs no bound: its slot is its
     * own `at` field, which holds the address and not the address + 1. (There is room: at most two
     * checks per step between frames.) */
    b->chk[c].at = (uintptr_t)&b->chk[c].at;
    b->chk[c].val = b->chk[c].at + 1;
}

#ifdef OT_UNWIND_VERIFY
/* The checking build derives every walk's checks the plain way too (frame by frame, matters0 from
 * the outermost frame in) and stops the program where the two differ. */
static void build_checks_plain(wbuf_t *b)
{
    unsigned m = 1; /* past the last frame: frames not known, unless the walk ended or was cut */
    for (unsigned t = b->n; t-- > 0;) {
        const wframe_t *f = &b->f[t];
        if (t + 1 == b->n && (b->complete || b->cut)) m = 0;
        else if (f->bpaddr) m = (unsigned)(f->bprel & 1);
        else if (f->bprel != 3) m = 1;
    }
    b->matters0 = m;
    unsigned k = 0, c = add_checks(b, 0, b->n, 0, &k);
    b->nchk = c;
    b->nips = k;
}

static OT_TLS wbuf_t verify_buf;
static void verify_checks(const wbuf_t *b)
{
    wbuf_t *r = &verify_buf;
    r->n = b->n;
    r->complete = b->complete;
    r->cut = b->cut;
    __builtin_memcpy(r->f, b->f, b->n * sizeof b->f[0]);
    build_checks_plain(r);
    bool same = r->matters0 == b->matters0 && r->nchk == b->nchk && r->nips == b->nips &&
                !__builtin_memcmp(r->chk, b->chk, b->nchk * sizeof b->chk[0]) &&
                !__builtin_memcmp(r->frame, b->frame, b->nchk * sizeof b->frame[0]) &&
                !__builtin_memcmp(r->first, b->first, b->n * sizeof b->first[0]) &&
                !__builtin_memcmp(r->ips, b->ips, b->nips * sizeof b->ips[0]);
    if (!same) {
        static const char msg[] = "oomtrace-verify: a walk's checks differ from the plain derivation\n";
        ot_write_all(2, msg, sizeof msg - 1);
        abort();
    }
}
#endif

/* Frames old->f[j..] checked against the stack (frame j itself is already known to hold);
 * returns how many hold, from j on. */
static inline unsigned validate(const wbuf_t *old, unsigned j)
{
    unsigned c = (unsigned)(first_failing(old, old->first[j]) - old->chk);
    return (c == old->nchk ? old->n : old->frame[c]) - j;
}

/* The new walk, in the least recently used buffer, becomes the last walk. */
static inline void release(walk_t *w, wbuf_t *nw, unsigned n, uint32_t complete, uint32_t cut,
                           uint32_t code_gen, unsigned stepped, const joined_t *jn)
{
    unsigned b = w->order[w->nbufs - 1];
    w->stepped = stepped;
    w->tag[b] = n ? ot_walk_tag(nw->f[0].ip, nw->f[0].sp) : 0;
    nw->code_gen = code_gen;
    nw->n = n;
    nw->complete = complete;
    nw->cut = cut;
    nw->note_key = 0;
    if (++w->gens == 0) w->gens = 1;
    nw->gen = w->gens;
    build_checks(nw, jn);
#ifdef OT_UNWIND_VERIFY
    verify_checks(nw);
#endif
    ot_walk_to_front(w, w->nbufs - 1);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    w->busy = 0;
}

/* Only the owning thread reads or writes notes; a signal handler that walks in between replaces the
 * buffer (new gen, note cleared) or leaves it alone, so a note is only ever taken for its own walk.
 * The site is written before the key that validates it. */
void ot_unwind_note_set(uint32_t walk, uint32_t tag, uint32_t value)
{
    walk_t *w = ot_walk_cache;
    if (!w || !walk || !tag || !value || w->busy) return;
    wbuf_t *b = &w->buf[w->order[0]];
    if (b->gen != walk) return;
    b->note_site = value;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    b->note_key = note_key(walk, tag);
    if (w->memo) {
        w->busy = 1;
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        if (walk != w->memo_kept_walk) memo_keep(w, b, tag, value); /* else the memo holds it (ot_unwind_noted_others) */
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        w->busy = 0;
    }
}

/* A remembered walk that is this very stack: its place in the order, or -1. The tags leave only
 * the buffers whose frame 0 may be equal. A program that allocates from a few stacks in turn
 * (python3: two) finds each of them here. */
static inline int memo_find(const walk_t *w, uintptr_t ip, uintptr_t sp, uintptr_t bp, uint32_t code_gen,
                            unsigned max, unsigned skip)
{
    for (unsigned cand = ot_walk_candidates(w, ip, sp); cand; cand &= cand - 1) {
        unsigned b = (unsigned)__builtin_ctz(cand);
        if (!is_stack(&w->buf[b], ip, sp, bp, code_gen, max, skip)) continue;
        int r = 0;
        while (w->order[r] != b) r++;
        return r;
    }
    return -1;
}

/* The very same stack as the remembered walk m: its note if it has one under this tag, else its
 * frames. No frame is walked and m stays as it is. */
static inline unsigned same_stack(const wbuf_t *m, uintptr_t *ips, unsigned max, unsigned skip,
                                  ot_stack_note_t *note)
{
    unsigned n = m->nips > skip ? m->nips - skip : 0;
    if (n > max) n = max;
    if (note && note->tag && m->note_key == note_key(m->gen, note->tag)) {
        note->hit = 1;
        note->value = m->note_site;
    } else {
        __builtin_memcpy(ips, m->ips + skip, n * sizeof *ips);
        if (note) note->walk = m->gen;
    }
    return n;
}

/* Buffer b compared with this stack for a note under tag: NT_NONE (it has none: not compared),
 * NT_OTHER (it is another stack), NT_HIT (it is this one: it becomes the last walk, *site and
 * *depth are set). */
enum { NT_NONE, NT_OTHER, NT_HIT };
static inline __attribute__((always_inline)) int noted_take(walk_t *w, unsigned b, uintptr_t ip, uintptr_t sp,
                                                            uintptr_t bp, uint32_t code_gen, unsigned max,
                                                            uint32_t tag, uint32_t *site, unsigned *depth)
{
    const wbuf_t *m = &w->buf[b];
    if (m->note_key != note_key(m->gen, tag)) return NT_NONE;
    w->asked++;
    if (!is_stack(m, ip, sp, bp, code_gen, max, 0)) return NT_OTHER;
    w->memo_last = NULL;
    *site = ot_walk_noted_hit(w, m, max, depth);
    unsigned r = 0;
    while (w->order[r] != b) r++;
    ot_walk_to_front(w, r);
    return NT_HIT;
}

/* The successor guess alone, in a function of its own: the allocation path asks it first and the
 * rest (ot_unwind_noted_rest) only where it is not this stack. Inside the rest's large frame, its
 * loads and compares shared the registers of the buffers' and the probe's code, which spilled them
 * (recursive_stacks 60000 under stacks=all, paired runs, 20 pairs: 0.980 of the time, quartiles
 * 0.953-1.007). In a run of the memo's answers only (memo_last set: no walk and no buffer's answer
 * since): a program whose stacks the buffers answer never asks it. */
uint32_t ot_unwind_noted_guess(uintptr_t ip, uintptr_t sp, uintptr_t bp, unsigned max, uint32_t tag, unsigned *depth)
{
    walk_t *w = ot_walk_cache;
    if (!w || !w->memo_last || w->busy || !tag) return 0;
    w->busy = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    uint32_t site = memo_succ(w, ip, sp, bp, __atomic_load_n(&ot_code_gen, __ATOMIC_ACQUIRE), max, tag, depth);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    w->busy = 0;
    return site;
}

uint32_t ot_unwind_noted_rest(uintptr_t ip, uintptr_t sp, uintptr_t bp, unsigned max, uint32_t tag, unsigned *depth,
                              uint32_t *searched)
{
    walk_t *w = ot_walk_cache;
    *searched = 0;
    if (!w || w->busy || !tag) return 0;
    w->busy = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    uint32_t site = 0, code_gen = __atomic_load_n(&ot_code_gen, __ATOMIC_ACQUIRE);
    unsigned last = w->order[0], cand = ot_walk_candidates(w, ip, sp);
    /* A candidate without a note under tag is not compared here: the walk's own search must then
     * compare it (it hands back the frames of a remembered stack whatever its note). The last walk
     * was compared by ot_unwind_noted_inline where it has one. */
    const wbuf_t *l = &w->buf[last];
    bool whole = !(cand >> last & 1) || l->note_key == note_key(l->gen, tag);
    cand &= ~(1u << last);
    unsigned guess = w->succ[last];
    int got = NT_OTHER;
    w->asked = 0;
    if (guess && (cand >> (guess - 1) & 1)) {
        cand &= ~(1u << (guess - 1));
        got = noted_take(w, guess - 1, ip, sp, bp, code_gen, max, tag, &site, depth);
        whole &= got != NT_NONE;
    }
    for (; cand && got != NT_HIT; cand &= cand - 1) {
        got = noted_take(w, (unsigned)__builtin_ctz(cand), ip, sp, bp, code_gen, max, tag, &site, depth);
        whole &= got != NT_NONE;
    }
    *searched = got != NT_HIT && whole;
    /* Then the memo, which holds thousands more (its successor guess was asked first, above, in a
     * run of its answers; asked first, the probe cost deep_large's few stacks,
     * which the buffers hold, 22% more instructions per allocation). A memo hit leaves the buffers
     * as they are, so the same stack again is not the last walk that the allocation path compares
     * inline. So the entry that answered the last question asked here, with no walk and no other
     * remembered walk's answer since, answers no more (0): the walk that follows becomes the last
     * walk, which then answers the stack inline. A thread that took over an exited one's walk cache
     * (handoff_server: a thread per 10,000 allocations, all from one stack) otherwise asked the memo
     * for nearly every allocation: at five key frames, 111 more instructions each than at two. That
     * walk (the next one released) is not kept in the memo a second time. */
    if (got != NT_HIT && w->memo) {
        const memo_t *hit = NULL;
        site = memo_find_noted(w, ip, sp, bp, code_gen, max, tag, depth, &hit);
        if (site && hit == w->memo_last) {
            site = 0;
            w->memo_last = NULL;
            w->memo_kept_walk = w->gens + 1 != 0 ? w->gens + 1 : 1; /* release's next gen */
        } else if (site) {
            memo_answered(w, hit);
        }
    }
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    w->busy = 0;
    return site;
}

/* Both questions, the last walk's and the others', out of line for stack.c (the checking build's
 * probe) and the tests. */
uint32_t ot_unwind_noted(uintptr_t ip, uintptr_t sp, uintptr_t bp, unsigned max, uint32_t tag, unsigned *depth)
{
    uint32_t searched, site = ot_unwind_noted_inline(ip, sp, bp, max, tag, depth);
    return site ? site : ot_unwind_noted_others(ip, sp, bp, max, tag, depth, &searched);
}

/* A join took cnt frames over from remembered walk o (from its frame j, which this walk reached
 * with rbp bp), the first `copy` of them into nw->f[at..]. The rbp of the last of them, as this
 * stack has it, for the walk to go on from there: o kept rbp exact only where it mattered to o
 * (bp_matters), and from its last frame nothing was computed. The frames whose rbp may matter to
 * this walk but not to o are the run of frames that pass rbp on up to the last one: they get this
 * stack's value, which is what the frame before the run saved (a slot in a frame the join checked),
 * or bp where the run starts at frame j. */
static inline uintptr_t join_bp(wbuf_t *nw, unsigned at, unsigned copy, const wbuf_t *o, unsigned j, unsigned cnt,
                                uintptr_t bp)
{
    unsigned s = j + cnt - 1;
    while (s > j && passes_bp_on(&o->f[s - 1])) s--;
    if (s > j) bp = o->f[s - 1].bpaddr ? *(const uintptr_t *)o->f[s - 1].bpaddr : o->f[s - 1].bp;
    for (unsigned x = s - j; x < copy; x++) nw->f[at + x].bp = bp;
    return bp;
}

/* Frame 0 is (ip, sp, bp): a return address, the stack pointer just after that return, and rbp
 * there. Returns the number of frames written, or -1 to ask libunwind instead. */
int ot_unwind_from(uintptr_t *ips, unsigned max, unsigned skip, uintptr_t ip, uintptr_t sp, uintptr_t bp,
                   ot_stack_note_t *note)
{
    unsigned n = 0, raw = 0, j = 0, steps = 0, skip0 = skip;
    uint32_t cut = 0;
    uint32_t code_gen = 0;
    walk_t *w = ot_walk_cache;
    const wbuf_t *old = NULL;
    wbuf_t *nw = NULL;
    joined_t jn = {0};
    /* The note's early step, called once with the walk's final frames (then cleared). */
    void (*early)(ot_stack_note_t *, const uintptr_t *, unsigned) = note ? note->early : NULL;
    if (max == 0) return 0;
    if (w && !w->busy) {
        w->busy = 1;
        __atomic_signal_fence(__ATOMIC_SEQ_CST); /* a handler sees busy before we touch the buffers */
        w->memo_last = NULL; /* a walk or a remembered walk answers: the memo's answers are not in a row */
        old = &w->buf[w->order[0]];
        nw = &w->buf[w->order[w->nbufs - 1]];
        code_gen = __atomic_load_n(&ot_code_gen, __ATOMIC_ACQUIRE);
        if (!old->n || old->code_gen != code_gen) old = NULL;
        /* The very same stack as one remembered (a loop, or a few stacks in turn): emit it, keep
         * the buffers, walk nothing. */
        int r = note && note->searched ? -1 : memo_find(w, ip, sp, bp, code_gen, max, skip);
        if (r >= 0) {
            n = same_stack(&w->buf[w->order[r]], ips, max, skip, note);
            ot_walk_to_front(w, (unsigned)r);
            w->stepped = 0;
            __atomic_signal_fence(__ATOMIC_SEQ_CST);
            w->busy = 0;
            return (int)n;
        }
    }
    for (;;) {
        if (old) {
            /* Join the last walk where this one reaches one of its frames. */
            while (j < old->n && old->f[j].sp < sp) j++;
            if (j < old->n && old->f[j].sp == sp) {
                const wframe_t *o = &old->f[j];
                if (o->ip == ip && (o->bp == bp || !bp_matters(old, j))) {
                    unsigned ok = validate(old, j), cnt = ok;
                    bool to_end = j + ok == old->n, ends = to_end && old->complete; /* ends: the stack's end */
                    /* Their return addresses, from old's row of them: every frame's but that of an
                     * ended walk's last frame, which is 0 (old->ips[t] is frame t's before it). The
                     * first `skip` are left out; at max the walk stops at the frame that filled it. */
                    unsigned nz = to_end ? old->nips - j : ok, sk = skip < nz ? skip : nz, take = nz - sk;
                    bool full = take >= max - n;
                    if (full) {
                        take = max - n;
                        cnt = sk + take;
                    }
                    skip -= sk;
                    __builtin_memcpy(&ips[n], &old->ips[j + sk], take * sizeof *ips);
                    n += take;
                    /* The walk's frames are all known when this join ends it: the early step gets
                     * them before the frames are copied and the checks built, not after. */
                    if ((full || ends) && early) {
                        early(note, ips, n);
                        early = NULL;
                    }
                    /* The frames in one copy, and (the first such run) their checks later on. */
                    unsigned room = raw < WALK_MAX ? WALK_MAX - raw : 0, copy = cnt < room ? cnt : room;
                    __builtin_memcpy(&nw->f[raw], &old->f[j], copy * sizeof(wframe_t));
                    bp = join_bp(nw, raw, copy, old, j, cnt, bp);
                    if (!jn.cnt && copy == cnt) jn = (joined_t){old, raw, j, cnt};
                    raw += cnt; /* counted past WALK_MAX too: such a walk is not complete */
                    if (full) goto done;
                    if (ends) {
                        nw->complete = raw <= WALK_MAX;
                        goto finish;
                    }
                    /* Go on stepping from the last frame that held (its rule is in the cache); the
                     * stacks may meet again further out. */
                    const wframe_t *last = &old->f[j + ok - 1];
                    ip = last->ip;
                    sp = last->sp;
                    j += ok;
                    if (ip == 0) goto ended;
                    goto step;
                }
                /* Same sp, another frame (the same function called from another line, or
                 * another function at that depth): the stacks differ here but may meet again
                 * further out, where the next remembered frame is tried. */
                j++;
            }
        }
        if (nw && raw < WALK_MAX) nw->f[raw] = (wframe_t){ip, sp, bp, 0, 1}; /* rbp matters until known */
        raw++;
        if (ip == 0) goto ended;
        if (skip) skip--;
        else {
            ips[n++] = ip;
            if (n == max) goto done;
        }
    step:;
        steps++;
        uint64_t rule = rule_for(ip);
        unsigned kind = rule_kind(rule);
        if (OT_UNLIKELY(kind != R_STEP)) {
            if (kind == R_LAST) goto ended;
            __atomic_fetch_add(&g_fallbacks, 1, __ATOMIC_RELAXED);
            if (nw) release(w, nw, 0, 0, 0, code_gen, steps, NULL);
            return -1;
        }
        uintptr_t cfa;
        if (OT_UNLIKELY(!rule_cfa(rule, sp, bp, &cfa))) { /* libunwind decides */
            __atomic_fetch_add(&g_fallbacks, 1, __ATOMIC_RELAXED);
            if (nw) release(w, nw, 0, 0, 0, code_gen, steps, NULL);
            return -1;
        }
        uintptr_t nip = *(const uintptr_t *)(cfa - 8);
        if (rule_bp_saved(rule)) {
            uintptr_t at = cfa + (uintptr_t)(intptr_t)rule_bpoff(rule);
            if (nw && raw - 1 < WALK_MAX) {
                nw->f[raw - 1].bpaddr = at;
                nw->f[raw - 1].bprel = rule_cfa_bp(rule);
            }
            bp = *(const uintptr_t *)at;
        } else if (nw && raw - 1 < WALK_MAX && !rule_cfa_bp(rule)) {
            nw->f[raw - 1].bprel = 3; /* rbp passed on as it is: it matters if it matters to the caller */
        }
        sp = cfa;
        ip = nip;
    }
ended:
    if (nw) nw->complete = raw <= WALK_MAX;
    goto finish;
done:
    /* Stopped at the depth limit: the same first frames under the same limit are the same stack. */
    if (nw) {
        nw->complete = 0;
        if (raw <= WALK_MAX) cut = max | skip0 << 16;
    }
finish:
    if (early) early(note, ips, n);
    if (nw) {
        release(w, nw, raw < WALK_MAX ? raw : WALK_MAX, nw->complete, cut, code_gen, steps, jn.cnt ? &jn : NULL);
        if (note) note->walk = nw->gen;
    }
    return (int)n;
}

void ot_unwind_init(void)
{
    (void)mods_rebuild();
}

void ot_unwind_flush(void)
{
    /* After dlclose: code may be mapped again where the closed library was. Readers racing with
     * the clear see an entry that fails its xor check (a miss), never a stale rule. */
    for (unsigned i = 0; i < (1u << RC_SET_BITS); i++)
        for (unsigned w = 0; w < RC_WAYS; w++) rc_put(&g_rc[i].way[w], 0, 0);
    __atomic_fetch_add(&ot_code_gen, 1, __ATOMIC_RELEASE);
    (void)mods_rebuild();
}

void ot_unwind_atfork_child(void)
{
    /* Only this thread exists now. A rebuild that was half written is dropped (no modules until
     * the next rebuild, which the first unknown address triggers); its lock is released. */
    if (__atomic_load_n(&g_mod_seq, __ATOMIC_RELAXED) & 1) {
        __atomic_store_n(&g_nmods, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&g_unknown, 0, __ATOMIC_RELAXED);
        __atomic_fetch_add(&g_mod_seq, 1, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&g_mod_lock, 0, __ATOMIC_RELEASE);
}

unsigned ot_unwind_last_stepped(void)
{
    return ot_walk_cache ? ot_walk_cache->stepped : 0;
}

unsigned ot_unwind_last_asked(void)
{
    return ot_walk_cache ? ot_walk_cache->asked : 0;
}

unsigned ot_unwind_rule_set_for_test(uintptr_t ip)
{
    return (unsigned)(rc_set(ip) - g_rc);
}

void ot_unwind_rule_for_test(uintptr_t ip)
{
    (void)rule_for(ip);
}

void ot_unwind_stats(uint64_t *rule_builds, uint64_t *fallbacks)
{
    if (rule_builds) *rule_builds = __atomic_load_n(&g_rc_builds, __ATOMIC_RELAXED);
    if (fallbacks) *fallbacks = __atomic_load_n(&g_fallbacks, __ATOMIC_RELAXED);
}
