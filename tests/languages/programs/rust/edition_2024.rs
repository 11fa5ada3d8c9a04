//! Edition 2024 and a recent standard library: a returned `impl Trait`
//! captures the argument's lifetime (an error in edition 2021), `unsafe
//! extern` with a `safe` item, let-else, `is_some_and`, `is_none_or` (1.82),
//! `iter::repeat_n` (1.82) and `chunk_by` (1.77). Prints "ok".

unsafe extern "C" {
    safe fn abs(value: i32) -> i32;
}

fn letters(text: &str) -> impl Iterator<Item = char> {
    text.chars().filter(|c| c.is_alphabetic())
}

fn main() {
    let Some(first) = letters("1a2b").next() else {
        panic!("no letter");
    };
    assert_eq!(first, 'a');
    assert!(Some(3).is_some_and(|n| n > 2));
    assert!(None::<i32>.is_none_or(|n| n > 2));
    assert_eq!(std::iter::repeat_n(7, 3).sum::<i32>(), 21);
    let runs: Vec<&[i32]> = [1, 1, 2, 3, 3].chunk_by(|a, b| a == b).collect();
    assert_eq!(runs.len(), 3);
    assert_eq!(abs(-4), 4);
    println!("ok");
}
