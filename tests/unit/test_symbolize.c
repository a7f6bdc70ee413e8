/* Symbolization (symbolize.c): module and offset that addr2line agrees with, static function
 * names from .symtab, libc, the vdso, unknown and random addresses, thousands of mappings, the
 * streaming fallback under RLIMIT_AS, no malloc; and the demangler against c++filt. */
#include "internal.h"
#include "harness.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdnoreturn.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "malloc_counter.h"

/* ------------------------------------------------------------------ targets in this binary */
static OT_NOINLINE int sym_target(int x)
{
    __asm__ volatile("" ::: "memory");
    return x * 7 + 3;
}
static OT_NOINLINE int sym_static_helper(int x)
{
    __asm__ volatile("" ::: "memory");
    return sym_target(x) ^ 5;
}

/* A call to a noreturn function as the last instruction: the return address lies past the end. */
static jmp_buf jb;
static void *volatile tail_ret;
static noreturn OT_NOINLINE void jumper(void)
{
    tail_ret = __builtin_return_address(0);
    longjmp(jb, 1);
}
static OT_NOINLINE void tail_caller(void) { jumper(); }

static bool same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return a && b && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

/* First line of `addr2line -f -e module 0xoffset`, or false if addr2line is not there. */
static bool addr2line(const char *module, uintptr_t off, char *fn, size_t cap)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "addr2line -f -e '%s' %#lx 2>/dev/null", module, (unsigned long)off);
    FILE *p = popen(cmd, "r");
    if (!p) return false;
    bool ok = fgets(fn, (int)cap, p) != NULL;
    if (pclose(p) != 0) ok = false;
    if (ok) fn[strcspn(fn, "\n")] = 0;
    return ok;
}

static unsigned elf_type_of(const char *path)
{
    Elf64_Ehdr eh;
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t n = fread(&eh, sizeof eh, 1, f);
    fclose(f);
    return n == 1 ? eh.e_type : 0;
}

TEST(test_exe_function)
{
    ot_frame_t f;
    Dl_info di;
    ot_symbolize_begin();
    uintptr_t ip = (uintptr_t)sym_target + 2;
    ot_symbolize(ip, &f);
    EXPECT_EQ_U(f.ip, ip);
    ASSERT(dladdr((void *)ip, &di) != 0);
    EXPECT(same_file(f.module, di.dli_fname) || same_file(f.module, "/proc/self/exe"));
    EXPECT(same_file(f.module, "/proc/self/exe"));
    EXPECT_STR(f.function, "sym_target"); /* static, no -rdynamic: from .symtab */
    EXPECT_STR(f.file, "");
    EXPECT_EQ_U(f.line, 0);
    if (elf_type_of(f.module) == ET_DYN) EXPECT_EQ_U(f.offset, ip - (uintptr_t)di.dli_fbase);
    else EXPECT_EQ_U(f.offset, ip);
    char fn[512];
    if (!addr2line(f.module, f.offset, fn, sizeof fn)) SKIP("addr2line not available");
    EXPECT_STR(fn, "sym_target");
    ot_symbolize((uintptr_t)sym_static_helper, &f);
    EXPECT_STR(f.function, "sym_static_helper");
    EXPECT(addr2line(f.module, f.offset, fn, sizeof fn));
    EXPECT_STR(fn, "sym_static_helper");
}

TEST(test_libc_function)
{
    ot_frame_t f;
    Dl_info di;
    void *p = dlsym(RTLD_DEFAULT, "getpid");
    ASSERT(p && dladdr(p, &di) != 0);
    uintptr_t ip = (uintptr_t)p + 1;
    ot_symbolize(ip, &f);
    EXPECT(same_file(f.module, di.dli_fname));
    EXPECT_CONTAINS(f.module, "libc");
    EXPECT_EQ_U(f.offset, ip - (uintptr_t)di.dli_fbase);
    EXPECT_STR(f.function, "getpid"); /* aliases __getpid / getpid: the plain name wins */
    char fn[512];
    if (!addr2line(f.module, f.offset, fn, sizeof fn)) SKIP("addr2line not available");
    if (strcmp(fn, "??") != 0) EXPECT_CONTAINS(fn, "getpid");
}

TEST(test_return_address_past_end)
{
    if (setjmp(jb) == 0) tail_caller();
    ot_frame_t f;
    ot_symbolize((uintptr_t)tail_ret - 1, &f);
    EXPECT_STR(f.function, "tail_caller");
}

TEST(test_unknown_address)
{
    ot_frame_t f;
    memset(&f, 0x5a, sizeof f);
    ot_symbolize(0x1234, &f);
    EXPECT_STR(f.module, "");
    EXPECT_STR(f.function, "");
    EXPECT_EQ_U(f.offset, 0x1234);
    void *anon = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (anon == MAP_FAILED) anon = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT(anon != MAP_FAILED);
    ot_symbolize_begin();
    ot_symbolize((uintptr_t)anon + 16, &f);
    EXPECT_STR(f.module, "");
    EXPECT_STR(f.function, "");
    ot_symbolize(~(uintptr_t)0, &f);
    EXPECT_STR(f.module, "");
    ot_symbolize(0, &f);
    EXPECT_STR(f.module, "");
    munmap(anon, 4096);
}

TEST(test_vdso)
{
    uintptr_t base = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
    if (!base) SKIP("no vdso");
    ot_frame_t f;
    ot_symbolize_begin();
    ot_symbolize(base + 64, &f);
    EXPECT_STR(f.module, "[vdso]");
    int named = 0;
    for (uintptr_t a = base; a < base + 8192; a += 8) {
        ot_symbolize(a, &f);
        if (strcmp(f.module, "[vdso]") != 0) break;
        if (strstr(f.function, "gettime") || strstr(f.function, "getcpu")) named++;
    }
    EXPECT(named > 0);
}

/* 10,000 addresses: random words and random points inside every mapping of the process. */
TEST(test_random_addresses)
{
    static uintptr_t ranges[4096][2];
    unsigned nr = 0;
    FILE *m = fopen("/proc/self/maps", "r");
    ASSERT(m);
    char line[4096];
    while (nr < 4096 && fgets(line, sizeof line, m)) {
        unsigned long s, e;
        if (sscanf(line, "%lx-%lx", &s, &e) == 2) {
            ranges[nr][0] = s;
            ranges[nr][1] = e;
            nr++;
        }
    }
    fclose(m);
    ASSERT(nr > 0);
    ot_symbolize_begin();
    uint64_t x = 88172645463325252ull;
    unsigned named = 0;
    for (int i = 0; i < 10000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uintptr_t ip = (uintptr_t)x;
        if (i % 2) {
            unsigned k = (unsigned)(x >> 32) % nr;
            ip = ranges[k][0] + (uintptr_t)(x % (ranges[k][1] - ranges[k][0]));
        }
        ot_frame_t f;
        ot_symbolize(ip, &f);
        ASSERT(f.module != NULL);
        ASSERT(memchr(f.function, 0, sizeof f.function) != NULL);
        ASSERT(strlen(f.module) < 4096);
        named += f.function[0] != 0;
    }
    EXPECT(named > 0);
}

/* Thousands of mappings: the whole of /proc/self/maps is read (the vdso is near its end). */
TEST(test_many_mappings)
{
    enum { N = 3000 };
    static void *maps[N];
    int fd = open("/proc/self/exe", O_RDONLY);
    ASSERT(fd >= 0);
    unsigned made = 0;
    for (unsigned i = 0; i < N; i++) {
        /* alternate protections so that the kernel cannot merge neighbours */
        int prot = (i % 2) ? PROT_READ : PROT_READ | PROT_EXEC;
        void *p = mmap(NULL, 4096, prot, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) break;
        maps[made++] = p;
    }
    close(fd);
    ASSERT(made > 1000);
    FILE *m = fopen("/proc/self/maps", "r");
    unsigned lines = 0;
    char line[4096];
    while (m && fgets(line, sizeof line, m)) lines++;
    if (m) fclose(m);
    EXPECT(lines > made);
    ot_symbolize_begin();
    ot_frame_t f;
    ot_symbolize((uintptr_t)sym_target, &f);
    EXPECT_STR(f.function, "sym_target");
    ot_symbolize((uintptr_t)dlsym(RTLD_DEFAULT, "getpid"), &f);
    EXPECT_STR(f.function, "getpid");
    uintptr_t vdso = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
    if (vdso) {
        ot_symbolize(vdso + 64, &f);
        EXPECT_STR(f.module, "[vdso]");
    }
    /* an extra mapping of the executable at offset 0: its own load base */
    ot_symbolize((uintptr_t)maps[0] + 16, &f);
    EXPECT(same_file(f.module, "/proc/self/exe"));
    EXPECT_EQ_U(f.offset, 16);
    for (unsigned i = 0; i < made; i++) munmap(maps[i], 4096);
    ot_symbolize_begin();
}

static void *symbolize_thread(void *arg)
{
    int bad = 0;
    for (int i = 0; i < 2000; i++) {
        ot_frame_t f;
        ot_symbolize((uintptr_t)sym_target + (uintptr_t)(i % 8), &f);
        if (strcmp(f.function, "sym_target") != 0 && f.function[0]) bad++;
        if (i % 500 == 0 && arg) ot_symbolize_begin();
    }
    return (void *)(intptr_t)bad;
}

TEST(test_threads)
{
    pthread_t t[3];
    for (int i = 0; i < 3; i++) /* the first one also refreshes the module table meanwhile */
        ASSERT(pthread_create(&t[i], NULL, symbolize_thread, (void *)(intptr_t)(i == 0)) == 0);
    for (int i = 0; i < 3; i++) {
        void *r;
        pthread_join(t[i], &r);
        EXPECT_EQ_U((uintptr_t)r, 0);
    }
}

TEST(test_no_malloc)
{
#ifdef OT_SANITIZER
    SKIP("malloc belongs to the sanitizer");
#else
    char out[512];
    ot_frame_t f;
    int before = __atomic_load_n(&mallocs_seen, __ATOMIC_RELAXED);
    count_mallocs = 1;
    ot_symbolize_begin();
    ot_symbolize((uintptr_t)sym_target, &f);
    ot_symbolize((uintptr_t)dlsym, &f);
    ot_symbolize((uintptr_t)getauxval(AT_SYSINFO_EHDR) + 64, &f);
    ot_symbolize(0x1234, &f);
    ot_demangle("_ZNSt6vectorIiSaIiEE12emplace_backIJiEEERiDpOT_", out, sizeof out);
    count_mallocs = 0;
    EXPECT_EQ_U(__atomic_load_n(&mallocs_seen, __ATOMIC_RELAXED) - before, 0);
#endif
}

/* With no address space left (RLIMIT_AS), symbol tables are streamed instead of mapped. */
TEST(test_rlimit_as_fallback)
{
#ifdef OT_SANITIZER
    SKIP("sanitizer runtimes need address space");
#else
    void *h = dlopen("libm.so.6", RTLD_NOW);
    if (!h) SKIP("no libm.so.6");
    void *cbrtp = dlsym(h, "cbrt"); /* a plain function (cos & co. are IFUNCs) */
    ASSERT(cbrtp);
    fflush(stdout);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        struct rlimit rl = {1 << 20, 1 << 20};
        if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(3);
        if (mmap(NULL, 1 << 16, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) != MAP_FAILED)
            _exit(4);
        ot_frame_t f;
        ot_symbolize_begin();
        int bad = 0;
        ot_symbolize((uintptr_t)cbrtp, &f);
        if (!strstr(f.module, "libm") || strcmp(f.function, "cbrt") != 0) bad |= 1;
        ot_symbolize((uintptr_t)sym_target, &f);
        if (strcmp(f.function, "sym_target") != 0) bad |= 2;
        _exit(bad ? 10 + bad : 0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    EXPECT(WIFEXITED(st));
    EXPECT_EQ_U(WEXITSTATUS(st), 0);
    dlclose(h);
#endif
}

/* A non-PIE executable (ET_EXEC): the offset is the absolute address. Built on the fly. */
TEST(test_non_pie)
{
    const char *src = "interpose/symbolize.c";
    if (access(src, R_OK) != 0) SKIP("not run from the source tree");
    char dir[] = "/tmp/ot_nopie_XXXXXX";
    if (!mkdtemp(dir)) SKIP("mkdtemp");
    char path[256], cmd[1024];
    snprintf(path, sizeof path, "%s/t.c", dir);
    FILE *f = fopen(path, "w");
    ASSERT(f);
    fputs("#include \"internal.h\"\n#include <stdio.h>\n"
          "static __attribute__((noinline)) int nopie_fn(int x)\n"
          "{ __asm__ volatile(\"\"); return x + 1; }\n"
          "int main(void) { ot_frame_t f; ot_symbolize((uintptr_t)nopie_fn + 1, &f);\n"
          "  printf(\"%s\\n%#lx\\n%s\\n%#lx\\n\", f.module, (unsigned long)f.offset, f.function,\n"
          "         (unsigned long)nopie_fn + 1); return nopie_fn(0) - 1; }\n", f);
    fclose(f);
    snprintf(cmd, sizeof cmd,
             "cc -std=gnu11 -O1 -g -no-pie -fno-pie -D_GNU_SOURCE -Iinterpose -Iinclude "
             "-o %s/t %s %s >/dev/null 2>&1 && %s/t", dir, path, src, dir);
    FILE *p = popen(cmd, "r");
    ASSERT(p);
    char mod[512] = "", off[64] = "", fn[512] = "", addr[64] = "";
    bool ok = fgets(mod, sizeof mod, p) && fgets(off, sizeof off, p) && fgets(fn, sizeof fn, p) &&
              fgets(addr, sizeof addr, p);
    int rc = pclose(p);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (!ok || rc != 0) {
        if (system(cmd)) {}
        SKIP("no compiler to build a non-PIE program");
    }
    mod[strcspn(mod, "\n")] = off[strcspn(off, "\n")] = fn[strcspn(fn, "\n")] = 0;
    addr[strcspn(addr, "\n")] = 0;
    EXPECT_STR(fn, "nopie_fn");
    EXPECT_STR(off, addr);
    EXPECT_EQ_U(elf_type_of(mod), ET_EXEC);
    char a2l[512];
    if (addr2line(mod, strtoul(off, NULL, 16), a2l, sizeof a2l)) EXPECT_STR(a2l, "nopie_fn");
    if (system(cmd)) {}
}

static double elapsed_us(const struct timespec *t0, const struct timespec *t1)
{
    return ((double)(t1->tv_sec - t0->tv_sec) * 1e9 + (double)(t1->tv_nsec - t0->tv_nsec)) / 1e3;
}

TEST(test_cost)
{
    ot_frame_t f;
    struct timespec t0, t1;
    void *libc_fn = dlsym(RTLD_DEFAULT, "getpid");
    double begin_us = 0, first_us = 0;
    for (int i = 0; i < 20; i++) {
        clock_gettime(CLOCK_MONOTONIC, &t0);
        ot_symbolize_begin(); /* also forgets remembered lookups */
        clock_gettime(CLOCK_MONOTONIC, &t1);
        begin_us += elapsed_us(&t0, &t1);
        ot_symbolize((uintptr_t)libc_fn, &f);
        ot_symbolize((uintptr_t)sym_target, &f);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        first_us += elapsed_us(&t1, &t0);
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 1000; i++)
        ot_symbolize((uintptr_t)(i % 2 ? libc_fn : (void *)sym_target), &f);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("  ot_symbolize_begin %.1f us; ot_symbolize first %.2f us, again %.2f us per frame\n",
           begin_us / 20, first_us / 40, elapsed_us(&t0, &t1) / 1000);
}

/* ------------------------------------------------------------------ demangler */
static const struct {
    const char *mangled, *expect; /* expect: c++filt (binutils 2.40) output */
} demangle_cases[] = {
    {"_Z1fPVKi",
     "f(int const volatile*)"},
    {"_Z1fPrVKi",
     "f(int const volatile restrict*)"},
    {"_Z1fKPFvvE",
     "f(void (* const)())"},
    {"_Z1fRKPFvvE",
     "f(void (* const&)())"},
    {"_Z1fPA10_i",
     "f(int (*) [10])"},
    {"_Z1fA2_A3_i",
     "f(int [2][3])"},
    {"_Z1fRA10_i",
     "f(int (&) [10])"},
    {"_Z1fM1Ai",
     "f(int A::*)"},
    {"_Z1fM1AKFvvE",
     "f(void (A::*)() const)"},
    {"_Z1fM1AFviE",
     "f(void (A::*)(int))"},
    {"_ZN1A1fEv.constprop.0",
     "A::f() [clone .constprop.0]"},
    {"_Z3foov.isra.0.cold",
     "foo() [clone .isra.0] [clone .cold]"},
    {"_ZZ4mainENKUlvE_clEv",
     "main::{lambda()#1}::operator()() const"},
    {"_ZZ4mainE1x",
     "main::x"},
    {"_ZNSsC1Ev",
     "std::basic_string<char, std::char_traits<char>, std::allocator<char> >::basic_string()"},
    {"_Z1fSs",
     "f(std::basic_string<char, std::char_traits<char>, std::allocator<char> >)"},
    {"_ZNKSt3_V214error_category10_M_messageB5cxx11Ei",
     "std::_V2::error_category::_M_message[abi:cxx11](int) const"},
    {"_ZSt7forwardIRiEOT_RNSt16remove_referenceIS1_E4typeE",
     "int& std::forward<int&>(std::remove_reference<int&>::type&)"},
    {"_ZNSt6vectorIiSaIiEE12emplace_backIJiEEERiDpOT_",
     "int& std::vector<int, std::allocator<int> >::emplace_back<int>(int&&)"},
    {"_Z1fIJEEvDpT_",
     "void f<>()"},
    {"_ZltIiEbRK1AIT_ES4_",
     "bool operator< <int>(A<int> const&, A<int> const&)"},
    {"_ZN1AcviEv",
     "A::operator int()"},
    {"_Z1fILi5ELj5ELl5ELm5ELb1ELc65ELin3EEvv",
     "void f<5, 5u, 5l, 5ul, true, (char)65, -3>()"},
    {"_Z1fIL_Z1gvEEvv",
     "void f<g()>()"},
    {"_Z1fDn",
     "f(decltype(nullptr))"},
    {"_ZTCSd0_Si",
     "construction vtable for std::basic_istream<char, std::char_traits<char> >-in-std::basic_iostream<char, std::char_traits<char> >"},
    {"_ZGVZ4mainE1x",
     "guard variable for main::x"},
    {"_ZThn8_N1B1fEv",
     "non-virtual thunk to B::f()"},
    {"_ZTv0_n24_N1B1fEv",
     "virtual thunk to B::f()"},
    {"_ZTHN1A1xE",
     "TLS init function for A::x"},
    {"_Z1fIiEvT_",
     "void f<int>(int)"},
    {"_Z1fPKcS0_",
     "f(char const*, char const*)"},
    {"_ZN12_GLOBAL__N_13fooEv",
     "(anonymous namespace)::foo()"},
    {"_ZNKR1A1fEv",
     "A::f() const &"},
    {"_ZNKO1A1fEv",
     "A::f() const &&"},
    {"_ZZ4mainE1x_0",
     "main::x"},
    {"_Z1fDF16_",
     "f(_Float16)"},
    {"_Z1fSt8functionIFviEE",
     "f(std::function<void (int)>)"},
    {"_ZNSt6thread11_State_implINS_8_InvokerISt5tupleIJPFvvEEEEEE6_M_runEv",
     "std::thread::_State_impl<std::thread::_Invoker<std::tuple<void (*)()> > >::_M_run()"},
    {"_Z1fPFvvEPFivES0_",
     "f(void (*)(), int (*)(), void (*)())"},
    {"_ZZN1A1fEvE1B",
     "A::f()::B"},
    {"_Z1fZ4mainE1A",
     "f(main::A)"},
    {"_ZN1AC1ERKS_",
     "A::A(A const&)"},
    {"_ZN1AD0Ev",
     "A::~A()"},
    {"_ZNSt10moneypunctIcLb1EE2idE",
     "std::moneypunct<char, true>::id"},
    {"_ZStlsISt11char_traitsIcEERSt13basic_ostreamIcT_ES5_PKc",
     "std::basic_ostream<char, std::char_traits<char> >& std::operator<< <std::char_traits<char> >(std::basic_ostream<char, std::char_traits<char> >&, char const*)"},
    {"_Z1fv.cold",
     "f() [clone .cold]"},
    {"_Z1fv.123",
     "f() [clone .123]"},
    {"_ZN1AIiEC2Ev",
     "A<int>::A()"},
    {"_ZN1AIiED2Ev",
     "A<int>::~A()"},
    {"_Z1fIJidEEvDpRKT_",
     "void f<int, double>(int const&, double const&)"},
    {"_Z1fIJidEEvSt5tupleIJDpT_EE",
     "void f<int, double>(std::tuple<int, double>)"},
    {"_ZN5caffe12SyncedMemory6to_gpuEv",
     "caffe::SyncedMemory::to_gpu()"},
    {"_ZN6google10LogMessage4FailEv",
     "google::LogMessage::Fail()"},
    {"_ZN5caffe4BlobIfE8gpu_dataEv",
     "caffe::Blob<float>::gpu_data()"},
    {"_ZNK5caffe4BlobIfE5countEv",
     "caffe::Blob<float>::count() const"},
    {"_Znwm",
     "operator new(unsigned long)"},
    {"_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE12_M_constructIPKcEEvT_S8_St20forward_iterator_tag",
     "void std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >::_M_construct<char const*>(char const*, char const*, std::forward_iterator_tag)"},
    {"_ZNSt7__cxx1115time_get_bynameIcSt19istreambuf_iteratorIcSt11char_traitsIcEEEC2EPKcm",
     "std::__cxx11::time_get_byname<char, std::istreambuf_iterator<char, std::char_traits<char> > >::time_get_byname(char const*, unsigned long)"},
    {"_ZNSt15__exception_ptr13exception_ptraSERKS0_",
     "std::__exception_ptr::exception_ptr::operator=(std::__exception_ptr::exception_ptr const&)"},
    {"_ZGTtNSt14overflow_errorC2ERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE",
     "transaction clone for std::overflow_error::overflow_error(std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > const&)"},
    {"_ZTIN10__cxxabiv117__class_type_infoE",
     "typeinfo for __cxxabiv1::__class_type_info"},
    {"_ZNSt14codecvt_bynameIwc11__mbstate_tED0Ev",
     "std::codecvt_byname<wchar_t, char, __mbstate_t>::~codecvt_byname()"},
    {"_ZTIN10__cxxabiv123__fundamental_type_infoE",
     "typeinfo for __cxxabiv1::__fundamental_type_info"},
    {"_ZGTtNSt11range_errorD2Ev",
     "transaction clone for std::range_error::~range_error()"},
    {"_ZNSt14basic_ofstreamIwSt11char_traitsIwEEC1ERKSsSt13_Ios_Openmode",
     "std::basic_ofstream<wchar_t, std::char_traits<wchar_t> >::basic_ofstream(std::basic_string<char, std::char_traits<char>, std::allocator<char> > const&, std::_Ios_Openmode)"},
    {"_ZGVNSt8numpunctIwE2idE",
     "guard variable for std::numpunct<wchar_t>::id"},
    {"_ZNSt10istrstreamD0Ev",
     "std::istrstream::~istrstream()"},
    {"_ZNKSt25__codecvt_utf8_utf16_baseIDiE13do_max_lengthEv",
     "std::__codecvt_utf8_utf16_base<char32_t>::do_max_length() const"},
    {"_ZNSt12bad_weak_ptrD0Ev",
     "std::bad_weak_ptr::~bad_weak_ptr()"},
    {"_ZNSt7codecvtIDsDu11__mbstate_tED0Ev",
     "std::codecvt<char16_t, char8_t, __mbstate_t>::~codecvt()"},
    {"_ZNSt14codecvt_bynameIwc11__mbstate_tEC2ERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEEm",
     "std::codecvt_byname<wchar_t, char, __mbstate_t>::codecvt_byname(std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > const&, unsigned long)"},
    {"_ZNSt7__cxx1110moneypunctIcLb1EEC2EP15__locale_structPKcm",
     "std::__cxx11::moneypunct<char, true>::moneypunct(__locale_struct*, char const*, unsigned long)"},
    {"_ZNSt7__cxx1119basic_ostringstreamIwSt11char_traitsIwESaIwEEC1ESt13_Ios_OpenmodeRKS3_",
     "std::__cxx11::basic_ostringstream<wchar_t, std::char_traits<wchar_t>, std::allocator<wchar_t> >::basic_ostringstream(std::_Ios_Openmode, std::allocator<wchar_t> const&)"},
    {"_ZNSt10moneypunctIwLb1EED1Ev",
     "std::moneypunct<wchar_t, true>::~moneypunct()"},
    {"_ZNSt7__cxx1112basic_stringIwSt11char_traitsIwESaIwEEC2ESt16initializer_listIwERKS3_",
     "std::__cxx11::basic_string<wchar_t, std::char_traits<wchar_t>, std::allocator<wchar_t> >::basic_string(std::initializer_list<wchar_t>, std::allocator<wchar_t> const&)"},
    {"_ZNSt10filesystem7__cxx114path16replace_filenameERKS1_",
     "std::filesystem::__cxx11::path::replace_filename(std::filesystem::__cxx11::path const&)"},
    {"_ZNKSt7__cxx119money_getIcSt19istreambuf_iteratorIcSt11char_traitsIcEEE10_M_extractILb1EEES4_S4_S4_RSt8ios_baseRSt12_Ios_IostateRNS_12basic_stringIcS3_SaIcEEE",
     "std::istreambuf_iterator<char, std::char_traits<char> > std::__cxx11::money_get<char, std::istreambuf_iterator<char, std::char_traits<char> > >::_M_extract<true>(std::istreambuf_iterator<char, std::char_traits<char> >, std::istreambuf_iterator<char, std::char_traits<char> >, std::ios_base&, std::_Ios_Iostate&, std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >&) const"},
    {"_ZnamRKSt9nothrow_t",
     "operator new[](unsigned long, std::nothrow_t const&)"},
    {"_ZNSt10istrstreamC1EPcl",
     "std::istrstream::istrstream(char*, long)"},
    {"_ZNKSt7__cxx1110moneypunctIcLb0EE13thousands_sepEv",
     "std::__cxx11::moneypunct<char, false>::thousands_sep() const"},
    {"_ZNSt7__cxx1119basic_ostringstreamIwSt11char_traitsIwESaIwEED2Ev",
     "std::__cxx11::basic_ostringstream<wchar_t, std::char_traits<wchar_t>, std::allocator<wchar_t> >::~basic_ostringstream()"},
    {"_ZNSt7__cxx1115numpunct_bynameIwED2Ev",
     "std::__cxx11::numpunct_byname<wchar_t>::~numpunct_byname()"},
    {"_ZGVNSt7collateIcE2idE",
     "guard variable for std::collate<char>::id"},
    {"_ZGTtNSt15underflow_errorC2EPKc",
     "transaction clone for std::underflow_error::underflow_error(char const*)"},
    {"_ZNSt14basic_ifstreamIcSt11char_traitsIcEEC1ERKNSt7__cxx1112basic_stringIcS1_SaIcEEESt13_Ios_Openmode",
     "std::basic_ifstream<char, std::char_traits<char> >::basic_ifstream(std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > const&, std::_Ios_Openmode)"},
    {"_ZGTtNSt11logic_errorD1Ev",
     "transaction clone for std::logic_error::~logic_error()"},
    {"_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEC1EOS4_",
     "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >::basic_string(std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >&&)"},
    {"_ZN5caffe3NetIfE13ForwardFromToEii",
     "caffe::Net<float>::ForwardFromTo(int, int)"},
    {"_ZN6google10LogMessageD1Ev",
     "google::LogMessage::~LogMessage()"},
    {"_ZN5caffe9SGDSolverIfE11ApplyUpdateEv",
     "caffe::SGDSolver<float>::ApplyUpdate()"},
    {"_ZN2at6native12_GLOBAL__N_117cuda_alloc_helperEm",
     "at::native::(anonymous namespace)::cuda_alloc_helper(unsigned long)"},
    {"_ZN3c104cuda20CUDACachingAllocator6Native22NativeCachingAllocator6mallocEPPvimP11CUstream_st",
     "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::malloc(void**, int, unsigned long, CUstream_st*)"},
    {"_ZN5torch8autograd6engine17evaluate_functionERSt10shared_ptrINS0_9GraphTaskEEPNS0_4NodeERNS0_11InputBufferERKS3_INS0_10ReadyQueueEE",
     "torch::autograd::engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&, torch::autograd::Node*, torch::autograd::InputBuffer&, torch::autograd::GraphTask<torch::autograd::ReadyQueue> const&)"},
};

TEST(test_demangle_table)
{
    char out[1024];
    unsigned n = sizeof demangle_cases / sizeof demangle_cases[0], ok = 0;
    for (unsigned i = 0; i < n; i++) {
        bool r = ot_demangle(demangle_cases[i].mangled, out, sizeof out);
        if (r && strcmp(out, demangle_cases[i].expect) == 0) ok++;
        else printf("  %s\n    got  %s\n    want %s\n", demangle_cases[i].mangled, out,
                    demangle_cases[i].expect);
    }
    printf("  demangler: %u/%u embedded names match c++filt\n", ok, n);
    EXPECT_EQ_U(ok, n);
}

TEST(test_demangle_unsupported)
{
    static const char *cases[] = {
        "main", "", "_Z", "_ZN", "_ZN1A", "malloc", "_GLOBAL__sub_I_main.c",
        "_ZN5caffe3NetIfE12ForwardFromToEii",    /* bad length: c++filt rejects it too */
        "_Z1fIiEDTcl1gfp_EET_",                  /* decltype(expression) */
        "_Z1fv trailing", "_Z3fo", "_Z1fPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPi",
    };
    char out[256];
    for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        EXPECT(!ot_demangle(cases[i], out, sizeof out));
        EXPECT_STR(out, cases[i]);
    }
    EXPECT(!ot_demangle(NULL, out, sizeof out));
    EXPECT_STR(out, "");
    EXPECT(!ot_demangle("_Z1fv", out, 0)); /* no room at all: nothing written, no crash */
    /* absurd nesting is refused, not a stack overflow */
    static char deep[20000];
    memcpy(deep, "_Z1f", 4);
    memset(deep + 4, 'P', sizeof deep - 6);
    deep[sizeof deep - 2] = 'i';
    EXPECT(!ot_demangle(deep, out, sizeof out));
    EXPECT(strlen(out) == sizeof out - 1);
}

TEST(test_demangle_truncation)
{
    const char *m = "_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE12_M_constructIPKcEEvT_"
                    "S8_St20forward_iterator_tag";
    char full[1024], out[256];
    ASSERT(ot_demangle(m, full, sizeof full));
    for (size_t cap = 1; cap < 200; cap++) {
        memset(out, '#', sizeof out);
        ot_demangle(m, out, cap);
        EXPECT(strlen(out) < cap);
        EXPECT(out[cap] == '#');
        EXPECT(strncmp(out, full, strlen(out)) == 0);
    }
    memset(out, '#', sizeof out);
    ot_demangle("not_mangled_but_long_enough", out, 8);
    EXPECT_STR(out, "not_man");
    EXPECT(out[8] == '#');
}

/* Live comparison with c++filt over libstdc++'s exported names. */
TEST(test_demangle_vs_cxxfilt)
{
    static const char *libs[] = {"/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
                                 "/usr/lib/aarch64-linux-gnu/libstdc++.so.6",
                                 "/usr/lib64/libstdc++.so.6", "/usr/lib/libstdc++.so.6"};
    const char *lib = NULL;
    for (unsigned i = 0; i < sizeof libs / sizeof libs[0] && !lib; i++)
        if (access(libs[i], R_OK) == 0) lib = libs[i];
    if (!lib) SKIP("no libstdc++.so.6 found");
    char tmp[] = "/tmp/ot_dm_XXXXXX", cmd[1024];
    int fd = mkstemp(tmp);
    ASSERT(fd >= 0);
    close(fd);
    snprintf(cmd, sizeof cmd,
             "nm -D --without-symbol-versions %s 2>/dev/null | awk '$NF ~ /^_Z/ {print $NF}' | "
             "sort -u | awk 'NR %% 10 == 1' | head -500 > %s", lib, tmp);
    if (system(cmd) != 0) {
        unlink(tmp);
        SKIP("nm failed");
    }
    snprintf(cmd, sizeof cmd, "c++filt < %s 2>/dev/null", tmp);
    FILE *names = fopen(tmp, "r"), *ref = popen(cmd, "r");
    ASSERT(names && ref);
    char m[4096], r[4096], out[4096];
    unsigned n = 0, ok = 0;
    while (fgets(m, sizeof m, names) && fgets(r, sizeof r, ref)) {
        m[strcspn(m, "\n")] = 0;
        r[strcspn(r, "\n")] = 0;
        ot_demangle(m, out, sizeof out);
        n++;
        if (strcmp(out, r) == 0) ok++;
        else if (n - ok <= 5) printf("  %s\n    got  %s\n    want %s\n", m, out, r);
    }
    fclose(names);
    pclose(ref);
    unlink(tmp);
    if (n < 100) SKIP("nm or c++filt not available (%u names)", n);
    printf("  demangler vs c++filt on %s: %u/%u (%.1f%%)\n", lib, ok, n, 100.0 * ok / n);
    EXPECT(ok * 100 >= n * 97);
}

/* ------------------------------------------------------------------ file and line (symbolize_line.c) */
static OT_NOINLINE uintptr_t return_address(void)
{
    uintptr_t r = (uintptr_t)__builtin_return_address(0);
    __asm__ volatile("" ::: "memory");
    return r;
}

/* The line of a call, from this binary's DWARF (built with -g), as addr2line gives it. */
TEST(test_line_of_call)
{
    uintptr_t ret = return_address(); int want = __LINE__;
    ot_frame_t f;
    ot_symbolize_begin();
    ot_symbolize(ret - 1, &f);
    ASSERT(f.module_file);
    EXPECT(!ot_symbolize_line(&f)); /* off until a library is named */
    EXPECT_STR(f.file, "");
    ot_symbolize_lines_use("libdw.so.1");
    bool found = ot_symbolize_line(&f);
    if (!found && ot_symbolize_lines_note()) SKIP("%s", ot_symbolize_lines_note());
    EXPECT(found);
    EXPECT_CONTAINS(f.file, "tests/unit/test_symbolize.c");
    EXPECT_EQ_U(f.line, want);
    char cmd[1024], out[1024] = "";
    snprintf(cmd, sizeof cmd, "addr2line -e '%s' %#lx 2>/dev/null", f.module, (unsigned long)f.offset);
    FILE *p = popen(cmd, "r");
    if (p && fgets(out, sizeof out, p)) {
        char tail[300];
        snprintf(tail, sizeof tail, "%s:%d", f.file, f.line);
        EXPECT_CONTAINS(out, tail);
    }
    if (p) pclose(p);
    /* Again, from the module already read; errno kept. */
    ot_symbolize(ret - 1, &f);
    errno = EDOM;
    EXPECT(ot_symbolize_line(&f));
    EXPECT_EQ_U(errno, EDOM);
    EXPECT_EQ_U(f.line, want);
    /* Frames without a file: the vdso, an unknown address. */
    ot_symbolize((uintptr_t)getauxval(AT_SYSINFO_EHDR) + 64, &f);
    EXPECT(!ot_symbolize_line(&f));
    ot_symbolize(0x1234, &f);
    EXPECT(!ot_symbolize_line(&f));
    EXPECT_STR(f.file, "");
    EXPECT_EQ_U(f.line, 0);
    ot_symbolize_lines_use("none");
}

/* No libdw: no file and line, a note that says why; another library name is tried again (before
 * test_line_of_call: a library once loaded stays). */
TEST(test_line_without_libdw)
{
    uintptr_t ret = return_address();
    ot_frame_t f;
    ot_symbolize_begin();
    ot_symbolize(ret - 1, &f);
    ot_symbolize_lines_use("/nonexistent/libdw.so.1");
    EXPECT(!ot_symbolize_line(&f));
    EXPECT_STR(f.file, "");
    EXPECT_EQ_U(f.line, 0);
    EXPECT_STR(f.function, "test_line_without_libdw");
    ASSERT(ot_symbolize_lines_note() != NULL);
    EXPECT_CONTAINS(ot_symbolize_lines_note(), "cannot load");
    EXPECT_CONTAINS(ot_symbolize_lines_note(), "/nonexistent/libdw.so.1");
    ot_symbolize_lines_use("none");
    EXPECT(!ot_symbolize_line(&f));
    EXPECT(ot_symbolize_lines_note() == NULL);
}

TEST_MAIN(test_exe_function, test_libc_function, test_return_address_past_end,
          test_unknown_address, test_vdso, test_random_addresses, test_many_mappings,
          test_threads, test_no_malloc, test_rlimit_as_fallback, test_non_pie, test_cost,
          test_demangle_table, test_demangle_unsupported, test_demangle_truncation,
          test_demangle_vs_cxxfilt, test_line_without_libdw, test_line_of_call)
