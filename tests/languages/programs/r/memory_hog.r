# Probe: keep 8 MiB vectors without bound.
keep <- list()
i <- 0
repeat {
    i <- i + 1
    keep[[i]] <- numeric(1e6) + i
}
