#include <iostream>

int main() {
    long long x, total = 0;
    while (std::cin >> x)
        total += x;
    std::cout << total << '\n';
}
