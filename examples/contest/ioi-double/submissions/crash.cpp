#include <cstdlib>
#include "double.h"

long long twice(long long x) {
    if (x > 5) std::abort();
    return 2 * x;
}
