#include <cstdio>
int main() { long long n; std::scanf("%lld", &n); volatile int* p = nullptr; std::printf("%d\n", *p); }
