/* Reading a flight-recorder state file (recorder_format.h) as untrusted input: every size, offset
 * and count checked before use, a torn frame never read. Self-contained (libc only), so that the
 * launcher's supervisor and `oomtrace postmortem` can compile it in as well as the tests. */
#ifndef OOMTRACE_RECORDER_READ_H
#define OOMTRACE_RECORDER_READ_H

#include <stddef.h>
#include <stdint.h>

#include "recorder_format.h"

enum { OT_REC_OK = 0, OT_REC_BAD = -1, OT_REC_TORN = -2 };

typedef struct {
    const uint8_t *base; /* the caller's copy of the file */
    size_t len;
    const ot_rec_file_t *file;
    const ot_rec_frame_t *frame; /* the newest complete frame */
    unsigned frame_index;
    ot_rec_section_t sec[5];     /* indexed by OT_REC_SEC_*, checked against the frame */
} ot_rec_view_t;

/* Checks a copy of a file and picks its newest complete frame. OT_REC_OK, or OT_REC_BAD /
 * OT_REC_TORN with a one-line reason in why. */
int ot_rec_parse(const void *buf, size_t len, ot_rec_view_t *v, char *why, size_t why_cap);
/* Entry `index` of a section: an array (sites, modules: index < its count) or a ring (large,
 * history, failures: valid for head - capacity <= index < head). NULL where out of range. */
const void *ot_rec_entry(const ot_rec_view_t *v, int sec, uint64_t index);
/* The ring's first valid index (head - capacity, or 0). */
uint64_t ot_rec_ring_first(const ot_rec_view_t *v, int sec);
/* A fixed string field copied NUL-terminated into out (bounded by both sizes). */
void ot_rec_str(const char *field, size_t field_size, char *out, size_t cap);
/* Reads a state file (a regular file, not followed if a symlink, at most cap bytes) into buf. While
 * the process may still be writing, the read is repeated until each frame's counter is the same
 * before and after it (a few tries). Returns the bytes read, or -1 with why. */
long ot_rec_load(const char *path, void *buf, size_t cap, char *why, size_t why_cap);

#endif
