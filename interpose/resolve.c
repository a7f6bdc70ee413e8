/* Finding real symbols. glibc 2.34 removed __libc_dlsym, and our own exported dlsym/dlvsym wrappers
 * (hooks_dlsym.c) would answer any call we make to "dlsym" or "dlvsym" by name, so the real pair is
 * read straight out of libc's dynamic symbol table (default versions), without calling either. */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdatomic.h>

#include "internal.h"

typedef void *(*dlsym_fn)(void *, const char *);
typedef void *(*dlvsym_fn)(void *, const char *, const char *);
static _Atomic(dlsym_fn) real_dlsym;
static _Atomic(dlvsym_fn) real_dlvsym;

struct find_ctx {
    void *dlsym_addr, *dlvsym_addr;
};

/* Number of symbols in a DT_GNU_HASH table: highest bucket start, then walk its chain to the end. */
static uint32_t gnu_hash_nsyms(const uint32_t *h)
{
    uint32_t nbuckets = h[0], symoffset = h[1], bloom_size = h[2];
    const uint32_t *buckets = h + 4 + bloom_size * (sizeof(ElfW(Addr)) / 4);
    const uint32_t *chain = buckets + nbuckets;
    uint32_t last = 0;
    for (uint32_t i = 0; i < nbuckets; i++)
        if (buckets[i] > last) last = buckets[i];
    if (last < symoffset) return symoffset;
    while (!(chain[last - symoffset] & 1)) last++;
    return last + 1;
}

static int find_in_libc(struct dl_phdr_info *info, size_t size, void *data)
{
    struct find_ctx *ctx = data;
    const char *nm = info->dlpi_name;
    if (!nm || !ot_strstr(nm, "libc.so")) return 0;
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (!dyn) return 0;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const ElfW(Half) *versym = NULL;
    const uint32_t *gnu_hash = NULL, *sysv_hash = NULL;
    /* glibc relocates these d_ptr entries to absolute addresses in the loaded image. */
    for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_SYMTAB: symtab = (const void *)d->d_un.d_ptr; break;
        case DT_STRTAB: strtab = (const void *)d->d_un.d_ptr; break;
        case DT_VERSYM: versym = (const void *)d->d_un.d_ptr; break;
        case DT_GNU_HASH: gnu_hash = (const void *)d->d_un.d_ptr; break;
        case DT_HASH: sysv_hash = (const void *)d->d_un.d_ptr; break;
        }
    }
    if (!symtab || !strtab) return 0;
    uint32_t n = gnu_hash ? gnu_hash_nsyms(gnu_hash) : sysv_hash ? sysv_hash[1] : 0;
    for (uint32_t i = 0; i < n; i++) {
        const ElfW(Sym) *s = &symtab[i];
        if (ELF64_ST_TYPE(s->st_info) != STT_FUNC || s->st_shndx == SHN_UNDEF) continue;
        if (versym && (versym[i] & 0x8000)) continue; /* hidden = not the default version */
        const char *name = strtab + s->st_name;
        if (!ot_strcmp(name, "dlsym")) ctx->dlsym_addr = (void *)(info->dlpi_addr + s->st_value);
        else if (!ot_strcmp(name, "dlvsym")) ctx->dlvsym_addr = (void *)(info->dlpi_addr + s->st_value);
    }
    return ctx->dlsym_addr ? 1 : 0;
}

static void find_real(void)
{
    struct find_ctx ctx = {0};
    dl_iterate_phdr(find_in_libc, &ctx);
    if (!ctx.dlsym_addr) {
        /* Before glibc 2.34 dlsym lived in libdl; ask for the versioned symbol, which our
         * wrapper (exported under these versions only where glibc has them) does not shadow there. */
        ctx.dlsym_addr = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
        if (!ctx.dlsym_addr) ctx.dlsym_addr = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.17");
    }
    if (!ctx.dlvsym_addr) ctx.dlvsym_addr = (void *)dlvsym;
    atomic_store_explicit(&real_dlvsym, (dlvsym_fn)ctx.dlvsym_addr, memory_order_release);
    atomic_store_explicit(&real_dlsym, (dlsym_fn)ctx.dlsym_addr, memory_order_release);
}

void *ot_real_dlsym(void *handle, const char *name)
{
    dlsym_fn f = atomic_load_explicit(&real_dlsym, memory_order_acquire);
    if (OT_UNLIKELY(!f)) {
        find_real();
        f = atomic_load_explicit(&real_dlsym, memory_order_acquire);
    }
    return f ? f(handle, name) : NULL;
}

void *ot_real_dlvsym(void *handle, const char *name, const char *version)
{
    dlvsym_fn f = atomic_load_explicit(&real_dlvsym, memory_order_acquire);
    if (OT_UNLIKELY(!f)) {
        find_real();
        f = atomic_load_explicit(&real_dlvsym, memory_order_acquire);
    }
    return f ? f(handle, name, version) : NULL;
}

void *ot_next(const char *name)
{
    return ot_real_dlsym(RTLD_NEXT, name);
}
