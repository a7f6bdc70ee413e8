/* A shared library with a 512 MiB bss (a big static table, as some numeric libraries have), for the
 * address-space breakdown's libraries category (tests/e2e/asmap.sh). Built as libbigbss.so; as a
 * program it only says what it is. */
#include <stdio.h>

char bigbss_table[512u << 20];

int bigbss_touch(int i);
int bigbss_touch(int i)
{
    bigbss_table[i] = 1;
    return bigbss_table[i];
}

#ifndef OT_SHARED_LIB
int main(void)
{
    printf("bigbss_lib: built as libbigbss.so for tests/e2e/asmap.sh (a 512 MiB bss)\n");
    return bigbss_touch(0) - 1;
}
#endif
