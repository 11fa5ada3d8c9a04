// Probe: spin forever on the CPU.
class Program {
    static void Main() {
        long counter = 0;
        while (true) { counter++; }
    }
}
