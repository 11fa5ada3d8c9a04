// Probe: allocate and touch memory without bound until the container's
// memory cap kills the process (expected: SIGKILL, exit 137, OOMKilled).
#include <cstddef>
#include <iostream>
#include <new>
#include <vector>

int main() {
    constexpr std::size_t chunk = std::size_t(16) << 20;
    std::vector<char*> keep;
    try {
        for (;;) {
            char* p = new char[chunk];
            volatile char* v = p;
            for (std::size_t i = 0; i < chunk; i += 4096)
                v[i] = 1;
            keep.push_back(p);
        }
    } catch (const std::bad_alloc&) {
        std::cerr << "memory_hog: bad_alloc\n";
        return 1;
    }
}
