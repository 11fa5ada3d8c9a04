// Probe: spin forever on the CPU (volatile: the optimizer keeps the loop).
import core.volatile : volatileLoad, volatileStore;
void main() {
    ulong counter;
    for (;;) {
        volatileStore(&counter, volatileLoad(&counter) + 1);
    }
}
