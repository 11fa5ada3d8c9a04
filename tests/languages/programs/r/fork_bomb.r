# Probe: fork sleeping children (parallel::mcparallel) without bound; when
# fork fails, "contained".
library(parallel)
for (i in 1:100000) {
    ok <- tryCatch({ mcparallel(Sys.sleep(5)); TRUE }, error = function(e) FALSE)
    if (!ok) {
        cat("contained\n")
        quit(status = 0)
    }
}
cat("not contained\n")
quit(status = 1)
