#include <stdio.h>

/* Crashes: writes through a null pointer (SIGSEGV). */
int main(void) {
    long long x, *total = NULL;
    while (scanf("%lld", &x) == 1)
        *total += x;
    printf("%lld\n", *total);
    return 0;
}
