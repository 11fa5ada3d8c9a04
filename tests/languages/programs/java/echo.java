// Probe: copy stdin to stdout unchanged, then print each argument on its own
// line to stderr. (Arguments are decoded by the JVM using the platform
// charset, so only ASCII arguments round-trip byte-exactly under the C locale.)
import java.io.IOException;

public class Main {
    public static void main(String[] args) throws IOException {
        byte[] input = System.in.readAllBytes();
        System.out.write(input);
        System.out.flush();
        for (String a : args) {
            System.err.println(a);
        }
        System.err.flush();
    }
}
