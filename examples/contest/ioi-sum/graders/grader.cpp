#include <cstdio>
#include <vector>
#include "sum.h"

int main() {
    int n;
    if (std::scanf("%d", &n) != 1) return 1;
    std::vector<int> a(n);
    for (int& x : a)
        if (std::scanf("%d", &x) != 1) return 1;
    std::printf("%lld\n", total(n, a));
}
