// Asks one query, then crashes (SIGABRT, 134) without reading the answer:
// the judge sees EOF, wrong answer.
#include <cstdio>
#include <cstdlib>

int main() {
    long long n;
    if (std::scanf("%lld", &n) != 1) return 1;
    std::printf("? 1\n");
    std::fflush(stdout);  // abort() does not flush
    std::abort();
}
