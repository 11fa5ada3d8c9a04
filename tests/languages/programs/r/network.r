# Probe: TCP to 1.1.1.1:53 and 127.0.0.1:9 (2 s timeout each).
reach <- function(host, port) tryCatch({
    con <- socketConnection(host, port, timeout = 2, open = "r+")
    close(con)
    TRUE
}, error = function(e) FALSE, warning = function(w) FALSE)
cat(if (reach("1.1.1.1", 53) || reach("127.0.0.1", 9)) "reachable\n" else "unreachable\n")
