#lang racket
;; Does not read: an unclosed parenthesis.
(define (f x) (+ x 1)
