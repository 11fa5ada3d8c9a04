#include <algorithm>
#include <iostream>
#include <string>

// Wrong: sorts instead of reversing.
int main(int argc, char **argv) {
    std::string s = argv[1];
    std::sort(s.begin(), s.end());
    std::cout << s << '\n';
}
