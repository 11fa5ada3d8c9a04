#include "double.h"

long long twice(long long x) { return 2 * x; }
