public class Main {
    public static void main(String[] args) {
        System.out.println(new StringBuilder(args[0]).reverse());
    }
}
