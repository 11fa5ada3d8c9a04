#include <cstdio>
int main() { long long n; std::scanf("%lld", &n); if (n == 0) std::printf("0 0\n"); else std::printf("1 %lld\n", n - 1); }
