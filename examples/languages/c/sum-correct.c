#include <stdio.h>

int main(void) {
    long long x, total = 0;
    while (scanf("%lld", &x) == 1)
        total += x;
    printf("%lld\n", total);
    return 0;
}
