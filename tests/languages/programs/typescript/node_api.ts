// Node's API as Node's own declarations type it: require, process, Buffer.
const fs = require("fs");
const input: string = fs.readFileSync(0, "utf8");
const numbers = input.split(/\s+/).filter((t: string) => t.length > 0).map(Number);
const total = numbers.reduce((a: number, b: number) => a + b, 0);
process.stdout.write(`${total} ${Buffer.from("ok").toString("hex")}\n`);
