#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    const char *s = argv[1];
    for (size_t i = strlen(s); i > 0; i--)
        putchar(s[i - 1]);
    putchar('\n');
    return 0;
}
