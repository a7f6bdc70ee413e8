#include <dlfcn.h>
#include <stdio.h>

int next_probe(void);
int via_next(void);
int via_next_v(void);

int main(void)
{
    int (*f)(void) = (int (*)(void))dlsym(RTLD_NEXT, "next_probe");
    printf("main_next=%d\n", f ? f() : -1);       /* libnext_a's */
    printf("liba_next=%d\n", via_next());         /* libnext_b's */
    printf("liba_next_v=%d\n", via_next_v());
    printf("default=%d\n", next_probe());
    printf("libc_next_malloc=%s\n", dlsym(RTLD_NEXT, "malloc") ? "found" : "null");
    return 0;
}
