# Probe: fork sleeping children without bound; when fork fails, "contained".
begin
  100_000.times { fork { $stdout.close; $stderr.close; sleep 5 } }
  puts "not contained"
  exit 1
rescue Errno::EAGAIN, Errno::ENOMEM, ThreadError => e
  warn "fork failed: #{e}"
  puts "contained"
end
