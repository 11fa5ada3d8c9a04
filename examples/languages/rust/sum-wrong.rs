use std::io::Read;

// Wrong: skips the last number.
fn main() {
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input).unwrap();
    let xs: Vec<i64> = input.split_whitespace().map(|w| w.parse().unwrap()).collect();
    let total: i64 = xs.iter().take(xs.len().saturating_sub(1)).sum();
    println!("{}", total);
}
