# Probe: TCP to 1.1.1.1:53 and 127.0.0.1:9 (2 s timeout each).
use IO::Socket::INET;
my $a = IO::Socket::INET->new(PeerAddr => "1.1.1.1", PeerPort => 53, Timeout => 2);
my $b = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => 9, Timeout => 2);
print(($a || $b) ? "reachable\n" : "unreachable\n");
