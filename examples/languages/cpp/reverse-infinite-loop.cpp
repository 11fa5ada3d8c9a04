#include <iostream>
#include <string>

// Never ends: the loop forgets to move i.
int main(int argc, char **argv) {
    std::string s = argv[1], out;
    volatile std::size_t i = s.size();
    while (i > 0) {
        out.push_back(s[i - 1]);
        out.pop_back();
    }
    std::cout << out << '\n';
}
