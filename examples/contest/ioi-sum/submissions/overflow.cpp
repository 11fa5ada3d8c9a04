#include "sum.h"
long long total(int n, const std::vector<int>& a) {
    int sum = 0;  // overflows past 2^31 - 1
    for (int i = 0; i < n; i++) sum = (int)((unsigned)sum + (unsigned)a[i]);
    return sum;
}
