// Binary search: at most floor(log2 n) + 1 queries, within q = ceil(log2 n) + 1.
#include <cstdio>

int main() {
    long long n, q;
    if (std::scanf("%lld %lld", &n, &q) != 2) return 1;
    long long lo = 1, hi = n;
    for (;;) {
        long long mid = lo + (hi - lo) / 2;
        std::printf("? %lld\n", mid);
        std::fflush(stdout);  // the judge waits for the whole line
        char r[2];
        if (std::scanf("%1s", r) != 1) return 1;  // judge gone
        if (r[0] == '=') {
            std::printf("! %lld\n", mid);
            return 0;  // exit flushes stdout
        }
        if (r[0] == '<') hi = mid - 1; else lo = mid + 1;
    }
}
