/* Address -> module, offset, function name, for reports written on an allocation failure or in a
 * signal handler. Never calls malloc or stdio: /proc/self/maps and ELF files are read with raw
 * open/read/pread/mmap into static tables, and C++ names are demangled into the caller's buffer.
 *
 * Concurrency: the module table, ELF cache and demangler scratch are static. ot_symbolize_begin and
 * ot_symbolize take one spin lock (bounded wait; a re-entry from a signal handler on the same
 * thread gets "unknown" instead of a deadlock). The module path handed out stays valid until the
 * next ot_symbolize_begin, so callers that print frames hold the report lock across both.
 *
 * Addresses are looked up as given (a function pointer names its function). Captured stacks hold
 * return addresses: pass ip - 1 to name the call itself, so that addr2line shows the line of the
 * call and a call to a noreturn function at the very end of a function is not attributed to the
 * next one (a lookup that finds nothing at ip retries ip - 1 by itself).
 * File and line are not this file's: symbolize_line.c reads them from DWARF, on the slow path. */
#include "internal.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <sched.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------ small helpers (no libc) */

static size_t sy_strlen(const char *s)
{
    size_t n = 0;
    while (s[n]) n++;
    return n;
}

static bool sy_memeq(const void *a, const void *b, size_t n)
{
    const unsigned char *x = a, *y = b;
    for (size_t i = 0; i < n; i++)
        if (x[i] != y[i]) return false;
    return true;
}

static void sy_memcpy(void *d, const void *s, size_t n)
{
    unsigned char *x = d;
    const unsigned char *y = s;
    for (size_t i = 0; i < n; i++) x[i] = y[i];
}

/* Copies at most cap-1 bytes and always terminates (cap > 0). */
static void sy_copy(char *out, size_t cap, const char *s)
{
    size_t i = 0;
    if (cap == 0) return;
    if (s)
        for (; s[i] && i + 1 < cap; i++) out[i] = s[i];
    out[i] = 0;
}

static bool sy_isdigit(char c) { return c >= '0' && c <= '9'; }
static bool sy_islower(char c) { return c >= 'a' && c <= 'z'; }
static bool sy_isupper(char c) { return c >= 'A' && c <= 'Z'; }

/* ================================================================== Itanium C++ demangler
 *
 * Two passes over a fixed node arena: parse the mangled name into a small tree (substitutions and
 * template parameters become references to earlier nodes), then print the tree. Output follows
 * c++filt (binutils, which prints std::string & co. in full). Anything outside the supported
 * grammar (expressions, decltype, vendor qualifiers ...) makes the whole name unsupported. */

enum {
    DN_NAME, DN_NESTED, DN_TEMPLATE, DN_LIST, DN_PACK, DN_BUILTIN, DN_STDSUB,
    DN_PTR, DN_REF, DN_RREF, DN_CV, DN_COMPLEX, DN_IMAG,
    DN_FUNC, DN_ARRAY, DN_PTRMEM, DN_TPARAM, DN_TYPED, DN_CTOR, DN_DTOR,
    DN_OPER, DN_CONV, DN_LITERAL, DN_EXTNAME, DN_LOCAL, DN_SPECIAL, DN_CTORVT, DN_ABITAG,
    DN_LAMBDA, DN_UNNAMED, DN_CLONE, DN_PACKEXP, DN_FLOATN
};
/* flags: cv-qualifiers and ref-qualifiers of types and member functions */
#define DQ_CONST 1u
#define DQ_VOLATILE 2u
#define DQ_RESTRICT 4u
#define DQ_REF 8u
#define DQ_RREF 16u
#define DQ_NEG 32u /* literal: negative */
#define DQ_X 32u   /* _FloatNx */

typedef struct {
    uint8_t kind, flags;
    int32_t a, b;    /* child nodes, -1 if none (DN_BUILTIN: b is the mangled letter) */
    const char *s;   /* text (into the mangled name or static) */
    uint32_t n;      /* text length / builtin letter / number */
} dn_t;

#define DM_NODES 4096
#define DM_SUBS 512
#define DM_TARGS 128
/* Recursion bounds, so that a hostile name cannot exhaust a signal stack: ~10 KiB at most for
 * parsing and printing each. No name among 74,000 from libstdc++, LLVM and clang nests deeper
 * than 24. */
#define DM_DEPTH 32
#define DM_PRINT_DEPTH 64

static struct {
    const char *p;
    int nn, nsub, ntarg;
    int type_depth, depth;
    dn_t node[DM_NODES];
    int sub[DM_SUBS];
    int targ[DM_TARGS];
} dm;
static volatile int dm_lock;

static int dm_new(unsigned kind, int a, int b)
{
    if (dm.nn >= DM_NODES) return -1;
    dn_t *n = &dm.node[dm.nn];
    n->kind = (uint8_t)kind;
    n->flags = 0;
    n->a = a;
    n->b = b;
    n->s = NULL;
    n->n = 0;
    return dm.nn++;
}

static int dm_text(unsigned kind, const char *s, size_t len)
{
    int i = dm_new(kind, -1, -1);
    if (i >= 0) {
        dm.node[i].s = s;
        dm.node[i].n = (uint32_t)len;
    }
    return i;
}

static char dm_peek(void) { return dm.p[0]; }
static char dm_peek2(void) { return dm.p[0] ? dm.p[1] : 0; }
static bool dm_eat(char c)
{
    if (dm.p[0] != c) return false;
    dm.p++;
    return true;
}

static bool dm_add_sub(int i)
{
    if (i < 0 || dm.nsub >= DM_SUBS) return false;
    dm.sub[dm.nsub++] = i;
    return true;
}

/* Appends item to a list given by head/tail; returns false when out of nodes. */
static bool dm_append(int *head, int *tail, int item)
{
    int l = dm_new(DN_LIST, item, -1);
    if (l < 0 || item < 0) return false;
    if (*tail >= 0) dm.node[*tail].b = l;
    else *head = l;
    *tail = l;
    return true;
}

/* <number> ::= [n] <decimal>; returns false without digits. */
static bool dm_number(long *out, bool *neg)
{
    long v = 0;
    bool ng = dm_eat('n');
    if (!sy_isdigit(dm_peek())) return false;
    while (sy_isdigit(dm_peek())) {
        if (v > 100000000L) return false;
        v = v * 10 + (*dm.p++ - '0');
    }
    *out = v;
    if (neg) *neg = ng;
    else if (ng) return false;
    return true;
}

static int dm_type(void);
static int dm_name(unsigned *cv, unsigned *ref);
static int dm_encoding(void);
static int dm_template_args(void);
static int dm_function_type(void);

static const struct {
    char code[3];
    const char *name;
} dm_ops[] = {
    {"nw", "new"}, {"na", "new[]"}, {"dl", "delete"}, {"da", "delete[]"}, {"ps", "+"},
    {"ng", "-"}, {"ad", "&"}, {"de", "*"}, {"co", "~"}, {"pl", "+"}, {"mi", "-"}, {"ml", "*"},
    {"dv", "/"}, {"rm", "%"}, {"an", "&"}, {"or", "|"}, {"eo", "^"}, {"aS", "="}, {"pL", "+="},
    {"mI", "-="}, {"mL", "*="}, {"dV", "/="}, {"rM", "%="}, {"aN", "&="}, {"oR", "|="},
    {"eO", "^="}, {"ls", "<<"}, {"rs", ">>"}, {"lS", "<<="}, {"rS", ">>="}, {"eq", "=="},
    {"ne", "!="}, {"lt", "<"}, {"gt", ">"}, {"le", "<="}, {"ge", ">="}, {"ss", "<=>"},
    {"nt", "!"}, {"aa", "&&"}, {"oo", "||"}, {"pp", "++"}, {"mm", "--"}, {"cm", ","},
    {"pm", "->*"}, {"pt", "->"}, {"cl", "()"}, {"ix", "[]"}, {"qu", "?"}, {"aw", "co_await"},
};

static const struct {
    char code;
    const char *name;
} dm_builtins[] = {
    {'v', "void"}, {'w', "wchar_t"}, {'b', "bool"}, {'c', "char"}, {'a', "signed char"},
    {'h', "unsigned char"}, {'s', "short"}, {'t', "unsigned short"}, {'i', "int"},
    {'j', "unsigned int"}, {'l', "long"}, {'m', "unsigned long"}, {'x', "long long"},
    {'y', "unsigned long long"}, {'n', "__int128"}, {'o', "unsigned __int128"}, {'f', "float"},
    {'d', "double"}, {'e', "long double"}, {'g', "__float128"}, {'z', "..."},
};

static const struct {
    char code;
    const char *name; /* as c++filt prints it (verbose) */
    const char *ctor; /* name of its constructors */
} dm_stdsubs[] = {
    {'a', "std::allocator", "allocator"},
    {'b', "std::basic_string", "basic_string"},
    {'s', "std::basic_string<char, std::char_traits<char>, std::allocator<char> >", "basic_string"},
    {'i', "std::basic_istream<char, std::char_traits<char> >", "basic_istream"},
    {'o', "std::basic_ostream<char, std::char_traits<char> >", "basic_ostream"},
    {'d', "std::basic_iostream<char, std::char_traits<char> >", "basic_iostream"},
};

static int dm_builtin_node(char c)
{
    for (size_t i = 0; i < sizeof dm_builtins / sizeof dm_builtins[0]; i++)
        if (dm_builtins[i].code == c) {
            int r = dm_text(DN_BUILTIN, dm_builtins[i].name, sy_strlen(dm_builtins[i].name));
            if (r >= 0) dm.node[r].b = (unsigned char)c; /* builtin letter */
            return r;
        }
    return -1;
}

/* <source-name> ::= <length> <identifier> */
static int dm_source_name(void)
{
    long len;
    if (!dm_number(&len, NULL) || len <= 0) return -1;
    const char *s = dm.p;
    for (long i = 0; i < len; i++)
        if (!s[i]) return -1;
    dm.p += len;
    if (len >= 10 && sy_memeq(s, "_GLOBAL_", 8) && (s[8] == '.' || s[8] == '_' || s[8] == '$') &&
        s[9] == 'N')
        return dm_text(DN_NAME, "(anonymous namespace)", 21);
    return dm_text(DN_NAME, s, (size_t)len);
}

/* <discriminator> ::= _ <digit> | __ <number> _ (ignored) */
static bool dm_discriminator(void)
{
    if (!dm_eat('_')) return true;
    if (dm_eat('_')) {
        long v;
        return dm_number(&v, NULL) && dm_eat('_');
    }
    if (!sy_isdigit(dm_peek())) return false;
    dm.p++;
    return true;
}

static unsigned dm_cv(void)
{
    unsigned q = 0;
    if (dm_eat('r')) q |= DQ_RESTRICT;
    if (dm_eat('V')) q |= DQ_VOLATILE;
    if (dm_eat('K')) q |= DQ_CONST;
    return q;
}

/* Types until 'E', '.' or the end (not consumed); at least one. */
static int dm_type_list(bool allow_ref_qual, unsigned *flags)
{
    int head = -1, tail = -1;
    for (;;) {
        char c = dm_peek();
        if (c == 0 || c == 'E' || c == '.') break; /* the caller checks what ends the list */
        if (allow_ref_qual && (c == 'R' || c == 'O') && dm_peek2() == 'E') {
            *flags |= c == 'R' ? DQ_REF : DQ_RREF;
            dm.p++;
            break;
        }
        if (!dm_append(&head, &tail, dm_type())) return -1;
    }
    return head;
}

static int dm_operator_name(void)
{
    char c0 = dm.p[0], c1 = c0 ? dm.p[1] : 0;
    if (c0 == 'c' && c1 == 'v') {
        dm.p += 2;
        int t = dm_type();
        return t < 0 ? -1 : dm_new(DN_CONV, t, -1);
    }
    for (size_t i = 0; i < sizeof dm_ops / sizeof dm_ops[0]; i++)
        if (dm_ops[i].code[0] == c0 && dm_ops[i].code[1] == c1) {
            dm.p += 2;
            return dm_text(DN_OPER, dm_ops[i].name, sy_strlen(dm_ops[i].name));
        }
    return -1;
}

/* <unqualified-name>, with ctor/dtor names of `prefix` and trailing ABI tags. */
static int dm_unqualified_name(int prefix)
{
    char c = dm_peek(), c2 = dm_peek2();
    int r;
    if (sy_isdigit(c)) {
        r = dm_source_name();
    } else if (sy_islower(c)) {
        r = dm_operator_name();
    } else if (c == 'C' && prefix >= 0) {
        dm.p++;
        bool inheriting = dm_eat('I');
        if (dm_peek() < '1' || dm_peek() > '5') return -1;
        dm.p++;
        if (inheriting && dm_type() < 0) return -1;
        r = dm_new(DN_CTOR, prefix, -1);
    } else if (c == 'D' && prefix >= 0 && (c2 == '0' || c2 == '1' || c2 == '2' || c2 == '4' ||
                                           c2 == '5')) {
        dm.p += 2;
        r = dm_new(DN_DTOR, prefix, -1);
    } else if (c == 'U' && c2 == 't') {
        long num = -1;
        dm.p += 2;
        if (sy_isdigit(dm_peek()) && !dm_number(&num, NULL)) return -1;
        if (!dm_eat('_')) return -1;
        r = dm_new(DN_UNNAMED, -1, -1);
        if (r >= 0) dm.node[r].n = (uint32_t)(num + 2);
    } else if (c == 'U' && c2 == 'l') {
        long num = -1;
        unsigned fl = 0;
        dm.p += 2;
        int params = dm_type_list(false, &fl);
        if (params < 0 || !dm_eat('E')) return -1;
        if (sy_isdigit(dm_peek()) && !dm_number(&num, NULL)) return -1;
        if (!dm_eat('_')) return -1;
        r = dm_new(DN_LAMBDA, params, -1);
        if (r >= 0) dm.node[r].n = (uint32_t)(num + 2);
    } else if (c == 'L') {
        dm.p++;
        r = dm_source_name();
        if (r >= 0 && !dm_discriminator()) return -1;
    } else {
        return -1;
    }
    while (r >= 0 && dm_peek() == 'B') {
        dm.p++;
        long len;
        if (!dm_number(&len, NULL) || len <= 0) return -1;
        for (long i = 0; i < len; i++)
            if (!dm.p[i]) return -1;
        r = dm_new(DN_ABITAG, r, -1);
        if (r < 0) return -1;
        dm.node[r].s = dm.p;
        dm.node[r].n = (uint32_t)len;
        dm.p += len;
    }
    return r;
}

/* <substitution> ::= S_ | S <seq-id> _ | St | Sa | Sb | Ss | Si | So | Sd */
static int dm_substitution(void)
{
    if (!dm_eat('S')) return -1;
    char c = dm_peek();
    if (c == 't') {
        dm.p++;
        return dm_text(DN_NAME, "std", 3);
    }
    for (size_t i = 0; i < sizeof dm_stdsubs / sizeof dm_stdsubs[0]; i++)
        if (dm_stdsubs[i].code == c) {
            dm.p++;
            int r = dm_new(DN_STDSUB, -1, -1);
            if (r >= 0) dm.node[r].n = (uint32_t)i;
            return r;
        }
    long idx = 0;
    if (c != '_') {
        long v = 0;
        while (sy_isdigit(dm_peek()) || sy_isupper(dm_peek())) {
            char d = *dm.p++;
            v = v * 36 + (sy_isdigit(d) ? d - '0' : d - 'A' + 10);
            if (v > DM_SUBS) return -1;
        }
        idx = v + 1;
    }
    if (!dm_eat('_') || idx >= dm.nsub) return -1;
    return dm.sub[idx];
}

/* <template-param> ::= T_ | T <number> _ */
static int dm_template_param(void)
{
    long idx = 0;
    if (!dm_eat('T')) return -1;
    if (dm_peek() != '_') {
        if (!dm_number(&idx, NULL)) return -1;
        idx++;
    }
    if (!dm_eat('_') || idx >= dm.ntarg) return -1;
    return dm_new(DN_TPARAM, dm.targ[idx], -1);
}

/* <template-arg> ::= <type> | L ... E | J <template-arg>* E */
static int dm_template_arg(void)
{
    char c = dm_peek();
    if (c == 'L') {
        dm.p++;
        if (dm_peek() == '_' && dm_peek2() == 'Z') dm.p += 2;
        else if (dm_peek() == 'Z') dm.p++;
        else {
            int t = dm_type();
            if (t < 0) return -1;
            if (dm.node[t].kind == DN_BUILTIN) {
                char b = (char)dm.node[t].b;
                if (b == 'f' || b == 'd' || b == 'e' || b == 'g') return -1;
            }
            bool neg = dm_eat('n');
            const char *v = dm.p;
            while (sy_isdigit(dm_peek())) dm.p++;
            if (dm.p == v || !dm_eat('E')) return -1;
            int r = dm_new(DN_LITERAL, t, -1);
            if (r < 0) return -1;
            dm.node[r].s = v;
            dm.node[r].n = (uint32_t)(dm.p - 1 - v);
            if (neg) dm.node[r].flags |= DQ_NEG;
            return r;
        }
        int e = dm_encoding();
        if (e < 0 || !dm_eat('E')) return -1;
        return dm_new(DN_EXTNAME, e, -1);
    }
    if (c == 'J') {
        int head = -1, tail = -1;
        dm.p++;
        while (dm_peek() != 'E') {
            if (!dm_peek() || !dm_append(&head, &tail, dm_template_arg())) return -1;
        }
        dm.p++;
        return dm_new(DN_PACK, head, -1);
    }
    if (c == 'X') return -1; /* expressions: unsupported */
    return dm_type();
}

/* <template-args> ::= I <template-arg>+ E. Arguments of the entity being named (not those met
 * inside a type) become the targets of T_ references. */
static int dm_template_args(void)
{
    int head = -1, tail = -1;
    bool tag = dm.type_depth == 0;
    if (!dm_eat('I')) return -1;
    dm.type_depth++;
    while (dm_peek() != 'E') {
        int a = dm_peek() ? dm_template_arg() : -1;
        if (!dm_append(&head, &tail, a)) return -1;
    }
    dm.p++;
    dm.type_depth--;
    if (tag) {
        int n = 0;
        for (int l = head; l >= 0 && n < DM_TARGS; l = dm.node[l].b) dm.targ[n++] = dm.node[l].a;
        dm.ntarg = n;
    }
    return head; /* -1 for "IE" is indistinguishable from failure; nobody mangles that */
}

/* <nested-name> ::= N [<CV-qualifiers>] [<ref-qualifier>] <prefix> <unqualified-name> E */
static int dm_nested_name(unsigned *cv, unsigned *ref)
{
    int ret = -1;
    if (!dm_eat('N')) return -1;
    unsigned q = dm_cv();
    if (dm_eat('R')) q |= DQ_REF;
    else if (dm_eat('O')) q |= DQ_RREF;
    if (cv) *cv = q;
    (void)ref;
    for (;;) {
        char c = dm_peek(), c2 = dm_peek2();
        int dc;
        if (c == 'E') {
            dm.p++;
            return ret;
        }
        if (c == 'S') {
            dc = dm_substitution();
        } else if (c == 'I') {
            if (ret < 0) return -1;
            int args = dm_template_args();
            if (args < 0) return -1;
            dc = -2;
            ret = dm_new(DN_TEMPLATE, ret, args);
        } else if (c == 'T') {
            dc = dm_template_param();
        } else if (c == 'M') {
            if (ret < 0) return -1;
            dm.p++;
            continue;
        } else if (c == 'D' && (c2 == 't' || c2 == 'T')) {
            return -1;
        } else {
            dc = dm_unqualified_name(ret);
        }
        if (dc == -1) return -1;
        if (dc >= 0) ret = ret < 0 ? dc : dm_new(DN_NESTED, ret, dc);
        if (ret < 0) return -1;
        if (c != 'S' && dm_peek() != 'E' && !dm_add_sub(ret)) return -1;
    }
}

/* <local-name> ::= Z <encoding> E <entity name> [<discriminator>] | Z <encoding> E s [<disc>] */
static int dm_local_name(unsigned *cv, unsigned *ref)
{
    if (!dm_eat('Z')) return -1;
    /* The enclosing function is a scope of its own: its template arguments are the targets of
     * the T_ in its signature, also when the local name sits inside a type. */
    int saved[16], nsaved = dm.ntarg, depth = dm.type_depth;
    if (nsaved > 16) return -1;
    for (int i = 0; i < nsaved; i++) saved[i] = dm.targ[i];
    dm.type_depth = 0;
    int enc = dm_encoding();
    dm.type_depth = depth;
    for (int i = 0; i < nsaved; i++) dm.targ[i] = saved[i];
    dm.ntarg = nsaved;
    if (enc < 0 || !dm_eat('E')) return -1;
    int ent;
    if (dm_eat('s')) {
        if (!dm_discriminator()) return -1;
        ent = dm_text(DN_NAME, "string literal", 14);
    } else {
        if (dm_peek() == 'd') return -1; /* default-argument scope */
        ent = dm_name(cv, ref);
        if (ent < 0) return -1;
        unsigned k = dm.node[ent].kind;
        if (k != DN_LAMBDA && k != DN_UNNAMED && !dm_discriminator()) return -1;
    }
    /* c++filt elides the return type of the enclosing function */
    if (dm.node[enc].kind == DN_TYPED) dm.node[dm.node[enc].b].a = -1;
    return ent < 0 ? -1 : dm_new(DN_LOCAL, enc, ent);
}

static int dm_name(unsigned *cv, unsigned *ref)
{
    char c = dm_peek();
    int r;
    if (c == 'N') return dm_nested_name(cv, ref);
    if (c == 'Z') return dm_local_name(cv, ref);
    if (c == 'S' && dm_peek2() == 't') {
        dm.p += 2;
        int std = dm_text(DN_NAME, "std", 3);
        int u = dm_unqualified_name(-1);
        if (std < 0 || u < 0) return -1;
        r = dm_new(DN_NESTED, std, u);
        if (dm_peek() == 'I') {
            if (!dm_add_sub(r)) return -1;
            int args = dm_template_args();
            r = args < 0 ? -1 : dm_new(DN_TEMPLATE, r, args);
        }
        return r;
    }
    if (c == 'S') {
        r = dm_substitution();
        if (r >= 0 && dm_peek() == 'I') {
            int args = dm_template_args();
            r = args < 0 ? -1 : dm_new(DN_TEMPLATE, r, args);
        }
        return r;
    }
    r = dm_unqualified_name(-1);
    if (r >= 0 && dm_peek() == 'I') {
        if (!dm_add_sub(r)) return -1;
        int args = dm_template_args();
        r = args < 0 ? -1 : dm_new(DN_TEMPLATE, r, args);
    }
    return r;
}

/* <function-type> ::= F [Y] <return type> <parameter types> [<ref-qualifier>] E */
static int dm_function_type(void)
{
    unsigned fl = 0;
    if (!dm_eat('F')) return -1;
    dm_eat('Y');
    int ret = dm_type();
    if (ret < 0) return -1;
    int params = dm_type_list(true, &fl);
    if (params < 0 || !dm_eat('E')) return -1;
    int r = dm_new(DN_FUNC, ret, params);
    if (r >= 0) dm.node[r].flags = (uint8_t)fl;
    return r;
}

static int dm_type_inner(void)
{
    char c = dm_peek(), c2 = dm_peek2();
    int r = -1, t;
    bool can_sub = true;
    switch (c) {
    case 'v': case 'w': case 'b': case 'c': case 'a': case 'h': case 's': case 't': case 'i':
    case 'j': case 'l': case 'm': case 'x': case 'y': case 'n': case 'o': case 'f': case 'd':
    case 'e': case 'g': case 'z':
        dm.p++;
        return dm_builtin_node(c);
    case 'r': case 'V': case 'K': {
        unsigned q = dm_cv();
        /* qualifiers of a member function type: the unqualified type is no substitution */
        t = dm_peek() == 'F' ? dm_function_type() : dm_type();
        if (t < 0) return -1;
        if (dm.node[t].kind == DN_FUNC) { /* qualifiers go after the parameters */
            r = dm_new(DN_FUNC, dm.node[t].a, dm.node[t].b);
            if (r >= 0) dm.node[r].flags = (uint8_t)(dm.node[t].flags | q);
        } else {
            r = dm_new(DN_CV, t, -1);
            if (r >= 0) dm.node[r].flags = (uint8_t)q;
        }
        break;
    }
    case 'P': case 'R': case 'O': case 'C': case 'G': {
        dm.p++;
        t = dm_type();
        unsigned k = c == 'P' ? DN_PTR : c == 'R' ? DN_REF : c == 'O' ? DN_RREF
                   : c == 'C' ? DN_COMPLEX : DN_IMAG;
        r = t < 0 ? -1 : dm_new(k, t, -1);
        break;
    }
    case 'F':
        r = dm_function_type();
        break;
    case 'A': {
        const char *dim = ++dm.p;
        while (sy_isdigit(dm_peek())) dm.p++;
        size_t dlen = (size_t)(dm.p - dim);
        if (!dm_eat('_')) return -1;
        t = dm_type();
        r = t < 0 ? -1 : dm_new(DN_ARRAY, t, -1);
        if (r >= 0) {
            dm.node[r].s = dim;
            dm.node[r].n = (uint32_t)dlen;
        }
        break;
    }
    case 'M': {
        dm.p++;
        int cls = dm_type();
        int mem = cls < 0 ? -1 : dm_type();
        r = mem < 0 ? -1 : dm_new(DN_PTRMEM, cls, mem);
        break;
    }
    case 'T':
        r = dm_template_param();
        if (r >= 0 && dm_peek() == 'I') {
            if (!dm_add_sub(r)) return -1;
            int args = dm_template_args();
            r = args < 0 ? -1 : dm_new(DN_TEMPLATE, r, args);
        }
        break;
    case 'S':
        if (sy_isdigit(c2) || c2 == '_' || sy_isupper(c2)) {
            r = dm_substitution();
            if (r >= 0 && dm_peek() == 'I') {
                int args = dm_template_args();
                r = args < 0 ? -1 : dm_new(DN_TEMPLATE, r, args);
            } else {
                can_sub = false;
            }
        } else {
            r = dm_name(NULL, NULL);
            if (r >= 0 && dm.node[r].kind == DN_STDSUB) can_sub = false;
        }
        break;
    case 'N': case 'Z': case '0': case '1': case '2': case '3': case '4': case '5': case '6':
    case '7': case '8': case '9':
        r = dm_name(NULL, NULL);
        break;
    case 'D':
        dm.p += 2;
        switch (c2) {
        case 'p':
            t = dm_type();
            r = t < 0 ? -1 : dm_new(DN_PACKEXP, t, -1);
            break;
        case 'n': return dm_text(DN_BUILTIN, "decltype(nullptr)", 17);
        case 'a': return dm_text(DN_BUILTIN, "auto", 4);
        case 'c': return dm_text(DN_BUILTIN, "decltype(auto)", 14);
        case 'f': return dm_text(DN_BUILTIN, "decimal32", 9);
        case 'd': return dm_text(DN_BUILTIN, "decimal64", 9);
        case 'e': return dm_text(DN_BUILTIN, "decimal128", 10);
        case 'h': return dm_text(DN_BUILTIN, "half", 4);
        case 'i': return dm_text(DN_BUILTIN, "char32_t", 8);
        case 's': return dm_text(DN_BUILTIN, "char16_t", 8);
        case 'u': return dm_text(DN_BUILTIN, "char8_t", 7);
        case 'F': {
            const char *d = dm.p;
            while (sy_isdigit(dm_peek())) dm.p++;
            size_t dl = (size_t)(dm.p - d);
            bool x = dm_eat('x');
            if (dl == 0 || (!x && !dm_eat('_'))) return -1;
            r = dm_text(DN_FLOATN, d, dl);
            if (r >= 0 && x) dm.node[r].flags = DQ_X;
            return r;
        }
        default:
            return -1;
        }
        break;
    default:
        return -1;
    }
    if (r >= 0 && can_sub && !dm_add_sub(r)) return -1;
    return r;
}

static int dm_type(void)
{
    if (++dm.depth > DM_DEPTH) return -1;
    dm.type_depth++;
    int r = dm_type_inner();
    dm.type_depth--;
    dm.depth--;
    return r;
}

static bool dm_is_cdc(int i) /* constructor, destructor or conversion operator */
{
    while (i >= 0) {
        switch (dm.node[i].kind) {
        case DN_NESTED: case DN_LOCAL: i = dm.node[i].b; break;
        case DN_ABITAG: i = dm.node[i].a; break;
        case DN_CTOR: case DN_DTOR: case DN_CONV: return true;
        default: return false;
        }
    }
    return false;
}

static bool dm_has_return_type(int i)
{
    while (i >= 0 && dm.node[i].kind == DN_LOCAL) i = dm.node[i].b;
    return i >= 0 && dm.node[i].kind == DN_TEMPLATE && !dm_is_cdc(dm.node[i].a);
}

/* <call-offset> ::= h <number> _ | v <number> _ <number> _ */
static bool dm_call_offset(char c)
{
    long v;
    bool neg;
    if (c == 'h') return dm_number(&v, &neg) && dm_eat('_');
    if (c == 'v')
        return dm_number(&v, &neg) && dm_eat('_') && dm_number(&v, &neg) && dm_eat('_');
    return false;
}

static int dm_special(const char *text, int child)
{
    int r = child < 0 ? -1 : dm_new(DN_SPECIAL, child, -1);
    if (r >= 0) {
        dm.node[r].s = text;
        dm.node[r].n = (uint32_t)sy_strlen(text);
    }
    return r;
}

static int dm_special_name(void)
{
    char c = *dm.p++, c2 = *dm.p ? *dm.p++ : 0;
    if (c == 'T') {
        switch (c2) {
        case 'V': return dm_special("vtable for ", dm_type());
        case 'T': return dm_special("VTT for ", dm_type());
        case 'I': return dm_special("typeinfo for ", dm_type());
        case 'S': return dm_special("typeinfo name for ", dm_type());
        case 'H': return dm_special("TLS init function for ", dm_name(NULL, NULL));
        case 'W': return dm_special("TLS wrapper function for ", dm_name(NULL, NULL));
        case 'h':
            if (!dm_call_offset('h')) return -1;
            return dm_special("non-virtual thunk to ", dm_encoding());
        case 'v':
            if (!dm_call_offset('v')) return -1;
            return dm_special("virtual thunk to ", dm_encoding());
        case 'c':
            if (!dm_call_offset(*dm.p ? *dm.p++ : 0) || !dm_call_offset(*dm.p ? *dm.p++ : 0))
                return -1;
            return dm_special("covariant return thunk to ", dm_encoding());
        case 'C': {
            long v;
            int t1 = dm_type();
            if (t1 < 0 || !dm_number(&v, NULL) || !dm_eat('_')) return -1;
            int t2 = dm_type();
            return t2 < 0 ? -1 : dm_new(DN_CTORVT, t1, t2);
        }
        default: return -1;
        }
    }
    if (c == 'G') {
        if (c2 == 'V') return dm_special("guard variable for ", dm_name(NULL, NULL));
        if (c2 == 'A') return dm_special("hidden alias for ", dm_encoding());
        if (c2 == 'T' && dm_eat('t')) return dm_special("transaction clone for ", dm_encoding());
        if (c2 == 'T' && dm_eat('n'))
            return dm_special("non-transaction clone for ", dm_encoding());
    }
    return -1;
}

/* <encoding> ::= <name> <bare-function-type> | <name> | <special-name> */
static int dm_encoding(void)
{
    char c = dm_peek();
    unsigned cv = 0, ref = 0;
    int r;
    if (++dm.depth > DM_DEPTH) return -1;
    if (c == 'T' || c == 'G') {
        r = dm_special_name();
    } else {
        r = dm_name(&cv, &ref);
        c = dm_peek();
        if (r >= 0 && c != 0 && c != 'E' && c != '.') {
            int ret = -1;
            unsigned fl = 0;
            if (dm_has_return_type(r) && (ret = dm_type()) < 0) return -1;
            int params = dm_type_list(false, &fl);
            int f = params < 0 ? -1 : dm_new(DN_FUNC, ret, params);
            if (f >= 0) dm.node[f].flags = (uint8_t)(cv | ref);
            r = f < 0 ? -1 : dm_new(DN_TYPED, r, f);
        }
    }
    dm.depth--;
    return r;
}

/* ------------------------------------------------------------------ printing */

typedef struct {
    char *p;
    size_t cap, len;
    bool full, bad;
    char last;       /* last character written; like c++filt, not undone with an empty pack */
    int pack;        /* element of the pack being expanded, -1 outside an expansion */
    unsigned budget; /* nodes printed: substitutions make a DAG, printing can blow up */
    int depth;
} dout_t;

static void d_putc(dout_t *o, char c)
{
    if (o->len + 1 >= o->cap) {
        o->full = true;
        return;
    }
    o->p[o->len++] = c;
    o->last = c;
}
static void d_putn(dout_t *o, const char *s, size_t n)
{
    for (size_t i = 0; i < n && !o->full; i++) d_putc(o, s[i]);
}
static void d_puts(dout_t *o, const char *s) { d_putn(o, s, sy_strlen(s)); }
static char d_last(const dout_t *o) { return o->last; }

static void d_print(dout_t *o, int i);

static int d_list_nth(int l, int k)
{
    for (; l >= 0 && k > 0; k--) l = dm.node[l].b;
    return l >= 0 ? dm.node[l].a : -1;
}

static void d_print_list(dout_t *o, int l)
{
    bool first = true;
    for (; l >= 0 && !o->full; l = dm.node[l].b) {
        size_t save = o->len;
        if (!first) d_puts(o, ", ");
        size_t before = o->len;
        d_print(o, dm.node[l].a);
        if (o->len == before && !o->full) o->len = save; /* empty pack: no separator */
        else first = false;
    }
}

static void d_print_params(dout_t *o, int l)
{
    if (l >= 0 && dm.node[l].b < 0) {
        int t = dm.node[l].a;
        if (t >= 0 && dm.node[t].kind == DN_BUILTIN && dm.node[t].b == 'v') return;
    }
    d_print_list(o, l);
}

static void d_print_quals(dout_t *o, unsigned q)
{
    if (q & DQ_CONST) d_puts(o, " const");
    if (q & DQ_VOLATILE) d_puts(o, " volatile");
    if (q & DQ_RESTRICT) d_puts(o, " restrict");
    if (q & DQ_REF) d_puts(o, " &");
    if (q & DQ_RREF) d_puts(o, " &&");
}

/* What a template parameter stands for here (one element while a pack is expanded). */
static int d_tparam_target(const dout_t *o, int i)
{
    int t = dm.node[i].a;
    if (t >= 0 && dm.node[t].kind == DN_PACK && o->pack >= 0)
        return d_list_nth(dm.node[t].a, o->pack);
    return t;
}

/* cv-qualifiers at the top of a type, seen through a template parameter */
static unsigned d_top_quals(const dout_t *o, int i)
{
    if (i >= 0 && dm.node[i].kind == DN_TPARAM) i = d_tparam_target(o, i);
    return (i >= 0 && dm.node[i].kind == DN_CV) ? dm.node[i].flags : 0;
}

static void d_print_basename(dout_t *o, int i)
{
    while (i >= 0) {
        const dn_t *n = &dm.node[i];
        switch (n->kind) {
        case DN_NESTED: case DN_LOCAL: {
            /* c++filt names members of unnamed types and closures after the enclosing class */
            unsigned k = n->b >= 0 ? dm.node[n->b].kind : DN_NAME;
            i = (k == DN_UNNAMED || k == DN_LAMBDA) ? n->a : n->b;
            break;
        }
        case DN_TEMPLATE: case DN_ABITAG: case DN_TPARAM: i = n->a; break;
        case DN_STDSUB: d_puts(o, dm_stdsubs[n->n].ctor); return;
        default: d_print(o, i); return;
        }
    }
}

static bool d_is_mod(unsigned k)
{
    return k == DN_PTR || k == DN_REF || k == DN_RREF || k == DN_CV || k == DN_COMPLEX ||
           k == DN_IMAG;
}

static void d_print_mods(dout_t *o, const int *mods, int nm)
{
    for (int k = nm - 1; k >= 0; k--) { /* innermost first */
        const dn_t *m = &dm.node[mods[k]];
        switch (m->kind) {
        case DN_PTR: d_putc(o, '*'); break;
        case DN_REF: d_putc(o, '&'); break;
        case DN_RREF: d_puts(o, "&&"); break;
        case DN_CV: d_print_quals(o, m->flags); break;
        case DN_COMPLEX: d_puts(o, " _Complex"); break;
        case DN_IMAG: d_puts(o, " _Imaginary"); break;
        }
    }
}

/* Types built from modifiers: "char const*", "void (*)(int)", "int (&) [3]", "int A::*". */
static void d_print_modified(dout_t *o, int i)
{
    int mods[16], nm = 0, t = i;
    for (int guard = 0; guard < 64; guard++) {
        const dn_t *n = &dm.node[t];
        if (d_is_mod(n->kind)) {
            if (n->kind == DN_REF || n->kind == DN_RREF) { /* reference collapsing: & + && = & */
                int sub = n->a;
                if (dm.node[sub].kind == DN_TPARAM) sub = d_tparam_target(o, sub);
                if (sub >= 0 && (dm.node[sub].kind == DN_REF || dm.node[sub].kind == DN_RREF)) {
                    if (dm.node[sub].kind == DN_REF || dm.node[sub].kind == n->kind) {
                        t = sub;
                        continue;
                    }
                    if (nm == 16) break;
                    mods[nm++] = t;
                    t = dm.node[sub].a;
                    continue;
                }
            }
            /* const applied to a parameter that is already const: c++filt prints it once */
            if (n->kind == DN_CV && (n->flags & ~d_top_quals(o, n->a)) == 0) {
                t = n->a;
                continue;
            }
            if (nm == 16) break;
            mods[nm++] = t;
            t = n->a;
            continue;
        }
        if (n->kind == DN_TPARAM) {
            int tgt = d_tparam_target(o, t);
            if (tgt >= 0 && (d_is_mod(dm.node[tgt].kind) || dm.node[tgt].kind == DN_FUNC ||
                             dm.node[tgt].kind == DN_ARRAY || dm.node[tgt].kind == DN_PTRMEM)) {
                t = tgt;
                continue;
            }
        }
        break;
    }
    if (t < 0) {
        o->bad = true;
        return;
    }
    const dn_t *n = &dm.node[t];
    if (n->kind == DN_FUNC) {
        d_print(o, n->a);
        if (nm) {
            d_puts(o, " (");
            d_print_mods(o, mods, nm);
            d_putc(o, ')');
        } else {
            d_putc(o, ' ');
        }
        d_putc(o, '(');
        d_print_params(o, n->b);
        d_putc(o, ')');
        d_print_quals(o, n->flags);
    } else if (n->kind == DN_ARRAY) {
        int chain[16], k = 0, e = t;
        while (e >= 0 && dm.node[e].kind == DN_ARRAY && k < 16) {
            chain[k++] = e;
            e = dm.node[e].a;
        }
        /* qualifiers of an array qualify its elements: "char const (&) [4]" */
        unsigned q = 0;
        while (nm > 0 && dm.node[mods[nm - 1]].kind == DN_CV) q |= dm.node[mods[--nm]].flags;
        d_print(o, e);
        d_print_quals(o, q & ~d_top_quals(o, e));
        d_putc(o, ' ');
        if (nm) {
            d_putc(o, '(');
            d_print_mods(o, mods, nm);
            d_puts(o, ") ");
        }
        for (int j = 0; j < k; j++) {
            d_putc(o, '[');
            d_putn(o, dm.node[chain[j]].s, dm.node[chain[j]].n);
            d_putc(o, ']');
        }
    } else if (n->kind == DN_PTRMEM) {
        int mem = n->b;
        if (dm.node[mem].kind == DN_FUNC) {
            d_print(o, dm.node[mem].a);
            d_puts(o, " (");
            d_print(o, n->a);
            d_puts(o, "::*");
            d_print_mods(o, mods, nm);
            d_puts(o, ")(");
            d_print_params(o, dm.node[mem].b);
            d_putc(o, ')');
            d_print_quals(o, dm.node[mem].flags);
        } else {
            d_print(o, mem);
            d_putc(o, ' ');
            d_print(o, n->a);
            d_puts(o, "::*");
            d_print_mods(o, mods, nm);
        }
    } else {
        d_print(o, t);
        d_print_mods(o, mods, nm);
    }
}

/* The pack a pack expansion walks over: the first parameter in the pattern that names one. */
static int d_find_pack(const dout_t *o, int i, int depth)
{
    if (i < 0 || depth > 64) return -1;
    const dn_t *n = &dm.node[i];
    if (n->kind == DN_TPARAM) {
        int t = n->a;
        return (t >= 0 && dm.node[t].kind == DN_PACK) ? t : -1;
    }
    if (n->kind == DN_LIST) {
        for (int l = i; l >= 0; l = dm.node[l].b) {
            int r = d_find_pack(o, dm.node[l].a, depth + 1);
            if (r >= 0) return r;
        }
        return -1;
    }
    if (n->kind == DN_PACKEXP) return -1;
    int r = d_find_pack(o, n->a, depth + 1);
    return r >= 0 ? r : d_find_pack(o, n->b, depth + 1);
}

static void d_print_literal(dout_t *o, const dn_t *n)
{
    const dn_t *t = &dm.node[n->a];
    const char *suffix = NULL;
    if (t->kind == DN_BUILTIN) {
        switch ((char)t->b) {
        case 'i': suffix = ""; break;
        case 'j': suffix = "u"; break;
        case 'l': suffix = "l"; break;
        case 'm': suffix = "ul"; break;
        case 'x': suffix = "ll"; break;
        case 'y': suffix = "ull"; break;
        case 'b':
            if (n->n == 1 && (n->s[0] == '0' || n->s[0] == '1') && !(n->flags & DQ_NEG)) {
                d_puts(o, n->s[0] == '1' ? "true" : "false");
                return;
            }
            break;
        }
    }
    if (!suffix) {
        d_putc(o, '(');
        d_print(o, n->a);
        d_putc(o, ')');
    }
    if (n->flags & DQ_NEG) d_putc(o, '-');
    d_putn(o, n->s, n->n);
    if (suffix) d_puts(o, suffix);
}

static void d_print_number(dout_t *o, unsigned long v)
{
    char tmp[24];
    int k = 0;
    do tmp[k++] = (char)('0' + v % 10);
    while ((v /= 10) && k < 24);
    while (k) d_putc(o, tmp[--k]);
}

static void d_print(dout_t *o, int i)
{
    if (i < 0) {
        o->bad = true;
        return;
    }
    if (o->full) return;
    if (o->budget-- == 0 || o->depth > DM_PRINT_DEPTH) {
        o->bad = o->full = true;
        return;
    }
    o->depth++;
    const dn_t *n = &dm.node[i];
    switch (n->kind) {
    case DN_NAME: case DN_BUILTIN: case DN_OPER:
        if (n->kind == DN_OPER) {
            d_puts(o, "operator");
            if (sy_islower(n->s[0])) d_putc(o, ' ');
        }
        d_putn(o, n->s, n->n);
        break;
    case DN_FLOATN:
        d_puts(o, "_Float");
        d_putn(o, n->s, n->n);
        if (n->flags & DQ_X) d_putc(o, 'x');
        break;
    case DN_STDSUB: d_puts(o, dm_stdsubs[n->n].name); break;
    case DN_NESTED: case DN_LOCAL:
        d_print(o, n->a);
        d_puts(o, "::");
        d_print(o, n->b);
        break;
    case DN_TEMPLATE:
        d_print(o, n->a);
        if (d_last(o) == '<') d_putc(o, ' ');
        d_putc(o, '<');
        d_print_list(o, n->b);
        if (d_last(o) == '>') d_putc(o, ' ');
        d_putc(o, '>');
        break;
    case DN_LIST: d_print_list(o, i); break;
    case DN_PACK: d_print_list(o, n->a); break;
    case DN_TPARAM: d_print(o, d_tparam_target(o, i)); break;
    case DN_PTR: case DN_REF: case DN_RREF: case DN_CV: case DN_COMPLEX: case DN_IMAG:
    case DN_FUNC: case DN_ARRAY: case DN_PTRMEM:
        d_print_modified(o, i);
        break;
    case DN_TYPED: {
        const dn_t *f = &dm.node[n->b];
        if (f->a >= 0) {
            d_print(o, f->a);
            d_putc(o, ' ');
        }
        d_print(o, n->a);
        d_putc(o, '(');
        d_print_params(o, f->b);
        d_putc(o, ')');
        d_print_quals(o, f->flags);
        break;
    }
    case DN_CTOR: d_print_basename(o, n->a); break;
    case DN_DTOR:
        d_putc(o, '~');
        d_print_basename(o, n->a);
        break;
    case DN_CONV:
        d_puts(o, "operator ");
        d_print(o, n->a);
        break;
    case DN_LITERAL: d_print_literal(o, n); break;
    case DN_EXTNAME: d_print(o, n->a); break;
    case DN_SPECIAL:
        d_putn(o, n->s, n->n);
        d_print(o, n->a);
        break;
    case DN_CTORVT:
        d_puts(o, "construction vtable for ");
        d_print(o, n->b);
        d_puts(o, "-in-");
        d_print(o, n->a);
        break;
    case DN_ABITAG:
        d_print(o, n->a);
        d_puts(o, "[abi:");
        d_putn(o, n->s, n->n);
        d_putc(o, ']');
        break;
    case DN_LAMBDA:
        d_puts(o, "{lambda(");
        d_print_params(o, n->a);
        d_puts(o, ")#");
        d_print_number(o, n->n);
        d_putc(o, '}');
        break;
    case DN_UNNAMED:
        d_puts(o, "{unnamed type#");
        d_print_number(o, n->n);
        d_putc(o, '}');
        break;
    case DN_CLONE:
        d_print(o, n->a);
        d_puts(o, " [clone ");
        d_putn(o, n->s, n->n);
        d_putc(o, ']');
        break;
    case DN_PACKEXP: {
        int pk = d_find_pack(o, n->a, 0);
        if (pk < 0) {
            d_print(o, n->a);
            d_puts(o, "...");
            break;
        }
        int save = o->pack, cnt = 0;
        for (int l = dm.node[pk].a; l >= 0; l = dm.node[l].b) cnt++;
        for (int k = 0; k < cnt && !o->full; k++) {
            if (k) d_puts(o, ", ");
            o->pack = k;
            d_print(o, n->a);
        }
        o->pack = save;
        break;
    }
    default:
        o->bad = true;
        break;
    }
    o->depth--;
}

bool ot_demangle(const char *mangled, char *out, size_t cap)
{
    if (!out || cap == 0) return false;
    if (!mangled || mangled[0] != '_' || mangled[1] != 'Z') {
        sy_copy(out, cap, mangled);
        return false;
    }
    /* One static arena: a second thread (or a signal handler) gets the name verbatim. */
    if (__atomic_exchange_n(&dm_lock, 1, __ATOMIC_ACQUIRE)) {
        sy_copy(out, cap, mangled);
        return false;
    }
    dm.p = mangled + 2;
    dm.nn = dm.nsub = dm.ntarg = dm.type_depth = dm.depth = 0;
    int r = dm_encoding();
    /* clone suffixes: foo.constprop.0, foo.cold, foo.isra.0 ... */
    while (r >= 0 && dm.p[0] == '.' &&
           (sy_islower(dm.p[1]) || sy_isdigit(dm.p[1]) || dm.p[1] == '_')) {
        const char *s = dm.p;
        dm.p += 2;
        while (sy_islower(*dm.p) || sy_isdigit(*dm.p) || *dm.p == '_') dm.p++;
        while (dm.p[0] == '.' && sy_isdigit(dm.p[1])) {
            dm.p += 2;
            while (sy_isdigit(*dm.p)) dm.p++;
        }
        int c = dm_new(DN_CLONE, r, -1);
        if (c >= 0) {
            dm.node[c].s = s;
            dm.node[c].n = (uint32_t)(dm.p - s);
        }
        r = c;
    }
    bool ok = r >= 0 && *dm.p == 0;
    if (ok) {
        dout_t o = {out, cap, 0, false, false, 0, -1, 1u << 16, 0};
        d_print(&o, r);
        out[o.len] = 0;
        ok = !o.bad && o.len > 0;
    }
    __atomic_store_n(&dm_lock, 0, __ATOMIC_RELEASE);
    if (!ok) sy_copy(out, cap, mangled);
    return ok;
}

/* ================================================================== module table */

#define SY_MAX_RANGES 4096
#define SY_MAX_MODULES 2048
#define SY_POOL (256 * 1024)
#define SY_ELF_CACHE 8
#define SY_MAX_LOADS 16

typedef struct {
    uintptr_t start, end, off; /* an executable mapping [start, end) at file offset off */
    uint32_t mod;
} sy_range_t;

typedef struct {
    uint64_t dev, ino;
    uintptr_t base; /* start - offset of the first mapping of this file: its ELF header */
    uint32_t path;  /* offset into the pool */
    bool vdso;      /* ELF image in memory, no file */
    bool external;  /* from ot_symbolize_use_modules: not this process's mapping */
    bool nosyms;    /* external, and its file is gone or another build: module+offset only */
} sy_module_t;

static sy_range_t sy_ranges[SY_MAX_RANGES];
static sy_module_t sy_mods[SY_MAX_MODULES];
static char sy_pool[SY_POOL];
static unsigned sy_nranges, sy_nmods;
static size_t sy_pool_len;
static bool sy_loaded;
static uint32_t sy_maps_gen; /* bumped by every refresh of the module table */
static char sy_mapsbuf[16384];

/* The group of mappings being read: one load of one file. Its path is copied to the pool at
 * path_at; the copy is tentative (overwritten by the next group) until an executable mapping of
 * the group makes it a module. */
static struct {
    bool valid;
    uint64_t dev, ino;
    uintptr_t base, last_end;
    size_t path_at, path_len;
    bool path_ok;
    int mod; /* module index, -1 while the group has no executable mapping */
} sy_cur;

static bool sy_hex(const char **p, const char *e, uint64_t *v)
{
    uint64_t x = 0;
    const char *s = *p;
    while (*p < e) {
        char c = **p;
        unsigned d;
        if (c >= '0' && c <= '9') d = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') d = (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') d = (unsigned)(c - 'A' + 10);
        else break;
        x = x * 16 + d;
        (*p)++;
    }
    *v = x;
    return *p > s;
}

static bool sy_expect(const char **p, const char *e, char c)
{
    if (*p >= e || **p != c) return false;
    (*p)++;
    return true;
}

/* "start-end perms offset major:minor inode   path" */
static void sy_parse_line(const char *s, size_t n)
{
    const char *p = s, *e = s + n;
    uint64_t start, end, off, maj, min, ino = 0;
    char perms[4];
    if (!sy_hex(&p, e, &start) || !sy_expect(&p, e, '-') || !sy_hex(&p, e, &end) ||
        !sy_expect(&p, e, ' ') || e - p < 5)
        return;
    for (int i = 0; i < 4; i++) perms[i] = *p++;
    if (!sy_expect(&p, e, ' ') || !sy_hex(&p, e, &off) || !sy_expect(&p, e, ' ') ||
        !sy_hex(&p, e, &maj) || !sy_expect(&p, e, ':') || !sy_hex(&p, e, &min) ||
        !sy_expect(&p, e, ' '))
        return;
    while (p < e && sy_isdigit(*p)) ino = ino * 10 + (uint64_t)(*p++ - '0');
    while (p < e && *p == ' ') p++;
    const char *path = p;
    size_t plen = (size_t)(e - p);
    uint64_t dev = maj << 32 | min;
    bool vdso = plen == 6 && sy_memeq(path, "[vdso]", 6);
    if (!vdso && (ino == 0 || plen == 0 || path[0] != '/')) return; /* anonymous or special */

    /* A new group starts with another file, or with offset 0 not adjacent to the previous
     * mapping (the same library loaded again, e.g. by dlmopen). */
    bool same = sy_cur.valid && !vdso && sy_cur.dev == dev && sy_cur.ino == ino &&
                sy_cur.path_ok && sy_cur.path_len == plen &&
                sy_memeq(sy_pool + sy_cur.path_at, path, plen) &&
                !(off == 0 && start != sy_cur.last_end);
    if (!same) {
        sy_cur.valid = !vdso;
        sy_cur.dev = dev;
        sy_cur.ino = ino;
        sy_cur.base = (uintptr_t)(start - off);
        sy_cur.path_at = sy_pool_len;
        sy_cur.path_len = plen;
        sy_cur.mod = -1;
        sy_cur.path_ok = sy_pool_len + plen + 1 <= SY_POOL;
        if (sy_cur.path_ok) {
            sy_memcpy(sy_pool + sy_pool_len, path, plen);
            sy_pool[sy_pool_len + plen] = 0;
        }
    }
    sy_cur.last_end = (uintptr_t)end;
    if (perms[2] != 'x' || !sy_cur.path_ok || sy_nranges >= SY_MAX_RANGES) return;
    if (sy_cur.mod < 0) {
        if (sy_nmods >= SY_MAX_MODULES) return;
        sy_module_t *m = &sy_mods[sy_nmods];
        m->dev = dev;
        m->ino = ino;
        m->base = sy_cur.base;
        m->path = (uint32_t)sy_cur.path_at;
        m->vdso = vdso;
        m->external = m->nosyms = false; /* the slot may hold a module given by ot_symbolize_use_modules */
        if (sy_cur.path_at == sy_pool_len) sy_pool_len += plen + 1; /* commit the copy */
        sy_cur.mod = (int)sy_nmods++;
    }
    sy_range_t *r = &sy_ranges[sy_nranges++];
    r->start = (uintptr_t)start;
    r->end = (uintptr_t)end;
    r->off = (uintptr_t)off;
    r->mod = (uint32_t)sy_cur.mod;
}

static void sy_maps_load(void)
{
    sy_nranges = sy_nmods = 0;
    sy_pool_len = 0;
    sy_cur.valid = false;
    sy_pool[0] = 0;
    sy_pool_len = 1; /* offset 0 is the empty string */
    sy_loaded = true;
    sy_maps_gen++;
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    size_t have = 0;
    bool skipping = false; /* inside a line longer than the buffer */
    for (;;) {
        ssize_t r = read(fd, sy_mapsbuf + have, sizeof sy_mapsbuf - have);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (have && !skipping) sy_parse_line(sy_mapsbuf, have);
            break;
        }
        have += (size_t)r;
        size_t pos = 0;
        for (size_t i = 0; i < have; i++) {
            if (sy_mapsbuf[i] != '\n') continue;
            if (!skipping) sy_parse_line(sy_mapsbuf + pos, i - pos);
            skipping = false;
            pos = i + 1;
        }
        if (pos == 0 && have == sizeof sy_mapsbuf) {
            skipping = true;
            have = 0;
            continue;
        }
        for (size_t i = pos; i < have; i++) sy_mapsbuf[i - pos] = sy_mapsbuf[i];
        have -= pos;
    }
    close(fd);
}

/* ================================================================== ELF symbol tables
 * Headers are read with pread; .symtab (static functions too) and .dynsym with their string
 * tables are mmap'ed read-only and kept for the SY_ELF_CACHE most recently used files. When mmap
 * fails (the failure we report may be RLIMIT_AS), the tables are streamed through a static
 * buffer instead: slower, but it needs no new address space. */

typedef struct {
    uint64_t sym_off, sym_size, str_off, str_size; /* file offsets (image offsets for vdso) */
    const ElfW(Sym) *syms;                          /* mapped, or NULL: stream from the file */
    const char *strs;
} sy_tab_t;

typedef struct {
    bool used, ok;
    uint64_t dev, ino;
    uintptr_t membase; /* vdso: the image lives at this address */
    unsigned long stamp;
    uint32_t gen; /* identifies this load of the entry, for the hit cache */
    unsigned e_type, nload;
    struct { uint64_t off, vaddr, filesz; bool x; } load[SY_MAX_LOADS];
    sy_tab_t tab[2]; /* [0] .symtab, [1] .dynsym */
    void *map[4];
    size_t maplen[4];
} sy_elf_t;

static sy_elf_t sy_elf[SY_ELF_CACHE];
static uint32_t sy_elf_gen;
static unsigned long sy_stamp;
static union {
    ElfW(Shdr) sh[64];
    ElfW(Phdr) ph[64];
    ElfW(Sym) sym[512];
    char name[4096];
} sy_scratch;
static char sy_namebuf[4096];

typedef struct {
    int fd;                   /* file, or -1 */
    const unsigned char *mem; /* in-memory image (vdso) */
    uint64_t size;
} sy_src_t;

static bool sy_read(const sy_src_t *s, uint64_t off, void *buf, size_t n)
{
    if (off > s->size || n > s->size - off) return false;
    if (s->mem) {
        sy_memcpy(buf, s->mem + off, n);
        return true;
    }
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(s->fd, (char *)buf + done, n - done, (off_t)(off + done));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        done += (size_t)r;
    }
    return true;
}

static const char *sy_mod_path(const sy_module_t *m) { return sy_pool + m->path; }

static uint64_t sy_pagesize(void)
{
    uint64_t pg = getauxval(AT_PAGESZ);
    return pg ? pg : 4096;
}

/* Opens the module's file; a deleted or replaced file is still reachable via map_files. */
static int sy_open_module(const sy_module_t *m, const sy_range_t *r)
{
    int fd = open(sy_mod_path(m), O_RDONLY | O_CLOEXEC);
    if (fd >= 0 || !r || m->external) return fd; /* map_files: this process's own mappings only */
    char p[64] = "/proc/self/map_files/";
    size_t k = sy_strlen(p);
    uintptr_t v[2] = {r->start, r->end};
    for (int j = 0; j < 2; j++) {
        char tmp[20];
        int t = 0;
        uintptr_t x = v[j];
        do tmp[t++] = "0123456789abcdef"[x & 15];
        while ((x >>= 4) && t < 20);
        while (t) p[k++] = tmp[--t];
        p[k++] = j ? 0 : '-';
    }
    return open(p, O_RDONLY | O_CLOEXEC);
}

static void sy_elf_drop(sy_elf_t *e)
{
    for (int i = 0; i < 4; i++)
        if (e->map[i]) munmap(e->map[i], e->maplen[i]);
    e->used = false;
}

static const void *sy_map(sy_elf_t *e, const sy_src_t *s, uint64_t off, uint64_t size)
{
    if (s->mem) return s->mem + off;
    uint64_t a = off & ~(sy_pagesize() - 1);
    size_t len = (size_t)(off - a + size);
    for (int i = 0; i < 4; i++) {
        if (e->map[i]) continue;
        void *p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, s->fd, (off_t)a);
        if (p == MAP_FAILED) return NULL;
        e->map[i] = p;
        e->maplen[i] = len;
        return (const char *)p + (off - a);
    }
    return NULL;
}

static void sy_elf_load(sy_elf_t *e, const sy_src_t *s)
{
    ElfW(Ehdr) eh;
    e->ok = false;
    if (!sy_read(s, 0, &eh, sizeof eh) || !sy_memeq(eh.e_ident, ELFMAG, SELFMAG) ||
        eh.e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) ||
        eh.e_phentsize != sizeof(ElfW(Phdr)) || eh.e_phnum > 64)
        return;
    e->e_type = eh.e_type;
    if (!sy_read(s, eh.e_phoff, sy_scratch.ph, eh.e_phnum * sizeof(ElfW(Phdr)))) return;
    for (unsigned i = 0; i < eh.e_phnum && e->nload < SY_MAX_LOADS; i++) {
        const ElfW(Phdr) *ph = &sy_scratch.ph[i];
        if (ph->p_type != PT_LOAD) continue;
        e->load[e->nload].off = ph->p_offset;
        e->load[e->nload].vaddr = ph->p_vaddr;
        e->load[e->nload].filesz = ph->p_filesz;
        e->load[e->nload].x = (ph->p_flags & PF_X) != 0;
        e->nload++;
    }
    e->ok = true; /* enough for offsets; symbols are a bonus */
    if (eh.e_shentsize != sizeof(ElfW(Shdr)) || eh.e_shoff == 0) return;
    uint64_t shnum = eh.e_shnum;
    if (shnum == 0) { /* more than 0xff00 sections: the count is in section 0 */
        ElfW(Shdr) sh0;
        if (!sy_read(s, eh.e_shoff, &sh0, sizeof sh0)) return;
        shnum = sh0.sh_size;
    }
    if (shnum > 1u << 20) return;
    for (uint64_t base = 0; base < shnum; base += 64) {
        unsigned cnt = (unsigned)(shnum - base < 64 ? shnum - base : 64);
        if (!sy_read(s, eh.e_shoff + base * sizeof(ElfW(Shdr)), sy_scratch.sh,
                     cnt * sizeof(ElfW(Shdr))))
            return;
        for (unsigned i = 0; i < cnt; i++) {
            const ElfW(Shdr) *sh = &sy_scratch.sh[i];
            int t = sh->sh_type == SHT_SYMTAB ? 0 : sh->sh_type == SHT_DYNSYM ? 1 : -1;
            if (t < 0 || e->tab[t].sym_size || sh->sh_entsize != sizeof(ElfW(Sym))) continue;
            e->tab[t].sym_off = sh->sh_offset;
            e->tab[t].sym_size = sh->sh_size - sh->sh_size % sizeof(ElfW(Sym));
            e->tab[t].str_off = sh->sh_link; /* index for now, resolved below */
        }
    }
    for (int t = 0; t < 2; t++) {
        sy_tab_t *tb = &e->tab[t];
        ElfW(Shdr) str;
        if (!tb->sym_size) continue;
        if (tb->str_off >= shnum ||
            !sy_read(s, eh.e_shoff + tb->str_off * sizeof(ElfW(Shdr)), &str, sizeof str) ||
            str.sh_type != SHT_STRTAB || tb->sym_off > s->size ||
            tb->sym_size > s->size - tb->sym_off || str.sh_offset > s->size ||
            str.sh_size > s->size - str.sh_offset) {
            tb->sym_size = 0;
            continue;
        }
        tb->str_off = str.sh_offset;
        tb->str_size = str.sh_size;
        /* NULL pointers (mmap failed) mean: stream this table */
        tb->syms = sy_map(e, s, tb->sym_off, tb->sym_size);
        tb->strs = tb->syms ? sy_map(e, s, tb->str_off, tb->str_size) : NULL;
        if (!tb->strs) tb->syms = NULL;
    }
}

static sy_elf_t *sy_elf_get(const sy_module_t *m, const sy_range_t *r)
{
    sy_elf_t *victim = &sy_elf[0];
    uintptr_t membase = m->vdso ? r->start - r->off : 0;
    for (int i = 0; i < SY_ELF_CACHE; i++) {
        sy_elf_t *e = &sy_elf[i];
        if (e->used && e->dev == m->dev && e->ino == m->ino && e->membase == membase) {
            e->stamp = ++sy_stamp;
            return e;
        }
        if (!e->used || (victim->used && e->stamp < victim->stamp)) victim = e;
    }
    if (victim->used) sy_elf_drop(victim);
    sy_elf_t *e = victim;
    for (size_t i = 0; i < sizeof *e; i++) ((char *)e)[i] = 0;
    e->used = true;
    e->dev = m->dev;
    e->ino = m->ino;
    e->membase = membase;
    e->stamp = ++sy_stamp;
    e->gen = ++sy_elf_gen;
    sy_src_t s = {-1, NULL, 0};
    if (m->vdso) {
        s.mem = (const unsigned char *)membase;
        s.size = r->end - membase;
        sy_elf_load(e, &s);
        return e;
    }
    s.fd = sy_open_module(m, r);
    struct stat st;
    if (s.fd < 0) return e;
    if (fstat(s.fd, &st) == 0 && S_ISREG(st.st_mode)) {
        s.size = (uint64_t)st.st_size;
        sy_elf_load(e, &s);
    }
    close(s.fd);
    return e;
}

static bool sy_candidate(const ElfW(Sym) *s, uint64_t vaddr)
{
    unsigned t = ELF64_ST_TYPE(s->st_info);
    return (t == STT_FUNC || t == STT_GNU_IFUNC) && s->st_shndx != SHN_UNDEF && s->st_size &&
           vaddr - s->st_value < s->st_size;
}

/* Copies the name at st_name of table tb (mapped or streamed from src) into out. */
static size_t sy_get_name(const sy_tab_t *tb, const sy_src_t *src, uint32_t st_name, char *out,
                          size_t cap)
{
    size_t k = 0;
    if (st_name >= tb->str_size || cap == 0) return 0;
    size_t avail = (size_t)(tb->str_size - st_name);
    if (avail > cap - 1) avail = cap - 1;
    if (tb->strs) {
        for (; k < avail && tb->strs[st_name + k]; k++) out[k] = tb->strs[st_name + k];
    } else if (src) {
        uint64_t at = tb->str_off + st_name;
        if (at < src->size && avail > src->size - at) avail = (size_t)(src->size - at);
        if (!sy_read(src, at, out, avail)) avail = 0;
        while (k < avail && out[k]) k++;
    }
    out[k] = 0;
    return k;
}

/* Aliases at one address (malloc / __libc_malloc, getpid / __getpid, cbrt / cbrtf64): the
 * fewest leading underscores, then global over weak over local, then the shortest name. */
typedef struct {
    unsigned underscores, rank;
    size_t len;
} sy_score_t;

static sy_score_t sy_score(const ElfW(Sym) *s, const sy_tab_t *tb, const sy_src_t *src)
{
    char name[128];
    sy_score_t r;
    unsigned b = ELF64_ST_BIND(s->st_info);
    r.len = sy_get_name(tb, src, s->st_name, name, sizeof name);
    r.underscores = 0;
    while (name[r.underscores] == '_') r.underscores++;
    r.rank = b == STB_GLOBAL ? 3 : b == STB_WEAK ? 2 : 1;
    return r;
}

static bool sy_score_better(sy_score_t a, sy_score_t b)
{
    if (a.underscores != b.underscores) return a.underscores < b.underscores;
    if (a.rank != b.rank) return a.rank > b.rank;
    return a.len < b.len;
}

/* Keeps the innermost (highest-starting) symbol containing vaddr, aliases ranked by score. */
typedef struct {
    ElfW(Sym) sym;
    sy_score_t score;
    size_t idx;
    bool found;
} sy_best_t;

static void sy_consider(const ElfW(Sym) *c, size_t idx, const sy_tab_t *tb, const sy_src_t *src,
                        uint64_t vaddr, sy_best_t *best)
{
    if (!sy_candidate(c, vaddr)) return;
    if (best->found && c->st_value < best->sym.st_value) return;
    sy_score_t sc = sy_score(c, tb, src);
    if (best->found && c->st_value == best->sym.st_value && !sy_score_better(sc, best->score))
        return;
    best->sym = *c;
    best->score = sc;
    best->idx = idx;
    best->found = true;
}

static int sy_open_src(const sy_module_t *m, const sy_range_t *r, sy_src_t *s)
{
    struct stat st;
    s->fd = sy_open_module(m, r);
    s->mem = NULL;
    s->size = 0;
    if (s->fd >= 0 && fstat(s->fd, &st) == 0) s->size = (uint64_t)st.st_size;
    return s->fd;
}

/* Finds the function containing vaddr: .symtab first (it has the static functions), then
 * .dynsym. Returns the table and index of the symbol. */
static bool sy_lookup(const sy_elf_t *e, const sy_module_t *m, const sy_range_t *r, uint64_t vaddr,
                      int *tab, size_t *idx)
{
    for (int t = 0; t < 2; t++) {
        const sy_tab_t *tb = &e->tab[t];
        sy_best_t best;
        best.found = false;
        if (!tb->sym_size) continue;
        if (tb->syms) {
            size_t n = tb->sym_size / sizeof(ElfW(Sym));
            for (size_t i = 0; i < n; i++) sy_consider(&tb->syms[i], i, tb, NULL, vaddr, &best);
        } else { /* streaming: mmap failed, no address space to spare */
            sy_src_t s;
            if (sy_open_src(m, r, &s) < 0) return false;
            for (uint64_t off = 0; off < tb->sym_size; off += sizeof sy_scratch.sym) {
                uint64_t left = tb->sym_size - off;
                size_t cnt = left < sizeof sy_scratch.sym ? (size_t)left : sizeof sy_scratch.sym;
                if (!sy_read(&s, tb->sym_off + off, sy_scratch.sym, cnt)) break;
                for (size_t i = 0; i < cnt / sizeof(ElfW(Sym)); i++)
                    sy_consider(&sy_scratch.sym[i], off / sizeof(ElfW(Sym)) + i, tb, &s, vaddr,
                                &best);
            }
            close(s.fd);
        }
        if (best.found) {
            *tab = t;
            *idx = best.idx;
            return true;
        }
    }
    return false;
}

/* The (mangled) name of symbol idx of table t into sy_namebuf. */
static bool sy_symbol_name(const sy_elf_t *e, const sy_module_t *m, const sy_range_t *r, int t,
                           size_t idx)
{
    const sy_tab_t *tb = &e->tab[t];
    ElfW(Sym) sym;
    if ((idx + 1) * sizeof(ElfW(Sym)) > tb->sym_size) return false;
    if (tb->syms) return sy_get_name(tb, NULL, tb->syms[idx].st_name, sy_namebuf,
                                     sizeof sy_namebuf) > 0;
    sy_src_t s;
    if (sy_open_src(m, r, &s) < 0) return false;
    bool ok = sy_read(&s, tb->sym_off + idx * sizeof sym, &sym, sizeof sym) &&
              sy_get_name(tb, &s, sym.st_name, sy_namebuf, sizeof sy_namebuf) > 0;
    close(s.fd);
    return ok;
}

/* Reports symbolize the same frames again and again (sites share callers): remember where each
 * address led, so that a big .dynsym is scanned once per address. */
#define SY_HITS 1024
typedef struct {
    uintptr_t ip;
    uint32_t maps_gen, elf_gen;
    int32_t tab; /* -1: no symbol */
    uint32_t idx;
} sy_hit_t;
static sy_hit_t sy_hits[SY_HITS];

/* ------------------------------------------------------------------ entry points */

static volatile int sy_lock_word;
static OT_TLS int sy_in_lock; /* this thread holds the lock: a signal handler re-entered */

static bool sy_lock(void)
{
    if (sy_in_lock) return false;
    /* Bounded: a lock left held by a thread that vanished in fork() must not hang a report. */
    for (unsigned i = 0; __atomic_exchange_n(&sy_lock_word, 1, __ATOMIC_ACQUIRE); i++) {
        if (i > 200000) return false;
        if (i > 100) sched_yield();
#if defined(__x86_64__) || defined(__i386__)
        else __builtin_ia32_pause();
#elif defined(__aarch64__)
        else __asm__ volatile("yield");
#endif
    }
    sy_in_lock = 1;
    return true;
}

static void sy_unlock(void)
{
    sy_in_lock = 0;
    __atomic_store_n(&sy_lock_word, 0, __ATOMIC_RELEASE);
}

void ot_symbolize_begin(void)
{
    int saved = errno;
    if (sy_lock()) {
        sy_maps_load();
        sy_unlock();
    }
    errno = saved;
}

static const sy_range_t *sy_find(uintptr_t ip)
{
    unsigned lo = 0, hi = sy_nranges;
    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;
        if (ip < sy_ranges[mid].start) hi = mid;
        else if (ip >= sy_ranges[mid].end) lo = mid + 1;
        else return &sy_ranges[mid];
    }
    return NULL;
}

void ot_symbolize(uintptr_t ip, ot_frame_t *out)
{
    int saved = errno;
    out->ip = ip;
    out->module = "";
    out->offset = ip;
    out->function[0] = 0;
    out->file[0] = 0;
    out->line = 0;
    out->module_file = false;
    out->line_note = NULL;
    if (!sy_lock()) {
        errno = saved;
        return;
    }
    if (!sy_loaded) sy_maps_load();
    const sy_range_t *r = sy_find(ip);
    if (r) {
        const sy_module_t *m = &sy_mods[r->mod];
        out->module = sy_mod_path(m);
        if (m->nosyms) {
            out->offset = ip - m->base;
            sy_unlock();
            errno = saved;
            return;
        }
        sy_elf_t *e = sy_elf_get(m, r);
        uintptr_t bias = m->base;
        out->module_file = e->ok && !m->vdso;
        if (e->ok) {
            /* ELF vaddr = ip - bias; the PT_LOAD holding this mapping's file offset fixes the
             * bias, also for linkers that give segments p_vaddr != p_offset. */
            int best = -1;
            for (unsigned i = 0; i < e->nload; i++) {
                uint64_t pg = e->load[i].off & ~(sy_pagesize() - 1);
                if (r->off < pg || r->off >= e->load[i].off + e->load[i].filesz) continue;
                if (best < 0 || (e->load[i].x && !e->load[best].x)) best = (int)i;
            }
            if (e->e_type == ET_EXEC) bias = 0;
            else if (best >= 0)
                bias = r->start - r->off - (uintptr_t)(e->load[best].vaddr - e->load[best].off);
        }
        out->offset = ip - bias;
        sy_hit_t *h = &sy_hits[(ip ^ (ip >> 10)) % SY_HITS];
        int tab = -1;
        size_t idx = 0;
        if (h->ip == ip && h->maps_gen == sy_maps_gen && h->elf_gen == e->gen) {
            tab = h->tab;
            idx = h->idx;
        } else if (e->ok) {
            /* A return address may sit just past a function that ends in a noreturn call. */
            if (!sy_lookup(e, m, r, ip - bias, &tab, &idx) &&
                !sy_lookup(e, m, r, ip - bias - 1, &tab, &idx))
                tab = -1;
            h->ip = ip;
            h->maps_gen = sy_maps_gen;
            h->elf_gen = e->gen;
            h->tab = tab;
            h->idx = (uint32_t)idx;
        }
        if (tab >= 0 && sy_symbol_name(e, m, r, tab, idx))
            ot_demangle(sy_namebuf, out->function, sizeof out->function);
    }
    sy_unlock();
    errno = saved;
}

/* ------------------------------------------------------------------ a module map from outside
 * The launcher symbolizes a dead process's stacks: the modules (paths, load bases) come from its
 * state file, and each file is checked to be the build that was loaded before its symbols are used. */

/* The NT_GNU_BUILD_ID of an open ELF file into id (up to cap bytes); its length, 0 if none. */
static unsigned sy_file_build_id(int fd, uint64_t size, unsigned char *id, unsigned cap)
{
    sy_src_t s = {fd, NULL, size};
    ElfW(Ehdr) eh;
    if (!sy_read(&s, 0, &eh, sizeof eh) || !sy_memeq(eh.e_ident, ELFMAG, SELFMAG) ||
        eh.e_phentsize != sizeof(ElfW(Phdr)) || eh.e_phnum > 64 ||
        !sy_read(&s, eh.e_phoff, sy_scratch.ph, eh.e_phnum * sizeof(ElfW(Phdr))))
        return 0;
    static unsigned char note[4096];
    ElfW(Phdr) ph[64];
    sy_memcpy(ph, sy_scratch.ph, eh.e_phnum * sizeof(ElfW(Phdr)));
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        if (ph[i].p_type != PT_NOTE) continue;
        uint64_t n = ph[i].p_filesz < sizeof note ? ph[i].p_filesz : sizeof note;
        if (!sy_read(&s, ph[i].p_offset, note, (size_t)n)) continue;
        for (uint64_t at = 0; at + 12 <= n;) {
            uint32_t namesz, descsz, type;
            sy_memcpy(&namesz, note + at, 4);
            sy_memcpy(&descsz, note + at + 4, 4);
            sy_memcpy(&type, note + at + 8, 4);
            uint64_t name = at + 12, desc = name + ((namesz + 3ull) & ~3ull);
            uint64_t next = desc + ((descsz + 3ull) & ~3ull);
            if (next > n) break;
            if (type == NT_GNU_BUILD_ID && namesz == 4 && sy_memeq(note + name, "GNU", 4)) {
                unsigned len = descsz < cap ? descsz : cap;
                sy_memcpy(id, note + desc, len);
                return len;
            }
            at = next;
        }
    }
    return 0;
}

/* Adds the executable PT_LOAD segments of module m (open as fd) as ranges; false if none. */
static bool sy_add_ranges(int fd, uint64_t size, uint32_t mod, uintptr_t base)
{
    sy_src_t s = {fd, NULL, size};
    ElfW(Ehdr) eh;
    if (!sy_read(&s, 0, &eh, sizeof eh) || eh.e_phentsize != sizeof(ElfW(Phdr)) || eh.e_phnum > 64 ||
        !sy_read(&s, eh.e_phoff, sy_scratch.ph, eh.e_phnum * sizeof(ElfW(Phdr))))
        return false;
    uint64_t pg = sy_pagesize();
    bool any = false;
    uintptr_t bias = eh.e_type == ET_EXEC ? 0 : base;
    for (unsigned i = 0; i < eh.e_phnum && sy_nranges < SY_MAX_RANGES; i++) {
        const ElfW(Phdr) *ph = &sy_scratch.ph[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || !ph->p_memsz) continue;
        sy_range_t *r = &sy_ranges[sy_nranges++];
        r->start = (uintptr_t)((bias + ph->p_vaddr) & ~(pg - 1));
        r->end = (uintptr_t)(bias + ph->p_vaddr + ph->p_memsz);
        r->off = (uintptr_t)(ph->p_offset & ~(pg - 1));
        r->mod = mod;
        any = true;
    }
    return any;
}

unsigned ot_symbolize_use_modules(const ot_module_desc_t *mods, unsigned n)
{
    int saved = errno;
    unsigned usable = 0;
    if (!sy_lock()) return 0;
    sy_nranges = sy_nmods = 0;
    sy_pool[0] = 0;
    sy_pool_len = 1;
    sy_cur.valid = false;
    sy_loaded = true; /* ot_symbolize must not read the launcher's own maps over these */
    sy_maps_gen++;
    for (unsigned i = 0; i < n && sy_nmods < SY_MAX_MODULES; i++) {
        const ot_module_desc_t *d = &mods[i];
        size_t plen = d->path ? sy_strlen(d->path) : 0;
        if (!plen || d->path[0] != '/' || sy_pool_len + plen + 1 > SY_POOL || d->end < d->start) continue;
        sy_module_t *m = &sy_mods[sy_nmods];
        for (size_t k = 0; k < sizeof *m; k++) ((char *)m)[k] = 0;
        m->base = d->base;
        m->path = (uint32_t)sy_pool_len;
        m->external = true;
        m->nosyms = true;
        sy_memcpy(sy_pool + sy_pool_len, d->path, plen + 1);
        sy_pool_len += plen + 1;
        uint32_t mod = sy_nmods++;
        unsigned before = sy_nranges;
        /* A path from a file on disk: only a regular file is opened (opening a device can act). */
        struct stat st;
        int fd = stat(d->path, &st) == 0 && S_ISREG(st.st_mode)
                     ? open(d->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY) : -1;
        if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
            unsigned char id[40];
            unsigned len = sy_file_build_id(fd, (uint64_t)st.st_size, id, sizeof id);
            bool same = !d->build_id_len || (len == d->build_id_len && sy_memeq(id, d->build_id, len));
            if (same && sy_add_ranges(fd, (uint64_t)st.st_size, mod, d->base)) {
                m->dev = (uint64_t)st.st_dev;
                m->ino = (uint64_t)st.st_ino;
                m->nosyms = false;
                usable++;
            }
        }
        if (fd >= 0) close(fd);
        if (m->nosyms) { /* the span alone: frames in it print module+offset */
            sy_nranges = before;
            if (sy_nranges < SY_MAX_RANGES && d->end > d->start)
                sy_ranges[sy_nranges++] = (sy_range_t){d->start, d->end, 0, mod};
        }
    }
    /* sy_find bisects: ranges by start (insertion sort, a few hundred at most) */
    for (unsigned i = 1; i < sy_nranges; i++) {
        sy_range_t t = sy_ranges[i];
        unsigned j = i;
        for (; j > 0 && sy_ranges[j - 1].start > t.start; j--) sy_ranges[j] = sy_ranges[j - 1];
        sy_ranges[j] = t;
    }
    for (unsigned i = 0; i < SY_HITS; i++) sy_hits[i].ip = 0;
    sy_unlock();
    errno = saved;
    return usable;
}
