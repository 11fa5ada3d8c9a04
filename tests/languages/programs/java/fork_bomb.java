// Probe: start sleeping threads without bound. When thread creation fails
// (pids limit -> OutOfMemoryError "unable to create native thread"), print
// "contained" and exit 0.
//
// HotSpot reports the failed pthread_create as a unified-logging warning,
// which goes to stdout by default; the probe first redirects JVM logging to
// stderr (via the VM.log diagnostic command) so stdout is exactly "contained".
// If that is not possible the warnings simply stay on stdout.
import java.lang.management.ManagementFactory;
import javax.management.ObjectName;

public class Main {
    static void jvmLogToStderr() {
        try {
            var server = ManagementFactory.getPlatformMBeanServer();
            var name = new ObjectName("com.sun.management:type=DiagnosticCommand");
            String[] sig = {String[].class.getName()};
            server.invoke(name, "vmLog", new Object[] {new String[] {"disable"}}, sig);
            server.invoke(name, "vmLog",
                    new Object[] {new String[] {"output=stderr", "what=all=warning"}}, sig);
        } catch (Exception e) {
            System.err.println("could not redirect JVM logging: " + e);
        }
    }

    public static void main(String[] args) {
        jvmLogToStderr();
        for (int i = 0; i < 100000; i++) {
            Thread t = new Thread(null, () -> {
                try {
                    Thread.sleep(60000);
                } catch (InterruptedException e) {
                    // exit quietly
                }
            }, "probe", 64 * 1024);
            t.setDaemon(true);
            try {
                t.start();
            } catch (OutOfMemoryError e) {
                System.err.println("thread start failed after " + i + " threads: " + e);
                System.out.println("contained");
                System.out.flush();
                System.err.flush();
                // halt: skip shutdown hooks, which would try to start threads too
                Runtime.getRuntime().halt(0);
            }
        }
        System.out.println("not contained");
        System.exit(1);
    }
}
