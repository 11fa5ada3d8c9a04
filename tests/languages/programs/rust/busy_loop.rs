// Probe: spin forever on the CPU.
fn main() {
    let mut counter: u64 = 0;
    loop {
        unsafe {
            let c = std::ptr::read_volatile(&counter);
            std::ptr::write_volatile(&mut counter, c.wrapping_add(1));
        }
    }
}
