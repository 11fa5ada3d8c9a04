# Probe: start sleeping children (through system2) without bound; when a
# start fails (pids limit), print "contained".
for (i in 1:100000) {
    status <- suppressWarnings(system2("/bin/sleep", "5", wait = FALSE, stdout = FALSE, stderr = FALSE))
    if (status != 0) {
        cat("contained\n")
        quit(status = 0)
    }
}
cat("not contained\n")
quit(status = 1)
