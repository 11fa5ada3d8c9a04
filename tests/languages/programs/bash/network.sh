# Probe: TCP to 1.1.1.1:53 and 127.0.0.1:9 through bash's /dev/tcp.
if (exec 3<>/dev/tcp/1.1.1.1/53) 2>/dev/null || (exec 3<>/dev/tcp/127.0.0.1/9) 2>/dev/null; then
    echo reachable
else
    echo unreachable
fi
