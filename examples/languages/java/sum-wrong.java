import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;

public class Main {
    // Wrong: counts the lines instead of adding them.
    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        long total = 0;
        while (in.readLine() != null) {
            total += 1;
        }
        System.out.println(total);
    }
}
