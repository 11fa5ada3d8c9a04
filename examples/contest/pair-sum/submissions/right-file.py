# File I/O, as old problems ask: input.txt in, output.txt out.
n = int(open("input.txt").read())
with open("output.txt", "w") as out:
    out.write("0 0\n" if n == 0 else f"1 {n - 1}\n")
print("this goes nowhere")
