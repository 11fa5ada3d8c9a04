// Wrong: string concatenation, not multiplication.
const n = process.argv[2];
console.log(n + n);
