/* e2e target (launcher.sh): launcher.sh links it with -static (the build rule makes a dynamic one
 * too); prints a line and exits 5. */
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
    char *p = malloc(32);
    printf("static_hello: %s\n", p ? "ok" : "no memory");
    free(p);
    return 5;
}
