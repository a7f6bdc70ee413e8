/* Formatting and raw I/O for reports and warnings. Everything here works inside a failing malloc
 * and inside a signal handler: no malloc, no stdio, no locale, only the write/open/read syscalls. */
#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

size_t ot_strlen(const char *s)
{
    size_t n = 0;
    while (s[n]) n++;
    return n;
}

int ot_strcmp(const char *a, const char *b)
{
    while (*a && *a == *b) a++, b++;
    return (unsigned char)*a - (unsigned char)*b;
}

int ot_strncmp(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (a[i] != b[i] || !a[i]) return (unsigned char)a[i] - (unsigned char)b[i];
    }
    return 0;
}

size_t ot_strlcpy(char *dst, const char *src, size_t cap)
{
    size_t n = ot_strlen(src);
    if (cap) {
        size_t c = n < cap - 1 ? n : cap - 1;
        ot_memcpy(dst, src, c);
        dst[c] = 0;
    }
    return n;
}

const char *ot_strstr(const char *h, const char *n)
{
    size_t nl = ot_strlen(n);
    for (; *h; h++)
        if (!ot_strncmp(h, n, nl)) return h;
    return nl ? NULL : h;
}

/* Byte loops, marked so the compiler does not turn them back into calls to memset/memcpy
 * (which would be fine, but keeps this file free of libc dependencies that could be interposed). */
__attribute__((optimize("no-tree-loop-distribute-patterns"))) void ot_memset(void *p, int c, size_t n)
{
    unsigned char *d = p;
    while (n--) *d++ = (unsigned char)c;
}

__attribute__((optimize("no-tree-loop-distribute-patterns"))) void ot_memcpy(void *d, const void *s, size_t n)
{
    unsigned char *dd = d;
    const unsigned char *ss = s;
    while (n--) *dd++ = *ss++;
}

ssize_t ot_write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    size_t done = 0;
    while (done < n) {
        long r = syscall(SYS_write, fd, c + done, n - done);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (r == 0) return -1;
        done += (size_t)r;
    }
    return (ssize_t)done;
}

ssize_t ot_read_file(const char *path, char *buf, size_t cap)
{
    int saved = errno;
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        errno = saved;
        return -1;
    }
    size_t len = 0;
    while (len + 1 < cap) {
        long r = syscall(SYS_read, fd, buf + len, cap - 1 - len);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        len += (size_t)r;
    }
    syscall(SYS_close, fd);
    if (cap) buf[len] = 0;
    errno = saved;
    return (ssize_t)len;
}

extern char **environ;
const char *ot_getenv(const char *name)
{
    size_t n = ot_strlen(name);
    if (!environ) return NULL;
    for (char **e = environ; *e; e++)
        if (!ot_strncmp(*e, name, n) && (*e)[n] == '=') return *e + n + 1;
    return NULL;
}

bool ot_parse_size(const char *s, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    size_t i = 0;
    if (n == 0) return false;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
        if (v > (UINT64_MAX - 9) / 10) return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (i == 0) return false;
    if (i < n) {
        unsigned shift;
        switch (s[i]) {
        case 'k': case 'K': shift = 10; break;
        case 'm': case 'M': shift = 20; break;
        case 'g': case 'G': shift = 30; break;
        case 't': case 'T': shift = 40; break;
        default: return false;
        }
        i++;
        if (i < n && (s[i] == 'i' || s[i] == 'I')) i++;
        if (i < n && (s[i] == 'b' || s[i] == 'B')) i++;
        if (i != n) return false;
        if (v > (UINT64_MAX >> shift)) return false;
        v <<= shift;
    }
    *out = v;
    return true;
}

const char *ot_errno_name(int err)
{
    switch (err) {
    case 0: return "0";
    case ENOMEM: return "ENOMEM";
    case EINVAL: return "EINVAL";
    case EAGAIN: return "EAGAIN";
    case EFAULT: return "EFAULT";
    case EOVERFLOW: return "EOVERFLOW";
    case ERANGE: return "ERANGE";
    case EPERM: return "EPERM";
    default: return "errno";
    }
}

/* ---- buffers ---- */

void ot_buf_init(ot_buf_t *b, char *mem, size_t cap, int fd)
{
    b->p = mem;
    b->cap = cap;
    b->len = 0;
    b->fd = fd;
    b->truncated = false;
}

void ot_buf_flush(ot_buf_t *b)
{
    if (b->fd >= 0 && b->len) {
        int saved = errno;
        ot_write_all(b->fd, b->p, b->len);
        errno = saved;
        b->len = 0;
    }
}

void ot_buf_putn(ot_buf_t *b, const char *s, size_t n)
{
    while (n) {
        size_t room = b->cap - 1 - b->len; /* keep one byte for a terminating NUL */
        if (room == 0) {
            if (b->fd >= 0) {
                ot_buf_flush(b);
                continue;
            }
            b->truncated = true;
            return;
        }
        size_t c = n < room ? n : room;
        ot_memcpy(b->p + b->len, s, c);
        b->len += c;
        s += c;
        n -= c;
    }
}

void ot_buf_puts(ot_buf_t *b, const char *s) { ot_buf_putn(b, s ? s : "(null)", ot_strlen(s ? s : "(null)")); }
void ot_buf_putc(ot_buf_t *b, char c) { ot_buf_putn(b, &c, 1); }

const char *ot_buf_cstr(ot_buf_t *b)
{
    b->p[b->len < b->cap ? b->len : b->cap - 1] = 0;
    return b->p;
}

static void put_unsigned(ot_buf_t *b, uint64_t v, unsigned base, int width, char pad, bool upper)
{
    char tmp[32];
    int n = 0;
    const char *dig = upper ? "0123456789ABCDEF" : "0123456789abcdef";
    do {
        tmp[n++] = dig[v % base];
        v /= base;
    } while (v);
    while (n < width && n < (int)sizeof tmp) tmp[n++] = pad;
    while (n) ot_buf_putc(b, tmp[--n]);
}

void ot_buf_u64(ot_buf_t *b, uint64_t v) { put_unsigned(b, v, 10, 0, ' ', false); }

void ot_buf_i64(ot_buf_t *b, int64_t v)
{
    if (v < 0) {
        ot_buf_putc(b, '-');
        put_unsigned(b, (uint64_t)0 - (uint64_t)v, 10, 0, ' ', false);
    } else {
        put_unsigned(b, (uint64_t)v, 10, 0, ' ', false);
    }
}

void ot_buf_hex(ot_buf_t *b, uint64_t v)
{
    ot_buf_puts(b, "0x");
    put_unsigned(b, v, 16, 0, ' ', false);
}

void ot_buf_bytes(ot_buf_t *b, uint64_t v)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    unsigned u = 0;
    uint64_t whole = v, frac10 = 0;
    while (whole >= 1024 && u < 6) {
        uint64_t rem = whole % 1024;
        whole /= 1024;
        frac10 = (rem * 10 + 512) / 1024; /* one rounded decimal */
        u++;
    }
    if (frac10 == 10) whole++, frac10 = 0;
    if (whole == 1024 && u < 6) whole = 1, u++; /* 1023.96 KiB prints as 1.0 MiB */
    ot_buf_u64(b, whole);
    if (u) {
        ot_buf_putc(b, '.');
        ot_buf_u64(b, frac10);
    }
    ot_buf_putc(b, ' ');
    ot_buf_puts(b, units[u]);
}

void ot_buf_json_str(ot_buf_t *b, const char *s)
{
    if (!s) {
        ot_buf_puts(b, "null");
        return;
    }
    ot_buf_putc(b, '"');
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        switch (*c) {
        case '"': ot_buf_puts(b, "\\\""); break;
        case '\\': ot_buf_puts(b, "\\\\"); break;
        case '\n': ot_buf_puts(b, "\\n"); break;
        case '\r': ot_buf_puts(b, "\\r"); break;
        case '\t': ot_buf_puts(b, "\\t"); break;
        default:
            if (*c < 0x20 || *c == 0x7f) {
                ot_buf_puts(b, "\\u00");
                put_unsigned(b, *c, 16, 2, '0', false);
            } else {
                ot_buf_putc(b, (char)*c);
            }
        }
    }
    ot_buf_putc(b, '"');
}

void ot_buf_json_i64_or_null(ot_buf_t *b, int64_t v)
{
    if (v < 0) ot_buf_puts(b, "null");
    else ot_buf_i64(b, v);
}

void ot_buf_vprintf(ot_buf_t *b, const char *fmt, va_list ap)
{
    for (const char *f = fmt; *f; f++) {
        if (*f != '%') {
            const char *start = f;
            while (f[1] && f[1] != '%') f++;
            ot_buf_putn(b, start, (size_t)(f - start + 1));
            continue;
        }
        f++;
        char pad = ' ';
        int width = 0, lng = 0;
        if (*f == '-') f++; /* left alignment not supported: ignored */
        if (*f == '0') pad = '0', f++;
        while (*f >= '0' && *f <= '9') width = width * 10 + (*f++ - '0');
        for (;;) {
            if (*f == 'l') lng++, f++;
            else if (*f == 'z') lng = 2, f++;
            else break;
        }
        switch (*f) {
        case 's': {
            const char *s = va_arg(ap, const char *);
            size_t n = ot_strlen(s ? s : "(null)");
            for (int i = (int)n; i < width; i++) ot_buf_putc(b, ' ');
            ot_buf_puts(b, s);
            break;
        }
        case 'c': ot_buf_putc(b, (char)va_arg(ap, int)); break;
        case 'd': case 'i': {
            int64_t v = lng >= 2 ? (int64_t)va_arg(ap, long long) : lng == 1 ? va_arg(ap, long) : va_arg(ap, int);
            if (v < 0) {
                ot_buf_putc(b, '-');
                put_unsigned(b, (uint64_t)0 - (uint64_t)v, 10, width ? width - 1 : 0, pad, false);
            } else {
                put_unsigned(b, (uint64_t)v, 10, width, pad, false);
            }
            break;
        }
        case 'u': case 'x': case 'X': {
            uint64_t v = lng >= 2 ? (uint64_t)va_arg(ap, unsigned long long)
                       : lng == 1 ? va_arg(ap, unsigned long) : va_arg(ap, unsigned);
            put_unsigned(b, v, *f == 'u' ? 10 : 16, width, pad, *f == 'X');
            break;
        }
        case 'p': ot_buf_hex(b, (uintptr_t)va_arg(ap, void *)); break;
        case '%': ot_buf_putc(b, '%'); break;
        case 0: return;
        default: ot_buf_putc(b, '%'); ot_buf_putc(b, *f); break;
        }
    }
}

void ot_buf_printf(ot_buf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ot_buf_vprintf(b, fmt, ap);
    va_end(ap);
}
