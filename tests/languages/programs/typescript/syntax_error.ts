// Does not type-check: tsc exits 2 and emits nothing.
const x: number = "not a number";
console.log(x);
