#include <stdio.h>
#include <stdlib.h>

/* Wrong: doubles instead of squaring. */
int main(int argc, char **argv) {
    long long n = strtoll(argv[1], NULL, 10);
    printf("%lld\n", n * 2);
    return 0;
}
