#include <iostream>
#include <string>

// Does not compile: `square` is never declared.
int main(int argc, char **argv) {
    long long n = std::stoll(argv[1]);
    std::cout << square(n) << '\n';
}
