# Probe: double a string without bound until the memory cap kills bash.
x=aaaaaaaaaaaaaaaa
while :; do x="$x$x"; done
