#include <stdio.h>

/* Wrong: only the first line counts. */
int main(void) {
    long long x = 0;
    if (scanf("%lld", &x) != 1)
        x = 0;
    printf("%lld\n", x);
    return 0;
}
