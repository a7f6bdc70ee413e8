/* The one reader of state files. Everything in a file is untrusted (a shared tmpfs, a crash in the
 * middle of a write, a crafted file): every size, offset and count is checked against the bytes
 * actually read, with 64-bit arithmetic that cannot wrap, before anything is copied; every string
 * is cut at its array's end. It never trusts a count to size an allocation beyond the file itself. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launcher.h"
#include "statefile.h"

static bool say(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool say(char *err, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (cap) vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return false;
}

/* [off, off + n) lies within [0, len)? */
static bool within(uint64_t off, uint64_t n, uint64_t len)
{
    return off <= len && n <= len - off;
}

/* Is s valid UTF-8 (what a JSON report may carry)? */
static bool utf8_ok(const char *s)
{
    for (const unsigned char *c = (const unsigned char *)s; *c;) {
        unsigned n = *c < 0x80 ? 0 : (*c & 0xe0) == 0xc0 ? 1 : (*c & 0xf0) == 0xe0 ? 2 : (*c & 0xf8) == 0xf0 ? 3 : 9;
        if (n == 9 || (n == 1 && *c < 0xc2) || (n == 3 && *c > 0xf4)) return false;
        for (unsigned i = 1; i <= n; i++)
            if ((c[i] & 0xc0) != 0x80) return false;
        c += n + 1;
    }
    return true;
}

/* Cuts s at its array's end, and replaces what is not UTF-8 (a report prints it) with '?'. */
static void cut(char *s, size_t cap)
{
    s[cap - 1] = 0;
    if (utf8_ok(s)) return;
    for (unsigned char *c = (unsigned char *)s; *c; c++)
        if (*c >= 0x80) *c = '?';
}

/* A path a report may print and the symbolizer may open: absolute, no control bytes. */
static bool usable_path(const char *p)
{
    if (p[0] != '/' || !utf8_ok(p)) return false;
    for (const unsigned char *c = (const unsigned char *)p; *c; c++)
        if (*c < 0x20 || *c == 0x7f) return false;
    return true;
}

typedef struct {
    uint64_t offset, stride, cap;
} sec_t;

/* Checks a section descriptor against the frame: entries at least `need` bytes, all inside. */
static bool section(const ot_rec_file_t *id, unsigned which, size_t need, sec_t *s, char *err, size_t errcap)
{
    static const char *const names[] = {"sites", "large", "history", "failures", "modules"};
    const ot_rec_section_t *d = &id->sections[which];
    s->offset = d->offset;
    s->stride = d->entry_size;
    s->cap = d->capacity;
    if (s->cap == 0) return true; /* absent: no entries */
    if (s->stride < need)
        return say(err, errcap, "corrupt: %s entries are %llu bytes, at least %zu expected", names[which],
                   (unsigned long long)s->stride, need);
    if (s->offset < sizeof(ot_rec_frame_t) || s->cap > id->frame_size / s->stride ||
        !within(s->offset, s->stride * s->cap, id->frame_size))
        return say(err, errcap, "corrupt: the %s section (offset %llu, %llu x %llu bytes) does not fit a %u-byte frame",
                   names[which], (unsigned long long)s->offset, (unsigned long long)s->cap,
                   (unsigned long long)s->stride, id->frame_size);
    return true;
}

/* The ring's valid entries, oldest first: i in [head - min(head, cap), head) at i % cap. */
static unsigned ring_count(uint64_t head, uint64_t cap)
{
    return (unsigned)(head < cap ? head : cap);
}

static bool frame_good(const unsigned char *f)
{
    uint64_t seq;
    memcpy(&seq, f, sizeof seq);
    return seq && !(seq & 1);
}

bool ot_sf_parse(const unsigned char *buf, size_t len, ot_sf_t *out, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    if (len < sizeof(ot_rec_file_t)) {
        if (len >= 8 && !memcmp(buf, OT_REC_MAGIC, 8))
            return say(err, errcap, "truncated: %zu bytes, the identity block alone is %zu", len, sizeof(ot_rec_file_t));
        return say(err, errcap, "not a state file (%zu bytes)", len);
    }
    ot_rec_file_t *id = &out->id;
    memcpy(id, buf, sizeof *id);
    if (memcmp(id->magic, OT_REC_MAGIC, 8)) return say(err, errcap, "not a state file (no OOMTREC magic)");
    if (id->endian_mark != OT_REC_ENDIAN_MARK) return say(err, errcap, "written with another byte order");
    if (id->layout_version != OT_REC_LAYOUT_VERSION)
        return say(err, errcap, "layout version %u, this reader knows %u", id->layout_version, OT_REC_LAYOUT_VERSION);
    if (id->total_size > len)
        return say(err, errcap, "truncated: %zu of %llu bytes", len, (unsigned long long)id->total_size);
    if (id->total_size < sizeof *id || id->header_size < sizeof *id || id->header_size > id->total_size)
        return say(err, errcap, "corrupt: sizes (file %llu, header %u)", (unsigned long long)id->total_size,
                   id->header_size);
    if (!frame_good((const unsigned char *)&id->seq))
        return say(err, errcap, "torn: the identity block was being written (seq %llu)", (unsigned long long)id->seq);
    if (id->pid <= 0) return say(err, errcap, "corrupt: pid %d", id->pid);
    if (id->frame_size < sizeof(ot_rec_frame_t))
        return say(err, errcap, "corrupt: frame size %u", id->frame_size);
    for (int i = 0; i < 2; i++)
        if (id->frame_offset[i] < id->header_size || !within(id->frame_offset[i], id->frame_size, id->total_size))
            return say(err, errcap, "corrupt: frame %d at %llu (+%u) outside the %llu-byte file", i,
                       (unsigned long long)id->frame_offset[i], id->frame_size, (unsigned long long)id->total_size);
    cut(id->boot_id, sizeof id->boot_id);
    cut(id->version, sizeof id->version);
    cut(id->host, sizeof id->host);
    cut(id->rank, sizeof id->rank);
    cut(id->exe, sizeof id->exe);
    cut(id->cmdline, sizeof id->cmdline);
    cut(id->cgroup_path, sizeof id->cgroup_path);

    sec_t sites, large, hist, fail, mods;
    if (!section(id, OT_REC_SEC_SITES, sizeof(ot_rec_site_t), &sites, err, errcap) ||
        !section(id, OT_REC_SEC_LARGE, sizeof(ot_rec_large_t), &large, err, errcap) ||
        !section(id, OT_REC_SEC_HISTORY, sizeof(ot_rec_sample_t), &hist, err, errcap) ||
        !section(id, OT_REC_SEC_FAILURES, sizeof(ot_rec_failure_t), &fail, err, errcap) ||
        !section(id, OT_REC_SEC_MODULES, sizeof(ot_rec_module_t), &mods, err, errcap))
        return false;

    /* The newest good frame; a frame torn by the kill leaves the other, one update older. */
    int best = -1;
    ot_rec_frame_t h[2];
    bool good[2];
    for (int i = 0; i < 2; i++) {
        memcpy(&h[i], buf + id->frame_offset[i], sizeof h[i]);
        good[i] = frame_good(buf + id->frame_offset[i]) && h[i].update_no;
        if (good[i] && (best < 0 || h[i].update_no > h[best].update_no)) best = i;
    }
    if (best < 0)
        return say(err, errcap, "torn: neither frame is complete (seq %llu and %llu)", (unsigned long long)h[0].seq,
                   (unsigned long long)h[1].seq);
    out->frame = (unsigned)best;
    out->fr = h[best];
    out->other_torn = !good[1 - best] && h[1 - best].seq != 0;
    ot_rec_frame_t *fr = &out->fr;
    cut(fr->last_report, sizeof fr->last_report);
    const unsigned char *f = buf + id->frame_offset[best];

    if (fr->n_sites > sites.cap || fr->n_modules > mods.cap)
        return say(err, errcap, "corrupt: %u sites in %llu slots, %u modules in %llu slots", fr->n_sites,
                   (unsigned long long)sites.cap, fr->n_modules, (unsigned long long)mods.cap);
    if (fr->large_head > (1ull << 62) || fr->history_head > (1ull << 62) || fr->failure_head > (1ull << 62))
        return say(err, errcap, "corrupt: ring counters");

    /* Every count is bounded by its section, and every section lies in the file read: no
     * allocation below is larger than the file. */
    out->sites = calloc(fr->n_sites ? fr->n_sites : 1, sizeof *out->sites);
    unsigned nl = ring_count(fr->large_head, large.cap), nh = ring_count(fr->history_head, hist.cap),
             nf = ring_count(fr->failure_head, fail.cap);
    out->large = calloc(nl ? nl : 1, sizeof *out->large);
    out->hist = calloc(nh ? nh : 1, sizeof *out->hist);
    out->fail = calloc(nf ? nf : 1, sizeof *out->fail);
    out->mods = calloc(fr->n_modules ? fr->n_modules : 1, sizeof *out->mods);
    if (!out->sites || !out->large || !out->hist || !out->fail || !out->mods) {
        ot_sf_free(out);
        return say(err, errcap, "out of memory reading it");
    }
    for (unsigned i = 0; i < fr->n_sites; i++) {
        ot_rec_site_t s;
        memcpy(&s, f + sites.offset + i * sites.stride, sizeof s);
        if (s.depth > OT_REC_MAX_FRAMES || s.kind >= OT_REC_KINDS || s.live_count > s.total_count) {
            out->dropped++;
            continue;
        }
        out->sites[out->n_sites++] = s;
    }
    for (uint64_t i = fr->large_head - nl; i < fr->large_head; i++) {
        ot_rec_large_t e;
        memcpy(&e, f + large.offset + (i % large.cap) * large.stride, sizeof e);
        if (e.depth > OT_REC_LARGE_FRAMES || e.kind >= OT_REC_KINDS) {
            out->dropped++;
            continue;
        }
        out->large[out->n_large++] = e;
    }
    for (uint64_t i = fr->history_head - nh; i < fr->history_head; i++)
        memcpy(&out->hist[out->n_hist++], f + hist.offset + (i % hist.cap) * hist.stride, sizeof *out->hist);
    for (uint64_t i = fr->failure_head - nf; i < fr->failure_head; i++) {
        ot_rec_failure_t *e = &out->fail[out->n_fail++];
        memcpy(e, f + fail.offset + (i % fail.cap) * fail.stride, sizeof *e);
        cut(e->api, sizeof e->api);
        cut(e->error_name, sizeof e->error_name);
        cut(e->report, sizeof e->report);
    }
    for (unsigned i = 0; i < fr->n_modules; i++) {
        ot_rec_module_t m;
        memcpy(&m, f + mods.offset + i * mods.stride, sizeof m);
        m.path[sizeof m.path - 1] = 0; /* not rewritten: usable_path drops it instead */
        if (m.build_id_len > sizeof m.build_id || m.end < m.start || !usable_path(m.path)) {
            out->dropped++;
            continue;
        }
        out->mods[out->n_mods++] = m;
    }
    return true;
}

void ot_sf_free(ot_sf_t *s)
{
    free(s->sites);
    free(s->large);
    free(s->hist);
    free(s->fail);
    free(s->mods);
    s->sites = NULL;
    s->large = NULL;
    s->hist = NULL;
    s->fail = NULL;
    s->mods = NULL;
    s->n_sites = s->n_large = s->n_hist = s->n_fail = s->n_mods = 0;
}

bool ot_sf_read(const char *path, ot_sf_t *out, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    /* O_NONBLOCK: a FIFO planted under the name must not hang the reader; O_NOFOLLOW: no symlink. */
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return say(err, errcap, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return say(err, errcap, "not a regular file");
    }
    if (getuid() != 0 && st.st_uid != getuid()) {
        close(fd);
        return say(err, errcap, "owned by uid %u, not by you (uid %u): not read", (unsigned)st.st_uid,
                   (unsigned)getuid());
    }
    if ((uint64_t)st.st_size > OT_SF_MAX_BYTES) {
        close(fd);
        return say(err, errcap, "%lld bytes: larger than any state file (%u MiB at most)", (long long)st.st_size,
                   OT_SF_MAX_BYTES >> 20);
    }
    size_t cap = (size_t)st.st_size;
    unsigned char *buf = malloc(cap ? cap : 1);
    if (!buf) {
        close(fd);
        return say(err, errcap, "out of memory reading it");
    }
    size_t have = 0;
    while (have < cap) { /* a file that shrinks meanwhile is read as far as it goes */
        ssize_t r = read(fd, buf + have, cap - have);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        have += (size_t)r;
    }
    close(fd);
    bool ok = ot_sf_parse(buf, have, out, err, errcap);
    if (ok && getuid() != 0 && out->id.uid != (uint32_t)st.st_uid) {
        ot_sf_free(out);
        ok = say(err, errcap, "written for uid %u but owned by uid %u", out->id.uid, (unsigned)st.st_uid);
    }
    free(buf);
    return ok;
}


bool ot_sf_process_alive(const ot_sf_t *s)
{
    char boot[64] = "";
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, boot, sizeof boot - 1);
        boot[n > 0 ? n : 0] = 0;
        close(fd);
        char *nl = strchr(boot, '\n');
        if (nl) *nl = 0;
    }
    /* A file from an earlier boot names no live process, whatever runs under its pid now. */
    if (boot[0] && s->id.boot_id[0] && strcmp(boot, s->id.boot_id)) return false;
    char state;
    unsigned long long st = ot_proc_stat(s->id.pid, &state);
    /* A zombie is dead: it will not write again (its parent has not reaped it yet). */
    return st != 0 && st == s->id.start_time && state != 'Z' && state != 'X';
}

unsigned long long ot_proc_start_time(pid_t pid)
{
    char st;
    return ot_proc_stat(pid, &st);
}

unsigned long long ot_proc_stat(pid_t pid, char *state)
{
    *state = 0;
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* comm may hold spaces and ')' */
    if (!p) return 0;
    p++;
    if (p[0] == ' ') *state = p[1];
    /* field 3 (state) follows; start time is field 22 */
    for (int field = 3; field < 22 && p; field++) p = strchr(p + 1, ' ');
    return p ? strtoull(p + 1, NULL, 10) : 0;
}
