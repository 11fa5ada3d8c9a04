public class Main {
    public static void main(String[] args) {
        long n = Long.parseLong(args[0]);
        System.out.println(n * n);
    }
}
