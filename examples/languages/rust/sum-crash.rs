use std::io::Read;

// Crashes: indexes one past the end (panic: index out of bounds).
fn main() {
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input).unwrap();
    let xs: Vec<i64> = input.split_whitespace().map(|w| w.parse().unwrap()).collect();
    let mut total: i64 = 0;
    for i in 0..=xs.len() {
        total += xs[i];
    }
    println!("{}", total);
}
