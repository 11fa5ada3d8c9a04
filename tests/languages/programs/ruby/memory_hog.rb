# Probe: keep 1 MiB strings without bound.
keep = []
loop { keep << ("x" * (1 << 20)) + keep.size.to_s }
