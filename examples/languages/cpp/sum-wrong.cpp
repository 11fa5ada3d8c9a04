#include <iostream>

// Wrong: the total is an unsigned char, so it wraps at 256.
int main() {
    long long x;
    unsigned char total = 0;
    while (std::cin >> x)
        total += x;
    std::cout << static_cast<int>(total) << '\n';
}
