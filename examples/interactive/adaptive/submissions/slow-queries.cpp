// Asks at a third of the candidates, not the middle: the adversary keeps the
// bigger two thirds, so about log(n) / log(1.5) = 1.71 log2(n) queries.
// Accepted on test 01 (n = 16: 4 queries), partial points on 02 and 03.
#include <cstdio>

int main() {
    long long n;
    if (std::scanf("%lld", &n) != 1) return 1;
    long long lo = 1, hi = n;
    while (lo < hi) {
        long long x = lo + (hi - lo + 1) / 3;
        std::printf("? %lld\n", x);
        std::fflush(stdout);
        char r[2];
        if (std::scanf("%1s", r) != 1) return 1;
        if (r[0] == '=') lo = hi = x;
        else if (r[0] == '<') hi = x - 1;
        else lo = x + 1;
    }
    std::printf("! %lld\n", lo);
    return 0;
}
