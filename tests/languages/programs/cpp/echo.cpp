// Probe: copy stdin to stdout unchanged, then print each argument on its own
// line to stderr.
#include <iostream>

int main(int argc, char** argv) {
    std::ios::sync_with_stdio(false);
    std::cout << std::cin.rdbuf();
    std::cout.flush();
    for (int i = 1; i < argc; i++)
        std::cerr << argv[i] << "\n";
    return 0;
}
