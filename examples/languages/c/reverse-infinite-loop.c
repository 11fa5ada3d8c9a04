#include <stdio.h>
#include <string.h>

/* Never ends: the loop forgets to move i. */
int main(int argc, char **argv) {
    const char *s = argv[1];
    char out[4096] = {0};
    volatile size_t i = strlen(s);
    while (i > 0) {
        out[strlen(s) - i] = s[i - 1];
    }
    puts(out);
    return 0;
}
