// Probe: spin forever on the CPU.
public class Main {
    static volatile long counter;

    public static void main(String[] args) {
        for (;;) {
            counter++;
        }
    }
}
