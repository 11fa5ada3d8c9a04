// Probe: start sleeping children without bound; when a start fails (or the
// JVM cannot start a thread to reap one), "contained".
object Main {
  def main(args: Array[String]): Unit = {
    try {
      for (i <- 0 until 100000) new ProcessBuilder("/bin/sleep", "5").start()
      println("not contained")
      sys.exit(1)
    } catch {
      case e: Throwable =>
        System.err.println("start failed: " + e)
        println("contained")
        System.out.flush()
        Runtime.getRuntime().halt(0)
    }
  }
}
