// Probe: spin forever on the CPU.
object Main {
  def main(args: Array[String]): Unit = {
    var counter = 0L
    while (true) counter += 1
  }
}
