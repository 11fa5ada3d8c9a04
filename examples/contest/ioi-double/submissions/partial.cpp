#include "double.h"

// Wrong for numbers above 5.
long long twice(long long x) { return x > 5 ? 2 * x + 1 : 2 * x; }
