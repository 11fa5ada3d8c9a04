#include <vector>
long long total(int n, const std::vector<int>& a);
