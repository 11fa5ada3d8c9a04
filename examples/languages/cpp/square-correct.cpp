#include <iostream>
#include <string>

int main(int argc, char **argv) {
    long long n = std::stoll(argv[1]);
    std::cout << n * n << '\n';
}
