#include "sum.h"
long long total(int n, const std::vector<int>& a) {
    volatile long long* nowhere = nullptr;
    return *nowhere + n + a[0];
}
