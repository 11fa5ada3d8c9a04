// Wrong: prints the argument unchanged.
fn main() {
    let s = std::env::args().nth(1).unwrap();
    println!("{}", s.chars().collect::<String>());
}
