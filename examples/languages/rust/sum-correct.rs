use std::io::Read;

fn main() {
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input).unwrap();
    let total: i64 = input.split_whitespace().map(|w| w.parse::<i64>().unwrap()).sum();
    println!("{}", total);
}
