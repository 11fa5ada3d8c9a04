// Asks one query, then crashes (SIGABRT, 134) without reading the answer:
// the judge's answer may meet a closed pipe, then it sees EOF: wrong answer.
#include <cstdio>
#include <cstdlib>

int main() {
    long long n, q;
    if (std::scanf("%lld %lld", &n, &q) != 2) return 1;
    std::printf("? 1\n");
    std::fflush(stdout);  // abort() does not flush
    std::abort();
}
