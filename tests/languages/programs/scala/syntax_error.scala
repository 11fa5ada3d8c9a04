// Does not compile: scalac exits 1.
object Main { def main(args: Array[String]): Unit = { val x = } }
