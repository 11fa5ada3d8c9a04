// The user side of ioi-double (std_io): asks the contestant's twice() for
// each number the manager sends, and answers each at once.
#include <cstdio>
#include "double.h"

int main() {
    int count = 0;
    if (std::scanf("%d", &count) != 1) return 0;
    for (int i = 0; i < count; ++i) {
        long long x = 0;
        if (std::scanf("%lld", &x) != 1) return 0;
        std::printf("%lld\n", twice(x));
        std::fflush(stdout);
    }
    return 0;
}
