/* A program that never touches CUDA. Under the preload it must not get any CUDA library loaded,
 * even after a host allocation failure report, and lookups of CUDA names must answer as without
 * us (NULL: the process has no CUDA).
 *   nocuda        lookups, then lists the CUDA libraries in its address space
 *   nocuda oom    the same after a failing malloc (a report) */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    const char *names[] = {"cuMemAlloc_v2", "cudaMalloc", "cuGetProcAddress", "cudaGetDriverEntryPoint", "printf"};
    for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++)
        printf("%s=%s\n", names[i], dlsym(RTLD_DEFAULT, names[i]) ? "found" : "null");
    void *m = dlopen("libm.so.6", RTLD_NOW);
    double (*cosine)(double) = m ? (double (*)(double))dlsym(m, "cos") : NULL;
    printf("cos=%s\n", cosine && cosine(0.0) == 1.0 ? "works" : "broken");
    if (argc > 1 && !strcmp(argv[1], "oom")) {
        volatile size_t huge = (size_t)1 << 50;
        void *p = malloc(huge);
        printf("malloc(huge)=%s\n", p ? "non-null" : "null");
    }
    char line[4096];
    int found = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, "libcuda") || strstr(line, "libcudart") || strstr(line, "libnvidia-ml") ||
            strstr(line, "libfakecudart")) {
            printf("cuda_lib %s", strchr(line, '/') ? strchr(line, '/') : line);
            found = 1;
        }
    if (f) fclose(f);
    printf("cuda_libs=%s\n", found ? "loaded" : "none");
    return 0;
}
