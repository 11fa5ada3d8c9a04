// Never ends: the index grows instead of shrinking.
const s = process.argv[2];
let out = "";
for (let i = s.length - 1; i >= 0; i++) {
  out = s[i % s.length] + out;
  if (out.length > 1000) out = "";
}
console.log(out);
