/* Test double for tests/e2e/asmap.sh's 32-bit case, built there with gcc -m32 and preloaded into a
 * 32-bit program (liboomtrace is 64-bit only): when malloc fails, it copies /proc/self/maps to
 * $OT_MAPS_OUT, first line "# request N", for build/tests/tools/asmap_dump to write up. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t n);

static void save_maps(size_t n)
{
    const char *out = getenv("OT_MAPS_OUT");
    if (!out) return;
    int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600), i = open("/proc/self/maps", O_RDONLY);
    if (o < 0 || i < 0) return;
    char buf[8192];
    int k = snprintf(buf, sizeof buf, "# request %zu\n", n);
    if (write(o, buf, (size_t)k) != k) return;
    ssize_t r;
    while ((r = read(i, buf, sizeof buf)) > 0)
        if (write(o, buf, (size_t)r) != r) break;
    close(i);
    close(o);
}

void *malloc(size_t n)
{
    void *p = __libc_malloc(n);
    if (!p) save_maps(n);
    return p;
}
