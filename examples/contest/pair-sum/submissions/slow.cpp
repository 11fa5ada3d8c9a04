#include <cstdio>
int main() { long long n; std::scanf("%lld", &n); volatile unsigned long long spin = 0; for (;;) spin++; }
