// Probe: allocate and touch memory without bound.
// The JVM sizes its heap from the container limit (default MaxHeapSize = 1/4
// of it), so the JVM's own heap limit is expected to trip first: the program
// exits non-zero (1) with "java.lang.OutOfMemoryError: Java heap space" on
// stderr, rather than being SIGKILLed by the container's memory cap.
// Observed (OpenJDK 17, java -XX:+UseSerialGC) under both a 256 MiB and a
// 512 MiB cap: exit 1, OutOfMemoryError: Java heap space, OOMKilled=false.
import java.util.ArrayList;
import java.util.List;

public class Main {
    static final int CHUNK = 16 << 20;

    public static void main(String[] args) {
        List<byte[]> keep = new ArrayList<>();
        for (;;) {
            byte[] b = new byte[CHUNK];
            for (int i = 0; i < CHUNK; i += 4096) {
                b[i] = 1;
            }
            keep.add(b);
        }
    }
}
