# Probe: keep 1 MiB strings without bound.
my @keep;
push @keep, "x" x (1 << 20) . scalar(@keep) while 1;
