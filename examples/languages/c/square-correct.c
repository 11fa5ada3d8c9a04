#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    long long n = strtoll(argv[1], NULL, 10);
    printf("%lld\n", n * n);
    return 0;
}
