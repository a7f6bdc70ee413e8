/* asmap.c: a maps text (the test's own, 64- and 32-bit, and this process's) broken down into the
 * right categories with the right figures, in any pieces, without malloc; and the diagnoses. */
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "report_internal.h"

#include "malloc_counter.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)

static char text[1 << 20];
static size_t tlen;

static void add(uint64_t start, uint64_t end, const char *perms, const char *path)
{
    int ino = path && path[0] == '/' ? 1234 : 0;
    tlen += (size_t)snprintf(text + tlen, sizeof text - tlen, "%llx-%llx %s 00000000 %s %d%s%s\n",
                             (unsigned long long)start, (unsigned long long)end, perms, ino ? "fe:00" : "00:00", ino,
                             path ? "                          " : " ", path ? path : "");
}

/* A 64-bit process like the Caffe run with 8 threads: the executable and libc (with its bss),
 * [heap], 8 thread arenas (rw head + PROT_NONE tail, 64 MiB aligned), 8 thread stacks (4 KiB guard
 * below 8 MiB), a data file mapped whole, one large block's own mapping, an anonymous pool, [stack]. */
static void threaded_text(void)
{
    tlen = 0;
    add(0x555500000000, 0x555500002000, "r--p", "/opt/caffe/bin/classify");
    add(0x555500002000, 0x555500010000, "r-xp", "/opt/caffe/bin/classify");
    add(0x555500010000, 0x555500011000, "rw-p", "/opt/caffe/bin/classify");
    add(0x555500011000, 0x555500111000, "rw-p", NULL); /* its bss: 1 MiB */
    add(0x555501000000, 0x555503000000, "rw-p", "[heap]"); /* 32 MiB */
    for (int i = 0; i < 8; i++) {
        uint64_t a = 0x7f0000000000ull + (uint64_t)i * 64 * MiB;
        add(a, a + 132 * 1024, "rw-p", NULL);
        add(a + 132 * 1024, a + 64 * MiB, "---p", NULL);
    }
    for (int i = 0; i < 8; i++) {
        uint64_t a = 0x7f4000001000ull + (uint64_t)i * (8 * MiB + 4096);
        add(a, a + 4096, "---p", NULL);
        add(a + 4096, a + 4096 + 8 * MiB, "rw-p", NULL);
    }
    add(0x7f5000000000, 0x7f5040000000, "r--s", "/data/imagenet_mean.bin"); /* 1 GiB */
    add(0x7f6000000000, 0x7f6000401000, "rw-p", NULL); /* a 4 MiB block of malloc's own mmap */
    add(0x7f6100000000, 0x7f6102000000, "rw-p", NULL); /* the program's pool, 32 MiB */
    add(0x7f7000000000, 0x7f7000026000, "r--p", "/usr/lib/x86_64-linux-gnu/libc.so.6");
    add(0x7f7000026000, 0x7f700017c000, "r-xp", "/usr/lib/x86_64-linux-gnu/libc.so.6");
    add(0x7f700017c000, 0x7f70001d3000, "r--p", "/usr/lib/x86_64-linux-gnu/libc.so.6");
    add(0x7f70001d3000, 0x7f70001d5000, "rw-p", "/usr/lib/x86_64-linux-gnu/libc.so.6");
    add(0x7f70001d5000, 0x7f70001e2000, "rw-p", NULL);
    add(0x7ffd00000000, 0x7ffd00021000, "rw-p", "[stack]");
    add(0x7ffd10000000, 0x7ffd10004000, "r--p", "[vvar]");
    add(0x7ffd10004000, 0x7ffd10006000, "r-xp", "[vdso]");
}

static ot_asmap_t as, as2;

/* own: oomtrace's own mapping, [own_at, own_at + own) */
static uintptr_t own_lo[1], own_hi[1];
static void parse_own(ot_asmap_t *a, size_t piece, int bits, bool cuda, uintptr_t own_at, uint64_t own)
{
    own_lo[0] = own_at, own_hi[0] = own_at + own;
    ot_asmap_params_t p = {.pointer_bits = bits, .cuda_active = cuda, .limit = 800 * (int64_t)MiB,
                           .own_lo = own_lo, .own_hi = own_hi, .n_own = own ? 1 : 0};
    ot_asmap_begin(a, &p);
    for (size_t off = 0; off < tlen; off += piece) ot_asmap_feed(a, text + off, off + piece <= tlen ? piece : tlen - off);
}

static void parse(ot_asmap_t *a, size_t piece, int bits, bool cuda)
{
    parse_own(a, piece, bits, cuda, 0, 0);
}

TEST(categories_of_a_threaded_process)
{
    threaded_text();
    parse(&as, tlen, 64, false);
    ot_asmap_block(&as, 0x555501000100, 10 * MiB);      /* in [heap] */
    ot_asmap_block(&as, 0x7f0000000100, 100 * 1024);    /* in arena 0 */
    ot_asmap_block(&as, 0x7f6000000010, 4 * MiB);       /* its own mapping */
    ot_asmap_end(&as, 3763200);
    ASSERT(as.known);
    EXPECT_EQ_U(as.cat[OT_AS_ARENAS].count, 8);
    EXPECT_EQ_U(as.cat[OT_AS_ARENAS].bytes, 512 * MiB);
    EXPECT_EQ_U(as.cat[OT_AS_ARENAS].live, 100 * 1024);
    EXPECT_EQ_U(as.cat[OT_AS_STACKS].count, 9); /* 8 threads and [stack] */
    EXPECT_EQ_U(as.cat[OT_AS_STACKS].bytes, 8 * (8 * MiB + 4096) + 0x21000);
    EXPECT_EQ_U(as.cat[OT_AS_HEAP].bytes, 32 * MiB + 0x401000);
    EXPECT_EQ_U(as.cat[OT_AS_HEAP].count, 2);
    EXPECT_EQ_U(as.cat[OT_AS_HEAP].live, 14 * MiB);
    EXPECT_EQ_U(as.heap_mappings, 1);
    EXPECT_EQ_U(as.cat[OT_AS_FILES].bytes, 1 * GiB);
    EXPECT_STR(as.cat[OT_AS_FILES].top[0].name, "/data/imagenet_mean.bin");
    EXPECT_EQ_U(as.cat[OT_AS_ANON].bytes, 32 * MiB);
    EXPECT_EQ_U(as.cat[OT_AS_ANON].count, 1);
    EXPECT_EQ_U(as.cat[OT_AS_LIBS].count, 2);
    EXPECT_EQ_U(as.cat[OT_AS_LIBS].bytes, 0x111000 + 0x1e2000);
    EXPECT_STR(as.cat[OT_AS_LIBS].top[0].name, "/usr/lib/x86_64-linux-gnu/libc.so.6");
    EXPECT_EQ_U(as.cat[OT_AS_LIBS].top[1].bytes, 0x111000); /* the executable, bss included */
    EXPECT_EQ_U(as.cat[OT_AS_OTHER].bytes, 0x6000);
    EXPECT_EQ_U(as.cat[OT_AS_REQUEST].bytes, 3763200);
    uint64_t sum = 0;
    for (unsigned k = 0; k < OT_AS_KINDS; k++)
        if (k != OT_AS_REQUEST) sum += as.cat[k].bytes;
    EXPECT_EQ_U(sum, as.total);
    unsigned order[OT_AS_KINDS];
    unsigned n = ot_asmap_order(&as, order);
    ASSERT(n >= 3);
    EXPECT_EQ_U(order[0], OT_AS_FILES);
    EXPECT_EQ_U(order[1], OT_AS_ARENAS);
    EXPECT_EQ_U(order[2], OT_AS_STACKS);
}

TEST(lines_split_anywhere_give_the_same_result)
{
    threaded_text();
    parse(&as, tlen, 64, false);
    ot_asmap_end(&as, 0);
    size_t pieces[] = {1, 7, 64, 100, 4096};
    for (unsigned i = 0; i < sizeof pieces / sizeof pieces[0]; i++) {
        parse(&as2, pieces[i], 64, false);
        ot_asmap_end(&as2, 0);
        EXPECT(!memcmp(&as, &as2, sizeof as));
    }
}

TEST(own_mappings_and_cuda_reservations)
{
    tlen = 0;
    add(0x555501000000, 0x555501100000, "rw-p", "[heap]");
    add(0x7f6000000000, 0x7f6004000000, "rw-p", NULL);            /* 64 MiB, not aligned use: ours */
    add(0x200000000, 0x200000000 + 8 * GiB, "---p", NULL);        /* the driver's reservation */
    add(0x7f7000000000, 0x7f7000200000, "rw-s", "/dev/nvidia0");
    add(0x7f7000200000, 0x7f7000300000, "rw-s", "/dev/nvidiactl");
    parse_own(&as, tlen, 64, true, 0x7f6000000000, 16 * MiB); /* merged with a neighbour of 48 MiB */
    ot_asmap_end(&as, 0);
    EXPECT_EQ_U(as.cat[OT_AS_CUDA].bytes, 8 * GiB);
    EXPECT_EQ_U(as.cat[OT_AS_OOMTRACE].bytes, 16 * MiB);
    EXPECT_EQ_U(as.cat[OT_AS_ANON].bytes, 48 * MiB);
    EXPECT_EQ_U(as.cat[OT_AS_DEVICE].bytes, 3 * MiB);
    EXPECT_EQ_U(as.cat[OT_AS_DEVICE].count, 2);
    EXPECT_STR(as.cat[OT_AS_DEVICE].top[0].name, "/dev/nvidia0");
    /* without CUDA the same range is only an anonymous reservation */
    parse(&as, tlen, 64, false);
    ot_asmap_end(&as, 0);
    EXPECT_EQ_U(as.cat[OT_AS_CUDA].bytes, 0);
    EXPECT_EQ_U(as.cat[OT_AS_ANON].bytes, 8 * GiB + 64 * MiB);
}

/* The map CI saw under load: one of oomtrace's own mappings (76 KiB) right below a thread arena's
 * used part, merged with it by the kernel into one rw mapping that starts off the arena's
 * alignment. The arena is still an arena, whole; ours is still ours. */
TEST(arena_merged_with_one_of_ours_below_it)
{
    tlen = 0;
    add(0x7fa0b3fed000, 0x7fa0b4021000, "rw-p", NULL);
    add(0x7fa0b4021000, 0x7fa0b8000000, "---p", NULL);
    add(0x7fa0b8000000, 0x7fa0b8021000, "rw-p", NULL);
    add(0x7fa0b8021000, 0x7fa0bc000000, "---p", NULL);
    parse_own(&as, tlen, 64, false, 0x7fa0b3fed000, 0x7fa0b4000000 - 0x7fa0b3fed000);
    ot_asmap_end(&as, 0);
    EXPECT_EQ_U(as.cat[OT_AS_ARENAS].count, 2);
    EXPECT_EQ_U(as.cat[OT_AS_ARENAS].bytes, 128 * MiB);
    EXPECT_EQ_U(as.cat[OT_AS_OOMTRACE].bytes, 0x13000);
    EXPECT_EQ_U(as.cat[OT_AS_ANON].bytes, 0);
    /* ours above a thread stack's rw part, merged: the stack keeps its guard and its size */
    tlen = 0;
    add(0x7f4000000000, 0x7f4000001000, "---p", NULL);
    add(0x7f4000001000, 0x7f4000801000 + 0x10000, "rw-p", NULL);
    add(0x7f5000000000, 0x7f5000021000, "rw-p", NULL);
    parse_own(&as, tlen, 64, false, 0x7f4000801000, 0x10000);
    ot_asmap_end(&as, 0);
    EXPECT_EQ_U(as.cat[OT_AS_STACKS].count, 1);
    EXPECT_EQ_U(as.cat[OT_AS_STACKS].bytes, 8 * MiB + 4096);
    EXPECT_EQ_U(as.cat[OT_AS_OOMTRACE].bytes, 0x10000);
    EXPECT_EQ_U(as.cat[OT_AS_ANON].bytes, 0x21000); /* what follows ours does not pair with the stack */
    uint64_t sum = 0;
    for (unsigned k = 0; k < OT_AS_KINDS; k++)
        if (k != OT_AS_REQUEST) sum += as.cat[k].bytes;
    EXPECT_EQ_U(sum, as.total);
}

static char lines[8][1024];
static unsigned nlines;
static void sink(void *ctx, const char *l)
{
    (void)ctx;
    if (nlines < 8) snprintf(lines[nlines++], sizeof lines[0], "%s", l);
}
static const char *diag(const ot_asmap_t *a, uint64_t req, bool *heap)
{
    static char all[8192], line[1024];
    nlines = 0;
    bool h = ot_asmap_diagnose(a, req, sink, NULL, line, sizeof line);
    if (heap) *heap = h;
    all[0] = 0;
    for (unsigned i = 0; i < nlines; i++) {
        strcat(all, lines[i]);
        strcat(all, "\n");
    }
    return all;
}

TEST(diagnosis_arenas_and_stacks)
{
    tlen = 0;
    add(0x555501000000, 0x555501800000, "rw-p", "[heap]");
    for (int i = 0; i < 8; i++) {
        uint64_t a = 0x7f0000000000ull + (uint64_t)i * 64 * MiB;
        add(a, a + 132 * 1024, "rw-p", NULL);
        add(a + 132 * 1024, a + 64 * MiB, "---p", NULL);
    }
    for (int i = 0; i < 24; i++) {
        uint64_t a = 0x7f4000001000ull + (uint64_t)i * (8 * MiB + 4096);
        add(a, a + 4096, "---p", NULL);
        add(a + 4096, a + 4096 + 8 * MiB, "rw-p", NULL);
    }
    parse(&as, tlen, 64, false);
    ot_asmap_block(&as, 0x555501000100, 2 * MiB);
    ot_asmap_end(&as, 3763200);
    as.rlimit_stack = 8 * MiB;
    bool heap = true;
    const char *d = diag(&as, 3763200, &heap);
    EXPECT_CONTAINS(d, "glibc malloc arenas reserve 512.0 MiB of address space in 8 arenas (0 B of live blocks in "
                       "them): set MALLOC_ARENA_MAX=2 or raise the limit");
    EXPECT_CONTAINS(d, "24 threads' stacks take 192.1 MiB (8.0 MiB each; RLIMIT_STACK 8.0 MiB sets the default)");
    EXPECT(strstr(d, "malloc arenas") < strstr(d, "stacks take")); /* largest first */
    EXPECT(!heap);
}

TEST(diagnosis_file_mapped_whole_and_heap)
{
    threaded_text();
    parse(&as, tlen, 64, false);
    ot_asmap_end(&as, 0);
    bool heap = true;
    const char *d = diag(&as, 0, &heap);
    EXPECT_CONTAINS(d, "/data/imagenet_mean.bin is mapped whole (1.0 GiB)");
    EXPECT(!heap);
    /* a heap that holds most of it: no line of ours, and the heap is said to dominate */
    tlen = 0;
    add(0x555501000000, 0x555511000000, "rw-p", "[heap]");
    add(0x7f6100000000, 0x7f6100100000, "rw-p", NULL);
    parse(&as, tlen, 64, false);
    ot_asmap_block(&as, 0x555501000100, 200 * MiB);
    ot_asmap_end(&as, 0);
    d = diag(&as, 0, &heap);
    EXPECT(heap);
    EXPECT_STR(d, "");
}

TEST(diagnosis_cuda_reservation)
{
    tlen = 0;
    add(0x555501000000, 0x555501800000, "rw-p", "[heap]");
    add(0x200000000, 0x200000000 + 16 * GiB, "---p", NULL);
    parse(&as, tlen, 64, true);
    ot_asmap_end(&as, 0);
    const char *d = diag(&as, 0, NULL);
    EXPECT_CONTAINS(d, "the CUDA driver maps 16.0 GiB of virtual address space: an address-space limit (ulimit -v, "
                       "a scheduler's vmem limit) cannot work with CUDA \xe2\x80\x94 use a memory (RSS/cgroup) limit "
                       "instead");
}

/* A 32-bit process (seed 001): arenas are 1 MiB-aligned there; the diagnosis names the 3-4 GiB. */
TEST(diagnosis_32_bit)
{
    tlen = 0;
    add(0x08048000, 0x08050000, "r-xp", "/usr/bin/classification");
    add(0x08050000, 0x08051000, "rw-p", "/usr/bin/classification");
    add(0x09000000, 0x49000000, "rw-p", "[heap]"); /* 1 GiB */
    for (int i = 0; i < 4; i++) {
        uint64_t a = 0x50000000ull + (uint64_t)i * MiB;
        add(a, a + 128 * 1024, "rw-p", NULL);
        add(a + 128 * 1024, a + MiB, "---p", NULL);
    }
    add(0x60000000, 0xa0000000, "r--p", "/models/bvlc_alexnet.caffemodel"); /* 1 GiB */
    add(0xb0000000, 0xe0000000, "rw-p", NULL);                              /* 768 MiB */
    add(0xf7000000, 0xf7100000, "r-xp", "/lib/arm-linux-gnueabihf/libc.so.6");
    parse(&as, tlen, 32, false);
    ot_asmap_block(&as, 0x09000100, 900 * MiB);
    ot_asmap_end(&as, 3763200);
    EXPECT_EQ_U(as.pointer_bits, 32);
    EXPECT_EQ_U(as.cat[OT_AS_ARENAS].count, 4);
    EXPECT_EQ_U(as.cat[OT_AS_ARENAS].bytes, 4 * MiB);
    bool heap = false;
    const char *d = diag(&as, 3763200, &heap);
    EXPECT_CONTAINS(d, "a 32-bit process can address at most 3\xe2\x80\x93" "4 GiB, this one has 2.8 GiB in use: run a "
                       "64-bit build");
    EXPECT_CONTAINS(d, "/models/bvlc_alexnet.caffemodel is mapped whole (1.0 GiB)");
}

/* The field case behind a flaky e2e run (asmap.sh arenas: 7 of 8 arenas): one of ours whose size is
 * not a whole number of pages (a nursery: 0x2bc80 bytes), in the hole right below a glibc arena, the
 * kernel merging the two. The registry must hold the whole last page, or the sliver after our bytes
 * reads as the program's and the arena's rw part starts off its alignment. Built here in this
 * process with MAP_FIXED, so the placement does not depend on the kernel's choice. */
TEST(arena_merged_with_one_of_ours_not_page_sized)
{
    const size_t own = 0x2bc80, own_map = 0x2c000;
    ASSERT(ot_asmap_read_self(&as, 0, false, false));
    uint64_t before = as.cat[OT_AS_ARENAS].count;
    char *res = mmap(NULL, 192 * MiB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    ASSERT(res != MAP_FAILED);
    char *a = (char *)(((uintptr_t)res + 64 * MiB + 64 * MiB - 1) & ~(uintptr_t)(64 * MiB - 1));
    munmap(res, (size_t)(a - own_map - res));
    munmap(a + 64 * MiB, (size_t)(res + 192 * MiB - (a + 64 * MiB)));
    /* ours, as ot_mmap maps it; then the arena: rw head, PROT_NONE tail, as glibc's new_heap */
    char *o = mmap(a - own_map, own_map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    ASSERT(o == a - own_map);
    ot_mmap_register(o, own);
    ASSERT(mprotect(a, 0x21000, PROT_READ | PROT_WRITE) == 0);
    bool ok = ot_asmap_read_self(&as, 0, false, false);
    ot_mmap_unregister(o);
    munmap(o, own_map);
    munmap(a, 64 * MiB);
    ASSERT(ok);
    EXPECT_EQ_U(as.cat[OT_AS_ARENAS].count, before + 1);
}

/* This process: the figures add up to VmSize, libc is a library, no malloc on the way. */
TEST(this_process_without_malloc)
{
    void *pool = mmap(NULL, 64 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    ASSERT(pool != MAP_FAILED);
#if HAVE_MALLOC_COUNTER
    mallocs_seen = 0;
    count_mallocs = 1;
#endif
    bool ok = ot_asmap_read_self(&as, 4096, false, true);
#if HAVE_MALLOC_COUNTER
    count_mallocs = 0;
    EXPECT_EQ_U(mallocs_seen, 0);
#endif
    ASSERT(ok);
    ot_host_mem_t m;
    ot_probe_host(&m);
    EXPECT(as.total <= (uint64_t)m.vm_size + 16 * MiB && as.total + 16 * MiB >= (uint64_t)m.vm_size);
    bool libc = false;
    for (unsigned i = 0; i < as.cat[OT_AS_LIBS].ntop; i++) libc |= strstr(as.cat[OT_AS_LIBS].top[i].name, "libc") != NULL;
    EXPECT(libc);
    EXPECT(as.cat[OT_AS_ANON].bytes >= 64 * MiB);
    EXPECT(as.threads >= 1);
    EXPECT(as.rss > 0 && as.cat[OT_AS_STACKS].count >= 1);
    munmap(pool, 64 * MiB);
}

/* The failure report's budget: a million live blocks attributed in well under 100 ms. The work is
 * all on this thread (ot_asmap_block only searches the parsed ranges), so its CPU time is measured:
 * time scheduled out on a loaded machine does not count. */
TEST(a_million_blocks_quickly)
{
    threaded_text();
    parse(&as, tlen, 64, false);
    struct timespec a, b;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    for (uint64_t i = 0; i < 1000000; i++) {
        uint64_t addr = (i % 3 == 0)   ? 0x555501000000 + (i % 100000) * 64
                        : (i % 3 == 1) ? 0x7f0000000000ull + (i % 8) * 64 * MiB + 64
                                       : 0x7f6000000010 + (i % 1000);
        ot_asmap_block(&as, addr, 32);
    }
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    ot_asmap_end(&as, 0);
    double ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
    printf("  1M blocks attributed in %.1f ms of CPU time\n", ms);
    EXPECT(ms < 50);
    EXPECT_EQ_U(as.cat[OT_AS_HEAP].live + as.cat[OT_AS_ARENAS].live, 32000000);
}

/* The whole host diagnosis (report_diag.c) with the breakdown: under RLIMIT_AS the batch-size advice
 * comes only where the heap fills the space; a 32-bit process (seed 001) is told to run a 64-bit
 * build, with or without a limit. */
static ot_report_t rep;
static const char *report_diag(const ot_asmap_t *a, int bits, int64_t rlimit, uint64_t req)
{
    static char all[8192];
    memset(&rep, 0, sizeof rep);
    static ot_failure_t f;
    memset(&f, 0, sizeof f);
    f.api = "malloc";
    f.size = req;
    f.error_code = 12;
    f.error_name = "ENOMEM";
    rep.f = &f;
    rep.mem.mem_total = rep.mem.mem_available = 64ll << 30;
    rep.mem.rlimit_as = rlimit;
    rep.mem.rlimit_data = rep.mem.cgroup_limit = rep.mem.cgroup_usage = -1;
    rep.mem.vm_size = rep.mem.vm_data = (int64_t)a->total;
    rep.mem.ptr_bits = bits;
    rep.as = a;
    nlines = 0;
    ot_report_diagnose(&rep, sink, NULL);
    all[0] = 0;
    for (unsigned i = 0; i < nlines; i++) strcat(strcat(all, lines[i]), "\n");
    return all;
}

TEST(report_diagnosis_batch_advice_only_for_the_heap)
{
    threaded_text(); /* a file mapped whole, arenas, stacks: not the heap */
    parse(&as, tlen, 64, false);
    ot_asmap_end(&as, 3763200);
    const char *d = report_diag(&as, 64, (int64_t)as.total, 3763200);
    EXPECT_CONTAINS(d, "RLIMIT_AS ");
    EXPECT_CONTAINS(d, "/data/imagenet_mean.bin is mapped whole (1.0 GiB)");
    EXPECT_CONTAINS(d, "glibc malloc arenas reserve 512.0 MiB of address space in 8 arenas");
    EXPECT_CONTAINS(d, "try: raise the address-space limit (ulimit -v; the job scheduler's vmem limit)\n");
    EXPECT(!strstr(d, "batch size"));
    /* the heap holds it all: the advice is back */
    tlen = 0;
    add(0x555501000000, 0x555511000000, "rw-p", "[heap]");
    parse(&as, tlen, 64, false);
    ot_asmap_block(&as, 0x555501000100, 200 * MiB);
    ot_asmap_end(&as, 3763200);
    d = report_diag(&as, 64, (int64_t)as.total, 3763200);
    EXPECT_CONTAINS(d, "or reduce the batch size or model size");
}

TEST(report_diagnosis_32_bit)
{
    tlen = 0;
    add(0x08048000, 0x08050000, "r-xp", "/usr/bin/classification");
    add(0x09000000, 0x49000000, "rw-p", "[heap]");
    add(0x60000000, 0xb0000000, "rw-p", NULL);
    parse(&as, tlen, 32, false);
    ot_asmap_block(&as, 0x09000100, 900 * MiB);
    ot_asmap_block(&as, 0x60000010, 1200 * MiB);
    ot_asmap_end(&as, 3763200);
    const char *d = report_diag(&as, 32, -1, 3763200);
    EXPECT_CONTAINS(d, "a 32-bit process can address at most 3\xe2\x80\x93" "4 GiB, this one has 2.3 GiB in use: run a 64-bit build");
    EXPECT(!strstr(d, "no limit explains it"));
}

TEST_MAIN(categories_of_a_threaded_process, lines_split_anywhere_give_the_same_result,
          own_mappings_and_cuda_reservations, arena_merged_with_one_of_ours_below_it, diagnosis_arenas_and_stacks, diagnosis_file_mapped_whole_and_heap,
          diagnosis_cuda_reservation, diagnosis_32_bit, this_process_without_malloc, arena_merged_with_one_of_ours_not_page_sized, a_million_blocks_quickly,
          report_diagnosis_batch_advice_only_for_the_heap, report_diagnosis_32_bit)
