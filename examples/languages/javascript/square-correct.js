const n = BigInt(process.argv[2]);
console.log((n * n).toString());
