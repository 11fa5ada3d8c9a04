// Wrong: reverses the words, not the characters.
console.log(process.argv[2].split(" ").reverse().join(" "));
