// Binary search, claiming as soon as one candidate is left: each query keeps
// at most floor(s / 2) of s candidates, so floor(log2 n) <= m queries.
#include <cstdio>

int main() {
    long long n;
    if (std::scanf("%lld", &n) != 1) return 1;
    long long lo = 1, hi = n;
    while (lo < hi) {
        long long mid = lo + (hi - lo) / 2;
        std::printf("? %lld\n", mid);
        std::fflush(stdout);
        char r[2];
        if (std::scanf("%1s", r) != 1) return 1;
        if (r[0] == '=') lo = hi = mid;
        else if (r[0] == '<') hi = mid - 1;
        else lo = mid + 1;
    }
    std::printf("! %lld\n", lo);
    return 0;
}
