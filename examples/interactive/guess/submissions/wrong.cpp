// Finds the secret by binary search, then reports it off by one: wrong answer.
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
            std::printf("! %lld\n", mid + 1);
            return 0;  // exit flushes stdout
        }
        if (r[0] == '<') hi = mid - 1; else lo = mid + 1;
    }
}
