// Never ends: the loop forgets to move i.
fn main() {
    let s: Vec<char> = std::env::args().nth(1).unwrap().chars().collect();
    let mut out = String::new();
    let i = s.len();
    while i > 0 {
        out.push(s[i - 1]);
        out.pop();
    }
    println!("{}", out);
}
