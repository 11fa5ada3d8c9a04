// Does not compile: multiplies an i64 by a &str.
fn main() {
    let arg = std::env::args().nth(1).unwrap();
    let n: i64 = arg.parse().unwrap();
    println!("{}", n * arg.as_str());
}
