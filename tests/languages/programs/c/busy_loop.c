/* Probe: spin forever on the CPU. */
#include <stdio.h>

int main(void) {
    volatile unsigned long counter = 0;
    for (;;)
        counter++;
    printf("%lu\n", counter); /* unreachable */
    return 0;
}
