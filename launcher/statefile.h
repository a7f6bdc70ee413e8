/* The one reader of the recorder's state files (interpose/recorder_format.h), for the supervisor,
 * `oomtrace postmortem` and the fuzzer. A state file is untrusted input: the reader checks every
 * size, offset, count and string and hands back a validated copy, or a message and no state. */
#ifndef OOMTRACE_STATEFILE_H
#define OOMTRACE_STATEFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "recorder_format.h"

/* The largest state file the reader takes (recorder_bytes= is far below it). */
#define OT_SF_MAX_BYTES (64u << 20)

typedef struct {
    ot_rec_file_t id;   /* the identity block; every string NUL-terminated */
    ot_rec_frame_t fr;  /* the newest good frame's header */
    unsigned frame;     /* which frame (0 or 1) */
    bool other_torn;    /* the other frame was being written when the process died */
    /* Copies of the sections (malloc'd; ot_sf_free), rings in time order, oldest first. Entries
     * whose fields do not make sense (a depth past the array, an unknown kind) are left out and
     * counted in dropped. */
    ot_rec_site_t *sites;
    unsigned n_sites;
    ot_rec_large_t *large;
    unsigned n_large;
    ot_rec_sample_t *hist;
    unsigned n_hist;
    ot_rec_failure_t *fail;
    unsigned n_fail;
    ot_rec_module_t *mods; /* only modules with a usable path ('/...' without control bytes) */
    unsigned n_mods;
    unsigned dropped;
} ot_sf_t;

/* Parses a state file's bytes. Returns true with *out filled, or false with a one-line reason in
 * err ("truncated: 4096 of 1052672 bytes", "torn: ...", "not a state file") and *out empty. */
bool ot_sf_parse(const unsigned char *buf, size_t len, ot_sf_t *out, char *err, size_t errcap);
/* Reads and parses path: a regular file (no symlink followed, no FIFO waited on), owned by the
 * caller's uid unless the caller is root, at most OT_SF_MAX_BYTES. */
bool ot_sf_read(const char *path, ot_sf_t *out, char *err, size_t errcap);
void ot_sf_free(ot_sf_t *s);

/* Is the process the file names still running (same pid, same start time, same boot, not a zombie)? */
bool ot_sf_process_alive(const ot_sf_t *s);

#endif
