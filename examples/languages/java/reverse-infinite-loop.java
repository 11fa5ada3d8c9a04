public class Main {
    // Never ends: the loop counter is reset each time round.
    public static void main(String[] args) {
        String s = args[0];
        StringBuilder out = new StringBuilder();
        for (int i = s.length() - 1; i >= 0; i--) {
            out.append(s.charAt(i));
            if (i == 0) {
                out.setLength(0);
                i = s.length();
            }
        }
        System.out.println(out);
    }
}
