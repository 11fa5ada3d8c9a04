// Probe: spin forever on the CPU.
#include <iostream>

int main() {
    volatile unsigned long counter = 0;
    for (;;)
        counter = counter + 1;
    std::cout << counter << "\n";  // unreachable
    return 0;
}
