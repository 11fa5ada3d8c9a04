// Fails at run time, before anything runs: a syntax error.
const n = BigInt(process.argv[2];
console.log((n * n).toString());
