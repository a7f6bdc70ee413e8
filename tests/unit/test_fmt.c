/* fmt.c: malloc-free formatting, sizes, JSON escaping, raw file reads. */
#include <errno.h>
#include <stdint.h>
#include <unistd.h>

#include "harness.h"
#include "internal.h"

static const char *fmt(const char *f, long long a, const char *s)
{
    static char mem[256];
    ot_buf_t b;
    ot_buf_init(&b, mem, sizeof mem, -1);
    ot_buf_printf(&b, f, a, s);
    return ot_buf_cstr(&b);
}

TEST(printf_subset)
{
    EXPECT_STR(fmt("%lld|%s", -42, "x"), "-42|x");
    EXPECT_STR(fmt("[%5lld]%s", 42, ""), "[   42]");
    EXPECT_STR(fmt("[%05lld]%s", 42, ""), "[00042]");
    EXPECT_STR(fmt("%llx %s", 255, "hex"), "ff hex");
    EXPECT_STR(fmt("100%% %lld%s", 7, ""), "100% 7");
    char mem[64];
    ot_buf_t b;
    ot_buf_init(&b, mem, sizeof mem, -1);
    ot_buf_printf(&b, "%zu %u %ld %p %c", (size_t)18446744073709551615ull, 4000000000u, -1L, (void *)0x1000, 'z');
    EXPECT_STR(ot_buf_cstr(&b), "18446744073709551615 4000000000 -1 0x1000 z");
}

TEST(bytes_human)
{
    char mem[64];
    ot_buf_t b;
    const struct { uint64_t v; const char *s; } cases[] = {
        {0, "0 B"}, {512, "512 B"}, {1024, "1.0 KiB"}, {3763200, "3.6 MiB"}, {1536, "1.5 KiB"},
        {(uint64_t)139 << 30 | (uint64_t)819 << 20, "139.8 GiB"}, {1047552, "1023.0 KiB"}, {1048064, "1023.5 KiB"}, {1048575, "1.0 MiB"},
        {UINT64_MAX, "16.0 EiB"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ot_buf_init(&b, mem, sizeof mem, -1);
        ot_buf_bytes(&b, cases[i].v);
        EXPECT_STR(ot_buf_cstr(&b), cases[i].s);
    }
}

TEST(json_escaping)
{
    char mem[128];
    ot_buf_t b;
    ot_buf_init(&b, mem, sizeof mem, -1);
    ot_buf_json_str(&b, "a\"b\\c\nd\x01");
    EXPECT_STR(ot_buf_cstr(&b), "\"a\\\"b\\\\c\\nd\\u0001\"");
    ot_buf_init(&b, mem, sizeof mem, -1);
    ot_buf_json_str(&b, NULL);
    ot_buf_putc(&b, ' ');
    ot_buf_json_i64_or_null(&b, -1);
    ot_buf_putc(&b, ' ');
    ot_buf_json_i64_or_null(&b, 5);
    EXPECT_STR(ot_buf_cstr(&b), "null null 5");
}

TEST(truncation_is_safe)
{
    char mem[8];
    ot_buf_t b;
    ot_buf_init(&b, mem, sizeof mem, -1);
    ot_buf_puts(&b, "0123456789abcdef");
    EXPECT(b.truncated);
    EXPECT_STR(ot_buf_cstr(&b), "0123456");
    char small[4];
    EXPECT_EQ_U(ot_strlcpy(small, "hello", sizeof small), 5);
    EXPECT_STR(small, "hel");
}

TEST(flush_to_fd)
{
    int fds[2];
    ASSERT(pipe(fds) == 0);
    char mem[16];
    ot_buf_t b;
    ot_buf_init(&b, mem, sizeof mem, fds[1]);
    for (int i = 0; i < 10; i++) ot_buf_puts(&b, "abcdefgh");
    ot_buf_flush(&b);
    close(fds[1]);
    char got[128] = {0};
    ssize_t n = 0, r;
    while ((r = read(fds[0], got + n, sizeof got - 1 - (size_t)n)) > 0) n += r;
    close(fds[0]);
    EXPECT_EQ_U(n, 80);
    EXPECT(!b.truncated);
}

TEST(parse_size)
{
    uint64_t v;
    EXPECT(ot_parse_size("512K", 4, &v) && v == 512 * 1024);
    EXPECT(ot_parse_size("64KiB", 5, &v) && v == 64 * 1024);
    EXPECT(ot_parse_size("3G", 2, &v) && v == 3ull << 30);
    EXPECT(ot_parse_size("17", 2, &v) && v == 17);
    EXPECT(!ot_parse_size("", 0, &v));
    EXPECT(!ot_parse_size("12Q", 3, &v));
    EXPECT(!ot_parse_size("-1", 2, &v));
    EXPECT(!ot_parse_size("99999999999999999999", 20, &v));
    EXPECT(!ot_parse_size("17179869184G", 12, &v)); /* overflows on shift */
}

TEST(read_file_and_env)
{
    char buf[64];
    errno = 4321;
    ssize_t n = ot_read_file("/proc/self/stat", buf, sizeof buf);
    EXPECT(n > 0 && n < (ssize_t)sizeof buf);
    EXPECT(ot_read_file("/nonexistent/file", buf, sizeof buf) == -1);
    EXPECT_EQ_U(errno, 4321);
    setenv("OT_TEST_VAR", "v1", 1);
    EXPECT_STR(ot_getenv("OT_TEST_VAR"), "v1");
    EXPECT(ot_getenv("OT_TEST_VA") == NULL);
    EXPECT_STR(ot_errno_name(ENOMEM), "ENOMEM");
}

TEST_MAIN(printf_subset, bytes_human, json_escaping, truncation_is_safe, flush_to_fd, parse_size, read_file_and_env)
