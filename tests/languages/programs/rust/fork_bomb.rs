// Probe: spawn sleeping threads without bound. When spawning fails (pids
// limit), print "contained" and exit 0.
use std::thread;
use std::time::Duration;

fn main() {
    for i in 0..100_000u32 {
        let spawned = thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(|| thread::sleep(Duration::from_secs(60)));
        if let Err(e) = spawned {
            eprintln!("thread spawn failed after {} threads: {}", i, e);
            println!("contained");
            std::process::exit(0);
        }
    }
    println!("not contained");
    std::process::exit(1);
}
