/* Probe: allocate and touch memory without bound until the container's
 * memory cap kills the process (expected: SIGKILL, exit 137, OOMKilled). */
#include <stdio.h>
#include <stdlib.h>

#define CHUNK ((size_t)16 << 20)

int main(void) {
    for (;;) {
        volatile char *p = malloc(CHUNK);
        if (p == NULL) {
            fputs("memory_hog: malloc failed\n", stderr);
            return 1;
        }
        for (size_t i = 0; i < CHUNK; i += 4096)
            p[i] = 1;
    }
}
