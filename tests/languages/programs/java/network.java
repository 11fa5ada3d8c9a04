// Probe: try TCP connections to 1.1.1.1:53 and 127.0.0.1:9 (2 s timeout
// each); print "unreachable" if both fail, else "reachable".
import java.net.InetSocketAddress;
import java.net.Socket;

public class Main {
    static boolean tryConnect(String host, int port) {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(host, port), 2000);
            return true;
        } catch (Exception e) {
            return false;
        }
    }

    public static void main(String[] args) {
        boolean a = tryConnect("1.1.1.1", 53);
        boolean b = tryConnect("127.0.0.1", 9);
        System.out.println(a || b ? "reachable" : "unreachable");
    }
}
