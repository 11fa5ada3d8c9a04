#!/usr/bin/env python3
"""Writes examples/languages/multipl-e/<lang>/<problem>-<variant>.<ext>: whole
programs for two MultiPL-E HumanEval problems in every MultiPL-E language
progscore has an image for, each MultiPL-E's prompt, then a body written here
(the dataset has no reference solutions), then MultiPL-E's tests, joined as
MultiPL-E joins them (prompt + completion + tests). A correct program exits 0;
a wrong one fails MultiPL-E's own tests.

    python3 examples/languages/multipl-e/make-programs.py [DATASET_DIR]

DATASET_DIR holds MultiPL-E's humaneval-<lang>.jsonl (default:
../shared/datasets/multipl-e beside the repository). The written programs are
committed, so the tests do not need the dataset.
"""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROBLEMS = ["HumanEval_53_add", "HumanEval_60_sum_to_n"]

# MultiPL-E language -> (file extension, {problem: (correct body, wrong body)}).
# Brace languages whose tests start with the closing brace get the body only.
BODIES = {
    "cpp": ("cpp", {
        "add": ("    return x + y;\n", "    return x - y;\n"),
        "sum_to_n": ("    return n * (n + 1) / 2;\n", "    return n * (n - 1) / 2;\n"),
    }),
    "cs": ("cs", {
        "add": ("        return x + y;\n", "        return x * y;\n"),
        "sum_to_n": ("        return n * (n + 1) / 2;\n", "        return n * (n - 1) / 2;\n"),
    }),
    "d": ("d", {
        "add": ("{\n    return x + y;\n}\n", "{\n    return x - y;\n}\n"),
        "sum_to_n": ("{\n    return n * (n + 1) / 2;\n}\n", "{\n    return n * (n - 1) / 2;\n}\n"),
    }),
    "go": ("go", {
        "add": ("    return x + y\n}\n\n", "    return x - y\n}\n\n"),
        "sum_to_n": ("    return n * (n + 1) / 2\n}\n\n", "    return n * (n - 1) / 2\n}\n\n"),
    }),
    "java": ("java", {
        "add": ("        return x + y;\n", "        return x - y;\n"),
        "sum_to_n": ("        return n * (n + 1) / 2;\n", "        return n * (n - 1) / 2;\n"),
    }),
    "js": ("js", {
        "add": ("  return x + y;\n}\n\n", "  return x - y;\n}\n\n"),
        "sum_to_n": ("  return n * (n + 1) / 2;\n}\n\n", "  return n * (n - 1) / 2;\n}\n\n"),
    }),
    "lua": ("lua", {
        "add": ("    return x + y\nend\n\n", "    return x - y\nend\n\n"),
        "sum_to_n": ("    return n * (n + 1) // 2\nend\n\n", "    return n * (n - 1) // 2\nend\n\n"),
    }),
    "php": ("php", {
        "add": ("    return $x + $y;\n}\n\n", "    return $x - $y;\n}\n\n"),
        "sum_to_n": ("    return intdiv($n * ($n + 1), 2);\n}\n\n", "    return intdiv($n * ($n - 1), 2);\n}\n\n"),
    }),
    "pl": ("pl", {
        "add": ("    return $x + $y;\n}\n\n", "    return $x - $y;\n}\n\n"),
        "sum_to_n": ("    return $n * ($n + 1) / 2;\n}\n\n", "    return $n * ($n - 1) / 2;\n}\n\n"),
    }),
    "r": ("r", {
        "add": ("\n    x + y\n}\n", "\n    x - y\n}\n"),
        "sum_to_n": ("\n    n * (n + 1) / 2\n}\n", "\n    n * (n - 1) / 2\n}\n"),
    }),
    "rb": ("rb", {
        "add": ("  x + y\nend\n\n", "  x - y\nend\n\n"),
        "sum_to_n": ("  n * (n + 1) / 2\nend\n\n", "  n * (n - 1) / 2\nend\n\n"),
    }),
    "rkt": ("rkt", {
        "add": ("  (+ x y))\n\n", "  (- x y))\n\n"),
        "sum_to_n": ("  (quotient (* n (+ n 1)) 2))\n\n", "  (quotient (* n (- n 1)) 2))\n\n"),
    }),
    "rs": ("rs", {
        "add": ("    x + y\n", "    x - y\n"),
        "sum_to_n": ("    n * (n + 1) / 2\n", "    n * (n - 1) / 2\n"),
    }),
    "scala": ("scala", {
        "add": ("        x + y\n", "        x - y\n"),
        "sum_to_n": ("        n * (n + 1) / 2\n", "        n * (n - 1) / 2\n"),
    }),
    "sh": ("sh", {
        "add": ("    echo $(( $1 + $2 ))\n", "    echo $(( $1 - $2 ))\n"),
        "sum_to_n": ("    echo $(( $1 * ($1 + 1) / 2 ))\n", "    echo $(( $1 * ($1 - 1) / 2 ))\n"),
    }),
    "ts": ("ts", {
        "add": ("  return x + y;\n}\n\n", "  return x - y;\n}\n\n"),
        "sum_to_n": ("  return n * (n + 1) / 2;\n}\n\n", "  return n * (n - 1) / 2;\n}\n\n"),
    }),
}


def main():
    default = HERE.parents[3] / "shared/datasets/multipl-e"
    dataset = Path(sys.argv[1]) if len(sys.argv) > 1 else default
    written = 0
    for lang, (ext, bodies) in BODIES.items():
        rows = {}
        for line in (dataset / f"humaneval-{lang}.jsonl").read_text().splitlines():
            row = json.loads(line)
            rows[row["name"]] = row
        out = HERE / lang
        out.mkdir(exist_ok=True)
        for problem in PROBLEMS:
            row = rows[problem]
            short = problem.split("_", 2)[2]
            correct, wrong = bodies[short]
            for variant, body in (("correct", correct), ("wrong", wrong)):
                program = row["prompt"] + body + row["tests"]
                (out / f"{short}-{variant}.{ext}").write_text(program)
                written += 1
    print(f"wrote {written} programs under {HERE}")


if __name__ == "__main__":
    main()
