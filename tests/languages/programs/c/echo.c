/* Probe: copy stdin to stdout unchanged, then print each argument on its own
 * line to stderr. */
#include <stdio.h>

int main(int argc, char **argv) {
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, stdin)) > 0)
        fwrite(buf, 1, n, stdout);
    fflush(stdout);
    for (int i = 1; i < argc; i++)
        fprintf(stderr, "%s\n", argv[i]);
    return 0;
}
