#include "sum.h"
long long total(int n, const std::vector<int>& a) {
    long long sum = 0;
    for (int i = 0; i < n; i++) sum += a[i];
    return sum;
}
