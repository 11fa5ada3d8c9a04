import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;

public class Main {
    static Long total;

    // Crashes: unboxes a null Long (uncaught NullPointerException).
    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            total += Long.parseLong(line.trim());
        }
        System.out.println(total + 0);
    }
}
