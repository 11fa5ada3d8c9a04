#include <algorithm>
#include <iostream>
#include <string>

int main(int argc, char **argv) {
    std::string s = argv[1];
    std::reverse(s.begin(), s.end());
    std::cout << s << '\n';
}
