# Reads "n q" and exits without a word: the judge sees EOF, wrong answer.
input()
