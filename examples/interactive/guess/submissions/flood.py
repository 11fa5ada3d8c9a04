# Writes "? 1" for ever without reading the answers. The judge must give up at
# query q + 1 (limit exceeded) and exit; our next write then meets a closed
# pipe and SIGPIPE ends us.
import signal
import sys

signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # die by SIGPIPE like C++, not by BrokenPipeError
while True:
    sys.stdout.write("? 1\n")
