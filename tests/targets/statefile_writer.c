/* Writes a recorder state file (interpose/recorder_format.h) the way the recorder does, for the
 * supervisor's and postmortem's tests and the fuzzer's seed corpus, independently of the library:
 *   statefile_writer grow DIR [BLOCK_MIB]   mallocs and touches blocks from grow_buffers, updating
 *                                           the state after each, until it is killed
 *   statefile_writer leave DIR [torn|torn1]          writes a state and exits without removing it
 *   statefile_writer wait DIR               writes a state and sleeps (a live process's file)
 *   statefile_writer plain - [BLOCK_MIB]    grows as `grow` with no state file of its own (for the
 *                                           library's recorder to record) 
 * DIR "-" means the recorder's default (/dev/shm/oomtrace-UID). */

#include <elf.h>
#include <execinfo.h>
#include <fcntl.h>
#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../interpose/recorder_format.h"

#define NSITES 4
#define NLARGE 16
#define NHIST 32
#define NFAIL 4
#define NMODS 16

typedef struct {
    ot_rec_frame_t h;
    ot_rec_site_t sites[NSITES];
    ot_rec_large_t large[NLARGE];
    ot_rec_sample_t hist[NHIST];
    ot_rec_failure_t fail[NFAIL];
    ot_rec_module_t mods[NMODS];
} frame_t;

static ot_rec_file_t *id;
static frame_t *fr[2];
static size_t frame_size, total;
static uint64_t update_no, live, total_bytes, nblocks, peak;
static ot_rec_site_t site; /* grow_buffers's */
static ot_rec_large_t large[NLARGE];
static ot_rec_sample_t hist[NHIST];
static uint64_t nlarge, nhist;
static ot_rec_module_t mods[NMODS];
static unsigned nmods;

static uint64_t ns(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static unsigned long long start_time(void)
{
    char buf[1024];
    int fd = open("/proc/self/stat", O_RDONLY);
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    char *p = strrchr(buf, ')');
    for (int f = 2; f < 22 && p; f++) p = strchr(p + 1, ' ');
    return p ? strtoull(p + 1, NULL, 10) : 0;
}

static int module_cb(struct dl_phdr_info *info, size_t size, void *ctx)
{
    (void)size;
    (void)ctx;
    if (nmods >= NMODS) return 1;
    ot_rec_module_t *m = &mods[nmods];
    memset(m, 0, sizeof *m);
    const char *name = info->dlpi_name;
    if (nmods == 0) {
        ssize_t n = readlink("/proc/self/exe", m->path, sizeof m->path - 1);
        m->path[n > 0 ? n : 0] = 0;
    } else if (name && name[0] == '/') {
        snprintf(m->path, sizeof m->path, "%s", name);
    } else {
        return 0; /* the vDSO and others without a file */
    }
    m->base = info->dlpi_addr;
    m->start = UINT64_MAX;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD) {
            uint64_t s = info->dlpi_addr + ph->p_vaddr, e = s + ph->p_memsz;
            if (s < m->start) m->start = s;
            if (e > m->end) m->end = e;
        }
        if (ph->p_type == PT_NOTE) {
            const unsigned char *n = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
            for (uint64_t at = 0; at + 12 <= ph->p_memsz;) {
                uint32_t nsz, dsz, type;
                memcpy(&nsz, n + at, 4);
                memcpy(&dsz, n + at + 4, 4);
                memcpy(&type, n + at + 8, 4);
                uint64_t desc = at + 12 + ((nsz + 3) & ~3u);
                if (type == NT_GNU_BUILD_ID && nsz == 4 && !memcmp(n + at + 12, "GNU", 4) && dsz <= 40) {
                    memcpy(m->build_id, n + desc, dsz);
                    m->build_id_len = dsz;
                }
                at = desc + ((dsz + 3) & ~3u);
            }
        }
    }
    nmods++;
    return 0;
}

static void create(const char *dir_arg)
{
    char dir[512], path[700];
    if (!strcmp(dir_arg, "-")) snprintf(dir, sizeof dir, "/dev/shm/oomtrace-%u", (unsigned)geteuid());
    else snprintf(dir, sizeof dir, "%s", dir_arg);
    mkdir(dir, 0700);
    unsigned long long st = start_time();
    snprintf(path, sizeof path, "%s/" OT_REC_NAME_PREFIX "%d-%llu" OT_REC_NAME_SUFFIX, dir, (int)getpid(), st);
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        perror(path);
        exit(3);
    }
    frame_size = (sizeof(frame_t) + 4095) & ~4095ul;
    total = 4096 + 2 * frame_size;
    if (ftruncate(fd, (off_t)total) != 0) exit(3);
    char *base = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) exit(3);
    id = (ot_rec_file_t *)base;
    fr[0] = (frame_t *)(base + 4096);
    fr[1] = (frame_t *)(base + 4096 + frame_size);
    memcpy(id->magic, OT_REC_MAGIC, 8);
    id->layout_version = OT_REC_LAYOUT_VERSION;
    id->endian_mark = OT_REC_ENDIAN_MARK;
    id->total_size = total;
    id->header_size = sizeof *id;
    id->frame_size = (uint32_t)frame_size;
    id->frame_offset[0] = 4096;
    id->frame_offset[1] = 4096 + frame_size;
    id->sections[OT_REC_SEC_SITES] = (ot_rec_section_t){offsetof(frame_t, sites), sizeof(ot_rec_site_t), NSITES};
    id->sections[OT_REC_SEC_LARGE] = (ot_rec_section_t){offsetof(frame_t, large), sizeof(ot_rec_large_t), NLARGE};
    id->sections[OT_REC_SEC_HISTORY] = (ot_rec_section_t){offsetof(frame_t, hist), sizeof(ot_rec_sample_t), NHIST};
    id->sections[OT_REC_SEC_FAILURES] = (ot_rec_section_t){offsetof(frame_t, fail), sizeof(ot_rec_failure_t), NFAIL};
    id->sections[OT_REC_SEC_MODULES] = (ot_rec_section_t){offsetof(frame_t, mods), sizeof(ot_rec_module_t), NMODS};
    id->pid = getpid();
    id->ppid = getppid();
    id->start_time = st;
    id->clock_ticks = (uint64_t)sysconf(_SC_CLK_TCK);
    int b = open("/proc/sys/kernel/random/boot_id", O_RDONLY);
    if (b >= 0) {
        ssize_t n = read(b, id->boot_id, sizeof id->boot_id - 1);
        if (n > 0 && id->boot_id[n - 1] == '\n') id->boot_id[n - 1] = 0;
        close(b);
    }
    const char *sup = getenv("OOMTRACE_SUPERVISOR");
    id->supervisor_pid = sup ? atoi(sup) : 0;
    id->uid = getuid();
    id->created_realtime_ns = ns(CLOCK_REALTIME);
    id->created_mono_ns = ns(CLOCK_MONOTONIC);
    id->exec_count = 1;
    id->ptr_bits = 64;
    id->recorder_bytes = total;
    snprintf(id->version, sizeof id->version, "0.1.0");
    gethostname(id->host, sizeof id->host - 1);
    ssize_t n = readlink("/proc/self/exe", id->exe, sizeof id->exe - 1);
    id->exe[n > 0 ? n : 0] = 0;
    snprintf(id->cmdline, sizeof id->cmdline, "%s", id->exe);
    dl_iterate_phdr(module_cb, NULL);
    __atomic_store_n(&id->seq, 2, __ATOMIC_RELEASE);
}

static int64_t rss(void)
{
    char buf[4096];
    int fd = open("/proc/self/statm", O_RDONLY);
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    unsigned long long sz, res;
    return sscanf(buf, "%llu %llu", &sz, &res) == 2 ? (int64_t)(res * 4096) : -1;
}

/* One update, the recorder's way: frame update_no % 2, seq odd while it is written. stop_at: tear
 * it there (leave seq odd) for the torn cases. */
static void update(bool tear)
{
    update_no++;
    frame_t *f = fr[update_no % 2];
    uint64_t seq = f->h.seq;
    __atomic_store_n(&f->h.seq, seq + 1, __ATOMIC_RELEASE); /* odd */
    f->h.update_no = update_no;
    f->h.update_realtime_ns = ns(CLOCK_REALTIME);
    f->h.update_mono_ns = ns(CLOCK_MONOTONIC);
    f->h.n_sites = live ? 1 : 0;
    site.live_bytes = live;
    site.live_count = nblocks;
    site.total_bytes = total_bytes;
    site.total_count = nblocks;
    site.peak_bytes = peak;
    f->sites[0] = site;
    f->h.kind[0] = f->h.host = (ot_rec_totals_t){live, nblocks, peak, total_bytes, nblocks};
    memset(&f->h.mem, 0xff, sizeof f->h.mem); /* -1: unknown */
    f->h.mem.vm_rss = rss();
    f->h.mem.cgroup_version = 0;
    f->h.mem.ptr_bits = 64;
    f->h.mem.probed_realtime_ns = f->h.update_realtime_ns;
    f->h.cgroup_peak = -1;
    hist[nhist % NHIST] = (ot_rec_sample_t){f->h.update_realtime_ns, f->h.update_mono_ns, live, 0, rss(), -1};
    nhist++;
    memcpy(f->large, large, sizeof large);
    memcpy(f->hist, hist, sizeof hist);
    f->h.large_head = nlarge;
    f->h.history_head = nhist;
    memcpy(f->mods, mods, sizeof mods);
    f->h.n_modules = nmods;
    if (tear) return;
    __atomic_store_n(&f->h.seq, seq + 2, __ATOMIC_RELEASE); /* even: complete */
}

static __attribute__((noinline)) void note_site(uint64_t size)
{
    void *bt[OT_REC_MAX_FRAMES + 1];
    int n = backtrace(bt, OT_REC_MAX_FRAMES + 1);
    site.site_id = 1;
    site.kind = 0;
    site.device = -1;
    site.depth = n > 1 ? (uint32_t)(n - 1) : 0;
    for (int i = 1; i < n; i++) site.ips[i - 1] = (uint64_t)(uintptr_t)bt[i];
    ot_rec_large_t *l = &large[nlarge % NLARGE];
    memset(l, 0, sizeof *l);
    l->realtime_ns = ns(CLOCK_REALTIME);
    l->mono_ns = ns(CLOCK_MONOTONIC);
    l->size = size;
    l->live_host = live;
    l->device = -1;
    l->site_id = 1;
    l->depth = site.depth < OT_REC_LARGE_FRAMES ? site.depth : OT_REC_LARGE_FRAMES;
    memcpy(l->ips, site.ips, l->depth * sizeof l->ips[0]);
    nlarge++;
}

static __attribute__((noinline)) void grow_buffers(uint64_t block, int max_blocks)
{
    for (int i = 0; max_blocks < 0 || i < max_blocks; i++) {
        char *p = malloc(block);
        if (!p) {
            fprintf(stderr, "statefile_writer: malloc failed\n");
            exit(4);
        }
        live += block;
        total_bytes += block;
        nblocks++;
        if (live > peak) peak = live;
        if (id) {
            note_site(block); /* postmortem.sh: the site's line */
            update(false);
        }
        memset(p, 1, block); /* the page faults the OOM killer answers */
        if (id) update(false);
        if (max_blocks < 0) usleep(20000);
    }
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: statefile_writer grow|leave|wait DIR [ARG]\n");
        return 2;
    }
    if (!strcmp(argv[1], "plain")) {
        uint64_t mib = argc > 3 ? strtoull(argv[3], NULL, 10) : 16;
        grow_buffers(mib << 20, -1);
        return 0;
    }
    create(argv[2]);
    if (!strcmp(argv[1], "grow")) {
        uint64_t mib = argc > 3 ? strtoull(argv[3], NULL, 10) : 16;
        grow_buffers(mib << 20, -1);
        return 0;
    }
    grow_buffers(1 << 20, 3);
    const char *how = argc > 3 ? argv[3] : "";
    if (!strcmp(how, "torn")) { /* both frames torn: nothing can be read */
        update(true);
        update(true);
    } else if (!strcmp(how, "torn1")) { /* the newest torn: the one before is the state */
        update(true);
    }
    if (!strcmp(argv[1], "wait")) {
        printf("ready %d\n", (int)getpid());
        fflush(stdout);
        pause();
    }
    printf("left %d\n", (int)getpid());
    return 0;
}
