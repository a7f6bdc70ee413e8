/* ot_symbolize_use_modules: symbolizing with a module map given by the caller (the launcher's
 * post-mortem of a dead process) instead of /proc/self/maps — function names and offsets from the
 * files, a build-id that does not match giving module+offset only, a missing file, hostile entries. */
#include <elf.h>
#include <link.h>
#include <unistd.h>

#include "harness.h"
#include "internal.h"

__attribute__((noinline)) void map_target_function(void);
__attribute__((noinline)) void map_target_function(void) { __asm__ volatile(""); }

static ot_module_desc_t mods[64];
static unsigned char ids[64][40];
static char paths[64][256];
static unsigned nmods;

static int cb(struct dl_phdr_info *info, size_t size, void *ctx)
{
    (void)size;
    (void)ctx;
    if (nmods >= 64) return 1;
    ot_module_desc_t *m = &mods[nmods];
    memset(m, 0, sizeof *m);
    if (nmods == 0) {
        ssize_t n = readlink("/proc/self/exe", paths[0], sizeof paths[0] - 1);
        paths[0][n > 0 ? n : 0] = 0;
    } else if (info->dlpi_name && info->dlpi_name[0] == '/') {
        snprintf(paths[nmods], sizeof paths[nmods], "%s", info->dlpi_name);
    } else {
        return 0;
    }
    m->path = paths[nmods];
    m->base = info->dlpi_addr;
    m->start = UINTPTR_MAX;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD) {
            uintptr_t s = info->dlpi_addr + ph->p_vaddr, e = s + ph->p_memsz;
            if (s < m->start) m->start = s;
            if (e > m->end) m->end = e;
        }
        if (ph->p_type == PT_NOTE) {
            const unsigned char *n = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
            for (size_t at = 0; at + 12 <= ph->p_memsz;) {
                uint32_t nsz, dsz, type;
                memcpy(&nsz, n + at, 4);
                memcpy(&dsz, n + at + 4, 4);
                memcpy(&type, n + at + 8, 4);
                size_t desc = at + 12 + ((nsz + 3) & ~3u);
                if (type == NT_GNU_BUILD_ID && nsz == 4 && dsz <= 40) {
                    memcpy(ids[nmods], n + desc, dsz);
                    m->build_id = ids[nmods];
                    m->build_id_len = dsz;
                }
                at = desc + ((dsz + 3) & ~3u);
            }
        }
    }
    nmods++;
    return 0;
}

static void load_map(void)
{
    nmods = 0;
    dl_iterate_phdr(cb, NULL);
}

TEST(test_map_names_functions)
{
    load_map();
    ASSERT(nmods >= 2);
    EXPECT(ot_symbolize_use_modules(mods, nmods) >= 2);
    ot_frame_t f;
    ot_symbolize((uintptr_t)map_target_function, &f);
    EXPECT_STR(f.function, "map_target_function");
    EXPECT_STR(f.module, paths[0]);
    EXPECT_EQ_U(f.offset, (uintptr_t)map_target_function - mods[0].base);
    ot_symbolize((uintptr_t)getppid + 1, &f); /* libc (not intercepted by ASan) */
    EXPECT_CONTAINS(f.module, "libc");
    ot_symbolize_begin(); /* back to this process's own maps */
}

static __attribute__((noinline)) uintptr_t map_return_address(void)
{
    uintptr_t r = (uintptr_t)__builtin_return_address(0);
    __asm__ volatile("" ::: "memory");
    return r;
}

/* The launcher's file:line: from the given map's files, where their build is the one mapped. */
TEST(test_map_file_line)
{
    uintptr_t ret = map_return_address(); int want = __LINE__;
    load_map();
    ASSERT(ot_symbolize_use_modules(mods, nmods) >= 2);
    ot_symbolize_lines_use("libdw.so.1");
    ot_frame_t f;
    ot_symbolize(ret - 1, &f);
    EXPECT(f.module_file);
    bool found = ot_symbolize_line(&f);
    const char *note = ot_symbolize_lines_note();
    ot_symbolize_lines_use(NULL);
    ot_symbolize_begin();
    if (!found && note) SKIP("%s", note);
    EXPECT(found);
    EXPECT_CONTAINS(f.file, "test_symbolize_map.c");
    EXPECT_EQ_U(f.line, want);
}

TEST(test_map_build_id_mismatch)
{
    load_map();
    ASSERT(mods[0].build_id_len > 0);
    ids[0][0] ^= 0xff; /* another build of the program */
    ot_symbolize_use_modules(mods, nmods);
    ot_frame_t f;
    ot_symbolize((uintptr_t)map_target_function, &f);
    EXPECT_STR(f.function, "");
    EXPECT_STR(f.module, paths[0]);
    EXPECT_EQ_U(f.offset, (uintptr_t)map_target_function - mods[0].base);
    /* Nor file and line: that file's DWARF describes another build. */
    EXPECT(!f.module_file);
    ot_symbolize_lines_use("libdw.so.1");
    EXPECT(!ot_symbolize_line(&f));
    EXPECT_STR(f.file, "");
    ot_symbolize_lines_use(NULL);
    ot_symbolize_begin();
}

TEST(test_map_missing_and_hostile)
{
    load_map();
    snprintf(paths[0], sizeof paths[0], "/nonexistent/oomtrace-test-binary");
    mods[1].path = "relative/path";     /* left out */
    mods[2].end = mods[2].start - 1;    /* left out */
    ot_symbolize_use_modules(mods, nmods);
    ot_frame_t f;
    ot_symbolize((uintptr_t)map_target_function, &f);
    EXPECT_STR(f.function, "");
    EXPECT_STR(f.module, "/nonexistent/oomtrace-test-binary");
    ot_symbolize(0x10, &f);
    EXPECT_STR(f.module, "");
    EXPECT_EQ_U(ot_symbolize_use_modules(NULL, 0), 0);
    ot_symbolize((uintptr_t)map_target_function, &f);
    EXPECT_STR(f.module, "");
    ot_symbolize_begin();
    ot_symbolize((uintptr_t)map_target_function, &f);
    EXPECT_STR(f.function, "map_target_function");
}

TEST_MAIN(test_map_names_functions, test_map_file_line, test_map_build_id_mismatch, test_map_missing_and_hostile)
