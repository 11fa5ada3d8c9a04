// Reads "n q" and exits without a word: the judge sees EOF, wrong answer.
#include <cstdio>

int main() {
    long long n, q;
    return std::scanf("%lld %lld", &n, &q) == 2 ? 0 : 1;
}
