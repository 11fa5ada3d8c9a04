public class Main {
    // Does not compile: a long does not fit in an int without a cast.
    public static void main(String[] args) {
        long n = Long.parseLong(args[0]);
        int square = n * n;
        System.out.println(square);
    }
}
