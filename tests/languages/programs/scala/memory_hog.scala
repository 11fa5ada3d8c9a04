// Probe: keep 1 MiB arrays without bound (the JVM's -Xmx may end it first).
object Main {
  def main(args: Array[String]): Unit = {
    val keep = scala.collection.mutable.ArrayBuffer[Array[Byte]]()
    while (true) keep += Array.fill[Byte](1 << 20)(1)
  }
}
