/* Reader of flight-recorder state files: validation and frame choice (recorder_read.h). Treats the
 * file as hostile: no field is trusted before it is checked; libc's memcpy, open and pread only. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "recorder_read.h"

static int fail(char *why, size_t cap, int rc, const char *msg)
{
    if (why && cap) {
        size_t n = strlen(msg);
        if (n >= cap) n = cap - 1;
        memcpy(why, msg, n);
        why[n] = 0;
    }
    return rc;
}

static const uint32_t entry_min[5] = {sizeof(ot_rec_site_t), sizeof(ot_rec_large_t), sizeof(ot_rec_sample_t),
                                      sizeof(ot_rec_failure_t), sizeof(ot_rec_module_t)};

int ot_rec_parse(const void *buf, size_t len, ot_rec_view_t *v, char *why, size_t cap)
{
    memset(v, 0, sizeof *v);
    const uint8_t *b = buf;
    if (!b || len < sizeof(ot_rec_file_t)) return fail(why, cap, OT_REC_BAD, "truncated: shorter than its header");
    const ot_rec_file_t *f = buf;
    if (memcmp(f->magic, OT_REC_MAGIC, 8)) return fail(why, cap, OT_REC_BAD, "not an oomtrace state file (bad magic)");
    if (f->endian_mark != OT_REC_ENDIAN_MARK) return fail(why, cap, OT_REC_BAD, "written with another byte order");
    if (f->layout_version != OT_REC_LAYOUT_VERSION) return fail(why, cap, OT_REC_BAD, "unknown layout version");
    uint64_t seq = f->seq;
    if (seq == 0 || (seq & 1)) return fail(why, cap, OT_REC_TORN, "torn: the header was being written");
    if (f->total_size != len) return fail(why, cap, OT_REC_BAD, "truncated or padded: size differs from its header");
    if (f->header_size < sizeof(ot_rec_file_t) || f->header_size > len)
        return fail(why, cap, OT_REC_BAD, "bad header size");
    uint64_t fs = f->frame_size;
    if (fs < sizeof(ot_rec_frame_t) || fs > len) return fail(why, cap, OT_REC_BAD, "bad frame size");
    for (int i = 0; i < 2; i++) {
        uint64_t off = f->frame_offset[i];
        if (off < f->header_size || off > len || len - off < fs || (off & 7))
            return fail(why, cap, OT_REC_BAD, "frame outside the file");
    }
    if (f->frame_offset[0] != f->frame_offset[1] &&
        (f->frame_offset[0] < f->frame_offset[1] ? f->frame_offset[1] - f->frame_offset[0] < fs
                                                 : f->frame_offset[0] - f->frame_offset[1] < fs))
        return fail(why, cap, OT_REC_BAD, "frames overlap");
    if (f->frame_offset[0] == f->frame_offset[1]) return fail(why, cap, OT_REC_BAD, "frames overlap");
    for (int i = 0; i < 5; i++) {
        ot_rec_section_t s = f->sections[i];
        if (s.entry_size < entry_min[i] || s.entry_size > (1u << 20) || (s.entry_size & 7) || s.capacity == 0 ||
            s.capacity > (1u << 24) || s.offset < sizeof(ot_rec_frame_t) || s.offset > fs || (s.offset & 7) ||
            (uint64_t)s.entry_size * s.capacity > fs - s.offset)
            return fail(why, cap, OT_REC_BAD, "a section lies outside its frame");
        v->sec[i] = s;
    }
    /* The newest complete frame; a torn one (odd or zero counter: the writer was inside it) is
     * never looked at. */
    int pick = -1;
    uint64_t best = 0;
    for (int i = 0; i < 2; i++) {
        const ot_rec_frame_t *fr = (const void *)(b + f->frame_offset[i]);
        uint64_t s = fr->seq;
        if (s == 0 || (s & 1) || fr->update_no == 0) continue;
        if (pick < 0 || fr->update_no > best) pick = i, best = fr->update_no;
    }
    if (pick < 0) return fail(why, cap, OT_REC_TORN, "torn: no complete update in the file");
    const ot_rec_frame_t *fr = (const void *)(b + f->frame_offset[pick]);
    if (fr->n_sites > v->sec[OT_REC_SEC_SITES].capacity || fr->n_modules > v->sec[OT_REC_SEC_MODULES].capacity)
        return fail(why, cap, OT_REC_BAD, "a count exceeds its section");
    v->base = b;
    v->len = len;
    v->file = f;
    v->frame = fr;
    v->frame_index = (unsigned)pick;
    if (why && cap) why[0] = 0;
    return OT_REC_OK;
}

static uint64_t ring_head(const ot_rec_view_t *v, int sec)
{
    switch (sec) {
    case OT_REC_SEC_LARGE: return v->frame->large_head;
    case OT_REC_SEC_HISTORY: return v->frame->history_head;
    case OT_REC_SEC_FAILURES: return v->frame->failure_head;
    default: return 0;
    }
}

uint64_t ot_rec_ring_first(const ot_rec_view_t *v, int sec)
{
    uint64_t head = ring_head(v, sec), cap = v->sec[sec].capacity;
    return head > cap ? head - cap : 0;
}

const void *ot_rec_entry(const ot_rec_view_t *v, int sec, uint64_t index)
{
    if (!v->frame || sec < 0 || sec >= 5) return NULL;
    ot_rec_section_t s = v->sec[sec];
    uint64_t slot;
    if (sec == OT_REC_SEC_SITES || sec == OT_REC_SEC_MODULES) {
        uint32_t n = sec == OT_REC_SEC_SITES ? v->frame->n_sites : v->frame->n_modules;
        if (index >= n) return NULL;
        slot = index;
    } else {
        if (index >= ring_head(v, sec) || index < ot_rec_ring_first(v, sec)) return NULL;
        slot = index % s.capacity;
    }
    return (const uint8_t *)v->frame + s.offset + slot * s.entry_size;
}

void ot_rec_str(const char *field, size_t field_size, char *out, size_t cap)
{
    if (!cap) return;
    size_t n = 0;
    while (n < field_size && n + 1 < cap && field[n]) n++;
    memcpy(out, field, n);
    out[n] = 0;
}

static int read_all(int fd, void *buf, size_t n, off_t at)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char *)buf + got, n - got, at + (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return 0;
}

long ot_rec_load(const char *path, void *buf, size_t cap, char *why, size_t why_cap)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return fail(why, why_cap, -1, errno == ELOOP ? "a symlink, not followed" : "cannot open");
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return fail(why, why_cap, -1, "not a regular file");
    }
    if ((uint64_t)st.st_size > cap || st.st_size < (off_t)sizeof(ot_rec_file_t)) {
        close(fd);
        return fail(why, why_cap, -1, st.st_size < (off_t)sizeof(ot_rec_file_t) ? "truncated: shorter than its header"
                                                                             : "larger than any state file");
    }
    size_t n = (size_t)st.st_size;
    for (int attempt = 0; attempt < 5; attempt++) {
        if (read_all(fd, buf, n, 0) != 0) {
            close(fd);
            return fail(why, why_cap, -1, "read error");
        }
        /* Were the frames changed while we read them? Their counters again. */
        const ot_rec_file_t *f = buf;
        bool same = true;
        for (int i = 0; i < 2; i++) {
            uint64_t off = f->frame_offset[i], s, had;
            if (off > n || n - off < sizeof(uint64_t)) break; /* ot_rec_parse says what is wrong */
            memcpy(&had, (const char *)buf + off, sizeof had);
            if (read_all(fd, &s, sizeof s, (off_t)off) != 0 || s != had) same = false;
        }
        if (same) break;
        usleep(1000);
    }
    close(fd);
    return (long)n;
}
