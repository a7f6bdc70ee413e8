/* The report's address-space section and diagnosis for a maps text saved from another process (a
 * 32-bit one, which liboomtrace, 64-bit only, cannot be preloaded into): the same parser and
 * writers, as a post-mortem would use them.
 *   asmap_dump MAPS_FILE POINTER_BITS REQUEST JSON_OUT    (text report on stdout) */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "report_internal.h"

static char text[4 << 20];
static ot_report_t r;
static ot_asmap_t as;

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s MAPS_FILE POINTER_BITS REQUEST JSON_OUT\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    if (!f) return perror(argv[1]), 2;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    ot_asmap_params_t p = {.pointer_bits = atoi(argv[2]), .limit = -1};
    ot_asmap_begin(&as, &p);
    ot_asmap_feed(&as, text, n);
    ot_asmap_end(&as, strtoull(argv[3], NULL, 0));
    ot_failure_t fl = {0};
    fl.api = "malloc";
    fl.size = strtoull(argv[3], NULL, 0);
    fl.error_code = ENOMEM;
    fl.error_name = "ENOMEM";
    fl.device_index = -1;
    r.event = "alloc_failure";
    r.f = &fl;
    r.proc = (ot_report_proc_t){0, argv[1], argv[1], "", NULL};
    r.opt.stacks = OT_STACKS_SAMPLED;
    ot_probe_host(&r.mem);
    r.mem.ptr_bits = as.pointer_bits;
    r.mem.vm_size = (int64_t)as.total;
    r.mem.rlimit_as = r.mem.rlimit_data = r.mem.cgroup_limit = -1;
    r.mem.cgroup_version = 0;
    r.focus = -1;
    r.as = &as;
    ot_report_write_text(&r, 1);
    int fd = open(argv[4], O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return perror(argv[4]), 2;
    ot_report_write_json(&r, fd);
    close(fd);
    return 0;
}
