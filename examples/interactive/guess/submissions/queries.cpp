// Linear scan from 1: needs `secret` queries, so it passes only when the
// secret is at most q (test 01) and exceeds the query limit otherwise.
#include <cstdio>

int main() {
    long long n, q;
    if (std::scanf("%lld %lld", &n, &q) != 2) return 1;
    for (long long x = 1; x <= n; x++) {
        std::printf("? %lld\n", x);
        std::fflush(stdout);
        char r[2];
        if (std::scanf("%1s", r) != 1) return 1;  // judge gone (it said "limit exceeded")
        if (r[0] == '=') {
            std::printf("! %lld\n", x);
            return 0;
        }
    }
    return 0;
}
