// Probe: try to open for writing (append, create) args[0], /build/probe and
// /etc/probe; print "denied" or "written" for each, in that order.
import java.io.FileOutputStream;

public class Main {
    static void attempt(String path) {
        try (FileOutputStream f = new FileOutputStream(path, true)) {
            System.out.println("written");
        } catch (Exception e) {
            System.out.println("denied");
        }
    }

    public static void main(String[] args) {
        attempt(args.length > 0 ? args[0] : "");
        attempt("/build/probe");
        attempt("/etc/probe");
    }
}
