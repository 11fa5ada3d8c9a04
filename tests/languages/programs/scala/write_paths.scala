// Probe: open args(0), /build/probe and /etc/probe for appending.
object Main {
  def main(args: Array[String]): Unit =
    for (p <- Seq(args.headOption.getOrElse(""), "/build/probe", "/etc/probe"))
      println(try { new java.io.FileOutputStream(p, true).close(); "written" } catch { case _: Exception => "denied" })
}
