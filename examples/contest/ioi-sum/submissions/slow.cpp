#include "sum.h"
long long total(int n, const std::vector<int>& a) {
    // Right, but cubic: each value is added one unit of work at a time.
    long long sum = 0;
    volatile long long work = 0;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++)
            for (int k = 0; k < 8 * n; k++) work = work + 1;
        sum += a[i];
    }
    return sum;
}
