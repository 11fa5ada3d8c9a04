// Writes a line that is neither "? x" nor "! x": presentation error.
#include <cstdio>

int main() {
    long long n, q;
    if (std::scanf("%lld %lld", &n, &q) != 2) return 1;
    std::printf("guess %lld\n", n / 2);
    std::fflush(stdout);
    char r[2];
    return std::scanf("%1s", r) == 1 ? 0 : 1;  // the judge has quit: EOF, 1
}
