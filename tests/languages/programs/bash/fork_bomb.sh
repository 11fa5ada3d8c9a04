# Probe: start sleeping children without bound in a subshell; bash gives up
# (exit 254) once a fork is refused for good: then print "contained".
( for i in $(seq 1 100000); do sleep 5 & done ) 2>/dev/null
if [ $? -ne 0 ]; then
    echo contained
else
    echo "not contained"
    exit 1
fi
