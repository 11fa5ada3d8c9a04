#!/usr/bin/env python3
"""Writes examples/languages/batch.jsonl and expected-verdicts.txt from the
programs in examples/languages/<lang>/.

Every language solves the same three problems, each checked by 3 cases:
  square   N in argv[1]             -> N squared
  sum      integers on stdin lines  -> their sum
  reverse  a word in argv[1]        -> the word reversed

A program's file is <problem>-<variant>.<ext>; the variant `correct` must get
`true`, every other one (wrong, compile-error, syntax-error, crash,
infinite-loop) `false`. The item id is <lang>/<problem>-<variant>, its profile
the language's profile in the progscore.toml written by
`scripts/setup.sh --languages all`.

    python3 examples/languages/make-batch.py
    progscore score examples/languages/batch.jsonl --out results.jsonl
"""

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent

# Language folder -> (profile, file extension).
LANGUAGES = {
    "c": ("c", ".c"),
    "cpp": ("cpp", ".cpp"),
    "rust": ("rust", ".rs"),
    "go": ("go", ".go"),
    "java": ("java", ".java"),
    "javascript": ("javascript", ".js"),
}


def case(args, stdin, stdout):
    return {
        "invocation": {"args": args, "stdin": stdin},
        "expected": {"stdout": {"equals": stdout}, "exit_code": 0},
    }


PROBLEMS = {
    "square": [
        case(["3"], None, "9"),
        case(["12"], None, "144"),
        case(["-5"], None, "25"),
    ],
    "sum": [
        case([], "1\n2\n3\n", "6"),
        # Past 255 and with a negative number: catches narrow or unsigned totals.
        case([], "1000\n-1\n250\n", "1249"),
        case([], "42\n", "42"),
    ],
    "reverse": [
        case(["hello"], None, "olleh"),
        case(["progscore"], None, "erocsgorp"),
        case(["ab"], None, "ba"),
    ],
}


def items():
    for lang, (profile, ext) in LANGUAGES.items():
        for problem, cases in PROBLEMS.items():
            files = sorted((HERE / lang).glob(f"{problem}-*{ext}"))
            if not any(f.stem == f"{problem}-correct" for f in files):
                raise SystemExit(f"{lang}: no {problem}-correct{ext}")
            for path in files:
                variant = path.stem[len(problem) + 1:]
                item = {
                    "id": f"{lang}/{path.stem}",
                    "program": path.read_text(),
                    "expectation": {
                        "conditions": [
                            {"program_behaves": {"profile": profile, "cases": cases}}
                        ]
                    },
                }
                yield item, "true" if variant == "correct" else "false"


def main():
    batch, verdicts = [], []
    for item, verdict in items():
        batch.append(json.dumps(item))
        verdicts.append(f"{item['id']} {verdict}")
    (HERE / "batch.jsonl").write_text("\n".join(batch) + "\n")
    (HERE / "expected-verdicts.txt").write_text(
        "# id verdict — what `progscore score examples/languages/batch.jsonl` must report\n"
        "# (profiles from `scripts/setup.sh --languages all`).\n"
        + "\n".join(verdicts)
        + "\n"
    )
    print(f"wrote {len(batch)} items to {HERE / 'batch.jsonl'}")


if __name__ == "__main__":
    main()
