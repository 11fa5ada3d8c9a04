#include <iostream>
#include <vector>

// Crashes: at() past the end throws std::out_of_range, never caught (abort).
int main() {
    std::vector<long long> xs;
    long long x, total = 0;
    while (std::cin >> x)
        xs.push_back(x);
    for (std::size_t i = 0; i <= xs.size(); i++)
        total += xs.at(i);
    std::cout << total << '\n';
}
