public class Main {
    // Wrong: upper-cases instead of reversing.
    public static void main(String[] args) {
        System.out.println(args[0].toUpperCase());
    }
}
