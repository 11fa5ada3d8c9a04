# Probe: open the first argument, /build/probe and /etc/probe for appending.
args <- commandArgs(trailingOnly = TRUE)
for (p in c(args[1], "/build/probe", "/etc/probe")) {
    ok <- tryCatch({ con <- file(p, "a"); close(con); TRUE },
        error = function(e) FALSE, warning = function(w) FALSE)
    cat(if (ok) "written\n" else "denied\n")
}
