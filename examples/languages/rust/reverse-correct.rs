fn main() {
    let s = std::env::args().nth(1).unwrap();
    println!("{}", s.chars().rev().collect::<String>());
}
